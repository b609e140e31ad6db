"""Gangs under `SchedulerRunner`, turn by turn, on the embedded store (in line, and with
the binding cycles in the pool): Permit's answers take effect within the turn, as in
`Scheduler.run_once` and upstream, where a rejected waiting pod is unreserved at once and
an allowed one starts its binding cycle without waiting for the loop to come round."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.cluster import SqliteStore
from kubedra.scheduler.runner import IDLE_S, RunConfig, SchedulerRunner
from kubedra.scheduler.verify import check_allocations
from tests.e2e.scheduler_process import wait_for
from tests.scheduler.cluster import gpu_node, gpu_template, new_store
from tests.scheduler.test_gang import allocated, bound, member, pod_group

MODES = pytest.mark.parametrize("background", [False, True], ids=["in-line", "background"])


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return new_store(tmp_path)


@pytest.fixture
def runners() -> Iterator[list[SchedulerRunner]]:
    made: list[SchedulerRunner] = []
    yield made
    for r in made:
        r.pool.shutdown(wait=True)
        r.feed.close()
        r.recorder.close()


def new_runner(
    store: SqliteStore, runners: list[SchedulerRunner], background: bool
) -> SchedulerRunner:
    # the members name no scheduler: the default one
    config = RunConfig(
        scheduler_name="default-scheduler", leader_elect=False, claim_controller=True
    )
    runner = SchedulerRunner(store, config, background=background)
    runners.append(runner)
    return runner


def turn(runner: SchedulerRunner) -> None:
    """One turn of the loop as `run` makes it, then the binding cycles it started are
    waited for and finished (the next turn would do so): nothing more is scheduled."""
    names = {p.name for p in runner.store.list(Pod)}
    # The watch (background) delivers asynchronously: until the view has every pod.
    wait_for("the view to show every pod", lambda: _seen(runner) >= names, timeout=30)
    runner._turn()
    runner._drain()


def _seen(runner: SchedulerRunner) -> set[str]:
    runner.scheduler.refresh()
    return {p.name for p in runner.scheduler.cache.of(Pod).values()}


def held_by(store: SqliteStore, runner: SchedulerRunner, prefix: str) -> list[str]:
    """What the pods named `prefix*` hold: bound, waiting on Permit, or claims allocated."""
    pods = [n for n in bound(store) if n.startswith(prefix)]
    waiting = [name for _, name in runner.scheduler.waiting if name.startswith(prefix)]
    claims = [c for c in allocated(store) if c.startswith(prefix)]
    return pods + waiting + claims


@MODES
def test_of_two_competing_gangs_the_first_is_bound_in_its_first_turn(
    store: SqliteStore, runners: list[SchedulerRunner], background: bool
) -> None:
    """Each gang fits alone, not both: the turn that completes the first binds all of it,
    and the second, rejected in the same turn, holds nothing when the turn ends."""
    gpu_node(store, "n1", gpus=10)
    gpu_template(store, "two", 2)
    pod_group(store, "a", 4)
    pod_group(store, "b", 4)
    for i in range(4):
        member(store, f"a{i}", "a", "two")
        member(store, f"b{i}", "b", "two")
    runner = new_runner(store, runners, background)
    turn(runner)
    assert bound(store) == {f"a{i}": "n1" for i in range(4)}
    assert held_by(store, runner, "b") == []
    assert not runner.scheduler.waiting
    assert check_allocations(store) == []


@MODES
def test_a_gang_that_fails_gives_its_devices_back_to_the_next_gang_in_the_same_turn(
    store: SqliteStore, runners: list[SchedulerRunner], background: bool
) -> None:
    """Gang a fits alone only when packed better than in its queue order (2+2 | 1+3 on
    two 4-GPU nodes; first-fit in order puts 2+1 | 3 and then 2 fits nowhere), so it is
    rejected after three members were reserved; gang b (4 | 4) fits alone. Unreserving a
    at once lets b be placed in that same turn: not both lose it."""
    gpu_node(store, "n1", gpus=4)
    gpu_node(store, "n2", gpus=4)
    for n in (1, 2, 3, 4):
        gpu_template(store, f"gpus{n}", n)
    pod_group(store, "a", 4)
    pod_group(store, "b", 2)
    for i, n in enumerate((2, 1, 3, 2)):
        member(store, f"a{i}", "a", f"gpus{n}")
    for i in range(2):
        member(store, f"b{i}", "b", "gpus4")
    runner = new_runner(store, runners, background)
    turn(runner)
    assert sorted(bound(store)) == ["b0", "b1"]
    assert held_by(store, runner, "a") == []
    assert check_allocations(store) == []


@MODES
def test_a_gang_completed_by_its_last_member_is_bound_in_that_turn(
    store: SqliteStore, runners: list[SchedulerRunner], background: bool
) -> None:
    """The members reserved before the last one are allowed by its Permit: they are bound
    in the turn that placed it, not one idle tick later."""
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3)
    member(store, "w0", "g", "two")
    member(store, "w1", "g", "two")
    runner = new_runner(store, runners, background)
    turn(runner)
    assert bound(store) == {} and allocated(store) == []  # too few members yet
    member(store, "w2", "g", "two")
    turn(runner)
    assert bound(store) == {"w0": "n1", "w1": "n1", "w2": "n1"}
    assert not runner.scheduler.waiting
    assert check_allocations(store) == []


def test_the_loop_does_not_sleep_while_permit_has_settled_a_waiting_pod(
    store: SqliteStore, runners: list[SchedulerRunner]
) -> None:
    """Members reserved and held by Permit: the loop sleeps until their timeout at most;
    once Permit allows them (or rejects them) it does not sleep at all, so that they are
    taken at once even if no store change wakes it."""
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3)
    for i in range(3):
        member(store, f"w{i}", "g", "two")
    runner = new_runner(store, runners, background=False)
    scheduler = runner.scheduler
    scheduler.refresh()
    for _ in range(2):  # two members reserved, held for the third
        pod = scheduler.queue.pop()
        assert isinstance(pod, Pod)
        assert scheduler.plan(pod).result == "waiting"  # type: ignore[union-attr]
    assert len(scheduler.waiting) == 2
    due = scheduler.waiting.next_due()
    assert due is not None
    assert 0.0 < runner._idle() <= IDLE_S
    for key in scheduler.waiting:
        scheduler.waiting.allow(key, "GangScheduling")
    assert runner._idle() == 0.0
