"""Where a gang with a topology constraint goes: one domain (one value of a node label)
for all its pods, chosen once for the whole gang.

Upstream's topology-aware workload scheduling (KEP-4671's follow-up) places a pod group
inside one domain of `schedulingConstraints.topology[0].key`. kubedra chooses the domain
before the gang's first pod is tried, by packing what the gang still needs into each
domain, node by node:

* each pending member's devices, per request: the devices passing the request's
  DeviceClass AND its own selectors (`firstAvailable`: its first alternative), `count` of
  them (`allocationMode: All` is left to the allocator); a member is counted on a node only
  when all its requests fit there together, and only on nodes its node selector, required
  node affinity and tolerations admit;
* a claim several members share (the PodGroup's own claim, KEP-5729, or one claim named by
  several pods) once, on one node of the domain.

A domain fits when its nodes take the members the gang still needs (all of them, else at
least minCount); of those, the one with the fewest free matching devices (best fit, ties:
the smaller value), so that a large or whole domain stays for a large gang. A domain with
546 free GPUs spread over many half-used nodes does not take 64 pods of 8 GPUs when only
60 of its nodes are whole. CPU, memory and a request's constraints are still the
allocator's: when the chosen domain fails at placement after all, the plugin remembers it
as failed for that gang (until a device in it is freed) and the next choice takes the next
best domain.

The same functions answer `kubedra explain podgroup` (`choose`, `cluster_fit`,
`blamed_class`, `held_domain`, `refusal`), so that its line and the PodGroup's condition
say the same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from kubedra.allocator import NodeInfo
from kubedra.allocator.inventory import DeviceEntry, Inventory
from kubedra.api.core import Node, Pod
from kubedra.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
)
from kubedra.api.scheduling import PodGroup
from kubedra.scheduler.claims import (
    group_claim_name,
    group_entry,
    pod_group_of,
    recorded_claim_name,
)
from kubedra.scheduler.framework.interfaces import Handle
from kubedra.scheduler.nodes import filter_node, node_constraints
from kubedra.scheduler.selectors import summarise_selector


@dataclass(frozen=True, slots=True)
class Demand:
    """`count` devices passing class `klass` and the request's own CEL `selectors`."""

    klass: str
    selectors: tuple[str, ...]
    count: int

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.klass, self.selectors)


@dataclass
class Need:
    """What a gang's pending members still need: each member's own devices, and the
    devices of claims they share (counted once)."""

    pods: list[tuple[Pod, tuple[Demand, ...]]] = field(default_factory=list)
    shared: tuple[Demand, ...] = ()

    @property
    def demands(self) -> list[Demand]:
        return [d for _, ds in self.pods for d in ds] + list(self.shared)

    @property
    def by_class(self) -> Counter[str]:
        need: Counter[str] = Counter()
        for d in self.demands:
            need[d.klass] += d.count
        return need

    def __bool__(self) -> bool:
        return bool(self.demands)

    def describe(self) -> str:
        """`18 device(s) of class gpu (memory > 40Gi)`: per class, with the selectors the
        requests add to the class's, summarised."""
        said: dict[str, list[str]] = {}
        for d in self.demands:
            texts = said.setdefault(d.klass, [])
            for expression in d.selectors:
                for text in summarise_selector(expression):
                    if text not in texts:
                        texts.append(text)
        need = self.by_class
        return " + ".join(
            f"{need[c]} device(s) of class {c}" + (f" ({', '.join(said[c])})" if said[c] else "")
            for c in sorted(need)
        )


def gang_need(handle: Handle, pods: Iterable[Pod]) -> Need:
    """What `pods` still need (claims not allocated yet): a pod's own claims per pod, a
    claim of the PodGroup or one named by several of them once."""
    need = Need()
    shared: list[Demand] = []
    seen: set[str] = set()
    claims = handle.cache.of(ResourceClaim)
    templates = handle.cache.of(ResourceClaimTemplate)
    pods = list(pods)
    # A claim named by one member only is that member's own; named by several, it is
    # shared (its devices taken once, reachable from every node that uses it).
    naming = Counter(
        e.resource_claim_name for p in pods for e in p.spec.resource_claims if e.resource_claim_name
    )
    for pod in pods:
        group = pod_group_of(pod)
        found_pg = handle.cache.of(PodGroup).get(group) if group is not None else None
        pg = found_pg if isinstance(found_pg, PodGroup) else None
        own: list[Demand] = []
        for entry in pod.spec.resource_claims:
            spec: ResourceClaimSpec | None = None
            group_shared = group_entry(pg, entry)
            name: str | None = recorded_claim_name(pod, entry)
            once = naming[entry.resource_claim_name] > 1 if entry.resource_claim_name else False
            if pg is not None and group_shared is not None:  # the group's claim (KEP-5729)
                name = group_claim_name(pg, group_shared) or f"\x00group\x00{entry.name}"
                once = True
            if name is not None:
                if name in seen:
                    continue
                seen.add(name)
                claim = claims.get((pod.namespace, name))
                if isinstance(claim, ResourceClaim):
                    if claim.status is not None and claim.status.allocation is not None:
                        continue
                    spec = claim.spec
            if spec is None and entry.resource_claim_template_name:
                template = templates.get((pod.namespace, entry.resource_claim_template_name))
                if isinstance(template, ResourceClaimTemplate):
                    spec = template.spec.spec
            if spec is not None:
                (shared if once else own).extend(spec_demands(spec))
        need.pods.append((pod, tuple(own)))
    need.shared = tuple(shared)
    return need


