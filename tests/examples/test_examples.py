"""Each example applied to a simulated cluster, and its placement checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.api.loader import load
from kubedra.api.resource import ResourceClaim
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.scheduler.scheduler import Scheduler
from tests.conftest import REPO

EXAMPLES = REPO / "examples"


def cluster(tmp_path: Path, *profiles: tuple[str, int], example: str) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    create_nodes(store, list(profiles))
    for loaded in load([str(EXAMPLES / example)]):
        store.create(loaded.obj)
    return store


def results(store: SqliteStore, pod: str, namespace: str = "default") -> list[tuple[str, str, str]]:
    """(request, pool, device) of every claim of a scheduled pod."""
    p = store.get(Pod, pod, namespace)
    assert p.spec.node_name, f"{pod} was not scheduled"
    out = []
    statuses = p.status.resource_claim_statuses if p.status else ()
    names = [e.resource_claim_name for e in p.spec.resource_claims if e.resource_claim_name]
    names += [s.resource_claim_name for s in statuses if s.resource_claim_name]
    if p.status and p.status.extended_resource_claim_status:
        names.append(p.status.extended_resource_claim_status.resource_claim_name)
    for name in names:
        claim = store.get(ResourceClaim, name or "", namespace)
        assert claim.status is not None and claim.status.allocation is not None
        out += [(r.request, r.pool, r.device) for r in claim.status.allocation.devices.results]
    return out


def test_every_example_has_a_readme() -> None:
    for folder in EXAMPLES.iterdir():
        assert (folder / "README.md").is_file(), folder


def test_seed_vllm_lands_on_an_h100(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("l4x4", 2), ("h100x8", 1), example="seed")
    Scheduler(store).run_once()
    assert results(store, "vllm-inference") == [("gpu", "h100x8-0", "gpu-0")]


def test_gpu_and_nic_share_a_pcie_root(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("h100x8", 1), example="gpu-nic-same-pcie-root")
    Scheduler(store).run_once()
    picked = results(store, "rdma-worker")
    assert [r[0] for r in picked] == ["gpu", "nic"]
    from kubedra.api.resource import ResourceSlice

    roots = {}
    for rs in store.list(ResourceSlice):
        for d in rs.spec.devices:
            attr = d.attributes.get("resource.kubernetes.io/pcieRoot")
            roots[(rs.spec.pool.name, d.name)] = attr.string if attr else None
    assert roots[picked[0][1:]] == roots[picked[1][1:]] == "pci0000:10"


def test_mig_1g10gb_slice(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("a100-40x8-mig", 1), example="mig-1g10gb")
    Scheduler(store).run_once()
    ((request, pool, device),) = results(store, "notebook")
    assert (request, pool) == ("mig", "a100-40x8-mig-0")
    assert device.startswith("gpu-0-mig-1g10gb-")


@pytest.mark.parametrize(("profiles", "expected"), [
    ((("l4x4", 1), ("h100x8", 1)), [("gpu/h100", "h100x8-0", "gpu-0")]),
    ((("l4x4", 1),), [("gpu/l4", "l4x4-0", "gpu-0"), ("gpu/l4", "l4x4-0", "gpu-1")]),
])
def test_first_available_h100_else_two_l4(tmp_path: Path, profiles: tuple[tuple[str, int], ...],
                                          expected: list[tuple[str, str, str]]) -> None:
    store = cluster(tmp_path, *profiles, example="first-available")
    Scheduler(store).run_once()
    assert results(store, "inference") == expected


def test_one_claim_shared_by_two_pods(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("h100x8", 2), example="shared-claim")
    Scheduler(store).run_once()
    assert results(store, "server") == results(store, "cache-warmer") == [("gpu", "h100x8-0", "gpu-0")]
    claim = store.get(ResourceClaim, "shared-gpu")
    assert claim.status is not None and sorted(r.name for r in claim.status.reserved_for) == [
        "cache-warmer", "server"]


def test_admin_access_sees_gpus_in_use(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("h100x8", 1), example="seed")
    Scheduler(store).run_once()  # vllm holds gpu-0
    for loaded in load([str(EXAMPLES / "admin-access")]):
        store.create(loaded.obj)
    Scheduler(store).run_once()
    picked = results(store, "dcgm-exporter", "gpu-monitoring")
    assert sorted(d for _, _, d in picked) == sorted(f"gpu-{i}" for i in range(8))
    claim_name = store.get(Pod, "dcgm-exporter", "gpu-monitoring").status.resource_claim_statuses[0].resource_claim_name  # type: ignore[union-attr]
    claim = store.get(ResourceClaim, claim_name or "", "gpu-monitoring")
    assert claim.status and claim.status.allocation
    assert all(r.admin_access for r in claim.status.allocation.devices.results)


def test_training_pod_gets_one_nvlink_domain(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("l4x4", 2), ("h100x8", 1), example="nvlink-training")
    Scheduler(store).run_once()
    picked = results(store, "trainer")
    assert {pool for _, pool, _ in picked} == {"h100x8-0"} and len(picked) == 8


def test_extended_resource_pod_is_served_by_dra(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("h100x8", 1), example="extended-resource")
    Scheduler(store).run_once()
    assert results(store, "legacy-cuda-job") == [("container-0-request-0", "h100x8-0", "gpu-0")]


def test_mig_3g40gb_instance(tmp_path: Path) -> None:
    store = cluster(tmp_path, ("h100x8-mig", 1), example="mig-3g40gb")
    Scheduler(store).run_once()
    ((request, pool, device),) = results(store, "mig-inference")
    assert (request, pool) == ("mig", "h100x8-mig-0")
    assert device in ("gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4")


def test_gang_training_places_all_four_workers_on_one_node_or_none(tmp_path: Path) -> None:
    """Two l4x4 nodes have 8 GPUs, but no node holds the whole gang (4 workers x 2 GPUs,
    topology key kubernetes.io/hostname): upstream's gang admission binds none of them."""
    store = cluster(tmp_path, ("l4x4", 2), example="gang-training")
    Scheduler(store).run_once()
    assert [p.spec.node_name for p in store.list(Pod)] == [None] * 4
