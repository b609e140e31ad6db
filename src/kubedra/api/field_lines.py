"""Lines of field paths in a YAML (or JSON) text, found only when a problem needs one.

The fast path keeps no positions: a problem names its object's document and a field path,
and the lines of all problems of a file come from one pass over its parse events (no
nodes are kept), so placing any number of problems costs one parse, not one each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from kubedra.api.yaml_reader import Loader

Segment = str | int

_PATH_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def parse_path(path: str) -> list[Segment]:
    """`spec.devices[0].attributes[gpu.nvidia.com/memory]` -> segments (inverse of format_path)."""
    out: list[Segment] = []
    for name, bracket in _PATH_SEGMENT.findall(path):
        if name:
            out.append(name)
        else:
            out.append(int(bracket) if bracket.isdigit() else bracket)
    return out


_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)


@dataclass(slots=True)
class _Trie:
    """The paths asked for in one document, merged; `line` once the node is seen."""

    children: dict[Segment, _Trie] = field(default_factory=dict)
    line: int = 0


@dataclass(slots=True)
class _Open:
    """A mapping or list being read: what was asked inside it, and where the reader is."""

    trie: _Trie
    mapping: bool
    key: Segment | None = None  # the key whose value comes next (mappings)
    index: int = 0  # the index of the next item (lists)


def field_lines(text: str, queries: Sequence[tuple[int, Sequence[Segment]]]) -> list[int]:
    """For each (document ordinal, path): the 1-based line of the deepest node of the path
    that exists in the text, 0 when not even the document does."""
    tries: dict[int, _Trie] = {}
    chains: list[list[_Trie]] = []
    for document, path in queries:
        node = tries.setdefault(document, _Trie())
        chain = [node]
        for segment in path:
            node = node.children.setdefault(segment, _Trie())
            chain.append(node)
        chains.append(chain)
    if tries:
        _read(text, tries)
    return [_deepest(chain) for chain in chains]


def _deepest(chain: list[_Trie]) -> int:
    line = 0
    for node in chain:
        if not node.line:
            break
        line = node.line
    return line


def _read(text: str, tries: dict[int, _Trie]) -> None:
    """One pass over the events, stopping once every node asked for in the last document
    asked about has been seen (a problem at an object's top is found at its first line)."""
    loader = Loader(text)
    last = max(tries)
    unseen = _count(tries[last])
    document = -1
    stack: list[_Open] = []
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is yaml.DocumentStartEvent:
                document += 1
                if document > last:
                    return
                continue
            if kind is yaml.StreamEndEvent:
                return
            if kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                stack.pop()
                continue
            if kind not in _NODE_EVENTS:
                continue
            trie = _place(stack, tries.get(document), event)
            if trie is None:
                _skip(loader, event)
                continue
            if not trie.line:
                trie.line = event.start_mark.line + 1
                unseen -= document == last
                if not unseen:
                    return
            if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                stack.append(_Open(trie, kind is yaml.MappingStartEvent))
    except yaml.YAMLError:
        return  # lines found before the bad syntax stand
    finally:
        loader.dispose()


def _count(trie: _Trie) -> int:
    return 1 + sum(_count(child) for child in trie.children.values())


def _place(stack: list[_Open], root: _Trie | None, event: yaml.Event) -> _Trie | None:
    """The asked-for node this event starts, None when nothing inside it was asked for."""
    if not stack:
        return root
    parent = stack[-1]
    if parent.mapping:
        if parent.key is None:
            parent.key = event.value if isinstance(event, yaml.ScalarEvent) else ""
            return None
        key, parent.key = str(parent.key), None
        children = parent.trie.children
        if key not in children and key.isdigit():
            return children.get(int(key))  # `[7]` was read as an index: it is a key here
        return children.get(key)
    segment = parent.index
    parent.index += 1
    return parent.trie.children.get(segment)


def _skip(loader: Loader, event: yaml.Event) -> None:
    """Consume the rest of a mapping or list nothing was asked about."""
    if not isinstance(event, yaml.CollectionStartEvent):
        return
    depth = 1
    while depth:
        kind = type(loader.get_event())
        if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            depth += 1
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            depth -= 1
