"""The side-by-side benchmark's parts that need no cluster: scheduler_perf's objects, the
pre-allocated claims of its steady-state shapes, the API server metrics it reads, and the
rows that pair each kubedra policy with the kube-scheduler setting doing comparable work."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.bench_kube_scheduler import rows_of
from bench.kube_scheduler_perf import (
    FIRST_FIT,
    FRAGMENTATION,
    KUBE_DEFAULT,
    KUBE_FEWEST,
    Result,
    apf_wait,
    scaled,
    writes,
)

from kubedra.api.codec import to_dict
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cluster.sqlite import SqliteStore
from kubedra.devcluster.harness import plain_node
from kubedra.devcluster.workload import (
    PERF_TEMPLATE,
    perf_allocated_claims,
    perf_class,
    perf_pod,
    perf_slice,
    perf_template,
)
from kubedra.scheduler.verify import check_allocations

METRICS = """\
# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 40
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 38
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 2
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="a",priority_level="b"} 0.5
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="c",priority_level="d"} 1.25
"""


def test_writes_count_every_write_by_resource_and_skip_reads() -> None:
    assert writes(METRICS) == {"POST pods/binding": 42, "POST events": 38}
    assert apf_wait(METRICS) == 1.75


def test_scheduler_perf_objects_are_upstreams() -> None:
    slice_ = perf_slice("scheduler-perf-dra-3", 10)
    assert isinstance(slice_, ResourceSlice)
    assert [d.name for d in slice_.spec.devices] == [f"instance-{i}" for i in range(10)]
    assert slice_.spec.pool.name == slice_.spec.node_name == "scheduler-perf-dra-3"
    pod = perf_pod("a", "test", "kubedra")
    assert pod.spec.scheduler_name == "kubedra"
    assert pod.spec.resource_claims[0].resource_claim_template_name == PERF_TEMPLATE
    assert perf_template("test").name == PERF_TEMPLATE
    assert scaled(500, 0.2) == 100 and scaled(2500, 0.0001) == 1


def test_preallocated_claims_fill_nodes_in_order_and_check_valid(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    nodes = ["n0", "n1", "n2"]
    for name in nodes:
        store.create(plain_node(name))
        store.create(perf_slice(name, 4))
    store.create(perf_class())
    perf_allocated_claims(store, 5, nodes, devices=4, namespace="default")
    perf_allocated_claims(store, 3, nodes, devices=4, namespace="default", first=5)
    claims = store.list(ResourceClaim, "default")
    placed = sorted(
        (c.name, r.pool, r.device)
        for c in claims
        if c.status and c.status.allocation
        for r in c.status.allocation.devices.results
    )
    assert len(placed) == 8
    assert ("test-claim-4", "n1", "instance-0") in placed
    assert ("test-claim-7", "n1", "instance-3") in placed
    assert check_allocations(store) == []


def test_rows_pair_first_fit_with_fewest_nodes_and_fragmentation_with_default() -> None:
    def res(v: object, rate: float) -> Result:
        r = Result(v, "s", 50.0, 10, bound=10, pods_per_s=rate)  # type: ignore[arg-type]
        r.cpu = {"scheduler": 1.0}
        return r

    rows = rows_of(
        [res(KUBE_DEFAULT, 10), res(KUBE_FEWEST, 20), res(FIRST_FIT, 30), res(FRAGMENTATION, 4)]
    )
    ratios = {r.name: r for r in rows if r.unit == "x"}
    ff = ratios["s, QPS 50: kubedra first-fit / kube-scheduler percentageOfNodesToScore=1"]
    assert ff.value == 1.5 and ff.ok
    frag = ratios["s, QPS 50: kubedra fragmentation / kube-scheduler default"]
    assert frag.value == 0.4 and not frag.ok


def test_without_the_fewest_nodes_setting_first_fit_is_compared_with_the_default() -> None:
    def res(v: object, rate: float) -> Result:
        r = Result(v, "small", 5000.0, 10, bound=10, pods_per_s=rate)  # type: ignore[arg-type]
        r.cpu = {"scheduler": 1.0}
        return r

    rows = rows_of([res(KUBE_DEFAULT, 10), res(FIRST_FIT, 12)])
    [ratio] = [r for r in rows if r.unit == "x"]
    assert ratio.name == "small, QPS 5000: kubedra first-fit / kube-scheduler default"
    assert ratio.value == 1.2


def test_unthrottled_pairs_are_held_to_three_times_the_rate_at_half_the_cpu() -> None:
    def res(v: object, rate: float, cpu: float) -> Result:
        r = Result(v, "b", 5000.0, 10, bound=10, pods_per_s=rate)  # type: ignore[arg-type]
        r.cpu = {"scheduler": cpu}
        return r

    rows = rows_of(
        [
            res(KUBE_DEFAULT, 10, 4.0),
            res(KUBE_FEWEST, 10, 4.0),
            res(FIRST_FIT, 30, 2.0),  # 3x at 0.5x CPU: met
            res(FRAGMENTATION, 40, 2.4),  # 4x, but 0.6x CPU: not met
        ]
    )
    ratios = {r.name.split(": ")[1]: r for r in rows if r.unit == "x"}
    ff = ratios["kubedra first-fit / kube-scheduler percentageOfNodesToScore=1"]
    frag = ratios["kubedra fragmentation / kube-scheduler default"]
    assert ff.target == frag.target == ">= 3 at CPU <= 0.5x"
    assert ff.ok and not frag.ok


def test_direct_nodes_are_what_the_simulated_driver_publishes(tmp_path: Path) -> None:
    from kubedra.api.core import Node
    from kubedra.devcluster.workload import gpu_nodes

    def made(store: SqliteStore) -> tuple[list[object], list[object]]:
        def plain(obj: KubeObject) -> object:
            data = to_dict(obj)
            meta = data["metadata"]
            for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                meta.pop(key, None)
            for ref in meta.get("ownerReferences", []):
                ref.pop("uid")
            return data

        nodes = sorted((plain(n) for n in store.list(Node)), key=str)
        slices = sorted((plain(s) for s in store.list(ResourceSlice)), key=str)
        return nodes, slices

    published, direct = SqliteStore(tmp_path / "a.db"), SqliteStore(tmp_path / "b.db")
    assert gpu_nodes(published, 3) == gpu_nodes(direct, 3, direct=True, threads=2)
    assert made(direct) == made(published)
    nodes, slices = made(direct)
    assert len(nodes) == 3 and len(slices) >= 3
    for s in direct.list(ResourceSlice):
        [owner] = s.metadata.owner_references
        assert owner.uid == direct.get(Node, s.spec.node_name or "").metadata.uid


def test_large_bursts_run_unthrottled_only_and_variants_can_be_picked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.bench_kube_scheduler import burst_variants, rates
    from bench.harness import QUICK_ENV
    from bench.kube_scheduler_perf import THROTTLED, UNTHROTTLED

    monkeypatch.delenv(QUICK_ENV, raising=False)
    assert rates(125) == (THROTTLED, UNTHROTTLED)
    assert rates(1000) == rates(5000) == (UNTHROTTLED,)
    monkeypatch.setenv("KUBEDRA_BENCH_KUBE_VARIANTS", "fragmentation,default")
    assert burst_variants() == (FRAGMENTATION, KUBE_DEFAULT)
    monkeypatch.delenv("KUBEDRA_BENCH_KUBE_VARIANTS")
    assert burst_variants() == (KUBE_DEFAULT, KUBE_FEWEST, FIRST_FIT, FRAGMENTATION)
