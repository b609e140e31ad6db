"""Read manifests the way kubectl does: files, directories, stdin; YAML streams, JSON, Lists.

Every object remembers where it came from (file, document, List item), so a problem found
later (at decode or validation time) can be printed as `FILE:LINE: Kind ns/name: path: ...`.
Lines of fields are looked up only when there are problems to print, for all problems of
a file in one pass (`kubedra.api.field_lines`), so the fast path pays nothing for them.

Reading is bounded (`kubedra.api.bounds`): a file's size before it is read, then the
readers' checks (UTF-8, nesting, object size, aliases, duplicate keys, numbers); every
breach is one problem with file and line, never an exception.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import yaml

from kubedra.api.bounds import MAX_INPUT_BYTES, InputError
from kubedra.api.codec import Decoded, decode_json, decode_object, object_ref
from kubedra.api.field_lines import field_lines, parse_path
from kubedra.api.json_reader import json_objects, json_ref
from kubedra.api.meta import UNKNOWN_FIELDS_KEY, KubeObject
from kubedra.api.yaml_reader import yaml_documents
from kubedra.errors import ObjectRef, Problem, ValidationError, errors_only

__all__ = ["LoadResult", "LoadedObject", "Source", "load", "load_paths", "load_text", "parse_path"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"

# Told how far reading has come: (file, lines read, lines in the file), after each YAML
# document and at the end of each file (parsing is most of the time a large apply takes).
ReadProgress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object was read: file, line of its document, and its place in the stream."""

    file: str
    line: int
    document: int = 0  # ordinal among all documents of the file, empty ones included
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
        """One problem placed in its file (for many, `locate_all` parses each file once)."""
        return self.locate_all([(problem, source)])[0]

    def locate_all(self, found: Iterable[tuple[Problem, Source]]) -> list[Problem]:
        """Each problem with the line of its field (or of its document) in its file; one
        pass over each file's text, however many problems it has."""
        found = list(found)
        lines: dict[int, int] = {}
        for file in {source.file for _, source in found}:
            mine = [(i, p, s) for i, (p, s) in enumerate(found) if s.file == file]
            queries = [(s.document, _segments(p, s)) for _, p, s in mine]
            for (i, _, _), line in zip(mine, field_lines(self.texts.get(file, ""), queries),
                                       strict=True):  # fmt: skip
                lines[i] = line
        return [p.located(s.file, lines[i] or s.line) for i, (p, s) in enumerate(found)]


def _segments(problem: Problem, source: Source) -> list[str | int]:
    head: list[str | int] = ["items", source.item] if source.item is not None else []
    return head + parse_path(problem.path)


def manifest_files(path: str) -> list[str]:
    """The manifest files of a path: the file itself, or a directory's, recursive and sorted."""
    p = Path(path)
    if p.is_dir():
        return sorted(str(f) for f in p.rglob("*") if f.is_file() and f.suffix in MANIFEST_SUFFIXES)
    return [path]


def load_paths(
    paths: Sequence[str], stdin: TextIO | None = None, progress: ReadProgress | None = None
) -> LoadResult:
    """Load every object of the given files, directories and `-` (stdin)."""
    result = LoadResult()
    for path in paths:
        for file in manifest_files(path):
            try:
                data = _read(file, stdin)
            except OSError as err:
                result.problems.append(Problem(f"cannot read: {err.strerror}", file=file))
                continue
            load_text(data, file, result, progress)
    return result


def _read(file: str, stdin: TextIO | None) -> bytes | str:
    """At most one byte more than the input bound (an endless stdin is not read to its end)."""
    if file != STDIN:
        with open(file, "rb") as f:
            return f.read(MAX_INPUT_BYTES + 1)
    stream = stdin or sys.stdin
    source: BinaryIO | TextIO = getattr(stream, "buffer", stream)
    return source.read(MAX_INPUT_BYTES + 1)


def load_text(
    data: str | bytes,
    file: str = "<string>",
    result: LoadResult | None = None,
    progress: ReadProgress | None = None,
) -> LoadResult:
    """Load every object of one YAML or JSON text into `result` (a new one by default)."""
    result = result if result is not None else LoadResult()
    try:
        text = _text(data)
    except InputError as err:
        result.problems.append(Problem(err.message, file=file, line=err.line))
        return result
    result.texts[file] = text
    try:
        pending = list(_pending(text, data, file, progress))
    except InputError as err:
        result.problems.append(Problem(err.message, err.path, file=file, line=err.line))
        return result
    except yaml.YAMLError as err:
        result.problems.append(_syntax_problem(err, file))
        return result
    _decode_all(pending, result)
    return result


