"""Policies that keep per-node indexes choose exactly what a full sort of every node would.

The reference policies below rank by sorting every feasible node from first principles (the
textbook FGD formula for `fragmentation`) and always score all their candidates; random
workloads with arrivals and departures go through the real scheduler and store twice, and
every placement must match, device for device.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

import msgspec
import pytest

from kubedra.allocator import Inventory
from kubedra.api.core import Node
from kubedra.scheduler.policies import Policy, make_policy
from kubedra.scheduler.policies.binpack import Binpack
from kubedra.scheduler.policies.fragmentation import (
    Fragmentation,
    fgd_score,
    node_fragmentation,
    placements,
)
from kubedra.scheduler.policies.fragmentation_lookahead import FragmentationLookahead
from kubedra.scheduler.policies.fragmentation_pack import FragmentationPack
from kubedra.scheduler.policies.fragmentation_priced import FragmentationPriced
from kubedra.scheduler.policies.ranking import Ranking
from kubedra.scheduler.policies.spread import Spread
from kubedra.scheduler.policies.topology import Topology
from kubedra.scheduler.scheduler import Outcome, Scheduler
from kubedra.scheduler.view import ClusterView
from kubedra.sim.engine import TYPICAL_SHARE, Simulation, simulation
from kubedra.sim.metrics import typical_types
from kubedra.sim.trace import Cluster, NodeSpec, TaskSpec
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store


class _AllCandidates(Policy):
    def first_only(self, first_is_best: bool) -> None:
        self.candidates = type(self).candidates  # always score every candidate


class _FewestFreeFirst(_AllCandidates):
    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        return sorted(nodes, key=lambda n: view.nodes[n].free())


class RefBinpack(_FewestFreeFirst, Binpack):
    name = ""  # not registered


class RefTopology(_FewestFreeFirst, Topology):
    name = ""


class RefSpread(_AllCandidates, Spread):
    name = ""

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        return sorted(nodes, key=lambda n: -view.nodes[n].free())


class RefFragmentation(_AllCandidates, Fragmentation):
    """FGD's rank straight from its definition, for every node, every pod."""

    name = ""

    def attach(self, scheduler: Scheduler) -> None:
        super().attach(scheduler)
        self.scheduler = scheduler

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        pod, mix = self.shape, self.mix()
        assert pod is not None and mix
        rated = {}
        for n in nodes:
            before = tuple(sorted(self.free_milli(view, n).values()))
            cpu = self.scheduler.cpu_free(n)
            after_cpu = None if cpu is None else cpu - pod.cpu_milli
            models = view.nodes[n].models
            base = self.measure(before, cpu, models)
            rated[n] = max(
                (self.option_rating(before, a, fgd_score(self.measure(a, after_cpu, models) - base))
                 for a in placements(before, pod)),
                default=None,
            )  # fmt: skip
        fitting = sorted((-r, self.tie_break(n), n) for n, r in rated.items() if r is not None)
        return [n for *_, n in fitting] + [n for n in nodes if rated[n] is None]

    def option_rating(self, before: tuple[int, ...], after: tuple[int, ...], score: int) -> float:
        """A placement's rating given FGD's score of it (less the tie-break on what is left)."""
        return score - self.free_weight * sum(after)

    def measure(self, free: tuple[int, ...], cpu: int | None, models: frozenset[str]) -> float:
        return node_fragmentation(free, self.mix(), cpu, models)


class RefLookahead(RefFragmentation, FragmentationLookahead):
    """Ranks by V(s) = F(s) + sum_m p_m min(0, min_a F(a) - F(s)) from the definition; the
    next task's CPU comes off the node's free CPU. (Its candidates' scores, on shared
    devices, are the policy's own.)"""

    def measure(self, free: tuple[int, ...], cpu: int | None, models: frozenset[str]) -> float:
        mix = self.mix()
        base = node_fragmentation(free, mix, cpu, models)
        gain = 0.0
        for shape, p in mix:
            if shape.devices == 0 or (cpu is not None and cpu < shape.cpu_milli):
                continue
            after_cpu = None if cpu is None else cpu - shape.cpu_milli
            best = min((node_fragmentation(a, mix, after_cpu, models) - base
                        for a in placements(free, shape)), default=0.0)  # fmt: skip
            gain += p * min(best, 0.0)
        return base + gain


