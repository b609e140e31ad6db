"""The scheduling loop: pending pods in, claims allocated and pods bound out.

One cycle per pod, as the kube-scheduler's DynamicResources plugin runs it: resolve the
pod's claims (generating them from templates), filter nodes, run the allocator for all of
the pod's claims on candidate nodes in the policy's order, score, reserve (the devices are
taken in memory at once, so the next pod sees them), then write: each claim's finalizer,
then `status.allocation` + `reservedFor` (upstream's PreBind), then the binding (Bind:
`spec.nodeName` and the PodScheduled condition, the pod's uid as precondition; a refused
binding undoes the reservations, as upstream's Unreserve). Claim writes happen inside one
store transaction together with the refresh that precedes allocation, so two schedulers on
one store never allocate from the same stale view; a scheduler that dies after the claims
are written and before the pod is bound leaves claims reserved for the pod, and the next
cycle binds the pod to a node that their allocation admits, without allocating again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubedra.allocator import (
    AllocatedState,
    AllocationError,
    DeviceRef,
    Features,
    Inventory,
    NodeInfo,
    allocate,
)
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store, T, atomic, with_scheduled_condition
from kubedra.errors import Conflict, NotFound, StoreError
from kubedra.scheduler.claims import (
    extended_resource_claim,
    extended_resource_classes,
    generated_claim,
    is_owned_by,
    recorded_claim_name,
    with_claim_status,
    with_extended_claim,
)
from kubedra.scheduler.nodes import (
    Left,
    add_requests,
    filter_node,
    pod_requests,
    resources_left,
    shortfall,
    wanted,
)
from kubedra.scheduler.policies import Candidate, Policy, make_policy
from kubedra.scheduler.policies.base import refs_of
from kubedra.scheduler.queue import SchedulingQueue, pod_key
from kubedra.scheduler.view import ClusterView

SCHEDULER_NAMES = ("kubedra", "default-scheduler")
FINALIZER = "resource.kubernetes.io/delete-protection"
MAX_RESERVED_FOR = 256
ENDED_PHASES = ("Succeeded", "Failed")
# Kinds whose change can make an unschedulable pod fit (upstream's queueing hints).
WAKING_KINDS = (ResourceSlice, ResourceClaim, DeviceClass, Node, DeviceTaintRule)


class Unschedulable(Exception):
    """The pod cannot be placed now; the message is what its PodScheduled condition says."""


@dataclass(frozen=True, slots=True)
class Outcome:
    pod: str  # namespace/name
    node: str | None
    message: str = ""
    devices: tuple[str, ...] = ()


@dataclass
class _Cache:
    """The scheduler's view of the store, refreshed from its change log."""

    rv: int = 0
    objects: dict[str, dict[tuple[str, str], KubeObject]] = field(default_factory=dict)

    def of(self, cls: type[KubeObject]) -> dict[tuple[str, str], KubeObject]:
        return self.objects.setdefault(cls.KIND, {})


