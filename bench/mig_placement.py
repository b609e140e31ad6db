"""MIG placement: kubedra's `mig-aware` against upstream's first fit and static partitioning.

    python -m bench.mig_placement [--quick] [--seeds N] [--gpus N] [--arrivals N] [--load X]
                                  [--mix 1g.10gb=0.4,4g.40gb=0.6] [--plot PATH]

The cluster: `--gpus` H100 80GB GPUs (100), four per node, published as the NVIDIA driver
publishes dynamic MIG (every profile at every placement, one counter set per GPU; the
catalog's `nvidia.gpu_inventory`). The stream: `--arrivals` requests (3,000), each for one MIG
instance of a profile drawn from `MIX`, arriving as a Poisson process whose offered load is
`--load` (1.0: the requests would hold every memory slice on average), each held for an
exponential time (mean 1) and then released. A request that fits nowhere is refused and
gone. The same stream (one per seed) goes to every method:

- kubedra: the `mig-aware` policy through the scheduler's placement calls (prepare, rank the
  nodes, a device order per node, allocate with kubedra's allocator, score), learning the
  mix from the requests it sees (not primed);
- first fit: upstream's allocator (the Go oracle, tools/oracle, on the node's slices and the
  claims allocated there) on the first node, in name order, where the request fits, as
  kubedra's `first-fit` policy and the kube-scheduler without device scoring decide. Where
  Go is not available, kubedra's own allocator in first-fit mode decides (it matches
  upstream's, tests/conformance); the output says so;
- static: the device-plugin way, every GPU split once into a fixed layout: `static` plans
  the layouts for the mix (profile instances in proportion to the mix, packed onto the
  GPUs), `all-balanced` is NVIDIA mig-parted's common layout (2x 1g.10gb, 1x 2g.20gb,
  1x 3g.40gb per GPU); a request takes an idle partition of its profile or is refused;
- unconstrained: no placement rules at all (a request fits where enough memory and compute
  slices are free, on the fullest such GPU): not a real scheduler, a reference for how much
  any placement could gain (first fit is not far below it).

Reported per method, mean ± sd over the seeds: requests accepted before the first refusal,
accepted in total, and memory slices stranded (free slices that no profile of the mix can
use, summed over the GPUs, averaged over the arrivals from the first refusal on). The last
line is JSON: {"kubedra": N, "first_fit": N, "static": N}, requests accepted in total (the
mean over the seeds). `--quick`: one seed. `--mix`: another mix (H100 profile=share, ...).
Only a full run of the documented stream writes docs/figures/mig-placement.png; others
plot where `--plot` says.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedra.allocator import AllocatedState, DeviceRef, Inventory, NodeInfo, allocate
from kubedra.api.codec import decode_object, to_dict
from kubedra.api.core import Node, Pod
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from kubedra.catalog import gpus, nvidia
from kubedra.catalog.gpus import GpuSpec, compute_slices
from kubedra.catalog.inventory import gpu_functions
from kubedra.catalog.profiles import pcie_per_gpu_layout
from kubedra.driver.publisher import slice_name, slice_specs
from kubedra.scheduler.policies import Candidate, Policy, make_policy
from kubedra.scheduler.policies.base import refs_of
from kubedra.scheduler.policies.partitions import SLICE_PREFIX, Avail, Model, Shape
from kubedra.scheduler.view import ClusterView

# The documented mix (share of the requests): H100 80GB profile names, inference-heavy with
# some training: small instances most often, a tenth of the requests for a whole GPU.
MIX: Mapping[str, float] = {
    "1g.10gb": 0.30,
    "1g.20gb": 0.10,
    "2g.20gb": 0.20,
    "3g.40gb": 0.15,
    "4g.40gb": 0.15,
    "7g.80gb": 0.10,
}
GPU: GpuSpec = gpus.H100_SXM5_80GB
GPUS_PER_NODE = 4
DRIVER = nvidia.DRIVER
CLASS = "mig.nvidia.com"
ALL_BALANCED = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")  # mig-parted's H100 all-balanced
DEFAULTS = {"gpus": 100, "arrivals": 3000, "load": 1.0, "seeds": 10}
FIGURE = Path(__file__).resolve().parents[1] / "docs" / "figures" / "mig-placement.png"
METHODS = ("kubedra", "first_fit", "static", "all_balanced", "unconstrained")
LABELS = {
    "kubedra": "kubedra mig-aware",
    "first_fit": "first fit (upstream)",
    "static": "static, planned for the mix",
    "all_balanced": "static, all-balanced",
    "unconstrained": "no placement rules (reference)",
}


# --- the cluster and the stream -----------------------------------------------------------


@dataclass(frozen=True)
class Request:
    index: int
    time: float
    kind: str
    duration: float


def stream(seed: int, gpu_count: int, arrivals: int, load: float) -> list[Request]:
    """The seed's requests: Poisson arrivals at `load` of the memory slices, Exp(1) holds."""
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    slices = sum(MIX[k] * GPU_GEOMETRY.profile(k).memory_slices for k in kinds) / sum(weights)
    rate = load * gpu_count * GPU_GEOMETRY.memory_slices / slices  # per unit of time
    out, t = [], 0.0
    for i in range(arrivals):
        t += rng.expovariate(rate)
        kind = rng.choices(kinds, weights)[0]
        out.append(Request(i, t, kind, rng.expovariate(1.0)))
    return out


