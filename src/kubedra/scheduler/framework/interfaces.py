"""The extension points of the scheduling framework, and what a plugin is given.

Upstream's framework (kube-scheduler's `pkg/scheduler/framework`) names the points of one
pod's scheduling cycle and binding cycle where plugins run; a plugin implements the points
it needs, and the framework runs every plugin that implements a point, in the profile's
order. kubedra keeps the names and their order of use:

    QueueSort      the order pods are taken from the active queue (exactly one plugin)
    PreEnqueue     may the pod be tried at all yet (a gang waits for its members)
    PreFilter      what the pod needs, computed once (its claims); may end the cycle
    Filter         which nodes may take the pod (a list in, a shorter list out)
    NodeOrder      kubedra: in which order to try the nodes that passed (upstream walks
                   them round-robin); one plugin
    NodeFilter     kubedra's per-node filter, run lazily in that order until enough nodes
                   were found (upstream's numFeasibleNodesToFind): where devices are
                   allocated, each success a Candidate
    Sufficient     enough candidates found? (every plugin must agree)
    PostFilter     nothing fits: explain why (upstream: preempt)
    Score          how good a candidate is (PreScore may skip a plugin for a pod);
                   kubedra ranks by the plugins' scores in profile order, not by a
                   weighted sum: a placement policy never trades the user's preference
    Reserve        assume the choice in the scheduler's view (Unreserve undoes it)
    Permit         allow, reject, or make the pod wait (a gang holds its pods until all
                   are reserved)
    PreBind        the writes before binding (claims' allocations)
    Bind           the binding
    PostBind       after a successful binding

Filter takes a list rather than one node (upstream calls Filter once per node) so that a
plugin can keep verdicts for whole lists between pods; NodeFilter is the per-node form.
Besides the points, a plugin may keep memos across cycles (`ClusterEvents`): the framework
tells it when what it memoized may have changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from kubedra.api.core import Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.quantity import Quantity
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.policies.base import Candidate

if TYPE_CHECKING:
    from kubedra.allocator import AllocatedState, DeviceOrder, Features, Inventory
    from kubedra.api.kinds import KubeObjectT
    from kubedra.api.resource import DeviceClass, ResourceClaim
    from kubedra.cluster.events import Recorder
    from kubedra.cluster.store import Store
    from kubedra.scheduler.cache import ObjectCache
    from kubedra.scheduler.framework.cycle import Framework
    from kubedra.scheduler.framework.waiting import WaitingPods
    from kubedra.scheduler.policies import Policy
    from kubedra.scheduler.queue import SchedulingQueue
    from kubedra.scheduler.sharing import OtherSchedulers
    from kubedra.scheduler.view import ClusterView

__all__ = ["Candidate"]


class Handle(Protocol):
    """What plugins may use of the scheduler (upstream's framework.Handle): the store, the
    scheduler's cache and the tables derived from it, the queue and the framework."""

    store: Store
    cache: ObjectCache
    queue: SchedulingQueue
    features: Features
    strict_cel: bool
    claim_controller: bool
    patience: float
    policy: Policy
    others: OtherSchedulers
    on_allocate: Callable[[str, float], None] | None
    waiting: WaitingPods[Any]  # the pods Permit holds (allow or reject them by key)
    recorder: Recorder  # events on objects (a PodGroup's)
    gang_timeout: float  # how long Permit holds a gang's reserved pods (s)

    @property
    def framework(self) -> Framework: ...

    def nodes(self) -> list[Node]: ...

    def node_map(self) -> Mapping[str, Node]: ...

    def node_names(self) -> list[str]: ...

    def inventory(self) -> Inventory: ...

    def allocated(self) -> AllocatedState: ...

    def built_allocated(self) -> AllocatedState | None: ...

    def view(self) -> ClusterView: ...

    def built_view(self) -> ClusterView | None: ...

    def claims(self) -> list[ResourceClaim]: ...

    def classes(self) -> dict[str, DeviceClass]: ...

    def namespace_labels(self, namespace: str) -> dict[str, str]: ...

    def node_usage(self) -> dict[str, dict[str, Quantity]]: ...

    def add_usage(self, node: str, pod: Pod) -> bool: ...

    def forget_usage(self) -> None: ...

    def touch(self, node: str) -> None: ...

    def mine(self, obj: KubeObjectT) -> KubeObjectT: ...

    def refresh(self) -> None: ...

    def invalidate(self) -> None: ...

    def shared_nodes(self) -> dict[str, str]: ...


class Plugin:
    """A plugin: a name, and the extension points it implements (the classes below)."""

    name: ClassVar[str] = ""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle


class QueueSortPlugin(Plugin):
    def queue_key(self, pod: Pod) -> tuple[Any, ...]:
        """The pod's place in the active queue: smaller first."""
        raise NotImplementedError


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: Pod) -> str:
        """ "" when the pod may be tried now; else why it waits (it is parked, quietly,
        until `SchedulingQueue.activate` or the longest backoff)."""
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, info: PodInfo) -> None:
        """Compute what the pod needs into `state`; raise Unschedulable or Waiting."""
        raise NotImplementedError

    def signature(self, state: CycleState, info: PodInfo) -> bytes:
        """What this plugin's verdicts on the pod depend on (self-delimiting bytes): pods
        whose signatures all match are equivalent (the framework's failure cache)."""
        return b""


