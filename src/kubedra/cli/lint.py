"""`kubedra lint`: load and validate manifests, one line per problem, warnings included.

Exit codes follow the issue's contract: 0 when clean or with warnings only, 1 with errors
(or with warnings under `--strict`), so the command can gate CI pipelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from kubedra.api.loader import LoadResult, ReadProgress, Source, load_paths
from kubedra.api.resource import ResourceSlice
from kubedra.api.validation import validate
from kubedra.cel.validation import cel_problems, published_names
from kubedra.cluster.store import Store
from kubedra.errors import Problem, ValidationError, errors_only


def lint_problems(
    result: LoadResult, strict: bool = False, published: Sequence[ResourceSlice] = ()
) -> list[Problem]:
    """Every problem of a load: reading and decoding, conversions, validation, then CEL
    (compiled in upstream's environment under `strict`, else in kubedra's lenient one).
    `published`: a cluster's slices, which say which driver publishes a bare name too."""
    problems = list(result.problems)
    slices = [o.obj for o in result.objects if isinstance(o.obj, ResourceSlice)]
    known = published_names([*slices, *published])
    found: list[tuple[Problem, Source]] = []
    for loaded in result.objects:
        problems.extend(loaded.warnings)
        checks = validate(loaded.obj) + cel_problems(loaded.obj, strict=strict, known=known)
        found += [(p, loaded.source) for p in checks]
    return problems + result.locate_all(found)


def checked_load(
    paths: Sequence[str], strict: bool, progress: ReadProgress | None = None
) -> tuple[LoadResult, list[Problem]]:
    """Load manifests and check them as `apply` does: (what was loaded, its warnings);
    ValidationError with every error when there is any."""
    result = load_paths(paths, progress=progress)
    problems = lint_problems(result, strict)
    errors = errors_only(problems)
    if errors:
        raise ValidationError(errors)
    return result, problems


def run_lint(
    paths: Sequence[str],
    out: TextIO,
    strict: bool,
    stdin: TextIO | None = None,
    cluster: Store | None = None,
) -> int:
    """Print the problems of the manifests at `paths` (with `cluster`, also how their
    selectors fare on the devices it publishes); returns the exit code."""
    result = load_paths(paths, stdin)
    if cluster is None:
        problems = lint_problems(result, strict)
    else:
        from kubedra.cli.live import cluster_problems, live_scheduler

        scheduler = live_scheduler(cluster, strict)
        published = scheduler.inventory().slices
        problems = lint_problems(result, strict, published)
        problems += cluster_problems(scheduler, result, strict)
    for problem in problems:
        out.write(f"{problem}\n")
    errors = sum(p.is_error for p in problems)
    warnings = len(problems) - errors
    if errors or (strict and warnings):
        return 1
    return 0
