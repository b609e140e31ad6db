"""Leader election on a Lease in a real store, with each candidate's clock under control."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kubedra.api.coordination import Lease
from kubedra.cluster import SqliteStore
from kubedra.cluster.leader import LeaderElector
from kubedra.errors import KubedraError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(store: SqliteStore, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(store, "sched", "kube-system", identity, lease_duration=15,
                         renew_deadline=10, retry_period=2, clock=clock)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def test_the_first_candidate_takes_the_lease_and_the_second_waits(store: SqliteStore) -> None:
    clock = Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader() and b.holder == "a"
    lease = store.get(Lease, "sched", "kube-system")
    assert (lease.spec.holder_identity, lease.spec.lease_duration_seconds) == ("a", 15)
    clock.now += 14  # a renews in time: b never gets it
    assert a.try_acquire_or_renew()
    clock.now += 14
    assert not b.try_acquire_or_renew()


def test_a_standby_takes_over_once_the_record_stood_still_for_the_lease_duration(
    store: SqliteStore,
) -> None:
    clock_a, clock_b = Clock(), Clock()
    clock_b.now = 5_000.0  # another machine: the clocks are never compared
    a, b = elector(store, "a", clock_a), elector(store, "b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b starts watching the record now
    clock_b.now += 14.9
    assert not b.try_acquire_or_renew()
    clock_b.now += 0.2  # 15.1 s without a change, as b saw it: a is gone
    assert b.try_acquire_or_renew() and b.is_leader()
    lease = store.get(Lease, "sched", "kube-system")
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)
    assert not a.try_acquire_or_renew()  # a comes back: it is a follower now
    assert not a.is_leader()


def test_a_leader_that_cannot_renew_stops_leading_before_anyone_may_take_over(
    store: SqliteStore,
) -> None:
    clock = Clock()
    a = elector(store, "a", clock)
    assert a.try_acquire_or_renew()
    clock.now += 9.9
    assert a.is_leader()
    clock.now += 0.2  # past the renew deadline (10 s) while the lease lasts 15 s
    assert not a.is_leader()


def test_of_two_candidates_racing_for_an_expired_lease_one_wins(store: SqliteStore) -> None:
    clock = Clock()
    old = elector(store, "old", clock)
    assert old.try_acquire_or_renew()
    racers = [elector(store, f"r{i}", clock) for i in range(2)]
    for r in racers:
        assert not r.try_acquire_or_renew()
    clock.now += 16
    current = store.get(Lease, "sched", "kube-system")
    # Both read the same expired record; the second write carries a stale resourceVersion.
    original_get = store.get
    store.get = lambda *a, **k: current  # type: ignore[method-assign]
    try:
        won = [r.try_acquire_or_renew() for r in racers]
    finally:
        store.get = original_get  # type: ignore[method-assign]
    assert won == [True, False]
    assert store.get(Lease, "sched", "kube-system").spec.holder_identity == "r0"


def test_a_released_lease_is_taken_at_once(store: SqliteStore) -> None:
    clock = Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader()
    assert b.try_acquire_or_renew()  # no wait for the lease duration


def test_run_reports_each_change_and_releases_on_stop(store: SqliteStore) -> None:
    changes: list[bool] = []
    stop = threading.Event()
    a = LeaderElector(store, "sched", "kube-system", "a", lease_duration=3, renew_deadline=2,
                      retry_period=0.05)
    thread = threading.Thread(target=a.run, args=(stop, changes.append))
    thread.start()
    try:
        for _ in range(100):
            if changes:
                break
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(5)
    assert changes == [True]
    assert store.get(Lease, "sched", "kube-system").spec.holder_identity == ""


def test_durations_must_leave_room_for_a_safe_handover(store: SqliteStore) -> None:
    with pytest.raises(KubedraError, match="retry period < renew deadline < lease duration"):
        LeaderElector(store, "sched", "kube-system", "a", lease_duration=10, renew_deadline=10)