class FilterPlugin(Plugin):
    def filter(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], diagnosis: Diagnosis
    ) -> Sequence[str]:
        """The `nodes` (in their order) that may take the pod; the others counted by reason
        in `diagnosis`. Return `nodes` itself when none is refused."""
        raise NotImplementedError


class NodeOrderPlugin(Plugin):
    def order(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], skip: AbstractSet[str]
    ) -> Sequence[str]:
        """`nodes` in the order to try them (`skip`: known not to fit, may go last)."""
        raise NotImplementedError

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        """Device orders the allocator should try on `node` (a hint: each success is a
        candidate; feasibility never depends on the order)."""
        return [None]


class NodeFilterPlugin(Plugin):
    def known_infeasible(self, state: CycleState) -> AbstractSet[str]:
        """Nodes known not to fit the pod (NodeOrder may put them last)."""
        return frozenset()

    def resume(
        self, state: CycleState, ranked: Sequence[str], stable: bool, diagnosis: Diagnosis
    ) -> int:
        """How many leading nodes of `ranked` are known not to fit (counted in `diagnosis`).
        `stable`: `ranked` is the filters' list as they returned it, unordered."""
        return 0

    def filter_node(
        self,
        state: CycleState,
        info: PodInfo,
        node: Node,
        index: int,
        found: list[Candidate] | None,
        diagnosis: Diagnosis,
    ) -> list[Candidate]:
        """The placements of the pod on `node` (`index` in the ranked list): the candidates
        a plugin before this one found there (None: none ran), refined or replaced; [] when
        the node cannot take the pod (the reason counted in `diagnosis`)."""
        raise NotImplementedError


class SufficientPlugin(Plugin):
    def sufficient(self, state: CycleState, found: Sequence[Candidate]) -> bool:
        """Enough candidates were found to choose among (every plugin must agree)."""
        raise NotImplementedError


class PostFilterPlugin(Plugin):
    def post_filter(self, state: CycleState, info: PodInfo, diagnosis: Diagnosis) -> str:
        """The pod fits nowhere: refine `diagnosis`; return an explanation (or "")."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def pre_score(self, state: CycleState, info: PodInfo) -> bool:
        """Whether to score this pod's candidates at all (False: upstream's Skip)."""
        return True

    def score(self, state: CycleState, candidate: Candidate) -> float:
        raise NotImplementedError

    def normalize(self, state: CycleState, scores: list[float]) -> None:
        """Upstream's NormalizeScore: adjust this plugin's scores of all candidates."""


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        """Assume the choice in the scheduler's view (nothing is written yet)."""
        raise NotImplementedError

    def unreserve(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: Sequence[KubeObject]
    ) -> None:
        """The pod will not be bound: give back in the view what was assumed and not
        written (`written`: what PreBind wrote before it stopped)."""

    def rollback(self, state: CycleState, pod: Pod) -> None:
        """After Unreserve, when nobody bound the pod: undo in the store what PreBind
        wrote for it (the pod's reservations of claims)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Permit's answer: allow (the default), reject with a reason, or wait `timeout` s."""

    reject: str = ""
    timeout: float | None = None  # wait at most this long for `WaitingPods.allow`


ALLOW = Verdict()


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, candidate: Candidate) -> Verdict:
        raise NotImplementedError


class PreBindPlugin(Plugin):
    def pre_bind(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: list[KubeObject]
    ) -> None:
        """Write what must exist before the binding, appending each object written to
        `written`; raise KubedraError to stop (runs off the scheduling thread: no view)."""
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: Pod, node: str) -> Pod | None:
        """Bind the pod; the bound pod when the store answers with it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        raise NotImplementedError


class ClusterEvents(Plugin):
    """A plugin that keeps memos across cycles, told when they may no longer hold."""

    def forget(self) -> None:
        """Anything may fit anywhere again (claims, classes or nodes changed)."""

    def freed(self, nodes: AbstractSet[str]) -> None:
        """Something was freed on `nodes` only: they may fit pods they refused."""

    def nodes_changed(self) -> None:
        """Nodes, or what they publish, changed."""
