"""Node filtering before any device is looked at: the kube-scheduler's non-DRA filters.

In order: nodeName, unschedulable, nodeSelector, required node affinity, taints with
NoSchedule/NoExecute, CPU/memory and extended-resource requests against what is left of
allocatable. Each returns the reason a node is excluded, which `explain` shows per node
group.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import msgspec

from kubedra.api.core import Container, Node, NodeSelector, Pod, Taint, Toleration
from kubedra.api.quantity import Quantity
from kubedra.api.selection import NodeSelectorError, node_selector_matches, untolerated

# Resources the scheduler accounts for, besides extended resources; DRA devices are
# accounted by the allocator.
ACCOUNTED = ("cpu", "memory")
_UNSCHEDULABLE = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def is_extended_resource(name: str) -> bool:
    """Upstream's extended resource name: a domain-prefixed name outside kubernetes.io
    (`example.com/gpu`), not a quota's `requests.` name."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.")


def container_requests(c: Container) -> dict[str, Quantity]:
    """A container's requests, a limit standing for a request it lacks (the API server's
    defaulting: requests default to limits)."""
    res = c.resources
    return {**(res.limits if res else {}), **(res.requests if res else {})}


def pod_requests(pod: Pod) -> dict[str, Quantity]:
    """Effective requests: the larger of the containers' sum and any init container's."""
    total: dict[str, Quantity] = {}
    for c in pod.spec.containers:
        for name, q in container_requests(c).items():
            total[name] = total[name].add(q) if name in total else q
    for c in pod.spec.init_containers:
        for name, q in container_requests(c).items():
            if name not in total or q > total[name]:
                total[name] = q
    return total


def node_constraints(pod: Pod) -> bytes:
    """What restricts a pod's nodes besides its requests: nodeName, selector, affinity,
    tolerations, encoded (the key of the request-independent filters' verdicts)."""
    s = pod.spec
    return msgspec.json.encode([s.node_name, s.node_selector, s.affinity, s.tolerations])


@dataclass(frozen=True, slots=True)
class NodeFit:
    """A node that passed, or the reason it did not (short, like the scheduler's)."""

    node: Node
    reason: str = ""

    @property
    def fits(self) -> bool:
        return not self.reason


def filter_node(
    pod: Pod, node: Node, used: Mapping[str, Quantity], served: Collection[str] = ()
) -> NodeFit:
    """Check one node for one pod; `used` is what pods already bound there request;
    `served`: the extended resources DeviceClasses map (DRA serves them where the node
    does not offer them itself)."""
    spec = pod.spec
    if spec.node_name and spec.node_name != node.name:
        return NodeFit(node, "node(s) didn't match the requested node name")
    if spec.node_selector and any(
        node.metadata.labels.get(k) != v for k, v in spec.node_selector.items()
    ):
        return NodeFit(node, "node(s) didn't match Pod's node affinity/selector")
    affinity = spec.affinity.node_affinity if spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    if required is not None and not _affinity_matches(required, node):
        return NodeFit(node, "node(s) didn't match Pod's node affinity/selector")
    reason = _taint_reason(node, spec.tolerations)
    if reason:
        return NodeFit(node, reason)
    return NodeFit(node, _resource_reason(pod_requests(pod), node, used, served))


def _affinity_matches(required: NodeSelector, node: Node) -> bool:
    try:
        return node_selector_matches(required, node.name, node.metadata.labels)
    except NodeSelectorError:
        return False  # a malformed requirement (validation rejects these) matches no node


def _taint_reason(node: Node, tolerations: Iterable[Toleration]) -> str:
    taints = list(node.spec.taints if node.spec else ())
    if node.spec and node.spec.unschedulable:
        taints.append(_UNSCHEDULABLE)
    taint = untolerated(taints, list(tolerations))
    if taint is None:
        return ""
    value = f"={taint.value}" if taint.value else ""
    return f"node(s) had untolerated taint {{{taint.key}{value}: {taint.effect}}}"


def _resource_reason(
    requests: Mapping[str, Quantity],
    node: Node,
    used: Mapping[str, Quantity],
    served: Collection[str] = (),
) -> str:
    """upstream NodeResourcesFit's "Insufficient <resource>". A node that does not declare
    CPU or memory is not limited on it (kubedra's leniency for bare test nodes); an
    extended resource it does not declare it has none of, unless a DeviceClass maps the
    name (KEP-5004: then the pod's generated claim asks DRA for the devices)."""
    allocatable = node.status.allocatable if node.status else {}
    extended = sorted(n for n in requests if is_extended_resource(n))
    for name in [n for n in ACCOUNTED if n in requests] + extended:
        want = requests[name]
        if want.sign() <= 0:
            continue
        if name not in allocatable:
            if name in ACCOUNTED or name in served:
                continue
            return f"Insufficient {name}"
        have = allocatable[name]
        taken = used.get(name)
        if taken is not None:
            have = have.sub(taken)
        if want > have:
            return f"Insufficient {name}"
    return ""


Left = tuple[int | None, ...]  # nano-units left of each ACCOUNTED resource; None: not limited
Wanted = tuple[tuple[int, int, str], ...]  # (index in ACCOUNTED, nano-units, reason if short)


def resources_left(node: Node, used: Mapping[str, Quantity]) -> Left:
    """What pods may still request of each accounted resource on `node` (exact nano-units);
    None where the node does not declare the resource, which then does not limit it."""
    allocatable = node.status.allocatable if node.status else {}
    left: list[int | None] = []
    for name in ACCOUNTED:
        have, taken = allocatable.get(name), used.get(name)
        left.append(None if have is None else have.nanos - (taken.nanos if taken else 0))
    return tuple(left)


def wanted(requests: Mapping[str, Quantity]) -> Wanted:
    """The accounted resources a pod requests (zero requests are not checked)."""
    return tuple(
        (i, q.nanos, f"Insufficient {name}")
        for i, name in enumerate(ACCOUNTED)
        if (q := requests.get(name)) is not None and not q.is_zero()
    )


def shortfall(wants: Wanted, left: Left) -> str:
    """Why `wants` do not fit in `left` (the first resource short), or "" when they do."""
    for i, nanos, reason in wants:
        room = left[i]
        if room is not None and nanos > room:
            return reason
    return ""


def add_requests(total: dict[str, Quantity], pod: Pod) -> None:
    """Account a pod bound to a node (in place)."""
    for name, q in pod_requests(pod).items():
        if _accounted(name):
            total[name] = total[name].add(q) if name in total else q


def asks_node_resources(requests: Mapping[str, Quantity]) -> bool:
    """Whether the requests include any that a node's allocatable limits."""
    return any(q.sign() > 0 for name, q in requests.items() if _accounted(name))


def _accounted(name: str) -> bool:
    return name in ACCOUNTED or is_extended_resource(name)