assert GPU.mig is not None
GPU_GEOMETRY = GPU.mig


def node_sizes(gpu_count: int, per_node: int = GPUS_PER_NODE) -> list[int]:
    full, rest = divmod(gpu_count, per_node)
    return [per_node] * full + ([rest] if rest else [])


def build_cluster(
    gpu_count: int, per_node: int = GPUS_PER_NODE
) -> tuple[list[ResourceSlice], list[Node]]:
    """Slices as the driver publishes them (counter sets, then devices) and the nodes."""
    slices: list[ResourceSlice] = []
    nodes: list[Node] = []
    sizes = node_sizes(gpu_count, per_node)
    width = max(3, len(str(len(sizes))))
    for n, size in enumerate(sizes):
        name = f"mig-{n:0{width}d}"
        labels = {"kubernetes.io/hostname": name}
        nodes.append(
            Node(api_version="v1", kind="Node", metadata=ObjectMeta(name=name, labels=labels))
        )
        functions = gpu_functions(pcie_per_gpu_layout(size))
        inventory = nvidia.gpu_inventory(name, GPU, functions, mig=True)
        for i, spec in enumerate(slice_specs(inventory, name, generation=1)):
            meta = ObjectMeta(name=slice_name(name, DRIVER, i))
            slices.append(
                ResourceSlice(
                    api_version="resource.k8s.io/v1", kind="ResourceSlice", metadata=meta, spec=spec
                )
            )
    return slices, nodes


def mig_class() -> DeviceClass:
    obj = decode_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{DRIVER}" && '
                            f'device.attributes["{DRIVER}"].type == "mig"'
                        }
                    }
                ]
            },
        }
    ).obj
    assert isinstance(obj, DeviceClass)
    return obj


def claim_wire(name: str, kind: str) -> dict[str, Any]:
    """A claim for one MIG instance of `kind`, as the API server stores it."""
    selector = f'device.attributes["{DRIVER}"].profile == "{kind}"'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "mig",
                        "exactly": {
                            "deviceClassName": CLASS,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }


def pod_for(name: str) -> Pod:
    obj = decode_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-pod-{name}"},
            "spec": {"containers": [{"name": "main"}]},
        }
    ).obj
    assert isinstance(obj, Pod)
    return obj


# --- bookkeeping shared by the dynamic methods -------------------------------------------


