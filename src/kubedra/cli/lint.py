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
    return _flat(result, _object_problems(result, strict, published))


ObjectProblems = tuple[list[Problem], list[Problem]]  # (found loading it, found checking it)


def _object_problems(
    result: LoadResult, strict: bool, published: Sequence[ResourceSlice]
) -> list[ObjectProblems]:
    """Each loaded object's problems, in the order of `result.objects`."""
    slices = [o.obj for o in result.objects if isinstance(o.obj, ResourceSlice)]
    known = published_names([*slices, *published])
    found: list[tuple[Problem, Source]] = []
    owners: list[int] = []
    for index, loaded in enumerate(result.objects):
        checks = validate(loaded.obj) + cel_problems(loaded.obj, strict=strict, known=known)
        found += [(p, loaded.source) for p in checks]
        owners += [index] * len(checks)
    per: list[ObjectProblems] = [(list(o.warnings), []) for o in result.objects]
    for index, problem in zip(owners, result.locate_all(found), strict=True):
        per[index][1].append(problem)
    return per


def _flat(result: LoadResult, per: list[ObjectProblems]) -> list[Problem]:
    """lint's order: reading, then every object's loading, then every object's checks."""
    return [
        *result.problems,
        *(p for loading, _ in per for p in loading),
        *(p for _, checks in per for p in checks),
    ]


def checked_load(
    paths: Sequence[str], strict: bool, progress: ReadProgress | None = None
) -> tuple[LoadResult, list[Problem]]:
    """Load manifests and check them as `apply` does: (what was loaded, its warnings);
    ValidationError with every error when there is any."""
    result, per = _checked(paths, strict, progress)
    return result, _flat(result, per)


def checked_load_by_object(
    paths: Sequence[str], strict: bool, progress: ReadProgress | None = None
) -> tuple[LoadResult, list[Problem], list[list[Problem]]]:
    """`checked_load` with the warnings apart: (what was loaded, the warnings about no one
    object, each object's warnings in the order of `result.objects`), so that `apply`
    and `diff` can say an object's warnings only where they change it."""
    result, per = _checked(paths, strict, progress)
    return result, list(result.problems), [loading + checks for loading, checks in per]


def _checked(
    paths: Sequence[str], strict: bool, progress: ReadProgress | None
) -> tuple[LoadResult, list[ObjectProblems]]:
    result = load_paths(paths, progress=progress)
    per = _object_problems(result, strict, ())
    errors = errors_only(_flat(result, per))
    if errors:
        raise ValidationError(errors)
    return result, per


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