class RefPriced(RefLookahead, FragmentationPriced):
    """The look-ahead's rating less, for a pod sharing a device, the milli its share loses:
    v(g) - v(g - s) - y_s from the mix's prices."""

    def option_rating(self, before: tuple[int, ...], after: tuple[int, ...], score: int) -> float:
        pod, prices = self.shape, self.prices()
        rating = super().option_rating(before, after, score)
        if pod is None or not pod.shares_a_device or prices is None:
            return rating
        (gap,) = Counter(before) - Counter(after)
        price = prices.price.get(
            pod.milli, prices.gap_value(pod.milli)
        )  # outside the mix: its best fill
        lost = prices.gap_value(gap) - prices.gap_value(gap - pod.milli) - price
        return rating - (lost if lost > 1e-6 else 0.0)


class RefFragmentationPack(RefFragmentation):
    name = ""
    free_weight = FragmentationPack.free_weight

    def tie_break(self, node: str) -> int:
        return 0


def _workload(seed: int) -> tuple[Cluster, list[TaskSpec]]:
    rng = random.Random(seed)
    # CPU is short on purpose: CPU-only pods move nodes between the mix's CPU bands too.
    nodes = tuple(
        NodeSpec(f"n{i:02d}", rng.choice((8000, 16000, 24000)), 262144,
                 rng.choice((2, 4, 8)), rng.choice(("T4", "V100M32")))
        for i in range(10)
    )  # fmt: skip
    tasks = []
    for i in range(110):
        kind = rng.random()
        gpus, milli = (0, 0) if kind < 0.25 else (1, rng.randrange(100, 1000, 50)) if kind < 0.6 \
            else (rng.choice((1, 1, 2, 4, 8)), 1000)  # fmt: skip
        spec = (rng.choice(("T4", "V100M32")),) if rng.random() < 0.2 else ()
        tasks.append(TaskSpec(f"t{i:03d}", rng.choice((0, 1000, 2000, 4000, 6000)), 1024,
                              gpus, milli, spec))  # fmt: skip
    return Cluster(nodes), tasks


