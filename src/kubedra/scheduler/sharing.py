"""Where other schedulers allocate devices on the nodes this scheduler owns.

Devices are no API objects: two schedulers that allocate from one node's slices can each
see a device free in a cache that has not yet seen the other's claim, and both take it.
Upstream supports one scheduler per node's devices (kubernetes#128980). kubedra tells which
of its nodes another scheduler uses: where that scheduler's pods hold devices (through a
claim reserved for them, or for their PodGroup), and where its
pending pods with claims may land while it is placing them. A pod its scheduler left pending
for RACE_WINDOW_S seconds is not being placed now, so a pod that fits nowhere does not keep
the nodes it could go to from kubedra for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kubedra.allocator import DeviceRef
from kubedra.api.core import Pod, pod_runs
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.cache import Key
from kubedra.scheduler.claims import is_podgroup_consumer, pod_group_of
from kubedra.scheduler.queue import pod_key

log = logging.getLogger(__name__)
RACE_WINDOW_S = 30.0  # another scheduler places a pending pod within this, or has not yet


def scheduler_of(pod: Pod) -> str:
    return pod.spec.scheduler_name or "default-scheduler"


@dataclass
class OtherSchedulers:
    """The owned nodes other schedulers allocate on (node -> a scheduler's name), kept
    until a pod of theirs or a claim changes, or a pending pod of theirs ages out."""

    names: tuple[str, ...]  # this scheduler's names
    clock: Callable[[], float]
    refuse: bool
    seen: set[str] = field(default_factory=set)  # nodes ever reported (each logged once)
    _pending: dict[Key, float] = field(default_factory=dict)  # their pending pods -> changed
    _nodes: dict[str, str] | None = None
    _until: float = 0.0

    def mine(self, pod: Pod) -> bool:
        return scheduler_of(pod) in self.names

    def changed(self, pod: Pod | None = None, runs: bool = False) -> None:
        """Something they may hold changed; `pod`: one of their pods (`runs`: not ended
        or being deleted) changed."""
        self._nodes = None
        if pod is None:
            return
        if runs and not pod.spec.node_name and pod.spec.resource_claims:
            self._pending[pod_key(pod)] = self.clock()
        else:
            self._pending.pop(pod_key(pod), None)

    def known(self, now: float | None = None, besides: Pod | None = None) -> dict[str, str] | None:
        """The nodes `nodes` found last while they still hold (None: it must look again);
        cheap, unlike gathering `nodes`' arguments (every pod and claim). Never when
        `besides` is one of their pending pods: those nodes counted it."""
        if besides is not None and pod_key(besides) in self._pending:
            return None
        if self._nodes is None or (self.clock() if now is None else now) >= self._until:
            return None
        return self._nodes

    def nodes(
        self,
        pods: Mapping[Key, Pod],
        claims: Iterable[ResourceClaim],
        node_of: Callable[[DeviceRef], str | None],
        may_go: Callable[[Pod], Iterable[str]],
        besides: Pod | None = None,
    ) -> dict[str, str]:
        """`node_of`: an owned device's node; `may_go`: the owned nodes a pod may land on;
        `besides`: a pending pod left out (a pod does not share a node with itself), the
        answer then not kept."""
        now = self.clock()
        known = self.known(now, besides)
        if known is not None:
            return known
        found = self._held(pods.values(), claims, node_of)
        self._pending = {k: t for k, t in self._pending.items() if now - t < RACE_WINDOW_S}
        self._until = min(self._pending.values(), default=now) + RACE_WINDOW_S
        left_out = pod_key(besides) if besides is not None else None
        pending = [pods[k] for k in self._pending if k in pods and k != left_out]
        # Their bound pods' nodes too: a binding can arrive on the pod watch before the
        # claim's allocation arrives on the claim watch (two streams, no common order).
        bound = [p for p in pods.values() if p.spec.node_name and self._holds_claims(p)]
        for pod in [*bound, *pending]:
            for node in may_go(pod):
                found.setdefault(node, scheduler_of(pod))
        for node in sorted(set(found) - self.seen):
            log.warning(
                "node %s: %s allocates devices here too; %s",
                node,
                found[node],
                "kubedra leaves its devices alone (it would race)"
                if self.refuse
                else "two schedulers may pick the same device (--shared-nodes=warn)",
            )
        self.seen |= set(found)
        # kept for the next caller only when it counted every pending pod
        self._nodes = found if left_out is None or left_out not in self._pending else None
        return found

    def _holds_claims(self, pod: Pod) -> bool:
        return bool(pod.spec.resource_claims) and pod_runs(pod) and not self.mine(pod)

    def _held(
        self,
        pods: Iterable[Pod],
        claims: Iterable[ResourceClaim],
        node_of: Callable[[DeviceRef], str | None],
    ) -> dict[str, str]:
        """Nodes where claims reserved for their pods hold devices, or reserved for a
        PodGroup (KEP-5729: one entry for the group) whose pods are theirs."""
        pods = list(pods)
        by_uid = {p.metadata.uid: p for p in pods}
        by_group: dict[tuple[str, str], Pod] = {}
        for p in pods:
            group = pod_group_of(p)
            if group is not None and not self.mine(p):
                by_group.setdefault(group, p)
        held: dict[str, str] = {}
        for claim in claims:
            status = claim.status
            if status is None or status.allocation is None:
                continue
            for consumer in status.reserved_for:
                if is_podgroup_consumer(consumer):
                    pod = by_group.get((claim.namespace, consumer.name))
                else:
                    pod = by_uid.get(consumer.uid)
                if pod is None or self.mine(pod):
                    continue
                for r in status.allocation.devices.results:
                    node = node_of(DeviceRef(r.driver, r.pool, r.device))
                    if node is not None:
                        held[node] = scheduler_of(pod)
        return held
