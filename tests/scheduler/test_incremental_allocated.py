"""A claim change updates the allocated devices and the view in place: after any sequence
of claims created, allocated, reallocated, freed and deleted (as other schedulers and the
claim controller do), the tables equal the ones built afresh from every claim."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from kubedra.allocator import AllocatedState, NodeInfo
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimStatus,
)
from kubedra.cluster import SqliteStore
from kubedra.scheduler.claims import allocated_refs
from kubedra.scheduler.scheduler import Scheduler
from kubedra.scheduler.view import ClusterView
from tests.scheduler.cluster import gpu_node, new_store, user_claim

DRIVER = "gpu.nvidia.com"
NODES = ("n1", "n2", "n3")


def device(rng: random.Random) -> DeviceRequestAllocationResult:
    """A device on an owned node mostly; sometimes one no slice publishes, one held for
    admin access, or one share of a device (those cannot be freed in place)."""
    pool = rng.choice((*NODES, "elsewhere")) if rng.random() < 0.1 else rng.choice(NODES)
    result = DeviceRequestAllocationResult(
        request="gpus", driver=DRIVER, pool=pool, device=f"gpu-{rng.randrange(4)}"
    )
    roll = rng.random()
    if roll < 0.05:
        return msgspec.structs.replace(result, admin_access=True)
    if roll < 0.1:
        return msgspec.structs.replace(
            result,
            share_id=f"s{rng.randrange(3)}",
            consumed_capacity={"memory": Quantity.parse("1Gi")},
        )
    return result


def allocation(rng: random.Random) -> AllocationResult:
    results = tuple(device(rng) for _ in range(rng.randint(1, 3)))
    return AllocationResult(devices=DeviceAllocationResult(results=results))


def fresh_view(s: Scheduler) -> ClusterView:
    infos = [NodeInfo(n.name, n.metadata.labels) for n in s.nodes()]
    return ClusterView(s.inventory(), infos, [r for c in s.claims() for r in allocated_refs(c)])


def assert_exact(s: Scheduler) -> None:
    built = s.built_allocated()
    assert built is not None
    fresh = AllocatedState.from_claims(s.claims())
    assert built.devices == fresh.devices
    assert built._extra == fresh._extra
    assert built.shares == fresh.shares
    assert built.shared == fresh.shared
    assert built.capacity == fresh.capacity
    view, again = s.built_view(), fresh_view(s)
    assert view is not None
    for name, nd in again.nodes.items():
        assert view.nodes[name].used == nd.used, name
        assert +view.nodes[name].holders == +nd.holders, name


@pytest.mark.parametrize("seed", range(6))
def test_claim_changes_keep_the_tables_equal_to_a_rebuild(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store: SqliteStore = new_store(tmp_path)
    for name in NODES:
        gpu_node(store, name, gpus=4)
    s = Scheduler(store, claim_controller=False)
    s.refresh()
    names: list[str] = []
    fallbacks = 0
    for step in range(150):
        s.allocated()  # built, so that the change is taken in place
        s.view()
        op = rng.random()
        if not names or op < 0.2:
            name = f"c{step}"
            user_claim(store, name)
            names.append(name)
        else:
            name = rng.choice(names)
            claim = store.get(ResourceClaim, name, "default")
            if op < 0.65:  # allocated, or allocated afresh
                status = ResourceClaimStatus(allocation=allocation(rng))
                store.update_status(msgspec.structs.replace(claim, status=status))
            elif op < 0.8:  # reserved for another consumer: the allocation stays
                store.update_status(msgspec.structs.replace(claim, metadata=claim.metadata))
            elif op < 0.9:  # freed
                store.update_status(msgspec.structs.replace(claim, status=None))
            else:
                store.delete(ResourceClaim, name, "default")
                names.remove(name)
        s.refresh()
        if s.built_allocated() is None:
            fallbacks += 1  # rebuilt from every claim: exact by construction
            s.allocated()
        assert_exact(s)
    assert fallbacks < 40  # most changes are taken in place