class Book:
    """Which devices of each GPU are allocated, the counters left, and what is stranded."""

    def __init__(self, model: Model, mix_kinds: Iterable[str]) -> None:
        self.model = model
        self.kinds = frozenset(mix_kinds)
        self.used: list[set[int]] = [set() for _ in model.gpus]
        self.avail: list[Avail] = [model.shapes[g.shape].totals for g in model.gpus]
        self._stranded: dict[tuple[int, Avail], int] = {}
        self._slices = {
            s: [i for i, c in enumerate(shape.counters) if c.startswith(SLICE_PREFIX)]
            for s, shape in enumerate(model.shapes)
        }

    def take(self, refs: Iterable[DeviceRef]) -> None:
        self._change(refs, True)

    def give(self, refs: Iterable[DeviceRef]) -> None:
        self._change(refs, False)

    def _change(self, refs: Iterable[DeviceRef], take: bool) -> None:
        for ref in refs:
            gpu, device = self.model.where[ref]
            if take:
                self.used[gpu].add(device)
            else:
                self.used[gpu].discard(device)
            shape = self.model.shapes[self.model.gpus[gpu].shape]
            self.avail[gpu] = shape.after(self.used[gpu])

    def fits(self, gpu: int, kind: str) -> list[int]:
        """Devices of `kind` that fit on `gpu` now, in the driver's order."""
        shape = self.model.shapes[self.model.gpus[gpu].shape]
        avail = self.avail[gpu]
        return [d for d, k in enumerate(shape.kinds) if k == kind and shape.fits(d, avail)]

    def first_fit(self, kind: str, nodes: Sequence[str]) -> tuple[str, DeviceRef] | None:
        """Upstream's choice as this model predicts it: the first node (in `nodes` order),
        the first device there in slice order that fits."""
        for node in nodes:
            for gpu in self.model.by_node.get(node, ()):
                found = self.fits(gpu, kind)
                if found:
                    return node, self.model.gpus[gpu].refs[found[0]]
        return None

    def node_fits(self, node: str, kind: str) -> bool:
        return any(self.fits(gpu, kind) for gpu in self.model.by_node.get(node, ()))

    def stranded(self) -> int:
        """Free memory slices, over all GPUs, that no device of a mix profile could use now."""
        total = 0
        for gpu, g in enumerate(self.model.gpus):
            key = (g.shape, self.avail[gpu])
            got = self._stranded.get(key)
            if got is None:
                got = self._stranded[key] = _stranded(
                    self.model.shapes[g.shape], self.avail[gpu], self.kinds, self._slices[g.shape]
                )
            total += got
        return total


def _stranded(shape: Shape, avail: Avail, kinds: frozenset[str], slices: list[int]) -> int:
    free = {i for i in slices if avail[i] > 0}
    usable: set[int] = set()
    for d, k in enumerate(shape.kinds):
        if k in kinds and shape.fits(d, avail):
            usable.update(i for i in slices if shape.uses[d][i] > 0)
    return len(free - usable)


# --- the methods ----------------------------------------------------------------------------


@dataclass
class Outcome:
    accepted_first: int = 0  # accepted before the first refusal
    accepted: int = 0
    stranded: float = 0.0
    refused_by_kind: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    note: str = ""


Place = Callable[[Request], object | None]  # a handle to release, or None: refused


def simulate(
    requests: Sequence[Request],
    place: Place,
    release: Callable[[object], None],
    stranded: Callable[[], int],
) -> Outcome:
    """Run the stream: departures before each arrival, then place it or refuse it."""
    out, ends, refused = Outcome(), list[tuple[float, int, object]](), False
    samples: list[int] = []
    began = time.perf_counter()
    for req in requests:
        while ends and ends[0][0] <= req.time:
            _, _, handle = heapq.heappop(ends)
            release(handle)
        if refused:
            samples.append(stranded())
        handle = place(req)
        if handle is None:
            if not refused:
                refused = True
                samples.append(stranded())
            out.refused_by_kind[req.kind] += 1
            continue
        out.accepted += 1
        if not refused:
            out.accepted_first += 1
        heapq.heappush(ends, (req.time + req.duration, req.index, handle))
    out.stranded = statistics.fmean(samples) if samples else 0.0
    out.seconds = time.perf_counter() - began
    return out


