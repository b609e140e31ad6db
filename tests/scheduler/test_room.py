"""Room: the CPU/memory verdicts kept between pods equal a fresh check after any changes."""

from __future__ import annotations

import random

import pytest

from kubedra.api.core import Pod
from kubedra.api.quantity import Quantity
from kubedra.scheduler import room as room_module
from kubedra.scheduler.nodes import add_requests, pod_requests, resources_left, shortfall, wanted
from kubedra.scheduler.room import Room
from tests.scheduler.test_nodes_queue_claims import node, pod, requests


def asking(cpu: str, memory: str) -> Pod:
    return pod(containers=requests(cpu, memory))


def fresh(nodes: list[str], by_name: dict, usage: dict, p: Pod) -> tuple[list[str], dict[str, int]]:
    """The check Room saves: every node against the pod's requests."""
    fitting, reasons = [], {}
    for name in nodes:
        reason = shortfall(wanted(pod_requests(p)), resources_left(by_name[name], usage.get(name, {})))
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
        else:
            fitting.append(name)
    return fitting, reasons


def test_a_pod_placed_in_place_is_seen_by_the_next_pod_with_the_same_requests() -> None:
    by_name = {n: node(n, cpu="4", memory="8Gi") for n in ("a", "b")}
    usage: dict[str, dict[str, Quantity]] = {}
    names, room, three = ["a", "b"], Room(), asking("3", "1Gi")
    room.sync(by_name, usage)
    reasons: dict[str, int] = {}
    assert room.fitting(b"k", names, wanted(pod_requests(three)), reasons) == ["a", "b"]
    add_requests(usage.setdefault("a", {}), three)
    room.changed("a")
    assert room.fitting(b"k", names, wanted(pod_requests(three)), reasons) == ["b"]
    assert reasons == {"Insufficient cpu": 1}
    # usage read afresh (another object): everything is judged again
    room.sync(by_name, {})
    assert room.fitting(b"k", names, wanted(pod_requests(three)), {}) == ["a", "b"]


@pytest.mark.parametrize("seed", range(6))
def test_kept_verdicts_equal_a_fresh_check_through_placements_and_resets(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The class of bug: a verdict kept past a change it should have seen. Random pods go to
    # random fitting nodes; the logs' limits are small so that they overflow too.
    monkeypatch.setattr(room_module, "VERDICTS_LIMIT", 3)
    monkeypatch.setattr(room_module, "CHANGES_LIMIT", 5)
    rng = random.Random(seed)
    by_name = {f"n{i}": node(f"n{i}", cpu=str(rng.choice((4, 8, 16))), memory=f"{rng.choice((8, 16))}Gi")
               for i in range(12)}
    names = sorted(by_name)
    shapes = [asking(f"{rng.choice((1, 2, 3))}", f"{rng.choice((1, 2, 4))}Gi") for _ in range(5)]
    usage: dict[str, dict[str, Quantity]] = {}
    room = Room()
    for step in range(120):
        if step % 40 == 39:
            usage = {k: dict(v) for k, v in usage.items()}  # the scheduler rebuilt it
        room.sync(by_name, usage)
        p = rng.choice(shapes)
        reasons: dict[str, int] = {}
        got = room.fitting(b"key", names, wanted(pod_requests(p)), reasons)
        assert (got, reasons) == fresh(names, by_name, usage, p)
        if got:
            chosen = rng.choice(got)
            add_requests(usage.setdefault(chosen, {}), p)
            room.changed(chosen)