class Scheduler:
    """Schedules the store's pending pods with one placement policy."""

    def __init__(
        self,
        store: Store,
        policy: str | Policy = "first-fit",
        *,
        scheduler_names: Sequence[str] = SCHEDULER_NAMES,
        features: Features | None = None,
        strict_cel: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.names = tuple(scheduler_names)
        self.features = features or Features()
        self.strict_cel = strict_cel
        self.queue = SchedulingQueue(clock=clock)
        self._cache = _Cache()
        self._inventory: Inventory | None = None
        self._view: ClusterView | None = None
        self._allocated: AllocatedState | None = None
        self._loaded = False
        self.policy.attach(self)
        self._own: set[int] = set()  # resourceVersions this scheduler wrote itself
        self._usage: dict[str, dict[str, Quantity]] | None = None
        # What is left per node for pod requests, and the usage and nodes it was read from.
        self._left_cache: dict[str, Left] = {}
        self._left_of: tuple[object, object] = (None, None)
        self._nodes: list[Node] | None = None
        self._nodes_by_name: dict[str, Node] = {}
        self._classes: dict[str, DeviceClass] | None = None
        self._static_fits: dict[bytes, list[str]] = {}
        # Claims signature -> nodes where those claims did not fit. Reserving devices only
        # removes options, so such a node stays infeasible until something is freed or
        # changed by someone else (then the memo is cleared).
        self._infeasible: dict[bytes, set[str]] = {}
        # Claims signature -> how many leading nodes of the (stable) ranked list are known
        # infeasible: first-fit resumes there instead of rescanning full nodes.
        self._cursor: dict[bytes, int] = {}
        # Pod signature (claims, requests, node constraints) -> why it fit nowhere, and the
        # length of `_freed` then. Placing pods only takes resources away, so a pod like it
        # can only fit on a node freed since (an equivalence cache, as the kube-scheduler
        # once had, narrowed like upstream's queueing hints to what an event can change).
        self._failed: dict[bytes, tuple[str, int]] = {}
        self._freed: list[str] = []  # nodes where devices, CPU or memory were freed, in order

    # --- public -----------------------------------------------------------------------

    def run_once(self) -> list[Outcome]:
        """Try every pending pod that is due (not in backoff); returns what happened."""
        self.refresh()
        self.release_ended()
        outcomes = []
        while (pod := self.queue.pop()) is not None:
            outcomes.append(self.schedule(pod))
        return outcomes

    def run(self, stop: Callable[[], bool], idle_sleep: float = 0.2) -> None:
        """Schedule until `stop()` is true, waking on store changes and backoff expiry."""
        while not stop():
            if not self.run_once():
                time.sleep(idle_sleep)

    def schedule(self, pod: Pod) -> Outcome:
        """One scheduling cycle for one pod."""
        key = pod_key(pod)
        try:
            with atomic(self.store):
                self.refresh()
                try:
                    pod = self._current_pod(pod)
                    claims = self._claims_of(pod)
                    candidate = self._place(pod, claims)
                except Unschedulable as why:
                    # Inside the transaction, so that claims generated for the pod are
                    # kept (committed) even though it cannot be placed now, as upstream.
                    return self._unschedulable(pod, str(why))
                self._write_claims(pod, claims, candidate)
        except (Conflict, NotFound):
            self._invalidate()
            self.queue.unschedulable(pod)
            return Outcome(f"{key[0]}/{key[1]}", None, "conflict: retried later")
        try:
            self._bind(pod, candidate.node)
        except (Conflict, NotFound) as refused:
            return self._unreserve(pod, claims, candidate.node, refused)
        self.queue.scheduled(key)
        self.policy.observe(len(candidate.refs))
        return Outcome(
            f"{key[0]}/{key[1]}", candidate.node, devices=tuple(str(r) for r in candidate.refs)
        )

    # --- refresh ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Bring the cache up to date with the store (a full load the first time)."""
        if not self._loaded:
            self._load_all()
            return
        events = self.store.changes(self._cache.rv)
        if not events:
            return
        woken = False
        for event in events:
            obj = event.obj
            table = self._cache.of(type(obj))
            k = (obj.namespace, obj.name)
            before = table.pop(k, None) if event.type == "DELETED" else table.get(k)
            if event.type != "DELETED":
                table[k] = obj
            self._cache.rv = event.resource_version
            if event.resource_version in self._own:
                self._own.discard(event.resource_version)  # already applied when written
                continue
            if isinstance(obj, ResourceClaim) and not (
                _is_allocated(obj) or (isinstance(before, ResourceClaim) and _is_allocated(before))
            ):
                continue  # a claim that holds no devices, before or after, changes no choice
            woken |= self._note_change(obj, event.type == "DELETED")
        if woken:
            self.queue.wake_all()

    def _load_all(self) -> None:
        rv = self.store.resource_version()
        for cls in (
            Node,
            Namespace,
            ResourceSlice,
            DeviceTaintRule,
            DeviceClass,
            ResourceClaim,
            ResourceClaimTemplate,
            Pod,
        ):
            table = self._cache.of(cls)
            for obj in self.store.list(cls):
                table[(obj.namespace, obj.name)] = obj
        self._cache.rv = rv
        self._loaded = True
        self._invalidate()
        for obj in self._cache.of(Pod).values():
            assert isinstance(obj, Pod)
            if self._is_pending(obj):
                self.queue.add(obj)

    def _note_change(self, obj: KubeObject, deleted: bool) -> bool:
        """Update derived state for one changed object; True if pending pods may now fit."""
        if isinstance(obj, (ResourceSlice, DeviceTaintRule, Node)):
            self._inventory = self._view = self._nodes = None
            self._static_fits.clear()
            self._forget_infeasible()
        if isinstance(obj, ResourceClaim):
            self._allocated = None
            self._view = None
            self._forget_infeasible()
        if isinstance(obj, DeviceClass):
            self._classes = None
            self._forget_infeasible()
        if isinstance(obj, Pod):
            ended = deleted or (obj.status is not None and obj.status.phase in ENDED_PHASES)
            if obj.spec.node_name:
                self._usage = None  # a pending pod uses nothing on any node yet
                self._touch(obj.spec.node_name)
                if ended:
                    self._note_freed({obj.spec.node_name})  # its CPU and memory
            if not deleted and self._is_pending(obj):
                self.queue.add(obj)
            else:
                self.queue.remove(pod_key(obj))
            return ended
        return isinstance(obj, WAKING_KINDS)

    def _invalidate(self) -> None:
        self._inventory = self._view = self._allocated = None
        self._usage = self._classes = self._nodes = None
        self._static_fits.clear()
        self._forget_infeasible()

    def _forget_infeasible(self) -> None:
        self._infeasible.clear()
        self._cursor.clear()
        self._failed.clear()
        self._freed.clear()

    def _note_freed(self, nodes: set[str]) -> None:
        """Something was freed on `nodes` only: just they can turn feasible again."""
        for infeasible in self._infeasible.values():
            infeasible -= nodes
        self._cursor.clear()  # a freed node may sit before a resume point
        if len(self._freed) >= _FREED_LOG_LIMIT:
            self._failed.clear()  # forget old failures rather than keep a long log
            self._freed.clear()
        if self._failed:  # only cached failures read the log
            self._freed.extend(sorted(nodes))

    def _retry_scope(self, equivalent: bytes) -> set[str] | None:
        """The nodes worth trying for a pod like one that fit nowhere (those freed since);
        None for a pod not seen failing. Raises when nothing was freed since."""
        failed = self._failed.get(equivalent)
        if failed is None:
            return None
        why, seen = failed
        if seen == len(self._freed):
            raise Unschedulable(why)
        return set(self._freed[seen:])

    def _mine(self, obj: T) -> T:
        """Note a write of this scheduler, so refresh does not treat it as news."""
        self._own.add(int(obj.metadata.resource_version or 0))
        return obj

    def _is_pending(self, pod: Pod) -> bool:
        ended = pod.status is not None and pod.status.phase in ENDED_PHASES
        return (
            not pod.spec.node_name
            and not ended
            and not pod.metadata.deletion_timestamp
            and (pod.spec.scheduler_name or "default-scheduler") in self.names
        )

    # --- derived state ----------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """All nodes in name order (cached until a node changes)."""
        if self._nodes is None:
            nodes = [n for n in self._cache.of(Node).values() if isinstance(n, Node)]
            self._nodes = sorted(nodes, key=lambda n: n.name)
            self._nodes_by_name = {n.name: n for n in self._nodes}
        return self._nodes

    def inventory(self) -> Inventory:
        if self._inventory is None:
            slices = [
                s for s in self._cache.of(ResourceSlice).values() if isinstance(s, ResourceSlice)
            ]
            rules = [
                r
                for r in self._cache.of(DeviceTaintRule).values()
                if isinstance(r, DeviceTaintRule)
            ]
            slices.sort(key=lambda s: s.name)
            self._inventory = Inventory.build(slices, rules, features=self.features)
        return self._inventory

    def allocated(self) -> AllocatedState:
        if self._allocated is None:
            self._allocated = AllocatedState.from_claims(self._claims())
        return self._allocated

    def view(self) -> ClusterView:
        if self._view is None:
            infos = [NodeInfo(n.name, n.metadata.labels) for n in self.nodes()]
            used = [r for c in self._claims() for r in _claim_refs(c)]
            self._view = ClusterView(self.inventory(), infos, used)
        return self._view

    def _claims(self) -> list[ResourceClaim]:
        return [c for c in self._cache.of(ResourceClaim).values() if isinstance(c, ResourceClaim)]

    def classes(self) -> dict[str, DeviceClass]:
        if self._classes is None:
            table = self._cache.of(DeviceClass).values()
            self._classes = {c.name: c for c in table if isinstance(c, DeviceClass)}
        return self._classes

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self._cache.of(Namespace).get(("", namespace))
        return dict(ns.metadata.labels) if ns is not None else {}

    def node_usage(self) -> dict[str, dict[str, Quantity]]:
        """CPU/memory requested by the pods bound to each node (cached)."""
        if self._usage is None:
            usage: dict[str, dict[str, Quantity]] = {}
            for pod in self._cache.of(Pod).values():
                assert isinstance(pod, Pod)
                if pod.spec.node_name and _runs(pod):
                    add_requests(usage.setdefault(pod.spec.node_name, {}), pod)
            self._usage = usage
        return self._usage

    def cpu_free(self, node: str) -> int | None:
        """Allocatable CPU (milli) a node has left for pods; None where it declares none."""
        self.nodes()
        found = self._nodes_by_name.get(node)
        allocatable = found.status.allocatable if found is not None and found.status else {}
        if "cpu" not in allocatable:
            return None
        used = self.node_usage().get(node, {}).get("cpu")
        left = allocatable["cpu"] if used is None else allocatable["cpu"].sub(used)
        return left.milli_value()

    # --- one cycle --------------------------------------------------------------------

    def _current_pod(self, pod: Pod) -> Pod:
        current = self._cache.of(Pod).get(pod_key(pod))
        if not isinstance(current, Pod) or not self._is_pending(current):
            raise Unschedulable("pod is no longer pending")
        return current

    def _claims_of(self, pod: Pod) -> list[ResourceClaim]:
        """The pod's claims in `spec.resourceClaims` order, generating template claims."""
        claims = []
        for entry in pod.spec.resource_claims:
            name = recorded_claim_name(pod, entry)
            if name is None and entry.resource_claim_template_name:
                claim, pod = self._generate(pod, entry.name, entry.resource_claim_template_name)
                claims.append(claim)
                continue
            found = self._cache.of(ResourceClaim).get((pod.namespace, name or ""))
            if not isinstance(found, ResourceClaim):
                raise Unschedulable(f'waiting for resource claim "{name}" to be created')
            if found.metadata.deletion_timestamp:
                raise Unschedulable(f'resource claim "{name}" is being deleted')
            if entry.resource_claim_template_name and not is_owned_by(found, pod):
                raise Unschedulable(f'resource claim "{name}" was not created for this pod')
            claims.append(found)
        extended = self._extended_claim(pod)
        return claims + ([extended] if extended is not None else [])

    def _extended_claim(self, pod: Pod) -> ResourceClaim | None:
        """The claim for extended resources served by DRA classes (created on first need)."""
        served = extended_resource_classes(self.classes().values())
        if not served:
            return None
        recorded = pod.status.extended_resource_claim_status if pod.status else None
        if recorded is not None:
            found = self._cache.of(ResourceClaim).get((pod.namespace, recorded.resource_claim_name))
            if isinstance(found, ResourceClaim):
                return found
        claim = extended_resource_claim(pod, served)
        if claim is None:
            return None
        claim = self._mine(self.store.create(claim))
        pod = self._mine(self.store.update_status(with_extended_claim(pod, claim, served)))
        self._cache.of(ResourceClaim)[(claim.namespace, claim.name)] = claim
        self._cache.of(Pod)[pod_key(pod)] = pod
        return claim

    def _generate(self, pod: Pod, entry: str, template_name: str) -> tuple[ResourceClaim, Pod]:
        template = self._cache.of(ResourceClaimTemplate).get((pod.namespace, template_name))
        if not isinstance(template, ResourceClaimTemplate):
            raise Unschedulable(f'resource claim template "{template_name}" not found')
        pod_entry = next(e for e in pod.spec.resource_claims if e.name == entry)
        claim = self._mine(self.store.create(generated_claim(pod, pod_entry, template)))
        pod = self._mine(self.store.update_status(with_claim_status(pod, entry, claim.name)))
        self._cache.of(ResourceClaim)[(claim.namespace, claim.name)] = claim
        self._cache.of(Pod)[pod_key(pod)] = pod
        return claim, pod

    def _place(self, pod: Pod, claims: list[ResourceClaim]) -> Candidate:
        reasons: dict[str, int] = {}
        self.nodes()
        nodes = self._nodes_by_name
        for claim in claims:
            reserved = claim.status.reserved_for if claim.status else ()
            if len(reserved) >= MAX_RESERVED_FOR and all(
                r.uid != pod.metadata.uid for r in reserved
            ):
                raise Unschedulable(
                    f'resource claim "{claim.name}" is in use by {MAX_RESERVED_FOR} pods'
                )
        found: list[Candidate] = []
        signature = _claims_signature(pod, claims)
        constraints, needs = _node_constraints(pod), pod_requests(pod)
        equivalent = signature + constraints + msgspec.json.encode(needs, enc_hook=str)
        only = self._retry_scope(equivalent)
        fitting = self._fitting_nodes(pod, constraints, needs, nodes, reasons, only)
        view = self.view()
        self.policy.prepare(pod, claims)
        infeasible = self._infeasible.setdefault(signature, set())
        ranked = self.policy.rank_nodes(view, fitting, infeasible)
        # the same full list every time: resume at the cursor
        stable = ranked is fitting and only is None
        start = self._cursor.get(signature, 0) if stable else 0
        if start:
            reasons["cannot allocate all claims"] = start
        for index in range(start, len(ranked)):
            name = ranked[index]
            if name in infeasible:
                reasons["cannot allocate all claims"] = (
                    reasons.get("cannot allocate all claims", 0) + 1
                )
                continue
            here = self._candidates_on(pod, claims, nodes[name], reasons)
            if not here:
                infeasible.add(name)
                if stable and index == self._cursor.get(signature, 0):
                    self._cursor[signature] = index + 1
            found += here
            if len(found) >= self.policy.candidates:
                break
        if not found:
            why = _nowhere(len(nodes), reasons) if only is None else self._failed[equivalent][0]
            self._failed[equivalent] = (why, len(self._freed))
            raise Unschedulable(why)
        return max(found, key=lambda c: self.policy.score(view, c))  # first best wins ties

    def _fitting_nodes(
        self,
        pod: Pod,
        constraints: bytes,
        needs: dict[str, Quantity],
        nodes: dict[str, Node],
        reasons: dict[str, int],
        only: set[str] | None = None,
    ) -> list[str]:
        """Nodes (of `only`, when given) that pass the non-DRA filters for a pod needing
        `needs`; the request-independent part is cached per `_node_constraints` until nodes
        change."""
        static = self._static_fits.get(constraints)
        if static is None:
            bare = msgspec.structs.replace(
                pod, spec=msgspec.structs.replace(pod.spec, containers=(), init_containers=())
            )
            static = []
            for node in nodes.values():
                fit = filter_node(bare, node, {})
                if fit.fits:
                    static.append(node.name)
            self._static_fits[constraints] = static
        excluded = len(nodes) - len(static)
        if excluded:
            reasons["node(s) didn't match Pod's node affinity/selector or taints"] = excluded
        if only is not None:
            static = [name for name in static if name in only]
        if not any(q.sign() > 0 for k, q in needs.items() if k in ("cpu", "memory")):
            return static
        # The static filters passed already: only the requests are left to check.
        wants, fitting, left = wanted(needs), [], self._left()
        for name in static:
            room = left.get(name)
            if room is None:
                room = left[name] = resources_left(nodes[name], self.node_usage().get(name, {}))
            reason = shortfall(wants, room)
            if reason:
                reasons[reason] = reasons.get(reason, 0) + 1
            else:
                fitting.append(name)
        return fitting

    def _left(self) -> dict[str, Left]:
        """What pods may still request per node (filled in as read), kept while the nodes
        and what their pods use are the same objects."""
        self.nodes()
        sources = (self.node_usage(), self._nodes_by_name)
        if any(a is not b for a, b in zip(sources, self._left_of, strict=True)):
            self._left_cache, self._left_of = {}, sources
        return self._left_cache

    def allocator_inputs(
        self, claims: Sequence[ResourceClaim], node: Node
    ) -> tuple[
        Sequence[ResourceClaim], NodeInfo, Inventory, dict[str, DeviceClass], AllocatedState
    ]:
        """What the allocator is given for `claims` on `node` (also used by explain)."""
        info = NodeInfo(node.name, node.metadata.labels)
        return claims, info, self.inventory(), self.classes(), self.allocated()

    def allocator_options(self, namespace: str) -> dict[str, Any]:
        """The allocator's switches for a pod of `namespace` (admin access needs its labels)."""
        return {
            "namespace_labels": self._namespace_labels(namespace),
            "features": self.features,
            "strict_cel": self.strict_cel,
        }

    def _candidates_on(
        self, pod: Pod, claims: list[ResourceClaim], node: Node, reasons: dict[str, int]
    ) -> list[Candidate]:
        """Allocate on one node once per device order the policy proposes."""
        view, out = self.view(), list[Candidate]()
        for order in self.policy.device_orders(view, node.name):
            try:
                allocation = allocate(
                    *self.allocator_inputs(claims, node),
                    **self.allocator_options(pod.namespace),
                    order=order,
                )
            except AllocationError as err:
                raise Unschedulable(str(err)) from None
            if allocation.results is None:
                reason = allocation.unsatisfiable.summary if allocation.unsatisfiable else "no fit"
                reasons[reason] = reasons.get(reason, 0) + 1
                return out  # feasibility does not depend on the order: no other order fits
            new = [
                r for r, c in zip(allocation.results, claims, strict=True) if not _is_allocated(c)
            ]
            out.append(Candidate(node.name, allocation.results, refs_of(new)))
        return out

    def _write_claims(self, pod: Pod, claims: list[ResourceClaim], chosen: Candidate) -> None:
        """Reserve in memory, then write finalizer and allocation + reservedFor per claim."""
        consumer = ResourceClaimConsumerReference(
            resource="pods", name=pod.name, uid=pod.metadata.uid or ""
        )
        for claim, result in zip(claims, chosen.results, strict=True):
            status = claim.status or ResourceClaimStatus()
            if any(r.uid == consumer.uid for r in status.reserved_for) and status.allocation:
                continue  # written by an earlier cycle that died before binding
            if FINALIZER not in claim.metadata.finalizers:
                meta = msgspec.structs.replace(
                    claim.metadata, finalizers=(*claim.metadata.finalizers, FINALIZER)
                )
                claim = self._mine(self.store.update(msgspec.structs.replace(claim, metadata=meta)))
            new_allocation = status.allocation is None
            status = msgspec.structs.replace(
                status,
                allocation=status.allocation or result,
                reserved_for=(*status.reserved_for, consumer),
            )
            claim = self._mine(
                self.store.update_status(msgspec.structs.replace(claim, status=status))
            )
            self._cache.of(ResourceClaim)[(claim.namespace, claim.name)] = claim
            if new_allocation:
                self._reserve(result)

    def _reserve(self, result: AllocationResult) -> None:
        if self._allocated is not None:
            self._allocated.reserve(result)
        self.view().reserve(refs_of([result]))

    def _bind(self, pod: Pod, node: str) -> None:
        """Bind through the store's `pods/binding`, after the claim writes (upstream's Bind
        after PreBind). The pod's uid is the precondition: the claims are reserved for this
        pod, not for whatever pod has its name by now."""
        bound = self.store.bind(pod, node)
        if bound is not None:
            self._mine(bound)
        if self._usage is not None:
            add_requests(self._usage.setdefault(node, {}), pod)
            self._left_cache.pop(node, None)
        self._touch(node)

    def _touch(self, node: str) -> None:
        """Tell the view's readers (policies with per-node indexes) that what pods use on
        `node` changed; a view built later is read afresh anyway."""
        if self._view is not None:
            self._view.touch(node)

    def _unreserve(
        self, pod: Pod, claims: list[ResourceClaim], node: str, refused: StoreError
    ) -> Outcome:
        """Binding was refused: the pod was deleted, re-created under its name, or bound by
        someone else since its claims were written. As upstream's Unreserve, the pod's
        reservations are dropped from those claims (a claim nobody else holds is freed, and
        deleted if it was generated for a pod that is gone), and the pod that now has the
        name, if any and pending, is queued afresh (the same pod backs off). Unless another
        scheduler bound this very pod to `node` from these reservations (as after a crash):
        then it is done."""
        key = pod_key(pod)
        self.refresh()
        current = self._cache.of(Pod).get(key)
        name = f"{key[0]}/{key[1]}"
        if (
            isinstance(current, Pod)
            and current.metadata.uid == pod.metadata.uid
            and current.spec.node_name == node
        ):
            self.queue.scheduled(key)
            return Outcome(name, None, f"bound to {node} by another scheduler")
        self._drop_reservations(pod, claims)
        self.queue.remove(key)
        self.refresh()
        current = self._cache.of(Pod).get(key)
        if isinstance(current, Pod) and self._is_pending(current):
            self.queue.add(current)
            if current.metadata.uid == pod.metadata.uid:
                self.queue.unschedulable(current)
        return Outcome(name, None, f"binding refused, retried: {refused}")

    def _drop_reservations(self, pod: Pod, claims: list[ResourceClaim]) -> None:
        pods = {p.metadata.uid: p for p in self._cache.of(Pod).values() if isinstance(p, Pod)}
        for claim in claims:
            current = self._cache.of(ResourceClaim).get((claim.namespace, claim.name))
            if isinstance(current, ResourceClaim) and current.status is not None:
                held = current.status.reserved_for
                live = tuple(r for r in held if r.uid != pod.metadata.uid)
                if len(live) < len(held):
                    self._release(current, live, pods)
        self._invalidate()  # allocations changed under the cached views

    def _unschedulable(self, pod: Pod, message: str) -> Outcome:
        self.queue.unschedulable(pod)
        try:
            current = self.store.get(Pod, pod.name, pod.namespace)
            if not _has_condition(current, message):
                self.store.update_status(
                    with_scheduled_condition(
                        current, "False", "Unschedulable", message, now_rfc3339()
                    )
                )
        except (NotFound, Conflict):
            pass
        return Outcome(f"{pod.namespace}/{pod.name}", None, message)

    # --- deallocation -----------------------------------------------------------------

    def release_ended(self) -> int:
        """Drop ended or deleted pods from reservedFor; free claims nobody uses any more
        (generated claims of an ended pod are deleted, as upstream's claim controller does),
        and claims being deleted that nobody holds (their finalizer goes, so they go)."""
        pods = {p.metadata.uid: p for p in self._cache.of(Pod).values() if isinstance(p, Pod)}
        released = 0
        freed: set[str | None] = set()  # None: a node we cannot tell
        for claim in self._claims():
            reserved = claim.status.reserved_for if claim.status else ()
            live = tuple(r for r in reserved if _runs(pods.get(r.uid)))
            if len(live) == len(reserved) and not _abandoned(claim):
                continue
            released += 1
            if self._release(claim, live, pods):
                if self._view is not None:
                    self._view.release(_claim_refs(claim))
                # a claim nobody held any more: its devices' node is not known here
                freed |= {_node_of(pods.get(r.uid)) for r in reserved} or {None}
        if released:
            self.refresh()
            # Only what claims decide changes: devices in use, CPU in use, known misfits.
            self._allocated = self._usage = None
            if None in freed:
                self._forget_infeasible()
            else:
                self._note_freed({node for node in freed if node is not None})
            self.queue.wake_all()
        return released

    def _release(
        self,
        claim: ResourceClaim,
        live: tuple[ResourceClaimConsumerReference, ...],
        pods: dict[str | None, Pod],
    ) -> bool:
        """Write the smaller reservedFor, or free the claim; True when it was freed. The
        writes are this scheduler's own: the caller updates what depends on them."""
        try:
            if live and claim.status is not None:
                self._mine(
                    self.store.update_status(
                        msgspec.structs.replace(
                            claim, status=msgspec.structs.replace(claim.status, reserved_for=live)
                        )
                    )
                )
                return False
            cleared = self._mine(
                self.store.update_status(msgspec.structs.replace(claim, status=None))
            )
            meta = msgspec.structs.replace(
                cleared.metadata,
                finalizers=tuple(f for f in cleared.metadata.finalizers if f != FINALIZER),
            )
            cleared = self._mine(self.store.update(msgspec.structs.replace(cleared, metadata=meta)))
            if cleared.metadata.deletion_timestamp and not cleared.metadata.finalizers:
                return True  # it was being deleted: without the finalizer it is gone
            owners = [pods.get(o.uid) for o in cleared.metadata.owner_references if o.controller]
            if owners and all(not _runs(p) for p in owners):
                self.store.delete(ResourceClaim, cleared.name, cleared.namespace)
        except (Conflict, NotFound):
            return False  # someone else changed it: the next refresh sees the new state
        return True


_FREED_LOG_LIMIT = 4096


def _nowhere(total: int, reasons: dict[str, int]) -> str:
    """The kube-scheduler's summary of why a pod fits no node."""
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    head = f"0/{total} nodes are available"
    return f"{head}: {detail}." if detail else f"{head}."


def _node_constraints(pod: Pod) -> bytes:
    """What restricts a pod's nodes besides its requests: nodeName, selector, affinity,
    tolerations (the key of the request-independent filter cache)."""
    s = pod.spec
    return msgspec.json.encode([s.node_name, s.node_selector, s.affinity, s.tolerations])


def _node_of(pod: Pod | None) -> str | None:
    return pod.spec.node_name if pod is not None and pod.spec.node_name else None


def _claims_signature(pod: Pod, claims: Sequence[ResourceClaim]) -> bytes:
    """What makes the allocator's answer for a node: the claims' specs and allocations and
    the namespace (admin access depends on its labels)."""
    return msgspec.json.encode(
        [pod.namespace, [(c.spec, c.status.allocation if c.status else None) for c in claims]],
        enc_hook=str,
    )


def _is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None


def _claim_refs(claim: ResourceClaim) -> Iterable[DeviceRef]:
    if claim.status is None or claim.status.allocation is None:
        return ()
    return [
        DeviceRef(r.driver, r.pool, r.device)
        for r in claim.status.allocation.devices.results
        if not r.admin_access
    ]


def _abandoned(claim: ResourceClaim) -> bool:
    """Being deleted, held by nobody, and still kept by the scheduler's finalizer."""
    reserved = claim.status.reserved_for if claim.status else ()
    return bool(
        claim.metadata.deletion_timestamp
        and not reserved
        and FINALIZER in claim.metadata.finalizers
    )


def _runs(pod: Pod | None) -> bool:
    if pod is None or pod.metadata.deletion_timestamp:
        return False
    return pod.status is None or pod.status.phase not in ENDED_PHASES


def _has_condition(pod: Pod, message: str) -> bool:
    conditions = pod.status.conditions if pod.status else ()
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.message == message
        for c in conditions
    )
