"""YAML documents as plain data, built from libyaml's parse events with every bound enforced.

PyYAML's composer keeps a node and two marks per value (gigabytes for a large slice before
anything can be checked), and its constructor shares aliased values without counting them,
so an alias bomb only explodes later, in whatever walks the data. This reader builds dicts
and lists straight from the events, in one iterative pass that never recurses, and checks
on the way what kubectl's YAML decoder (go-yaml via sigs.k8s.io/yaml, strict) rejects:
duplicate keys, keys JSON cannot hold, excessive aliasing, values JSON cannot hold; plus
kubedra's bounds (nesting depth, object size, number length). Scalars resolve and convert
with PyYAML's safe rules (YAML 1.1), without the timestamp type: Kubernetes keeps
timestamps as strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import yaml

from kubedra.api.bounds import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    MAX_OBJECT_BYTES,
    InputError,
    check_aliasing,
    number_too_long,
    too_deep,
    too_large,
)
from kubedra.api.codec import format_path

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Loader(_Base):  # type: ignore[misc,valid-type]
    """Safe YAML without the YAML 1.1 timestamp type: Kubernetes keeps timestamps as strings."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _MERGE_TAG = _TAG + "str", _TAG + "int", _TAG + "float", _TAG + "merge"
# The scalar types JSON can carry; sigs.k8s.io/yaml refuses !!binary, sets and the rest.
_SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _TAG + "bool", _TAG + "null", _MERGE_TAG})
_COLLECTION_TAGS = frozenset({None, "!", _TAG + "map", _TAG + "seq"})
_MERGE = object()  # the `<<` key: merges a mapping (or a list of them) into its parent
_NO_KEY = object()


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """One non-empty document: its place among all documents of the stream, its line,
    and its data, or the problems that kept it from being built."""

    ordinal: int
    line: int
    data: Any
    problems: tuple[InputError, ...] = ()


def yaml_documents(text: str) -> Iterator[YamlDocument]:
    """Every non-empty document of a YAML text; raises yaml.YAMLError on bad syntax (after
    the documents before it), InputError when a document is too large to be an object."""
    _check_document_sizes(text)
    loader = Loader(text)
    try:
        ordinal = 0
        loader.get_event()  # StreamStart
        while not loader.check_event(yaml.StreamEndEvent):
            loader.get_event()  # DocumentStart
            builder = _Builder(loader, loader.peek_event())
            doc = builder.document(ordinal)
            if doc.data is not None or doc.problems:
                yield doc
            ordinal += 1
    finally:
        loader.dispose()


# A document ends where a line starts with `---` or `...` (a block scalar's lines are
# indented, and a quoted one cannot hold a document marker).
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


def _check_document_sizes(text: str) -> None:
    """Refuse a document over the object bound before parsing it, unless it may be a
    kubectl List (whose items are measured one by one while it is read)."""
    if len(text) <= MAX_OBJECT_BYTES:
        return
    bounds = [0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text)), len(text)]
    for start, end in pairwise(bounds):
        if end - start > MAX_OBJECT_BYTES and text.find("List", start, end) < 0:
            raise too_large(end - start, text.count("\n", 0, start) + 1)


@dataclass(slots=True)
class _Anchor:
    value: Any
    open: bool = True  # still being built: an alias to it would contain itself
    nodes: int = 1  # values it expands to, itself included
    size: int = 0  # characters it expands to
    height: int = 0  # levels of mappings and lists it adds


class _Frame:
    """A mapping or list being built (a plain slotted class: one is made per value)."""

    __slots__ = ("anchored", "depth", "item", "key", "merges", "value")

    def __init__(self, value: dict[str, Any] | list[Any], depth: int) -> None:
        self.value = value
        self.depth = depth
        self.key: Any = _NO_KEY  # a mapping's key awaiting its value
        self.merges: list[dict[str, Any]] | None = None
        self.anchored: _Anchored | None = None
        self.item = False  # an item of a kubectl List: measured as an object of its own


@dataclass(slots=True)
class _Anchored:
    """What an anchored mapping or list needs to know, when it ends, to size its aliases."""

    name: str
    start: int  # character index of its first event
    nodes: int  # the document's decode count when it began
    expanded: int  # the document's alias characters when it began
    deepest: int  # the document's deepest level before it began


@dataclass(slots=True)
class _Measure:
    """The size of one object so far: its text, less the List items inside it, plus what
    aliases added."""

    start: int
    line: int
    excluded: int = 0
    expanded: int = 0


# Plain scalars resolve and convert the same way every time: the common ones (keys, enum
# values, small numbers) are converted once per process.
_PLAIN: dict[str, Any] = {}
_PLAIN_LIMIT = 1 << 16
_MISSING = object()


