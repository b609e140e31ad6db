"""Read manifests the way kubectl does: files, directories, stdin; YAML streams, JSON, Lists.

Every object remembers where it came from (file, line of its document), so a problem found
later (at decode or validation time) can be printed as `FILE:LINE: Kind ns/name: path: ...`.
Lines of individual fields are looked up only when there is a problem to print: the YAML
is composed again just for that, so the fast path pays nothing for it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import msgspec
import yaml

from kubedra.api.codec import Decoded, decode_json, decode_object, split_json
from kubedra.api.meta import UNKNOWN_FIELDS_KEY, KubeObject
from kubedra.errors import Problem, ValidationError, errors_only

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """Safe YAML without the YAML 1.1 timestamp type: Kubernetes keeps timestamps as strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object was read: file, line of its document, and its place in the stream."""

    file: str
    line: int
    document: int = 0
    item: int | None = None  # index in a kubectl List


@dataclass(frozen=True, slots=True)
class LoadedObject:
    obj: KubeObject
    source: Source
    warnings: tuple[Problem, ...] = ()


@dataclass
class LoadResult:
    """Everything read, and every problem found on the way (reading never stops early)."""

    objects: list[LoadedObject] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)

    def locate(self, problem: Problem, source: Source) -> Problem:
        """The problem with the line of its field (or of its document) in the source file."""
        line = field_line(self.texts.get(source.file, ""), source, problem.path) or source.line
        return problem.located(source.file, line)


def manifest_files(path: str) -> list[str]:
    """The manifest files of a path: the file itself, or a directory's, recursive and sorted."""
    p = Path(path)
    if p.is_dir():
        return sorted(str(f) for f in p.rglob("*") if f.is_file() and f.suffix in MANIFEST_SUFFIXES)
    return [path]


def load_paths(paths: Sequence[str], stdin: TextIO | None = None) -> LoadResult:
    """Load every object of the given files, directories and `-` (stdin)."""
    result = LoadResult()
    for path in paths:
        for file in manifest_files(path):
            try:
                text = (stdin or sys.stdin).read() if file == STDIN else Path(file).read_text()
            except OSError as err:
                result.problems.append(Problem(f"cannot read: {err.strerror}", file=file))
                continue
            load_text(text, file, result)
    return result


def load_text(text: str, file: str = "<string>", result: LoadResult | None = None) -> LoadResult:
    """Load every object of one YAML or JSON text into `result` (a new one by default)."""
    result = result if result is not None else LoadResult()
    result.texts[file] = text
    try:
        pending = list(_json_objects(text) if _is_json(text, file) else _yaml_objects(text))
    except (yaml.YAMLError, msgspec.DecodeError) as err:
        result.problems.append(_syntax_problem(err, file))
        return result
    for line, doc_index, item, decode in pending:
        source = Source(file, line, doc_index, item)
        try:
            decoded = decode()
        except ValidationError as err:
            result.problems.extend(result.locate(p, source) for p in err.problems)
            continue
        warnings = tuple(result.locate(w, source) for w in decoded.warnings)
        result.objects.append(LoadedObject(decoded.obj, source, warnings))
    return result


# (line, document index, List item index, how to decode it) of each object of a text.
_Pending = tuple[int, int, int | None, Callable[[], Decoded]]


def _is_json(text: str, file: str) -> bool:
    return file.endswith(".json") or text.lstrip().startswith(("{", "["))


def _json_objects(text: str) -> Iterator[_Pending]:
    typed = UNKNOWN_FIELDS_KEY not in text
    for item, raw in split_json(text.encode()):
        yield 1, 0, item, partial(decode_json, raw, typed)


def _yaml_objects(text: str) -> Iterator[_Pending]:
    for doc_index, (line, raw) in enumerate(_yaml_documents(text)):
        for item, item_raw in _items(raw):
            yield line, doc_index, item, partial(decode_object, item_raw)


def load(paths: Sequence[str], stdin: TextIO | None = None) -> list[LoadedObject]:
    """Load and raise ValidationError with every error found (warnings stay on the objects)."""
    result = load_paths(paths, stdin)
    errors = errors_only(result.problems)
    if errors:
        raise ValidationError(errors)
    return result.objects


def _yaml_documents(text: str) -> Iterator[tuple[int, Any]]:
    """(line of the document, data) for each non-empty document of a YAML text."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is not None:
                yield node.start_mark.line + 1, data
    finally:
        loader.dispose()


def _items(raw: Any) -> Iterable[tuple[int | None, Any]]:
    """A kubectl List (`kind: List` or `...List` with items) unrolled; anything else as is."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(raw.get("items"), list):
        yield from enumerate(raw["items"])
    else:
        yield None, raw


def _syntax_problem(err: Exception, file: str) -> Problem:
    mark = getattr(err, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 0
    return Problem(f"cannot parse: {str(err).splitlines()[0]}", file=file, line=line)


_PATH_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def parse_path(path: str) -> list[str | int]:
    """`spec.devices[0].attributes[gpu.nvidia.com/memory]` -> segments (inverse of format_path)."""
    out: list[str | int] = []
    for name, bracket in _PATH_SEGMENT.findall(path):
        if name:
            out.append(name)
        else:
            out.append(int(bracket) if bracket.isdigit() else bracket)
    return out


def field_line(text: str, source: Source, path: str) -> int:
    """1-based line of the deepest node of `path` that exists in the source, 0 if unknown."""
    if not text or not path:
        return 0
    try:
        node = _nth_document_node(text, source.document)
    except yaml.YAMLError:
        return 0
    segments: list[str | int] = ["items", source.item] if source.item is not None else []
    segments += parse_path(path)
    line = node.start_mark.line + 1 if node is not None else 0
    for seg in segments:
        node = _child(node, seg)
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _nth_document_node(text: str, index: int) -> yaml.Node | None:
    loader = _Loader(text)
    try:
        seen = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None or (
                isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null")
            ):
                continue
            if seen == index:
                return node  # type: ignore[no-any-return]
            seen += 1
    finally:
        loader.dispose()
    return None


def _child(node: yaml.Node | None, seg: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and isinstance(seg, int):
        return node.value[seg] if seg < len(node.value) else None
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == str(seg):
                return value  # type: ignore[no-any-return]
    return None
