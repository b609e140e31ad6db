"""The user's firstAvailable order beats every placement policy (upstream's KEP-4816
scoring): a node that satisfies a more preferred subrequest wins over one that satisfies
only a less preferred one, and the policy chooses among equally preferred placements."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.loader import load
from kubedra.api.resource import ResourceClaim
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.scheduler.framework import CycleState, PodInfo
from kubedra.scheduler.plugins import dra
from kubedra.scheduler.policies import POLICIES
from kubedra.scheduler.preference import MAX_SUBREQUESTS, most_preferred, preference
from kubedra.scheduler.scheduler import Scheduler
from tests.conftest import REPO

EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_dir())
# Every profile an example needs; name order puts the H100 node before the L4 nodes and
# after the A100s, so neither the first node nor the emptiest one is the preferred one.
MIX = [("a100-40x8-mig", 1), ("h100x8", 1), ("l4x4", 2)]


def cluster(tmp_path: Path, example: str, profiles: list[tuple[str, int]]) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    create_nodes(store, profiles)
    for loaded in load([str(REPO / "examples" / example)]):
        store.create(loaded.obj)
    return store


def claims_of(scheduler: Scheduler, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims as the DRA plugin's PreFilter resolves them."""
    state = CycleState()
    assert scheduler.dra is not None
    scheduler.dra.pre_filter(state, PodInfo(pod))
    return dra.claims_of(state)


def best_possible(scheduler: Scheduler, pod: Pod) -> int:
    """The brute force the scheduler must agree with: the best preference any node offers
    the pod now, from an allocation on every node in turn."""
    claims = claims_of(scheduler, pod)
    assert scheduler.dra is not None
    scores = [
        preference(claims, candidate.results)
        for node in scheduler.nodes()
        for candidate in scheduler.dra.candidates_on(pod, claims, node, {})
    ]
    return max(scores, default=-1)


def placed_preference(store: SqliteStore, scheduler: Scheduler, pod: Pod) -> int:
    claims = [store.get(ResourceClaim, c.name, c.namespace) for c in claims_of(scheduler, pod)]
    results = [c.status.allocation for c in claims if c.status and c.status.allocation]
    assert len(results) == len(claims)
    return preference(claims, results)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_policy_places_every_example_at_the_best_preference(
    tmp_path: Path, example: str, policy: str
) -> None:
    store = cluster(tmp_path, example, MIX)
    scheduler = Scheduler(store, policy)
    scheduler.refresh()
    while (pod := scheduler.queue.pop()) is not None:
        best = best_possible(scheduler, pod)  # makes the pod's claims from its templates
        scheduler.refresh()
        pod = store.get(Pod, pod.name, pod.namespace)
        outcome = scheduler.schedule(pod)
        if outcome.result == "waiting" and scheduler.waiting:
            continue  # a gang's pod, reserved: it is bound with the rest of its gang
        if outcome.node is None:
            assert best < 0, f"{pod.name}: pending though a node fits"
            continue
        assert placed_preference(store, scheduler, pod) == best, (example, policy, pod.name)
        scheduler.refresh()
    assert all(o.node for o in scheduler.settle_waiting())  # the gangs that completed


def _one_h100_pod(store: SqliteStore, name: str) -> None:
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
                 "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-h100"}]}}).obj)


def _renamed(pod: Pod, name: str) -> Pod:
    meta = msgspec.structs.replace(pod.metadata, name=name, uid=None, resource_version=None)
    return msgspec.structs.replace(pod, metadata=meta, status=None)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("fillers", "expected"), [(0, "gpu/h100"), (7, "gpu/h100"), (8, "gpu/l4")])
def test_one_h100_else_two_l4_whatever_the_policy(
    tmp_path: Path, policy: str, fillers: int, expected: str
) -> None:
    """Empty, nearly full and full H100 node beside empty L4 nodes: spread would pick an
    empty L4 node and binpack a fuller one; the H100 is taken while one is free."""
    store = cluster(tmp_path, "first-available", [("h100x8", 1), ("l4x4", 2)])
    one = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-h100", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
            "deviceClassName": "nvidia-gpu", "selectors": [{"cel": {"expression":
                'device.attributes["gpu.nvidia.com"].productName.contains("H100")'}}]}}]}}},
    }
    store.create(decode_object(one).obj)
    inference = store.get(Pod, "inference")
    store.delete(Pod, "inference")
    for i in range(fillers):
        _one_h100_pod(store, f"filler-{i}")
    Scheduler(store).run_once()
    store.create(_renamed(inference, "inference"))
    Scheduler(store, policy).run_once()
    placed = store.get(Pod, "inference")
    assert placed.spec.node_name, "the pod was not placed"
    claim = next(c for c in store.list(ResourceClaim) if c.name.startswith("inference-"))
    assert claim.status is not None and claim.status.allocation is not None
    requests = {r.request for r in claim.status.allocation.devices.results}
    assert requests == {expected}


def test_the_most_preferred_score_counts_each_request_once() -> None:
    claim = next(
        o.obj for o in load([str(REPO / "examples" / "first-available")])
        if o.obj.KIND == "ResourceClaimTemplate"
    )
    spec = claim.spec.spec  # type: ignore[attr-defined]
    as_claim = ResourceClaim(metadata=claim.metadata, spec=spec)
    assert most_preferred([as_claim]) == MAX_SUBREQUESTS