def spec_demands(spec: ResourceClaimSpec) -> list[Demand]:
    out = []
    for request in spec.devices.requests:
        # firstAvailable: the first alternative, the one the allocator prefers
        exact = request.exactly or (request.first_available[0] if request.first_available else None)
        if exact is None or (exact.allocation_mode or "ExactCount") != "ExactCount":
            continue
        selectors = tuple(s.cel.expression for s in exact.selectors if s.cel is not None)
        out.append(Demand(exact.device_class_name, selectors, exact.count or 1))
    return out


# --- packing ---------------------------------------------------------------------------


@dataclass
class DomainFit:
    """How much of a gang one domain (or the whole cluster) takes."""

    value: str
    members: int = 0  # pending members that fit, node by node
    shared: bool = True  # the shared claims fit too
    free: Counter[str] = field(default_factory=Counter)  # free matching devices per class
    nodes: int = 0

    @property
    def spare(self) -> int:
        return sum(self.free.values())


class Packer:
    """Packs a gang's members onto nodes: per node the free devices (node-local, usable,
    not in use), each with the set of the gang's demand keys it matches."""

    def __init__(self, handle: Handle, need: Need) -> None:
        self.handle = handle
        self.need = need
        keys = sorted({d.key for d in need.demands})
        self.bit = {k: 1 << i for i, k in enumerate(keys)}
        self.class_bits: dict[str, int] = {}
        for (klass, _), b in self.bit.items():
            self.class_bits[klass] = self.class_bits.get(klass, 0) | b
        self.classes = handle.classes()
        self.view = handle.view()
        self.inventory = handle.inventory()
        self._eligible: dict[bytes, set[str]] = {}

    def masks(self, node: Node) -> list[int]:
        """One bit mask per free device of the node: the demand keys it matches (devices
        matching none are left out)."""
        devices = self.view.nodes.get(node.name)
        if devices is None or not self.bit:
            return []
        out = []
        info = NodeInfo(node.name, node.metadata.labels)
        strict = self.handle.strict_cel
        for pool in self.inventory.pools_for(info, self.handle.features):
            for entry, usable in pool.devices:
                if not usable or not entry.node_local or entry.ref in devices.used:
                    continue
                mask = 0
                for (klass, selectors), b in self.bit.items():
                    dc = self.classes.get(klass)
                    if dc is not None and _passes(self.inventory, dc, selectors, entry, strict):
                        mask |= b
                if mask:
                    out.append(mask)
        return out

    def eligible(self, pod: Pod) -> set[str]:
        """The nodes the pod's node selector, required affinity and tolerations admit."""
        key = node_constraints(pod)
        found = self._eligible.get(key)
        if found is None:
            bare = msgspec.structs.replace(
                pod, spec=msgspec.structs.replace(pod.spec, containers=(), init_containers=())
            )
            found = {n.name for n in self.handle.nodes() if filter_node(bare, n, {}).fits}
            self._eligible[key] = found
        return found

    def fit(self, value: str, nodes: Sequence[Node]) -> DomainFit:
        result = DomainFit(value, nodes=len(nodes))
        free: dict[str, list[int]] = {}
        for node in nodes:
            masks = self.masks(node)
            free[node.name] = masks
            for klass, bits in self.class_bits.items():
                result.free[klass] += sum(1 for m in masks if m & bits)
        for klass in self.class_bits:
            result.free.setdefault(klass, 0)
        if self.need.shared:
            result.shared = any(_take(free[n.name], self.need.shared, self.bit) for n in nodes)
        refused: set[tuple[tuple[Demand, ...], bytes, str]] = set()
        ranked = sorted(self.need.pods, key=lambda pd: -sum(d.count for d in pd[1]))
        for pod, demands in ranked:
            admits = self.eligible(pod)
            constraints = node_constraints(pod)
            for node in nodes:
                tried = (demands, constraints, node.name)
                if node.name not in admits or tried in refused:
                    continue
                if _take(free[node.name], demands, self.bit):
                    result.members += 1
                    break
                refused.add(tried)  # the node only loses devices: no use trying again
        return result


def _take(
    masks: list[int], demands: Sequence[Demand], bit: Mapping[tuple[str, tuple[str, ...]], int]
) -> bool:
    """Take devices for all `demands` from `masks` (removed when all fit; else untouched):
    the scarcest demand first, each taking the devices that match fewest other demands."""
    if not demands:
        return True
    order = sorted(demands, key=lambda d: sum(1 for m in masks if m & bit[d.key]))
    taken: set[int] = set()
    for d in order:
        b = bit[d.key]
        candidates = sorted(
            (i for i, m in enumerate(masks) if m & b and i not in taken),
            key=lambda i: bin(masks[i]).count("1"),
        )
        if len(candidates) < d.count:
            return False
        taken.update(candidates[: d.count])
    for i in sorted(taken, reverse=True):
        del masks[i]
    return True


