"""Node rankings kept between pods instead of sorting the whole cluster for every pod.

A policy ranks nodes by something that changes only when the node does: its free devices,
its free milli and CPU. `NodeIndex` files every node under such a key and re-files only the
nodes the view logs as changed (`ClusterView.changed_since`); a new view (the scheduler
builds one after changes it did not make itself) is filed afresh. `Ranking` then walks the
keys best first and yields their nodes as the scheduler reads them: the cost per pod is the
number of distinct keys (a few shapes, in a large cluster) and the nodes actually read,
not a sort of every node. The order is the one a full sort would give: by rank, then by the
node's tie key (a policy's own, else its name).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from itertools import islice
from typing import Any, Generic, TypeVar, overload

from kubedra.scheduler.view import ClusterView

K = TypeVar("K", bound=Hashable)
Entry = tuple[Any, str]  # (tie key, node name): how nodes of one key are kept, in order


def free_devices(view: ClusterView, node: str) -> int:
    """The node's devices that no claim holds (all drivers)."""
    return view.nodes[node].free()


class NodeIndex(Generic[K]):
    """Every node of the view filed under `key(view, node)`, in tie order within a key."""

    def __init__(
        self, key: Callable[[ClusterView, str], K], tie: Callable[[str], Any] = str
    ) -> None:
        self._key = key
        self._tie = tie
        self._view: ClusterView | None = None
        self._mark = 0
        self.keys: dict[str, K] = {}
        self.groups: dict[K, list[Entry]] = {}
        # When a group last changed (a node joined, left or changed), from one counter, so a
        # group emptied and filled again never looks unchanged.
        self._changed: dict[K, int] = {}
        self._clock = 0
        # (key, id(skip)) -> (when, skip): the group was all in `skip` then; kept while the
        # group is unchanged (a node leaves a skip set only when freed, which changes it).
        self._skipped: dict[tuple[K, int], tuple[int, AbstractSet[str]]] = {}

    def forget(self) -> None:
        """File every node afresh at the next `sync` (the keys or the tie order changed)."""
        self._view = None

    def sync(self, view: ClusterView) -> None:
        """Re-file the nodes changed since the last call (all of them for a new view)."""
        changed, self._mark = view.changed_since(self._mark if view is self._view else 0)
        if view is not self._view or changed is None:
            self._view = view
            self._refile_all()
            return
        for node in set(changed):
            self._file(node)

    def _refile_all(self) -> None:
        assert self._view is not None
        self.keys.clear()
        self.groups.clear()
        self._skipped.clear()
        for node in self._view.nodes:
            key = self.keys[node] = self._key(self._view, node)
            self.groups.setdefault(key, []).append((self._tie(node), node))
        for key, entries in self.groups.items():
            entries.sort()
            self._touch(key)

    def _file(self, node: str) -> None:
        assert self._view is not None
        key, old = self._key(self._view, node), self.keys.get(node)
        self._touch(key)
        if key == old:
            return
        entry = (self._tie(node), node)
        if old is not None:
            self._touch(old)
            entries = self.groups[old]
            del entries[bisect.bisect_left(entries, entry)]
            if not entries:
                del self.groups[old]
        self.keys[node] = key
        bisect.insort(self.groups.setdefault(key, []), entry)

    def _touch(self, key: K) -> None:
        self._clock += 1
        self._changed[key] = self._clock

    def ranking(
        self,
        nodes: Sequence[str],
        ranks: Iterable[tuple[float, K]],
        skip: AbstractSet[str] = frozenset(),
    ) -> Ranking:
        """`nodes` (all filed) by the rank of their key, lowest first, equal ranks merged in
        tie order; then, in their order in `nodes`, the nodes of unranked keys and those in
        `skip`. Read it before the next `sync`: it walks the index's own lists."""
        heap = [(rank, i, key) for i, (rank, key) in enumerate(ranks)]
        heapq.heapify(heap)  # only the ranks read are sorted
        allowed = None if len(nodes) == len(self.keys) else frozenset(nodes)
        if len(self._skipped) > 4 * len(self.groups) + 1024:
            self._skipped.clear()  # verdicts on skip sets long gone

        def walk() -> Iterator[str]:
            seen: set[str] = set()
            while heap:
                rank, _, key = heapq.heappop(heap)
                runs = [self._entries(key, allowed, skip)]
                while heap and heap[0][0] == rank:
                    runs.append(self._entries(heapq.heappop(heap)[2], allowed, skip))
                for _, node in runs[0] if len(runs) == 1 else heapq.merge(*runs):
                    seen.add(node)
                    yield node
            yield from (node for node in nodes if node not in seen)

        return Ranking(walk(), len(nodes))

    def _entries(
        self, key: K, allowed: AbstractSet[str] | None, skip: AbstractSet[str]
    ) -> Iterable[Entry]:
        """The group's entries that are allowed and not skipped, filtered as read; a group
        seen all skipped is passed over at once until it changes."""
        entries = self.groups[key]
        if allowed is None and not skip:
            return entries
        when = self._changed[key]
        verdict = self._skipped.get((key, id(skip)))
        if verdict is not None and verdict[0] == when and verdict[1] is skip:
            return ()
        return self._filtered(key, when, entries, allowed, skip)

    def _filtered(
        self,
        key: K,
        when: int,
        entries: list[Entry],
        allowed: AbstractSet[str] | None,
        skip: AbstractSet[str],
    ) -> Iterator[Entry]:
        all_skipped = True
        for entry in entries:
            if entry[1] in skip:
                continue
            all_skipped = False
            if allowed is None or entry[1] in allowed:
                yield entry
        if all_skipped and skip:
            self._skipped[key, id(skip)] = (when, skip)


class Ranking(Sequence[str]):
    """A node order produced as it is read (the scheduler reads from the front)."""

    def __init__(self, order: Iterator[str], size: int) -> None:
        self._order = order
        self._read: list[str] = []
        self._size = size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice) or index < 0:
            self._read_up_to(self._size)
        else:
            self._read_up_to(index + 1)
        return self._read[index]

    def __iter__(self) -> Iterator[str]:
        for i in range(self._size):
            yield self[i]

    def _read_up_to(self, count: int) -> None:
        if len(self._read) < count:  # a few ahead: reading is cheaper in runs
            self._read.extend(islice(self._order, count - len(self._read) + 7))


def rank_by_free(
    index: NodeIndex[int],
    view: ClusterView,
    nodes: Sequence[str],
    skip: AbstractSet[str],
    fewest_first: bool,
) -> Ranking:
    """`nodes` by their free devices (fewest or most first), then by name; `skip` last."""
    index.sync(view)
    sign = 1 if fewest_first else -1
    return index.ranking(nodes, ((sign * free, free) for free in index.groups), skip)