def _placements(policy: Policy, seed: int, tmp: Path) -> list[Outcome]:
    """Tasks arrive in waves; between waves a third of the running ones end."""
    cluster, tasks = _workload(seed)
    rng = random.Random(seed + 1)
    out: list[Outcome] = []
    with simulation(cluster, "first-fit", target=tasks) as sim:
        _use(sim, policy, tasks, seed)
        for wave in range(0, len(tasks), 25):
            for task in tasks[wave : wave + 25]:
                sim.submit(task)
                out += sim.step()
            running = sorted(sim.placements)
            sim.end(rng.sample(running, len(running) // 3))
            out += sim.step()  # pods that waited may fit now
    return out


def _use(sim: Simulation, policy: Policy, target: list[TaskSpec], seed: int) -> None:
    sim.policy = sim.scheduler.policy = policy
    policy.attach(sim.scheduler)
    policy.reseed(seed)
    if isinstance(policy, Fragmentation):
        policy.prime(dict(typical_types(target, TYPICAL_SHARE)))


@pytest.mark.parametrize(("fast", "reference"), [
    (Binpack, RefBinpack), (Spread, RefSpread), (Topology, RefTopology),
    (Fragmentation, RefFragmentation), (FragmentationPack, RefFragmentationPack),
    (FragmentationLookahead, RefLookahead), (FragmentationPriced, RefPriced),
])  # fmt: skip
@pytest.mark.parametrize("seed", [1, 2])
def test_indexed_policies_place_like_a_full_sort(
    tmp_path: Path, fast: type[Policy], reference: type[Policy], seed: int
) -> None:
    got = _placements(fast(), seed, tmp_path / "fast")
    want = _placements(reference(), seed, tmp_path / "ref")
    assert [o.node for o in want].count(None) < len(want)  # some fit, some wait
    # The decisions must be the same; the failure messages may differ, as blockers are
    # diagnosed only on the nodes a search tried (the index passes over known misfits).
    assert [(o.pod, o.node, o.devices, o.result) for o in got] == [
        (o.pod, o.node, o.devices, o.result) for o in want
    ]


# node-b before node-a in seed 1's order for equal scores; two T4s each; node-a has more CPU.
TWO = Cluster((NodeSpec("node-a", 8000, 65536, 2, "T4"), NodeSpec("node-b", 6000, 65536, 2, "T4")))
MIX = [TaskSpec("m", 4000, 1024, 1, 1000)]  # the workload: whole GPUs with 4 CPUs
GPU = TaskSpec("gpu", 0, 1024, 1, 1000)  # scored on its first node only: the order decides


def test_a_pod_without_devices_moves_its_node_in_the_ranking() -> None:
    # A CPU-only pod leaves node-a 1 CPU: the workload's tasks cannot run there any more, so
    # a GPU taken there leaves less idle (score 73), while on node-b nothing changes (50).
    with simulation(TWO, "fragmentation", target=MIX, seed=1) as sim:
        sim.submit(TaskSpec("cpu", 7000, 1024))
        sim.submit(GPU)
        assert [o.node for o in sim.step()] == ["node-a", "node-a"]


def test_a_pod_that_ends_gives_its_node_its_cpu_back_in_the_ranking() -> None:
    with simulation(TWO, "fragmentation", target=MIX, seed=1) as sim:
        sim.submit(TaskSpec("cpu", 7000, 1024))
        sim.submit(TaskSpec("too-big", 9000, 1024, 1, 1000))  # ranks (with 1 CPU on node-a)
        assert [o.node for o in sim.step()] == ["node-a", None]
        sim.end(["cpu"])
        sim.submit(GPU)  # both nodes score 50 again: seed 1's order takes node-b
        assert {o.pod: o.node for o in sim.step()}["default/gpu"] == "node-b"


def test_first_only_is_kept_for_pods_whose_device_count_depends_on_the_node() -> None:
    from kubedra.api.codec import decode_object
    from kubedra.api.resource import ResourceClaim

    def claim(request: dict[str, object]) -> ResourceClaim:
        raw = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "c", "namespace": "default"},
               "spec": {"devices": {"requests": [{"name": "r", **request}]}}}  # fmt: skip
        got = decode_object(raw).obj
        assert isinstance(got, ResourceClaim)
        return got

    exact = claim({"exactly": {"deviceClassName": "gpu", "count": 2}})
    every = claim({"exactly": {"deviceClassName": "gpu", "allocationMode": "All"}})
    either = claim({"firstAvailable": [{"name": "a", "deviceClassName": "gpu", "count": 2},
                                       {"name": "b", "deviceClassName": "gpu"}]})  # fmt: skip
    shared = claim({"exactly": {"deviceClassName": "gpu",
                                "capacity": {"requests": {"gpu.nvidia.com/milli": "500"}}}})  # fmt: skip
    from kubedra.api.core import Pod

    pod = decode_object({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "default"},
                         "spec": {"containers": [{"name": "c"}]}}).obj  # fmt: skip
    assert isinstance(pod, Pod)
    cases = {Binpack: [exact], Spread: [exact], Fragmentation: [exact]}
    for cls, first in cases.items():
        policy = cls()
        for claims, expected in ([first, 1], [[every], cls.candidates], [[either], cls.candidates]):
            policy.prepare(pod, claims)
            assert policy.candidates == expected, (cls, claims)
    fgd = Fragmentation()
    fgd.prepare(pod, [shared])  # a share: the allocator's choice of device sets the score
    assert fgd.candidates == Fragmentation.candidates
    topo = Topology()
    topo.prepare(pod, [exact])  # two devices can span NVLink domains: all candidates
    assert topo.candidates == Topology.candidates
    topo.prepare(pod, [claim({"exactly": {"deviceClassName": "gpu"}})])
    assert topo.candidates == 1