class Placer:
    """The scheduler's placement step for one pod, without the store: the policy's calls in
    `Scheduler._place`'s order (prepare, rank nodes, device orders, allocate, score, the
    best candidate), then the reservation in the allocator's state and the view. Nodes
    where the counters hold no device of the request's profile are not tried (the allocator
    would refuse them: a shortcut, not a different choice)."""

    def __init__(
        self,
        slices: Sequence[ResourceSlice],
        nodes: Sequence[Node],
        policy: Policy,
        book: Book | None = None,
    ) -> None:
        self._inventory = Inventory.build(slices)
        self._nodes = list(nodes)
        self._infos = {n.name: NodeInfo(n.name, dict(n.metadata.labels)) for n in nodes}
        self._names = sorted(self._infos)
        self._classes = {CLASS: mig_class()}
        self._state = AllocatedState()
        self.view = ClusterView(self._inventory, list(self._infos.values()))
        self.policy = policy
        model = Model(self._inventory, list(self._infos.values()))
        self.book = book or Book(model, MIX)
        policy.attach(self)
        self.calls = 0

    # what a policy may ask of its scheduler
    def inventory(self) -> Inventory:
        return self._inventory

    def nodes(self) -> list[Node]:
        return self._nodes

    def classes(self) -> dict[str, DeviceClass]:
        return self._classes

    def allocated(self) -> AllocatedState:
        return self._state

    def cpu_free(self, node: str) -> int | None:
        return None

    def place(self, request: Request) -> Candidate | None:
        name = f"r{request.index}"
        claim = decode_object(claim_wire(name, request.kind)).obj
        assert isinstance(claim, ResourceClaim)
        policy = self.policy
        policy.prepare(pod_for(name), [claim])
        ranked = policy.rank_nodes(self.view, self._names)
        found: list[Candidate] = []
        for node in ranked:
            if not self.book.node_fits(node, request.kind):
                continue
            for order in policy.device_orders(self.view, node):
                self.calls += 1
                got = allocate([claim], self._infos[node], self._inventory, self._classes,
                               self._state, order=order)  # fmt: skip
                if got.results is None:
                    break
                found.append(Candidate(node, got.results, refs_of(got.results)))
            if len(found) >= policy.candidates:
                break
        if not found:
            return None
        best = max(found, key=lambda c: policy.score(self.view, c))
        for result in best.results:
            self._state.reserve(result)
        self.view.reserve(best.refs)
        self.book.take(best.refs)
        policy.observe(len(best.refs))
        return best

    def release(self, handle: object) -> None:
        assert isinstance(handle, Candidate)
        self._state = AllocatedState(self._state.devices - set(handle.refs))
        self.view.release(handle.refs)
        self.book.give(handle.refs)


def run_policy(
    requests: Sequence[Request], slices: Sequence[ResourceSlice], nodes: Sequence[Node], name: str
) -> Outcome:
    placer = Placer(slices, nodes, make_policy(name))
    out = simulate(requests, placer.place, placer.release, placer.book.stranded)
    out.note = f"{placer.calls} allocator calls"
    return out


class OracleFirstFit:
    """Upstream's allocator (the Go oracle) deciding first fit, node by node in name order."""

    def __init__(self, oracle: Any, slices: Sequence[ResourceSlice], nodes: Sequence[Node]):
        self.oracle = oracle
        names = [n.name for n in nodes]
        self.nodes = sorted(names)
        self.labels = {n.name: dict(n.metadata.labels) for n in nodes}
        self.slices: dict[str, list[dict[str, Any]]] = {}
        for s in slices:
            self.slices.setdefault(s.spec.node_name or "", []).append(to_dict(s))
        inventory = Inventory.build(slices)
        self.book = Book(Model(inventory, [NodeInfo(n, self.labels[n]) for n in names]), MIX)
        self.klass = to_dict(mig_class())
        self.allocated: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in names}
        self.calls = self.disagreements = 0

    def place(self, request: Request) -> tuple[str, str, DeviceRef] | None:
        from tests.conformance.scenario import UPSTREAM_FEATURES

        from kubedra.allocator import Features

        features = Features()
        switches = {up: getattr(features, ours) for ours, up in UPSTREAM_FEATURES.items()}
        name = f"r{request.index}"
        claim = claim_wire(name, request.kind)
        start = 0
        while True:
            predicted = self.book.first_fit(request.kind, self.nodes[start:])
            if predicted is None:
                return None
            node, ref = predicted
            self.calls += 1
            answer = self.oracle.ask(
                "alloc",
                {
                    "features": switches,
                    "deviceTaintRules": False,
                    "node": {"name": node, "labels": self.labels[node]},
                    "classes": [self.klass],
                    "slices": self.slices[node],
                    "taintRules": [],
                    "allocated": list(self.allocated[node].values()),
                    "claims": [claim],
                    "timeoutMs": 10_000,
                },
            )
            results = answer.get("results")
            if not results:  # the model said it fits: a disagreement, try the next node
                self.disagreements += 1
                start = self.nodes.index(node) + 1
                continue
            (device,) = [r["device"] for r in results[0]["devices"]["results"]]
            chosen = DeviceRef(DRIVER, node, device)
            if chosen != ref:
                self.disagreements += 1
            claim["status"] = {"allocation": results[0]}
            self.allocated[node][name] = claim
            self.book.take([chosen])
            return node, name, chosen

    def release(self, handle: object) -> None:
        node, name, ref = handle  # type: ignore[misc]
        del self.allocated[node][name]
        self.book.give([ref])


