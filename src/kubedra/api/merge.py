"""kubectl's client-side three-way merge, as a pure function over plain (JSON-shaped) dicts.

`kubectl apply` compares three versions of an object: what it applied last time (the
`original`, from the last-applied annotation), what the manifest says now (`modified`) and
what the server holds (`current`). Fields the manifest sets win; fields it dropped since the
last apply are removed; every other field of `current` (set by the scheduler, controllers,
defaulting, other users) is kept. Lists follow strategic merge patch: a list upstream tags
with a patch merge key is merged item by item (a list of scalars with the merge strategy, such
as `metadata.finalizers`, as a set); every other list is atomic and replaced whole. Maps are
always merged key by key.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]  # field names from the object's root, list positions left out
JsonMap = dict[str, Any]


@dataclass(frozen=True, slots=True)
class MergeList:
    """A list upstream tags `patchStrategy: merge`: items are matched by `key` (scalars by
    value when None). `retain_keys` (`merge,retainKeys`): a matched item keeps only the
    fields the manifest gives it, so switching a union member (a volume's source, a pod
    claim's name or template) drops the other member."""

    key: str | None = None
    retain_keys: bool = False


def three_way_merge(
    original: Mapping[str, Any] | None,
    modified: Mapping[str, Any],
    current: Mapping[str, Any],
    lists: Mapping[Path, MergeList],
) -> JsonMap:
    """The object `kubectl apply` leaves: `current` with the changes from `original` to
    `modified` and every field `modified` sets. `original` None (an object not created by
    apply) removes nothing. The result shares nothing with the inputs."""
    return _merge_maps(original or {}, modified, copy.deepcopy(current), (), lists)


def _merge_maps(
    original: Mapping[str, Any],
    modified: Mapping[str, Any],
    current: Mapping[str, Any],
    path: Path,
    lists: Mapping[Path, MergeList],
) -> JsonMap:
    out = dict(current)
    for key, want in modified.items():
        here, have, was = (*path, key), current.get(key), original.get(key)
        if isinstance(want, dict) and isinstance(have, dict):
            out[key] = _merge_maps(_or_empty(was, dict), want, have, here, lists)
        elif isinstance(want, list) and isinstance(have, list) and here in lists:
            out[key] = _merge_list(_or_empty(was, list), want, have, here, lists)
        else:
            out[key] = copy.deepcopy(want)
    for key in original:
        if key not in modified:
            out.pop(key, None)  # applied last time, dropped from the manifest since
    return out


def _merge_list(
    original: list[Any],
    modified: list[Any],
    current: list[Any],
    path: Path,
    lists: Mapping[Path, MergeList],
) -> list[Any]:
    """Items matched by merge key: the manifest's merged into the live ones, the ones it
    dropped since the last apply removed, the others (added by someone else) kept."""
    strategy = lists[path]
    ident = _identity(strategy.key)
    wanted = {ident(item): item for item in modified}
    dropped = {ident(item) for item in original} - wanted.keys()
    before = {ident(item): item for item in original}
    live = {ident(item): item for item in current}
    ours: list[Any] = []
    for key, want in wanted.items():
        have = live.get(key)
        if isinstance(want, dict) and isinstance(have, dict):
            merged = _merge_maps(_or_empty(before.get(key), dict), want, have, path, lists)
            if strategy.retain_keys:
                merged = {field: value for field, value in merged.items() if field in want}
            ours.append(merged)
        else:
            ours.append(copy.deepcopy(want))
    theirs = [item for item in current if ident(item) not in wanted and ident(item) not in dropped]
    return _interleave(ours, theirs, [ident(item) for item in current], ident)


def _interleave(
    ours: list[Any], theirs: list[Any], live_order: list[Hashable], ident: Callable[[Any], Hashable]
) -> list[Any]:
    """Upstream's element order: the manifest's items in the manifest's order, the others
    in their live order, each of theirs placed before the first of ours that came after it
    in the live list (`$setElementOrder` semantics)."""
    position = {key: i for i, key in reversed(list(enumerate(live_order)))}
    out: list[Any] = []
    i = j = 0
    while i < len(theirs) and j < len(ours):
        mine, other = position.get(ident(ours[j])), position.get(ident(theirs[i]))
        if mine is not None and other is not None and other < mine:
            out.append(theirs[i])
            i += 1
        else:
            out.append(ours[j])
            j += 1
    return out + ours[j:] + theirs[i:]


def _identity(key: str | None) -> Callable[[Any], Hashable]:
    """How items of a merge list are matched: by the merge key's value, scalars by value."""
    if key is None:
        return lambda item: _hashable(item)
    return lambda item: _hashable(item.get(key) if isinstance(item, dict) else item)


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def _or_empty(value: Any, kind: type) -> Any:
    return value if isinstance(value, kind) else kind()
