"""Shortcuts of the scheduling cycle (issue 39) that must not change what it does: the
first load without the garbage collector and the heap frozen after it (the runner's
scheduler), and the nodes known not to fit read without copying the plugins' sets."""

from __future__ import annotations

import builtins
import gc
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

from kubedra.api.core import Node
from kubedra.cluster import SqliteStore, WatchEvent
from kubedra.scheduler.feed import LogFeed
from kubedra.scheduler.framework import Candidate, CycleState, Diagnosis, Framework, PodInfo
from kubedra.scheduler.framework.interfaces import Handle, NodeFilterPlugin
from kubedra.scheduler.scheduler import FEED_KINDS, Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    gpu_template(store, "one", 1)
    for i in range(3):
        gpu_pod(store, f"p{i}", template="one")
    return store


class SpyFeed(LogFeed):
    """A LogFeed that notes whether the collector ran while each sync was read."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store, FEED_KINDS)
        self.collecting: list[bool] = []

    def sync(self) -> builtins.list[WatchEvent]:
        self.collecting.append(gc.isenabled())
        return super().sync()


@pytest.fixture
def unfrozen() -> Iterator[None]:
    before = gc.get_freeze_count()
    yield
    if gc.get_freeze_count() != before:
        gc.unfreeze()  # give the test process its collector back
    assert gc.isenabled()


@pytest.mark.usefixtures("unfrozen")
def test_freeze_loaded_loads_without_the_collector_then_freezes(store: SqliteStore) -> None:
    feed = SpyFeed(store)
    frozen = gc.get_freeze_count()
    outcomes = Scheduler(store, feed=feed, freeze_loaded=True).run_once()
    assert [o.node for o in outcomes] == ["n1", "n1", None]  # scheduling as ever
    assert feed.collecting[0] is False  # the first, full load
    assert all(feed.collecting[1:])  # every later sync with the collector back
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen


class RemoteFeed:
    """A feed that is no read of the store's log (as a watch of an API server)."""

    def __init__(self, store: SqliteStore) -> None:
        self.inner = LogFeed(store, FEED_KINDS)
        self.collecting: list[bool] = []

    def sync(self) -> builtins.list[WatchEvent]:
        self.collecting.append(gc.isenabled())
        return self.inner.sync()

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("unfrozen")
def test_a_watch_loads_with_the_collector_on(store: SqliteStore) -> None:
    """A watch's first listing may wait long for an API server: the collector stays on;
    what it loaded is frozen all the same."""
    feed = RemoteFeed(store)
    frozen = gc.get_freeze_count()
    outcomes = Scheduler(store, feed=feed, freeze_loaded=True).run_once()
    assert [o.node for o in outcomes] == ["n1", "n1", None]
    assert all(feed.collecting)
    assert gc.get_freeze_count() > frozen


@pytest.mark.usefixtures("unfrozen")
def test_without_freeze_loaded_the_collector_is_left_alone(store: SqliteStore) -> None:
    feed = SpyFeed(store)
    frozen = gc.get_freeze_count()
    outcomes = Scheduler(store, feed=feed).run_once()
    assert [o.node for o in outcomes] == ["n1", "n1", None]
    assert all(feed.collecting)
    assert gc.get_freeze_count() == frozen


class Known(NodeFilterPlugin):
    """A NodeFilter that only says which nodes it knows not to fit."""

    name = "Known"

    def __init__(self, handle: Handle, known: AbstractSet[str]) -> None:
        super().__init__(handle)
        self.known = known

    def known_infeasible(self, state: CycleState) -> AbstractSet[str]:
        return self.known

    def filter_node(
        self,
        state: CycleState,
        info: PodInfo,
        node: Node,
        index: int,
        found: list[Candidate] | None,
        diagnosis: Diagnosis,
    ) -> list[Candidate]:
        return []


def known_of(store: SqliteStore, *sets: AbstractSet[str]) -> AbstractSet[str]:
    handle = Scheduler(store)
    plugins: Sequence[Known] = [Known(handle, s) for s in sets]
    return Framework(handle, plugins)._known_infeasible(CycleState())


def test_known_infeasible_is_the_one_set_that_has_nodes(store: SqliteStore) -> None:
    """Where one plugin knows nodes and the others none, its own set is passed on (a set
    that grows as the cycle goes, as with a single plugin) instead of a copy per pod."""
    growing = {"n1", "n2"}
    assert known_of(store, frozenset(), growing) is growing
    assert known_of(store, growing, frozenset()) is growing
    assert known_of(store, growing) is growing
    both = known_of(store, {"n1"}, {"n2"})
    assert both == {"n1", "n2"}
    assert known_of(store, frozenset(), frozenset()) == frozenset()