@dataclass(frozen=True, slots=True)
class _Pending:
    """One object read: how to decode it, or the problems that keep it from being decoded
    (with the object's kind and name, as far as they could be read)."""

    source: Source
    decode: Callable[[], Decoded]
    problems: tuple[InputError, ...] = ()
    ref: ObjectRef = field(default_factory=ObjectRef)


def _text(data: str | bytes) -> str:
    """The text of an input, which must be UTF-8 (as kubectl's decoders require)."""
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"too large: more than {MAX_INPUT_BYTES:,} bytes")
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise InputError(
            f"cannot parse: invalid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}, "
            f"column {column}): manifests must be UTF-8",
            line,
        ) from None


def _pending(
    text: str, data: str | bytes, file: str, progress: ReadProgress | None
) -> Iterator[_Pending]:
    lines = text.count("\n") + 1 if progress else 0
    if file.endswith(".json") or text.lstrip().startswith(("{", "[")):
        raw = data if isinstance(data, bytes) else text.encode()
        typed = UNKNOWN_FIELDS_KEY not in text  # else the key must not reach the models
        for item, obj, problems in json_objects(raw.removeprefix(b"\xef\xbb\xbf")):
            ref = json_ref(obj) if problems else ObjectRef()
            decode = partial(decode_json, obj, typed)
            yield _Pending(Source(file, 1, 0, item), decode, problems, ref)
        if progress:
            progress(file, lines, lines)
        return
    for doc in yaml_documents(text):
        if progress:
            progress(file, doc.line, lines)
        if doc.problems:
            source = Source(file, doc.line, doc.ordinal)
            yield _Pending(source, _never, doc.problems, object_ref(doc.data))
            continue
        for item, raw_item in _items(doc.data):
            source = Source(file, doc.line, doc.ordinal, item)
            yield _Pending(source, partial(decode_object, raw_item))
    if progress:
        progress(file, lines, lines)


def _never() -> Decoded:
    raise AssertionError("an object with problems is not decoded")


def _decode_all(pending: list[_Pending], result: LoadResult) -> None:
    """Decode every object; place all problems and warnings in their files at once."""
    found: list[tuple[Problem, Source]] = []
    decoded: list[tuple[KubeObject, Source, int, int]] = []  # warnings found[i:j]
    errors: list[int] = []
    for one in pending:
        problems = [Problem(e.message, e.path, one.ref, line=e.line) for e in one.problems]
        if not problems:
            try:
                obj = one.decode()
            except ValidationError as err:
                problems = list(err.problems)
            else:
                decoded.append((obj.obj, one.source, len(found), len(found) + len(obj.warnings)))
                found += [(w, one.source) for w in obj.warnings]
                continue
        errors += range(len(found), len(found) + len(problems))
        found += [(p, one.source) for p in problems]
    located = result.locate_all(found)
    result.problems += [located[i] for i in errors]
    result.objects += [LoadedObject(o, s, tuple(located[i:j])) for o, s, i, j in decoded]


def load(paths: Sequence[str], stdin: TextIO | None = None) -> list[LoadedObject]:
    """Load and raise ValidationError with every error found (warnings stay on the objects)."""
    result = load_paths(paths, stdin)
    errors = errors_only(result.problems)
    if errors:
        raise ValidationError(errors)
    return result.objects


def _items(raw: Any) -> Iterable[tuple[int | None, Any]]:
    """A kubectl List (`kind: List` or `...List` with items) unrolled; anything else as is."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(raw.get("items"), list):
        yield from enumerate(raw["items"])
    else:
        yield None, raw


def _syntax_problem(err: yaml.YAMLError, file: str) -> Problem:
    """PyYAML's whole message on one line: what it was parsing and where that began, then
    what it found and where (`while parsing a block mapping (line 3, column 1): did not
    find expected key (line 5, column 2)`)."""
    if not isinstance(err, yaml.MarkedYAMLError):
        return Problem(f"cannot parse: {' '.join(str(err).split())}", file=file)
    parts = [
        f"{text} ({_where(mark)})" if mark is not None else text
        for text, mark in ((err.context, err.context_mark), (err.problem, err.problem_mark))
        if text
    ]
    mark = err.problem_mark or err.context_mark
    line = mark.line + 1 if mark is not None else 0
    return Problem(f"cannot parse: {': '.join(parts)}", file=file, line=line)


def _where(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"