def run_first_fit(
    requests: Sequence[Request], slices: Sequence[ResourceSlice], nodes: Sequence[Node]
) -> Outcome:
    """First fit by upstream's allocator (the oracle) where Go is available, else kubedra's
    allocator in first-fit mode."""
    why = oracle_unavailable()
    if why is not None:
        out = run_policy(requests, slices, nodes, "first-fit")
        out.note = f"FALLBACK: kubedra's allocator in first-fit mode ({why})"
        return out
    from tests.conformance.oracle import Oracle

    with Oracle() as oracle:
        ff = OracleFirstFit(oracle, slices, nodes)
        out = simulate(requests, ff.place, ff.release, ff.book.stranded)
    out.note = (
        f"upstream's allocator (Go oracle): {ff.calls} calls, "
        f"{ff.disagreements} disagreeing with the model's first fit"
    )
    return out


def oracle_unavailable() -> str | None:
    try:
        from tests.conformance.oracle import build, unavailable
    except ImportError as exc:  # the tests tree is not importable here
        return f"tests.conformance.oracle not importable: {exc}"
    why = unavailable()
    if why is None:
        try:
            build()
        except Exception as exc:
            return f"upstream oracle could not be built: {exc}"
    return why


def static_layouts(gpu_count: int, shape: Shape, mix: Mapping[str, float]) -> list[list[int]]:
    """Per GPU, the devices (shape indices) of a fixed layout planned for `mix`: one
    instance at a time of the profile furthest below its share of the instances placed so
    far, on the first GPU where the layout still fits (re-arranged if need be), until no
    profile fits anywhere."""
    kinds = [k for k in mix if k in shape.kinds]
    layouts: list[list[str]] = [[] for _ in range(gpu_count)]
    arranged: list[list[int]] = [[] for _ in range(gpu_count)]
    placed: Counter[str] = Counter()
    full: set[str] = set()
    while len(full) < len(kinds):
        kind = min((k for k in kinds if k not in full), key=lambda k: (placed[k] / mix[k], k))
        for g in range(gpu_count):
            fit = arrange(shape, [*layouts[g], kind])
            if fit is not None:
                layouts[g].append(kind)
                arranged[g] = fit
                placed[kind] += 1
                break
        else:
            full.add(kind)
    return arranged


def arrange(shape: Shape, kinds: Sequence[str]) -> list[int] | None:
    """Devices of `shape`, one per entry of `kinds`, that fit together (None: no way)."""
    order = sorted(kinds, key=lambda k: -sum(shape.uses[shape.kinds.index(k)]))

    def search(i: int, avail: Avail, taken: list[int]) -> list[int] | None:
        if i == len(order):
            return taken
        for d, k in enumerate(shape.kinds):
            if k == order[i] and d not in taken and shape.fits(d, avail):
                got = search(i + 1, shape.left(d, avail), [*taken, d])
                if got is not None:
                    return got
        return None

    return search(0, shape.totals, [])


def run_static(
    requests: Sequence[Request], shape: Shape, layouts: Sequence[Sequence[int]]
) -> Outcome:
    """The device-plugin way: a request takes an idle partition of its profile."""
    idle: Counter[str] = Counter(shape.kinds[d] for layout in layouts for d in layout)
    slices = [i for i, c in enumerate(shape.counters) if c.startswith(SLICE_PREFIX)]
    unpartitioned = sum(
        1
        for layout in layouts
        for i, left in enumerate(shape.after(layout))
        if i in slices and left
    )
    size = {k: sum(1 for i in slices if shape.uses[shape.kinds.index(k)][i]) for k in idle}

    def place(req: Request) -> str | None:
        if idle[req.kind] <= 0:
            return None
        idle[req.kind] -= 1
        return req.kind

    def release(handle: object) -> None:
        idle[str(handle)] += 1

    def stranded() -> int:
        # slices in no partition, and idle partitions of profiles outside the mix
        return unpartitioned + sum(size[k] * n for k, n in idle.items() if k not in MIX)

    out = simulate(requests, place, release, stranded)
    made = Counter(shape.kinds[d] for layout in layouts for d in layout)
    out.note = f"partitions {dict(sorted(made.items()))}, {unpartitioned} slices in none"
    return out


