"""The framework's runtime: one pod's cycle through the plugins of a profile.

`find` is the scheduling cycle up to the choice (PreFilter, the failure cache, Filter,
NodeOrder, NodeFilter until Sufficient, PostFilter when nothing fits, Score); `reserve`,
`permit`, `pre_bind`, `bind` and `post_bind` are the steps after it, which the scheduler
runs around its cache and the store (`schedule_one.py`). The runtime knows the extension
points and nothing of any plugin's internals: a plugin joins by implementing a point's
class (`interfaces.py`) and being named in the profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypeVar

from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.errors import KubedraError
from kubedra.scheduler.framework.failures import FailureCache
from kubedra.scheduler.framework.interfaces import (
    BindPlugin,
    Candidate,
    ClusterEvents,
    FilterPlugin,
    Handle,
    NodeFilterPlugin,
    NodeOrderPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SufficientPlugin,
)
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.framework.status import Unschedulable, Waiting

if TYPE_CHECKING:
    from kubedra.allocator import DeviceOrder
    from kubedra.scheduler.view import ClusterView

P = TypeVar("P", bound=Plugin)


class Framework:
    """The plugins of one profile, by extension point, in the profile's order."""

    def __init__(self, handle: Handle, plugins: Sequence[Plugin]) -> None:
        self.handle = handle
        self.plugins = list(plugins)
        sorts = self._at(QueueSortPlugin)
        if len(sorts) > 1:
            raise ValueError("a profile has one QueueSort plugin")
        self.queue_sort = sorts[0] if sorts else None
        self.pre_enqueues = self._at(PreEnqueuePlugin)
        self.pre_filters = self._at(PreFilterPlugin)
        self.filters = self._at(FilterPlugin)
        orders = self._at(NodeOrderPlugin)
        if len(orders) > 1:
            raise ValueError("a profile has one NodeOrder plugin")
        self.node_order = orders[0] if orders else None
        self.node_filters = self._at(NodeFilterPlugin)
        self.sufficients = self._at(SufficientPlugin)
        self.post_filters = self._at(PostFilterPlugin)
        self.scorers = self._at(ScorePlugin)
        self.reserves = self._at(ReservePlugin)
        self.permits = self._at(PermitPlugin)
        self.pre_binds = self._at(PreBindPlugin)
        self.binders = self._at(BindPlugin)
        self.post_binds = self._at(PostBindPlugin)
        self.listeners = self._at(ClusterEvents)
        self.failures = FailureCache()

    def _at(self, point: type[P]) -> list[P]:
        return [p for p in self.plugins if isinstance(p, point)]

    def get(self, cls: type[P]) -> P:
        """The profile's plugin of class `cls` (KeyError when it has none)."""
        for plugin in self.plugins:
            if isinstance(plugin, cls):
                return plugin
        raise KeyError(f"no {cls.__name__} plugin in the profile")

    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    # --- the queue ------------------------------------------------------------------------

    def queue_key(self, pod: Pod) -> tuple[Any, ...]:
        assert self.queue_sort is not None
        return self.queue_sort.queue_key(pod)

    def pre_enqueue(self, pod: Pod) -> None:
        """Raise Waiting (quiet: the pod is parked without a condition) when a plugin
        holds the pod back."""
        for plugin in self.pre_enqueues:
            why = plugin.pre_enqueue(pod)
            if why:
                raise Waiting(why, quiet=True)

    # --- the scheduling cycle ---------------------------------------------------------------

    def find(self, state: CycleState, info: PodInfo) -> Candidate:
        """Where the pod goes: the best candidate, or Unschedulable (Waiting) with why."""
        for plugin in self.pre_filters:
            plugin.pre_filter(state, info)
        names = self.handle.node_names()
        signature = b"".join([p.signature(state, info) for p in self.pre_filters])
        scope = state.scope = self.failures.scope(signature)
        diagnosis = Diagnosis(len(names))
        nodes: Sequence[str] = names if scope is None else [n for n in names if n in scope]
        for filter_plugin in self.filters:
            nodes = filter_plugin.filter(state, info, nodes, diagnosis)
        ranked = nodes
        if self.node_order is not None:
            ranked = self.node_order.order(state, info, nodes, self._known_infeasible(state))
        # the same full list every time (as the filters left it): memos may resume in it
        stable = ranked is nodes and scope is None
        found = self._search(state, info, ranked, stable, diagnosis)
        if not found:
            if scope is None:
                explanation = ""
                for post in self.post_filters:
                    explanation = post.post_filter(state, info, diagnosis) or explanation
                why = Unschedulable(diagnosis.summary(), explanation)
            else:  # a retry on the nodes freed since: it failed as the pod it is like
                why = self.failures.last(signature)
            self.failures.record(signature, why)
            raise Unschedulable(str(why), why.explanation)
        return self._select(state, info, found)

    def _known_infeasible(self, state: CycleState) -> AbstractSet[str]:
        known = [p.known_infeasible(state) for p in self.node_filters]
        if len(known) > 1:
            known = [k for k in known if k] or known[:1]  # a union would copy the big one
        if len(known) == 1:
            return known[0]  # the plugin's own set, as it grows
        return frozenset().union(*known)

    def _search(
        self,
        state: CycleState,
        info: PodInfo,
        ranked: Sequence[str],
        stable: bool,
        diagnosis: Diagnosis,
    ) -> list[Candidate]:
        """NodeFilter in the ranked order until the Sufficient plugins agree."""
        start = 0
        for plugin in self.node_filters:
            start = max(start, plugin.resume(state, ranked, stable, diagnosis))
        node_map = self.handle.node_map()
        filters, sufficients = self.node_filters, self.sufficients
        found: list[Candidate] = []
        for index in range(start, len(ranked)):
            name = ranked[index]
            here: list[Candidate] | None = None
            for plugin in filters:
                here = plugin.filter_node(state, info, node_map[name], index, here, diagnosis)
                if not here:
                    break
            if here is None:
                here = [Candidate(name, (), ())]
            elif not here:
                continue  # nothing new to judge: no plugin's answer can have changed
            found += here
            if all(p.sufficient(state, found) for p in sufficients):
                break
        return found

    def _select(self, state: CycleState, info: PodInfo, found: list[Candidate]) -> Candidate:
        """The candidate with the best scores, compared plugin by plugin in the profile's
        order; the first of equals wins."""
        columns = []
        for plugin in self.scorers:
            if not plugin.pre_score(state, info):
                continue
            column = [plugin.score(state, c) for c in found]
            plugin.normalize(state, column)
            columns.append(column)
        if not columns:
            return found[0]
        if len(columns) == 1:
            return found[max(range(len(found)), key=columns[0].__getitem__)]
        return found[max(range(len(found)), key=lambda i: tuple(c[i] for c in columns))]

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        if self.node_order is None:
            return [None]
        return self.node_order.device_orders(view, node)

    # --- after the choice -----------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        for plugin in self.reserves:
            plugin.reserve(state, pod, candidate)

    def unreserve(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: Sequence[KubeObject]
    ) -> None:
        for plugin in reversed(self.reserves):
            plugin.unreserve(state, pod, candidate, written)

    def rollback(self, state: CycleState, pod: Pod) -> None:
        for plugin in reversed(self.reserves):
            plugin.rollback(state, pod)

    def permit(self, state: CycleState, pod: Pod, candidate: Candidate) -> dict[str, float]:
        """The plugins that make the pod wait, with their timeouts ({}: allowed); raises
        Unschedulable when one rejects it."""
        waits: dict[str, float] = {}
        for plugin in self.permits:
            verdict = plugin.permit(state, pod, candidate)
            if verdict.reject:
                raise Unschedulable(verdict.reject)
            if verdict.timeout is not None:
                waits[plugin.name] = verdict.timeout
        return waits

    def pre_bind(
        self, state: CycleState, pod: Pod, candidate: Candidate
    ) -> tuple[list[KubeObject], KubedraError | None]:
        """What PreBind wrote, and the error that stopped it (None: all went through)."""
        written: list[KubeObject] = []
        try:
            for plugin in self.pre_binds:
                plugin.pre_bind(state, pod, candidate, written)
        except KubedraError as err:
            return written, err
        return written, None

    def bind(self, state: CycleState, pod: Pod, node: str) -> Pod | None:
        if not self.binders:
            raise ValueError("a profile needs a Bind plugin")
        return self.binders[0].bind(state, pod, node)

    def post_bind(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        for plugin in self.post_binds:
            plugin.post_bind(state, pod, candidate)

    # --- what memos across cycles are told ------------------------------------------------

    def forget(self) -> None:
        """Anything may fit anywhere again."""
        for plugin in self.listeners:
            plugin.forget()
        self.failures.forget()

    def freed(self, nodes: AbstractSet[str]) -> None:
        """Devices, CPU or memory were freed on `nodes` only."""
        for plugin in self.listeners:
            plugin.freed(nodes)
        self.failures.freed_on(nodes)

    def nodes_changed(self) -> None:
        for plugin in self.listeners:
            plugin.nodes_changed()
