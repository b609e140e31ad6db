"""What a gang still needs, as the topology choice counts it (`topology.py`): each pending
member's devices per request (the request's DeviceClass AND its own selectors; a count, or
with `allocationMode: All` every such device of a node), and the claims several members
share (the PodGroup's own claim, KEP-5729, or one claim named by several pods), once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubedra.api.core import Pod
from kubedra.api.resource import (
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
from kubedra.scheduler.selectors import summarise_selector


@dataclass(frozen=True, slots=True)
class Demand:
    """`count` devices passing class `klass` and the request's own CEL `selectors`; with
    `all`, every such device of the node (`count` is then 0)."""

    klass: str
    selectors: tuple[str, ...]
    count: int
    all: bool = False

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
        """Devices per class (a class asked for with `allocationMode: All` only: 0)."""
        need: Counter[str] = Counter()
        for d in self.demands:
            need[d.klass] += d.count
        return need

    def __bool__(self) -> bool:
        return bool(self.demands)

    def describe(self) -> str:
        """`18 device(s) of class gpu (memory > 40Gi)`: per class, with the selectors the
        requests add to the class's, summarised; `allocationMode: All` requests as `all
        device(s) of class gpu on one node` (on each of N nodes for N of them)."""
        said: dict[str, list[str]] = {}
        whole: Counter[str] = Counter()
        for d in self.demands:
            texts = said.setdefault(d.klass, [])
            whole[d.klass] += d.all
            for expression in d.selectors:
                for text in summarise_selector(expression):
                    if text not in texts:
                        texts.append(text)
        need = self.by_class

        def of(c: str) -> str:
            return f"of class {c}" + (f" ({', '.join(said[c])})" if said[c] else "")

        counted = [f"{need[c]} device(s) {of(c)}" for c in sorted(need) if need[c]]
        alls = [
            f"all device(s) {of(c)} "
            + ("on one node" if whole[c] == 1 else f"on each of {whole[c]} node(s)")
            for c in sorted(whole)
            if whole[c]
        ]
        return " + ".join(counted + alls)


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
    """The devices a claim's requests ask for, request by request."""
    out = []
    for request in spec.devices.requests:
        # firstAvailable: the first alternative, the one the allocator prefers
        exact = request.exactly or (request.first_available[0] if request.first_available else None)
        if exact is None:
            continue
        mode = exact.allocation_mode or "ExactCount"
        selectors = tuple(s.cel.expression for s in exact.selectors if s.cel is not None)
        if mode == "ExactCount":
            out.append(Demand(exact.device_class_name, selectors, exact.count or 1))
        elif mode == "All":
            out.append(Demand(exact.device_class_name, selectors, 0, all=True))
    return out
