"""DynamicResources: a pod's ResourceClaims, from the claims it names to devices allocated.

Upstream's plugin of the same name, in kubedra's cycle:
- PreEnqueue: a pod whose claim the resourceclaim controller has not made yet (or whose
  claim has not arrived in the cache) is parked until it has (`resolve.not_made_yet`).
- PreFilter: the pod's claims (generated from templates here when the scheduler is the
  claim controller, else waited for), plus those a ClaimSource adds (the claim of
  extended resources); a claim reserved for too many pods refuses the pod.
- Filter: nodes where another scheduler allocates devices are left alone.
- NodeFilter: the allocator, once per device order the placement policy proposes, on each
  node in the policy's order; each success is a candidate.
- Sufficient, Score: the user's firstAvailable preference (KEP-4816's score).
- PostFilter: the blockers and the explanation (`diagnosis.py`).
- Reserve: the claims as they will be written (allocated, reserved for the pod, with the
  finalizer) go into the scheduler's view at once; Unreserve gives them back.
- PreBind: each claim's finalizer, allocation and reservedFor, written (`binding.py`).

A PodGroup's claim (KEP-5729: a pod's entry matching the group's) is allocated once, for
the first pod of the group placed, and reserved for the PodGroup (one `reservedFor` entry
naming the group, not one per pod); the group's other pods reuse that allocation, so the
allocator admits only nodes it reaches (a node-local device keeps the whole group on its
node, and refuses the others with "allocation is not available on node ..."). Its devices
count once. With a gang, nothing is written before Permit allows it: PreBind writes, and
it reads the group's claim afresh, since the allocation a later member saw was the
in-flight one of an earlier member.

Between pods it keeps, per claims signature, the nodes where those claims did not fit:
reserving devices only removes options, so such a node stays infeasible until something is
freed or changed by someone else; and how many leading nodes of an unordered list are
known infeasible, where first-fit resumes instead of rescanning full nodes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubedra.allocator import AllocatedState, AllocationError, Inventory, NodeInfo, allocate
from kubedra.allocator.blockers import diagnose, holders_of
from kubedra.allocator.explain import Unsatisfiable
from kubedra.api.core import Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from kubedra.scheduler.binding import (
    FINALIZER,
    MAX_RESERVED_FOR,
    Refused,
    reserve_claim,
    reserved_for,
)
from kubedra.scheduler.cache import Key, key_of
from kubedra.scheduler.claims import pod_group_of, podgroup_consumer
from kubedra.scheduler.framework.interfaces import (
    Candidate,
    ClusterEvents,
    FilterPlugin,
    Handle,
    NodeFilterPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    SufficientPlugin,
)
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.framework.status import Unschedulable
from kubedra.scheduler.plugins.dra import diagnosis as diagnosis_module
from kubedra.scheduler.plugins.dra.release import drop_reservations
from kubedra.scheduler.plugins.dra.resolve import not_made_yet, resolve_claims
from kubedra.scheduler.policies.base import refs_of
from kubedra.scheduler.preference import most_preferred, preference

NAME = "DynamicResources"
CANNOT = "cannot allocate all claims"  # upstream's reason for a node the claims do not fit
SHARED = "node(s) where another scheduler allocates devices"


class ClaimSource(Plugin):
    """A plugin that adds claims of its own to a pod's (the claim of extended resources):
    not stored until PreBind, where it creates them."""

    def extra_claims(self, state: CycleState, pod: Pod) -> list[ResourceClaim]:
        raise NotImplementedError

    def create(self, state: CycleState, pod: Pod, claim: ResourceClaim) -> ResourceClaim:
        raise NotImplementedError


@dataclass(slots=True)
class DraState:
    claims: list[ResourceClaim]
    signature: bytes  # what the allocator's answer for a node depends on
    best: int  # the preference score no placement can beat (0: no firstAvailable)
    sources: dict[int, ClaimSource]  # claim index -> the plugin that creates it
    # per claim, whom it is reserved for: the pod, or its PodGroup for a group's claim
    consumers: list[ResourceClaimConsumerReference] = field(default_factory=list)
    assumed: set[Key] = field(default_factory=set)  # claims this pod's Reserve put in the view
    infeasible: set[str] = field(default_factory=set)
    unstable: bool = False  # the shared-node filter gave a list of its own
    stable: bool = False
    misses: list[Unsatisfiable] = field(default_factory=list)  # the allocator's refusals


def claims_of(state: CycleState) -> list[ResourceClaim]:
    """The pod's claims, as the DRA plugin's PreFilter resolved them ([] without it)."""
    st = state.get(NAME, DraState)
    return st.claims if st is not None else []


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    NodeFilterPlugin,
    SufficientPlugin,
    PostFilterPlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    ClusterEvents,
):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self._infeasible: dict[bytes, set[str]] = {}  # claims signature -> nodes refused
        self._cursor: dict[bytes, int] = {}  # claims signature -> leading nodes refused
        self._waiting: dict[Key, set[Key]] = {}  # claim -> pods parked until it exists
        self._sources: list[ClaimSource] | None = None

    def sources(self) -> list[ClaimSource]:
        if self._sources is None:
            plugins = self.handle.framework.plugins
            self._sources = [p for p in plugins if isinstance(p, ClaimSource)]
        return self._sources

    # --- PreEnqueue -------------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod) -> str:
        return not_made_yet(self.handle, self._waiting, pod)

    # --- PreFilter --------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, info: PodInfo) -> None:
        pod = info.pod
        claims, groups, now = resolve_claims(self.handle, self._waiting, pod)
        own = _consumer(pod)
        consumers = [own if pg is None else podgroup_consumer(pg) for pg in groups]
        sources: dict[int, ClaimSource] = {}
        for source in self.sources():
            for claim in source.extra_claims(state, now):
                sources[len(claims)] = source
                claims.append(claim)
                consumers.append(own)
        for claim, consumer in zip(claims, consumers, strict=True):
            reserved = claim.status.reserved_for if claim.status else ()
            if len(reserved) >= MAX_RESERVED_FOR and all(r.uid != consumer.uid for r in reserved):
                raise Unschedulable(
                    f'resource claim "{claim.name}" is in use by {MAX_RESERVED_FOR} pods'
                )
        state.write(
            NAME,
            DraState(
                claims,
                _signature(pod, claims),
                most_preferred(claims),
                sources,
                consumers=consumers,
            ),
        )

    def signature(self, state: CycleState, info: PodInfo) -> bytes:
        return state.read(NAME, DraState).signature

    # --- Filter -----------------------------------------------------------------------------

    def filter(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], diagnosis: Diagnosis
    ) -> Sequence[str]:
        """The nodes left to a pod with claims when this scheduler refuses nodes shared with
        another scheduler (devices are not API objects: two schedulers can pick the same)."""
        st = state.read(NAME, DraState)
        if not st.claims:
            return nodes
        shared = self.handle.shared_nodes() if self.handle.others.refuse else {}
        if not shared:
            return nodes
        st.unstable = True
        kept = [n for n in nodes if n not in shared]
        if len(kept) < len(nodes):
            diagnosis.add(SHARED, len(nodes) - len(kept))
        return kept

    # --- NodeFilter -------------------------------------------------------------------------

    def known_infeasible(self, state: CycleState) -> AbstractSet[str]:
        st = state.read(NAME, DraState)
        st.infeasible = self._infeasible.setdefault(st.signature, set())
        return st.infeasible

    def resume(
        self, state: CycleState, ranked: Sequence[str], stable: bool, diagnosis: Diagnosis
    ) -> int:
        st = state.read(NAME, DraState)
        st.stable = stable and not st.unstable
        start = self._cursor.get(st.signature, 0) if st.stable else 0
        if start:
            diagnosis.reasons[CANNOT] = start
        return start

    def filter_node(
        self,
        state: CycleState,
        info: PodInfo,
        node: Node,
        index: int,
        found: list[Candidate] | None,
        diagnosis: Diagnosis,
    ) -> list[Candidate]:
        st = state.read(NAME, DraState)
        if node.name in st.infeasible:
            diagnosis.add(CANNOT)
            return []
        here = self.candidates_on(info.pod, st.claims, node, diagnosis.reasons, st.misses)
        if not here:
            st.infeasible.add(node.name)
            if st.stable and index == self._cursor.get(st.signature, 0):
                self._cursor[st.signature] = index + 1
        return here

    def candidates_on(
        self,
        pod: Pod,
        claims: list[ResourceClaim],
        node: Node,
        reasons: dict[str, int],
        misses: list[Unsatisfiable] | None = None,
    ) -> list[Candidate]:
        """Allocate on one node once per device order the placement policy proposes."""
        handle = self.handle
        view, out = handle.view(), list[Candidate]()
        for order in handle.framework.device_orders(view, node.name):
            started = time.perf_counter()
            try:
                allocation = allocate(
                    *self.allocator_inputs(claims, node),
                    **self.allocator_options(pod.namespace),
                    order=order,
                )
            except AllocationError as err:
                if handle.on_allocate is not None:
                    handle.on_allocate("Error", time.perf_counter() - started)
                raise Unschedulable(str(err)) from None
            if handle.on_allocate is not None:
                status = "Unschedulable" if allocation.results is None else "Success"
                handle.on_allocate(status, time.perf_counter() - started)
            if allocation.results is None:
                reason = allocation.unsatisfiable.summary if allocation.unsatisfiable else "no fit"
                reasons[reason] = reasons.get(reason, 0) + 1
                if misses is not None and allocation.unsatisfiable is not None:
                    misses.append(allocation.unsatisfiable)
                return out  # feasibility does not depend on the order: no other order fits
            new = [
                r for r, c in zip(allocation.results, claims, strict=True) if not _is_allocated(c)
            ]
            out.append(Candidate(node.name, allocation.results, refs_of(new)))
        return out

    def allocator_inputs(
        self, claims: Sequence[ResourceClaim], node: Node
    ) -> tuple[
        Sequence[ResourceClaim], NodeInfo, Inventory, dict[str, DeviceClass], AllocatedState
    ]:
        """What the allocator is given for `claims` on `node` (also used by explain)."""
        info = NodeInfo(node.name, node.metadata.labels)
        handle = self.handle
        return claims, info, handle.inventory(), handle.classes(), handle.allocated()

    def allocator_options(self, namespace: str) -> dict[str, Any]:
        """The allocator's switches for a pod of `namespace` (admin access needs its labels)."""
        handle = self.handle
        return {
            "namespace_labels": handle.namespace_labels(namespace),
            "features": handle.features,
            "strict_cel": handle.strict_cel,
        }

    # --- Sufficient, PostFilter, Score ------------------------------------------------------

    def sufficient(self, state: CycleState, found: Sequence[Candidate]) -> bool:
        """With firstAvailable, search on until a candidate has the best preference."""
        st = state.read(NAME, DraState)
        return not st.best or any(preference(st.claims, c.results) == st.best for c in found)

    def post_filter(self, state: CycleState, info: PodInfo, diagnosis: Diagnosis) -> str:
        # Bounded: diagnosing runs on failure only, but a pod can fail on many nodes.
        misses = state.read(NAME, DraState).misses
        holders = holders_of(self.handle.claims()) if misses else {}
        diagnosed = misses[: diagnosis_module.DIAGNOSED_NODES]
        blocked = {m.node: diagnose(m, holders) for m in diagnosed}
        diagnosis.reasons = diagnosis_module.with_blockers(diagnosis.reasons, misses, blocked)
        return diagnosis_module.explained(misses, blocked, holders)

    def pre_score(self, state: CycleState, info: PodInfo) -> bool:
        return state.read(NAME, DraState).best != 0  # without firstAvailable: no opinion

    def score(self, state: CycleState, candidate: Candidate) -> float:
        return preference(state.read(NAME, DraState).claims, candidate.results)

    # --- Reserve ----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        """The claims as they will be written (allocated, reserved for the pod) go into the
        view now, before any write (upstream's in-flight allocations), so that the next pod
        never gets these devices."""
        st = state.read(NAME, DraState)
        for claim, result, consumer in zip(st.claims, candidate.results, st.consumers, strict=True):
            status = claim.status or ResourceClaimStatus()
            if status.allocation is not None and reserved_for(claim, consumer.uid):
                continue  # a group's claim another member of the group reserved already
            finalizers = claim.metadata.finalizers
            if status.allocation is None and FINALIZER not in finalizers:
                finalizers = (*finalizers, FINALIZER)
            self.handle.cache.assume(
                msgspec.structs.replace(
                    claim,
                    metadata=msgspec.structs.replace(claim.metadata, finalizers=finalizers),
                    status=msgspec.structs.replace(
                        status,
                        allocation=status.allocation or result,
                        reserved_for=(*status.reserved_for, consumer),
                    ),
                )
            )
            st.assumed.add(key_of(claim))
            if status.allocation is None:
                self._reserve(result)
        before = [r for r, c in zip(candidate.results, st.claims, strict=True) if _is_allocated(c)]
        state.joined = tuple(str(r) for r in refs_of(before))

    def _reserve(self, result: AllocationResult) -> None:
        allocated = self.handle.built_allocated()
        if allocated is not None:
            allocated.reserve(result)
        self.handle.view().reserve(refs_of([result]))

    def unreserve(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: Sequence[KubeObject]
    ) -> None:
        """The view goes back to the feed's version of each claim this pod put there and
        that was not written (a group's claim another member put there stays)."""
        keys = {key_of(c) for c in written if isinstance(c, ResourceClaim)}
        st = state.read(NAME, DraState)
        for claim in st.claims:
            if key_of(claim) not in keys and key_of(claim) in st.assumed:
                self.handle.cache.restore(ResourceClaim, key_of(claim))

    def rollback(self, state: CycleState, pod: Pod) -> None:
        drop_reservations(self.handle, pod, state.read(NAME, DraState).claims)

    # --- PreBind ----------------------------------------------------------------------------

    def pre_bind(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: list[KubeObject]
    ) -> None:
        """Finalizer, then allocation + reservedFor, per claim not yet reserved for the pod."""
        st = state.read(NAME, DraState)
        own = _consumer(pod)
        for index, (claim, result) in enumerate(zip(st.claims, candidate.results, strict=True)):
            consumer = st.consumers[index]
            if consumer.uid != own.uid:
                # A group's claim: what this cycle saw may be another member's in-flight
                # allocation; the store says whether it is written yet.
                claim = self.handle.store.get(ResourceClaim, claim.name, claim.namespace)
                if _is_allocated(claim) and reserved_for(claim, consumer.uid):
                    if not _same_devices(claim, result):
                        raise Refused(
                            f"claim {claim.namespace}/{claim.name} of the pod group got "
                            "allocated differently in the meantime"
                        )
                    continue
            elif _is_allocated(claim) and reserved_for(claim, consumer.uid):
                continue  # written by an earlier cycle that died before binding
            if claim.metadata.resource_version is None:
                claim = st.sources[index].create(state, pod, claim)
            written.append(
                reserve_claim(
                    self.handle.store,
                    claim,
                    result,
                    consumer,
                    allocate=not _is_allocated(claim),
                    patience=self.handle.patience,
                )
            )

    # --- between cycles ---------------------------------------------------------------------

    def forget(self) -> None:
        self._infeasible.clear()
        self._cursor.clear()

    def freed(self, nodes: AbstractSet[str]) -> None:
        for infeasible in self._infeasible.values():
            infeasible -= nodes
        self._cursor.clear()  # a freed node may sit before a resume point

    def claim_arrived(self, claim: ResourceClaim) -> list[Key]:
        """The pods parked until this claim existed (by name, or as its owner)."""
        keys = list(self._waiting.pop(key_of(claim), set()))
        for owner in claim.metadata.owner_references:
            if owner.controller and owner.kind == "Pod":
                keys.append((claim.namespace, owner.name))
            elif owner.controller and owner.kind == "PodGroup":  # the group's pods
                group = (claim.namespace, owner.name)
                keys += [
                    (p.namespace, p.name)
                    for p in self.handle.cache.of(Pod).values()
                    if isinstance(p, Pod) and not p.spec.node_name and pod_group_of(p) == group
                ]
        return keys


def _signature(pod: Pod, claims: Sequence[ResourceClaim]) -> bytes:
    """What makes the allocator's answer for a node: the claims' specs and allocations and
    the namespace (admin access depends on its labels)."""
    return msgspec.json.encode(
        [pod.namespace, [(c.spec, c.status.allocation if c.status else None) for c in claims]],
        enc_hook=str,
    )


def _consumer(pod: Pod) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(
        resource="pods", name=pod.name, uid=pod.metadata.uid or ""
    )


def _same_devices(claim: ResourceClaim, result: AllocationResult) -> bool:
    held = claim.status.allocation if claim.status else None
    return held is not None and refs_of([held]) == refs_of([result])


def _is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None
