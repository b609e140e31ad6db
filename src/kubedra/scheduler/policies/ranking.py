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
from typing import Any, Generic, TypeVar, overload

from kubedra.scheduler.view import ClusterView

K = TypeVar("K", bound=Hashable)
Entry = tuple[Any, str]  # (tie key, node name): how nodes of one key are kept, in order
Part = tuple[float, Iterable[Entry]]  # nodes of one rank (lower first), in tie order


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

    def forget(self) -> None:
        """File every node afresh at the next `sync` (the keys or the tie order changed)."""
        self._view = None

    def sync(self, view: ClusterView) -> None:
        """Re-file the nodes changed since the last call (all of them for a new view)."""
        changed, self._mark = view.changed_since(self._mark if view is self._view else 0)
        if view is not self._view or changed is None:
            self._view = view
            self.refile_all()
            return
        for node in set(changed):
            self._file(node)

    def refile_all(self) -> None:
        self.keys.clear()
        self.groups.clear()
        if self._view is None:
            return
        for node in self._view.nodes:
            key = self.keys[node] = self._key(self._view, node)
            self.groups.setdefault(key, []).append((self._tie(node), node))
        for entries in self.groups.values():
            entries.sort()

    def _file(self, node: str) -> None:
        assert self._view is not None
        key, old = self._key(self._view, node), self.keys.get(node)
        if key == old:
            return
        entry = (self._tie(node), node)
        if old is not None:
            entries = self.groups[old]
            del entries[bisect.bisect_left(entries, entry)]
            if not entries:
                del self.groups[old]
        self.keys[node] = key
        bisect.insort(self.groups.setdefault(key, []), entry)

    def ranking(self, nodes: Sequence[str], parts: Iterable[Part]) -> Ranking:
        """`nodes` (all filed) in the order of `parts`: lowest rank first, equal ranks merged
        in tie order; the nodes of no part last, in their order in `nodes`. Read it before
        the next `sync`: the parts are the index's own lists."""
        heap = [(rank, i, entries) for i, (rank, entries) in enumerate(parts)]
        heapq.heapify(heap)  # only the ranks read are sorted
        allowed = None if len(nodes) == len(self.keys) else frozenset(nodes)

        def walk() -> Iterator[str]:
            seen: set[str] = set()
            while heap:
                rank, _, entries = heapq.heappop(heap)
                runs = [entries]
                while heap and heap[0][0] == rank:
                    runs.append(heapq.heappop(heap)[2])
                for _, node in runs[0] if len(runs) == 1 else heapq.merge(*runs):
                    if allowed is None or node in allowed:
                        seen.add(node)
                        yield node
            yield from (node for node in nodes if node not in seen)

        return Ranking(walk(), len(nodes))


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
        read = self._read
        while len(read) < count:
            node = next(self._order, None)
            if node is None:
                return
            read.append(node)


def rank_by_free(
    index: NodeIndex[int], view: ClusterView, nodes: Sequence[str], fewest_first: bool
) -> Ranking:
    """`nodes` by their free devices (fewest or most first), then by name."""
    index.sync(view)
    sign = 1 if fewest_first else -1
    return index.ranking(nodes, ((sign * free, group) for free, group in index.groups.items()))