def _passes(
    inventory: Inventory,
    klass: DeviceClass,
    selectors: tuple[str, ...],
    entry: DeviceEntry,
    strict: bool,
) -> bool:
    try:
        return all(
            inventory.matches(s.cel.expression, entry, strict=strict)
            for s in klass.spec.selectors
            if s.cel is not None
        ) and all(inventory.matches(e, entry, strict=strict) for e in selectors)
    except Exception:  # a selector that fails on a device does not select it
        return False


# --- choosing --------------------------------------------------------------------------


@dataclass
class Choice:
    """The domain for a gang, or why there is none (`reason`), with every domain's fit."""

    domain: str | None
    reason: str
    need: Need
    fits: dict[str, DomainFit]
    required: int
    skipped: tuple[str, ...] = ()  # domains that fit but failed at placement for the gang


def domains(handle: Handle, key: str) -> dict[str, list[Node]]:
    """The owned nodes per value of label `key` (nodes without it are in none)."""
    out: dict[str, list[Node]] = {}
    for node in sorted(handle.nodes(), key=lambda n: n.name):
        value = node.metadata.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(node)
    return out


def choose(
    handle: Handle,
    pods: Sequence[Pod],
    key: str,
    required: int | None = None,
    failed: Mapping[str, int] | None = None,
) -> Choice:
    """The domain of label `key` for the gang's pending `pods`: of those whose nodes take
    at least `required` of them (default: all) and the shared claims, the best fit; one
    in `failed` (domain -> its free devices when it failed) only once more is free there."""
    need = gang_need(handle, pods)
    wanted = len(pods) if required is None else min(required, len(pods))
    groups = domains(handle, key)
    if not groups:
        reason = f"no node has the label {key} of the pod group's topology constraint"
        return Choice(None, reason, need, {}, wanted)
    packer = Packer(handle, need)
    fits = {value: packer.fit(value, nodes) for value, nodes in groups.items()}
    ok = [f for f in fits.values() if f.shared and f.members >= wanted]
    failed = failed or {}
    skipped = tuple(sorted(f.value for f in ok if f.value in failed and f.spare <= failed[f.value]))
    ok = [f for f in ok if f.value not in skipped]
    if ok:
        best = min(ok, key=lambda f: (f.members < len(pods), f.spare, f.value))
        return Choice(best.value, "", need, fits, wanted, skipped)
    choice = Choice(None, "", need, fits, wanted, skipped)
    choice.reason = refusal(key, choice)
    return choice


def cluster_fit(handle: Handle, pods: Sequence[Pod]) -> tuple[Need, DomainFit]:
    """What the gang's pending `pods` need and how much of it the whole cluster (the
    nodes this scheduler owns) takes: the count without a topology key."""
    need = gang_need(handle, pods)
    nodes = sorted(handle.nodes(), key=lambda n: n.name)
    return need, Packer(handle, need).fit("", nodes)


def blamed_class(need: Mapping[str, int], free: Iterable[Mapping[str, int]]) -> str:
    """The class a refusal names: the one the best domain lacks most of (ties: the first
    by name; none lacking: the class needed most)."""
    frees = list(free) or [Counter()]
    return max(sorted(need), key=lambda c: (need[c] - max(f.get(c, 0) for f in frees), need[c]))


def held_domain(handle: Handle, members: Iterable[Pod], key: str) -> str | None:
    """The domain the gang's bound or reserved members are in, if any."""
    node_map = handle.node_map()
    for m in members:
        node = node_map.get(m.spec.node_name or "")
        if node is not None and (value := node.metadata.labels.get(key)) is not None:
            return value
    return None


def refusal(key: str, choice: Choice) -> str:
    """Why no domain takes the gang, in one line with the numbers: `needs 16 device(s) of
    class gpu (memory > 40Gi) in one topology.kubernetes.io/rack; the largest rack has 12
    free (rack-b)`, then, where devices are not what is short, how many pods fit there."""
    short = key.rpartition("/")[2] or key
    fits = choice.fits
    need = choice.need.by_class
    head = f"needs {choice.need.describe() or 'no devices'} in one {key}"
    if not need:
        best = max(fits.values(), key=lambda f: (f.members, f.value))
        return (
            f"{head}; the best {short} ({best.value}) has room for {best.members} of "
            f"{len(choice.need.pods)} pod(s)"
        )
    klass = blamed_class(need, (f.free for f in fits.values()))
    largest = max(fits.values(), key=lambda f: (f.free[klass], f.members, f.value))
    line = f"{head}; the largest {short} has {largest.free[klass]} free ({largest.value})"
    if largest.free[klass] >= need[klass]:
        if not largest.shared:
            line += " but not the shared claim's devices on one node"
        elif largest.members < choice.required:
            line += f" but room for {largest.members} of {len(choice.need.pods)} pod(s)"
    if choice.skipped:
        line += f"; failed at placement: {', '.join(choice.skipped)}"
    return line
