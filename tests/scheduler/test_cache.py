"""The assume cache: what the scheduler wrote, or is writing, wins over older news."""

from __future__ import annotations

import msgspec

from kubedra.api.core import Pod, PodSpec
from kubedra.api.meta import ObjectMeta
from kubedra.cluster.store import EventType, WatchEvent
from kubedra.scheduler.cache import ASSUMED, CURRENT, SUPERSEDED, ObjectCache


def pod(rv: int, node: str | None = None, name: str = "p") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", resource_version=str(rv)),
        spec=PodSpec(node_name=node),
    )


def event(obj: Pod, kind: EventType = EventType.MODIFIED) -> WatchEvent:
    return WatchEvent(kind, int(obj.metadata.resource_version or 0), obj)


def seen(cache: ObjectCache) -> Pod:
    found = cache.of(Pod)[("default", "p")]
    assert isinstance(found, Pod)
    return found


def test_an_assumption_in_flight_hides_every_change_but_a_deletion() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(1, node="n1"))  # being written
    assert not cache.apply(event(pod(5)))  # someone else's change: kept aside
    assert seen(cache).spec.node_name == "n1"
    cache.restore(Pod, ("default", "p"))  # the write failed: back to the newest news
    assert seen(cache).metadata.resource_version == "5" and not cache.assumed(Pod, ("default", "p"))


def test_the_written_version_or_a_newer_one_ends_the_assumption() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(7, node="n1"), rv=7)
    assert not cache.apply(event(pod(6)))  # older than the write: the view keeps ours
    assert seen(cache).spec.node_name == "n1"
    assert cache.apply(event(pod(8, node="n2")))
    assert seen(cache).spec.node_name == "n2" and not cache.assumed(Pod, ("default", "p"))


def test_a_feed_faster_than_the_writer_wins_at_once() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(1, node="n1"))
    assert not cache.apply(event(pod(9, node="n1")))  # the write's own event, first
    cache.assume(pod(9, node="n1"), rv=9)  # then the writer's answer
    assert seen(cache).metadata.resource_version == "9"
    assert not cache.assumed(Pod, ("default", "p"))


def test_a_write_answered_without_the_object_ends_when_the_feed_shows_it() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(1, node="n1"), shows=lambda o: isinstance(o, Pod) and o.spec.node_name == "n1")
    assert not cache.apply(event(pod(2)))  # still pending in this version
    assert cache.apply(event(pod(3, node="n1")))
    assert not cache.assumed(Pod, ("default", "p"))


def test_deletion_ends_an_assumption_and_a_restore_of_a_new_object_removes_it() -> None:
    cache = ObjectCache()
    cache.assume(pod(0, name="q"))  # an object the feed never delivered
    cache.restore(Pod, ("default", "q"))
    assert ("default", "q") not in cache.of(Pod)
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(msgspec.structs.replace(pod(1), spec=PodSpec(node_name="n1")))
    assert cache.apply(event(pod(2), EventType.DELETED))
    assert ("default", "p") not in cache.of(Pod)


def test_a_deletion_during_the_write_keeps_the_late_answer_out_of_the_view() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(1, node="n1"))  # being written
    assert cache.apply(event(pod(4), EventType.DELETED))  # bound, then deleted, first
    assert cache.assume(pod(3, node="n1"), rv=3) == SUPERSEDED  # the write's answer, late
    assert ("default", "p") not in cache.of(Pod) and not cache.assumed(Pod, ("default", "p"))
    assert cache.assume(pod(1, node="n1")) == SUPERSEDED  # nor an answer without a version
    assert ("default", "p") not in cache.of(Pod)
    assert cache.apply(event(pod(9), EventType.ADDED))  # a new pod of the name
    assert cache.assume(pod(10, node="n2"), rv=10) == ASSUMED
    assert seen(cache).spec.node_name == "n2"


def test_assume_says_whether_the_feed_had_the_write_or_newer_news() -> None:
    cache = ObjectCache()
    cache.apply(event(pod(1), EventType.ADDED))
    cache.assume(pod(1, node="n1"))
    assert not cache.apply(event(pod(5, node="n1")))
    assert cache.assume(pod(5, node="n1"), rv=5) == CURRENT
    cache.assume(pod(5, node="n1"))
    assert not cache.apply(event(pod(8)))  # someone else's change after the write
    assert cache.assume(pod(6, node="n1"), rv=6) == SUPERSEDED
    assert seen(cache).metadata.resource_version == "8"