def test_ranking_reads_lazily_and_behaves_as_a_sequence() -> None:
    names = [f"n{i:03d}" for i in range(100)]
    pulled: list[str] = []

    def order() -> Iterator[str]:
        for name in names:
            pulled.append(name)
            yield name

    ranking = Ranking(order(), len(names))
    assert len(ranking) == 100 and pulled == []
    assert ranking[1] == "n001" and 2 <= len(pulled) <= 10  # a few read ahead, not all
    assert list(ranking) == names and ranking[-1] == "n099" and ranking[0:2] == names[:2]
    with pytest.raises(IndexError):
        ranking[100]


def test_view_logs_changed_nodes_until_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubedra.scheduler import view as view_module

    monkeypatch.setattr(view_module, "CHANGE_LOG_LIMIT", 4)
    view = ClusterView(Inventory.build([], []), [])
    _, mark = view.changed_since(0)
    for node in ("a", "b", "a"):
        view.touch(node)
    changed, later = view.changed_since(mark)
    assert changed == ["a", "b", "a"]
    assert view.changed_since(later) == ([], later)
    for node in ("c", "d"):  # the fifth entry drops the four before it
        view.touch(node)
    assert view.changed_since(later) == (None, later + 2)  # "c" is gone: read every node
    assert view.changed_since(later + 1) == (["d"], later + 2)  # what came after the drop


def test_a_node_given_more_cpu_is_read_afresh(tmp_path: Path) -> None:
    # What is left on a node is cached between pods; a Node update (more allocatable CPU)
    # must reach the filter even though no pod changed there.
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2, cpu="2")
    gpu_template(store, "one", 1)
    big = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "4"},
                                                         "claims": [{"name": "gpus"}]}}]}  # fmt: skip
    scheduler = Scheduler(store, "binpack")
    gpu_pod(store, "p", template="one", **big)
    (first,) = scheduler.run_once()
    assert first.node is None and "Insufficient cpu" in first.message
    node = store.get(Node, "n1")
    assert node.status is not None
    from kubedra.api.quantity import Quantity

    allocatable = {**node.status.allocatable, "cpu": Quantity.parse("8")}
    store.update_status(msgspec.structs.replace(
        node, status=msgspec.structs.replace(node.status, allocatable=allocatable)))  # fmt: skip
    scheduler.queue.wake_all()
    assert [o.node for o in scheduler.run_once()] == ["n1"]


def test_sim_results_do_not_depend_on_the_string_hash_seed(tmp_path: Path) -> None:
    # The fragmentation total once summed per-node floats in a set's order, which moved the
    # last digits of every row between processes.
    code = (
        "import json, sys\n"
        "from kubedra.sim.engine import run_saturate\n"
        "from kubedra.sim.trace import Cluster, NodeSpec, TaskSpec, Workload\n"
        "nodes = Cluster(tuple(NodeSpec(f'n{i}', 32000, 65536, 4, 'T4') for i in range(40)))\n"
        "tasks = tuple(TaskSpec(f't{i}', 1000 + 37 * i, 1024, 1, 100 + (i * 97) % 900)"
        " for i in range(120))\n"
        "r = run_saturate(nodes, Workload(tasks, 'w'), 'first-fit', target=tasks)\n"
        "print(json.dumps(r.rows))\n"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(h), "PATH": "/usr/bin:/bin"}).stdout
        for h in (1, 2, 3)
    }  # fmt: skip
    assert len(outputs) == 1


def test_a_subclass_registers_only_under_its_own_name() -> None:
    """A subclass that inherits a policy's name (a variant, a test's reference) must not
    take that name over: `make_policy` keeps giving the policy itself."""

    class Variant(FragmentationLookahead):
        pass

    class Named(FragmentationLookahead):
        name = "x-test-variant"

    assert type(make_policy("fragmentation-lookahead")) is FragmentationLookahead
    assert type(make_policy("x-test-variant")) is Named
    assert Variant.name == "fragmentation-lookahead"