def run_unconstrained(requests: Sequence[Request], gpu_count: int) -> Outcome:
    """No placement rules: memory and compute slices only, the fullest GPU that has both."""
    memory = [GPU_GEOMETRY.memory_slices] * gpu_count
    compute = [GPU_GEOMETRY.compute_slices] * gpu_count

    def place(req: Request) -> tuple[int, int, int] | None:
        mem = GPU_GEOMETRY.profile(req.kind).memory_slices
        sm = compute_slices(req.kind)
        best = None
        for g in range(gpu_count):
            if memory[g] >= mem and compute[g] >= sm and (best is None or memory[g] < memory[best]):
                best = g
        if best is None:
            return None
        memory[best] -= mem
        compute[best] -= sm
        return best, mem, sm

    def release(handle: object) -> None:
        g, mem, sm = handle  # type: ignore[misc]
        memory[g] += mem
        compute[g] += sm

    return simulate(requests, place, release, lambda: 0)


# --- one seed, many seeds, the report ---------------------------------------------------------


def run_seed(seed: int, gpu_count: int, arrivals: int, load: float) -> dict[str, Outcome]:
    requests = stream(seed, gpu_count, arrivals, load)
    slices, nodes = build_cluster(gpu_count)
    model = Model(Inventory.build(slices), [NodeInfo(n.name, {}) for n in nodes])
    (shape,) = model.shapes
    planned = static_layouts(gpu_count, shape, MIX)
    balanced = [arrange(shape, ALL_BALANCED) or [] for _ in range(gpu_count)]
    return {
        "kubedra": run_policy(requests, slices, nodes, "mig-aware"),
        "first_fit": run_first_fit(requests, slices, nodes),
        "static": run_static(requests, shape, planned),
        "all_balanced": run_static(requests, shape, balanced),
        "unconstrained": run_unconstrained(requests, gpu_count),
    }


def summarize(runs: Sequence[dict[str, Outcome]]) -> dict[str, dict[str, tuple[float, float]]]:
    """Method -> metric -> (mean, sd) over the seeds."""

    def ms(values: list[float]) -> tuple[float, float]:
        return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0

    return {
        m: {
            "accepted_first": ms([float(r[m].accepted_first) for r in runs]),
            "accepted": ms([float(r[m].accepted) for r in runs]),
            "stranded": ms([r[m].stranded for r in runs]),
        }
        for m in METHODS
    }


def report(
    runs: Sequence[dict[str, Outcome]], args: argparse.Namespace, out: Any = None
) -> dict[str, float]:
    out = out or sys.stdout
    table = summarize(runs)
    seeds = len(runs)
    print(
        f"MIG placement: {args.gpus} H100 80GB GPUs ({GPUS_PER_NODE} per node), "
        f"{args.arrivals} requests per seed at load {args.load}, {seeds} seed(s); mix "
        + ", ".join(f"{k} {v:.0%}" for k, v in MIX.items()),
        file=out,
    )
    head = f"{'method':30} {'before 1st refusal':>20} {'accepted':>18} {'stranded slices':>17}"
    print(head, file=out)
    for m in METHODS:
        row = table[m]
        cells = [f"{row[k][0]:.1f} ± {row[k][1]:.1f}" for k in ("accepted_first", "accepted")]
        print(
            f"{LABELS[m]:30} {cells[0]:>20} {cells[1]:>18} "
            f"{row['stranded'][0]:>9.1f} ± {row['stranded'][1]:<5.1f}",
            file=out,
        )
    base = table["first_fit"]
    for k, label in (("accepted_first", "before the first refusal"), ("accepted", "in total")):
        gain = table["kubedra"][k][0] / base[k][0] - 1 if base[k][0] else math.inf
        print(f"kubedra vs first fit, accepted {label}: {gain:+.1%}", file=out)
    notes = {m: runs[0][m].note for m in METHODS if runs[0][m].note}
    for m, note in notes.items():
        print(f"{LABELS[m]} (seed 0): {note}", file=out)
    refused = {m: dict(sum((r[m].refused_by_kind for r in runs), Counter())) for m in METHODS}
    print("refused by profile (all seeds): " + json.dumps(refused, sort_keys=True), file=out)
    secs = {m: round(sum(r[m].seconds for r in runs), 1) for m in METHODS}
    print(f"seconds: {json.dumps(secs)}", file=out)
    return {m: table[m]["accepted"][0] for m in ("kubedra", "first_fit", "static")}