class _Builder:
    """Builds one document from the loader's events (iteratively: no recursion)."""

    def __init__(self, loader: Loader, root: yaml.Event) -> None:
        self.loader = loader
        self.line = _line(root)
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchor] = {}
        self.measures = [_Measure(_begin(root), self.line)]
        self.decoded = 0  # values decoded, aliases expanded (go-yaml's decodeCount)
        self.aliased = 0  # of which came from aliases
        self.expanded = 0  # characters added by alias expansion
        self.deepest = 0  # the deepest level reached (reset inside each anchored value)
        self.problems: list[InputError] = []

    def document(self, ordinal: int) -> YamlDocument:
        """The document; with problems, its data is what could be built (None if nothing)."""
        root: Any = None
        try:
            root = self._build()
        except InputError as err:
            self.problems.append(err)
            self._skip_document()
        return YamlDocument(ordinal, self.line, root, tuple(self.problems))

    def _build(self) -> Any:
        """The event loop; the common events (plain and quoted scalars, string keys that
        are new to their mapping) take the inline path, everything else a method."""
        get, stack, plain = self.loader.get_event, self.stack, _PLAIN
        scalar_event, mapping_start = yaml.ScalarEvent, yaml.MappingStartEvent
        while True:
            event = get()
            kind = type(event)
            if kind is scalar_event:
                self.decoded += 1
                if event.anchor is None and event.tag is None:
                    if not event.implicit[0]:
                        value = event.value  # quoted: always a string
                    elif (value := plain.get(event.value, _MISSING)) is _MISSING:
                        value = self._plain(event)
                else:
                    value = self._scalar(event)
            elif kind is mapping_start or kind is yaml.SequenceStartEvent:
                self._open(event, {} if kind is mapping_start else [])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value = self._close(event)
            elif kind is yaml.AliasEvent:
                value = self._alias(event)
            else:  # DocumentEnd
                return None
            if not stack:
                get()  # DocumentEnd
                return value
            top = stack[-1]
            container = top.value
            if type(container) is list:
                container.append("<<" if value is _MERGE else value)
            elif top.key is not _NO_KEY:
                self._set(top, value, event)
            elif type(value) is str and value not in container:
                top.key = value
            else:
                top.key = self._key(value, event)

    def _skip_document(self) -> None:
        """Consume the rest of a document that cannot be built (the next one still can)."""
        while not isinstance(self.loader.get_event(), yaml.DocumentEndEvent):
            pass

    # -- values ------------------------------------------------------------------------

    def _plain(self, event: yaml.ScalarEvent) -> Any:
        """A plain scalar without tag or anchor, remembered when short."""
        tag = self.loader.resolve(yaml.ScalarNode, event.value, (True, False))
        value = self._convert(event, tag)
        if len(event.value) <= 64 and len(_PLAIN) < _PLAIN_LIMIT:
            _PLAIN[event.value] = value
        return value

    def _scalar(self, event: yaml.ScalarEvent) -> Any:
        """A tagged or anchored scalar (anchors are sized here for their aliases)."""
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        value = self._convert(event, tag)
        if event.anchor is not None:
            self.anchors[event.anchor] = _Anchor(value, False, 1, _end(event) - _begin(event))
        return value

    def _convert(self, event: yaml.ScalarEvent, tag: str) -> Any:
        if tag == _STR:
            return event.value
        if tag not in _SCALAR_TAGS:
            raise InputError(f"unsupported YAML tag {tag!r}: JSON cannot carry it", _line(event))
        if tag == _MERGE_TAG:
            return _MERGE
        if tag in (_INT, _FLOAT) and len(event.value) > MAX_NUMBER_CHARS:
            raise number_too_long(event.value, _line(event))
        try:
            construct = self.loader.yaml_constructors[tag]
            value = construct(self.loader, yaml.ScalarNode(tag, event.value))
        except (ValueError, yaml.YAMLError) as err:
            raise InputError(f"cannot read {event.value!r} as {tag[len(_TAG) :]}: {err}",
                             _line(event)) from None  # fmt: skip
        if isinstance(value, float) and not math.isfinite(value):
            # As json.Marshal in sigs.k8s.io/yaml: JSON has no infinities or NaN.
            raise InputError(f"unsupported value: {event.value} (JSON has no infinities or NaN)",
                             _line(event))  # fmt: skip
        return value

    def _open(self, event: yaml.CollectionStartEvent, value: dict[str, Any] | list[Any]) -> None:
        if event.tag is not None and event.tag not in _COLLECTION_TAGS:
            raise InputError(f"unsupported YAML tag {event.tag!r}: JSON cannot carry it",
                             _line(event))  # fmt: skip
        stack = self.stack
        parent = stack[-1] if stack else None
        if parent is not None and parent.key is _NO_KEY and type(parent.value) is dict:
            raise InputError("a mapping or list cannot be a map key (JSON keys are strings)",
                             _line(event))  # fmt: skip
        depth = parent.depth + 1 if parent is not None else 1
        if depth > MAX_DEPTH:
            raise too_deep(_line(event))
        self.decoded += 1
        frame = _Frame(value, depth)
        if event.anchor is not None:
            self.anchors[event.anchor] = _Anchor(value)
            frame.anchored = _Anchored(event.anchor, _begin(event), self.decoded, self.expanded,
                                       self.deepest)  # fmt: skip
            self.deepest = depth
        elif depth > self.deepest:
            self.deepest = depth
        if depth == 3 and _in_list_items(stack):
            frame.item = True
            self.measures.append(_Measure(_begin(event), _line(event)))
        stack.append(frame)

    def _close(self, event: yaml.CollectionEndEvent) -> Any:
        frame = self.stack.pop()
        value = frame.value
        if frame.merges is not None and type(value) is dict:
            _merge(value, frame.merges)
        end = _end(event)
        anchored = frame.anchored
        if anchored is not None:
            self.anchors[anchored.name] = _Anchor(
                value,
                False,
                self.decoded - anchored.nodes + 1,
                end - anchored.start + self.expanded - anchored.expanded,
                self.deepest - frame.depth + 1,
            )
            self.deepest = max(self.deepest, anchored.deepest)
        self._check_size(end)
        if frame.item:
            measure = self.measures.pop()
            self.measures[-1].excluded += end - measure.start
        return value

    def _alias(self, event: yaml.AliasEvent) -> Any:
        anchor = self.anchors.get(event.anchor or "")
        if anchor is None:
            raise InputError(f"unknown anchor {event.anchor!r} referenced", _line(event))
        if anchor.open:
            raise InputError(f"anchor {event.anchor!r} value contains itself", _line(event))
        depth = (self.stack[-1].depth if self.stack else 0) + anchor.height
        if depth > MAX_DEPTH:
            raise too_deep(_line(event))
        self.deepest = max(self.deepest, depth)
        self.decoded += 1 + anchor.nodes
        self.aliased += anchor.nodes
        self.expanded += anchor.size
        self.measures[-1].expanded += anchor.size
        check_aliasing(self.decoded, self.aliased, _line(event))
        self._check_size(_end(event))
        return anchor.value

    def _check_size(self, end: int) -> None:
        """The current object, text and alias expansions, within the request size bound
        (checked where a value ends: every mapping or list, every alias)."""
        measure = self.measures[-1]
        size = end - measure.start - measure.excluded + measure.expanded
        if size > MAX_OBJECT_BYTES:
            raise too_large(size, measure.line)

    # -- placing a value in its parent mapping -------------------------------------------

    def _set(self, top: _Frame, value: Any, event: yaml.Event) -> None:
        key, top.key = top.key, _NO_KEY
        if key is _MERGE:
            if top.merges is None:
                top.merges = []
            top.merges.extend(_merge_sources(value, event))
        elif key is not None:
            top.value[key] = "<<" if value is _MERGE else value

    def _key(self, value: Any, event: yaml.Event) -> Any:
        """A mapping key as sigs.k8s.io/yaml turns it into a JSON key (None: skipped)."""
        if value is _MERGE:
            return _MERGE
        if isinstance(value, bool):
            key = "true" if value else "false"
        elif isinstance(value, int | str):
            key = str(value)
        else:
            shown = getattr(event, "value", None) or "null"
            self.problems.append(
                InputError(f"unsupported map key {shown!r}: JSON keys are strings",
                           _line(event), self._path()))  # fmt: skip
            return None
        if key in self.stack[-1].value:
            # go-yaml's strict decoding (kubectl's --validate=strict): no silent overwrite.
            self.problems.append(
                InputError(f'key "{key}" already set in map', _line(event), self._path(key))
            )
        return key

    def _path(self, *last: str) -> str:
        """kubectl path of the mapping being built, and of `last` in it (for messages)."""
        segments: list[str | int] = []
        for frame in self.stack[:-1]:
            if isinstance(frame.value, list):
                segments.append(len(frame.value))
            elif isinstance(frame.key, str):
                segments.append(frame.key)
        return format_path([*segments, *last])


def _line(event: yaml.Event) -> int:
    """1-based line where an event starts (libyaml marks every event)."""
    assert event.start_mark is not None
    return int(event.start_mark.line) + 1


def _begin(event: yaml.Event) -> int:
    """Character index where an event starts."""
    assert event.start_mark is not None
    return int(event.start_mark.index)


def _end(event: yaml.Event) -> int:
    """Character index where an event ends."""
    assert event.end_mark is not None
    return int(event.end_mark.index)


def _in_list_items(stack: list[_Frame]) -> bool:
    """Whether a value opening at depth 3 is an element of the root's `items` list (a
    kubectl List, whose items are measured one by one)."""
    return stack[0].key == "items" and type(stack[1].value) is list


def _merge_sources(value: Any, event: yaml.Event) -> list[dict[str, Any]]:
    sources = value if isinstance(value, list) else [value]
    if not all(isinstance(s, dict) for s in sources):
        raise InputError("a merge key (<<) needs a mapping or a list of mappings", _line(event))
    return sources


def _merge(target: dict[str, Any], sources: list[dict[str, Any]]) -> None:
    """YAML merge keys: explicit keys win, and earlier sources win over later ones."""
    for source in sources:
        for key, value in source.items():
            target.setdefault(key, value)