def plot(runs: Sequence[dict[str, Outcome]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summarize(runs)
    shown = ("kubedra", "first_fit", "static", "all_balanced")
    colors = ("#1b7837", "#b2182b", "#2166ac", "#92c5de")
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    metrics = (
        ("accepted_first", "accepted before the first refusal"),
        ("accepted", "accepted in total"),
        ("stranded", "memory slices stranded (mean)"),
    )
    names = {
        "kubedra": "kubedra\nmig-aware",
        "first_fit": "first fit\n(upstream)",
        "static": "static\n(planned)",
        "all_balanced": "static\n(all-balanced)",
    }
    for ax, (key, label) in zip(axes, metrics, strict=True):
        means = [table[m][key][0] for m in shown]
        sds = [table[m][key][1] for m in shown]
        ax.bar(range(len(shown)), means, yerr=sds, color=colors, capsize=4)
        ax.set_xticks(range(len(shown)), [names[m] for m in shown], fontsize=8)
        ax.set_title(label, fontsize=9)
        for x, (mean, sd) in enumerate(zip(means, sds, strict=True)):
            ax.text(x, mean + sd, f"{mean:,.0f}" if mean >= 10 else f"{mean:.1f}",
                    ha="center", va="bottom", fontsize=7)  # fmt: skip
        if key == "accepted":
            ax.axhline(table["unconstrained"][key][0], color="grey", linestyle="--", linewidth=1)
            ax.text(len(shown) - 0.5, table["unconstrained"][key][0] * 1.01,
                    "no placement rules", fontsize=7, ha="right", va="bottom",
                    color="grey")  # fmt: skip
        ax.margins(y=0.12)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mig_placement")
    parser.add_argument("--quick", action="store_true", help="one seed")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--gpus", type=int, default=DEFAULTS["gpus"])
    parser.add_argument("--arrivals", type=int, default=DEFAULTS["arrivals"])
    parser.add_argument("--load", type=float, default=DEFAULTS["load"])
    parser.add_argument("--mix", default=None, help="profile=share,... (default: MIX)")
    parser.add_argument("--plot", type=Path, default=None, help=f"PNG (full runs: {FIGURE})")
    args = parser.parse_args(argv)
    global MIX
    default = MIX
    if args.mix:
        pairs = (item.split("=") for item in args.mix.split(","))
        MIX = {k.strip(): float(v) for k, v in pairs}
        unknown = [k for k in MIX if k not in {p.name for p in GPU_GEOMETRY.profiles}]
        if unknown:
            parser.error(f"--mix: no H100 80GB profile {', '.join(unknown)}")
    try:
        return _run(args)
    finally:
        MIX = default


def _run(args: argparse.Namespace) -> int:
    seeds = args.seeds or (1 if args.quick else int(DEFAULTS["seeds"]))
    runs = []
    for seed in range(seeds):
        runs.append(run_seed(seed, args.gpus, args.arrivals, args.load))
        print(f"seed {seed}: " + ", ".join(f"{m} {runs[-1][m].accepted}" for m in METHODS),
              file=sys.stderr, flush=True)  # fmt: skip
    totals = report(runs, args)
    documented = (
        not args.quick
        and not args.mix
        and all(getattr(args, k) == v for k, v in DEFAULTS.items() if k != "seeds")
    )
    path = args.plot or (FIGURE if documented else None)
    if path is not None:
        title = (
            f"{args.gpus} H100 80GB GPUs, {args.arrivals} MIG requests per seed at load "
            f"{args.load}, mean ± sd over {seeds} seeds"
        )
        plot(runs, path, title)
        print(f"plot: {path}")
    print(json.dumps({k: int(v) if v == int(v) else round(v, 1) for k, v in totals.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
