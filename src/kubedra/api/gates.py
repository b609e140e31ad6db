"""The feature gates kubedra's API follows, and what a server with them does to fields
of gates that are off: it drops them before validating and storing (each kind's
`dropDisabled...Fields` upstream), so a manifest that sets one is accepted and loses it.

kubedra models those fields (manifests load verbatim), warns about them, validates the
object as the server would after dropping them, and drops them where it stores objects.
The gates are those `kubedra dev-cluster up --feature-gates` is documented with for the
scheduling.k8s.io/v1beta1 kinds (docs/compatibility.md, "Workloads and pod groups").
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from kubedra.api.meta import KubeObject
from kubedra.api.scheduling import PodGroup, PodGroupTemplate, Workload

T = TypeVar("T", bound=KubeObject)

# Gate -> on in the server kubedra models (Kubernetes 1.37).
GATES: dict[str, bool] = {
    "GenericWorkload": True,  # beta, off by default: Workload, PodGroup, Pod schedulingGroup
    "DRAWorkloadResourceClaims": True,  # beta, off by default: pod groups' resourceClaims
    "TopologyAwareWorkloadScheduling": True,  # alpha: schedulingConstraints
    "CompositePodGroup": False,  # alpha: compositePodGroupTemplates, parentCompositePodGroupName
    "PodGroupPreemptionPolicy": False,  # alpha: preemptionPolicy
}

# The command-line value that turns the gates above on (kube-apiserver, controllers, kubelet).
WORKLOAD_FEATURE_GATES = ",".join(f"{gate}=true" for gate, on in GATES.items() if on)

Path = tuple[str | int, ...]


def disabled_fields(obj: KubeObject) -> list[tuple[Path, str]]:
    """(path, gate) of every field set in `obj` that its gate being off makes the API
    server drop."""
    out: list[tuple[Path, str]] = []
    if isinstance(obj, Workload):
        for i, t in enumerate(obj.spec.pod_group_templates):
            out += _template_fields(("spec", "podGroupTemplates", i), t)
        if obj.spec.composite_pod_group_templates and not GATES["CompositePodGroup"]:
            out.append((("spec", "compositePodGroupTemplates"), "CompositePodGroup"))
    elif isinstance(obj, PodGroup):
        spec = obj.spec
        for field, value, gate in (
            ("parentCompositePodGroupName", spec.parent_composite_pod_group_name,
             "CompositePodGroup"),
            ("schedulingConstraints", spec.scheduling_constraints,
             "TopologyAwareWorkloadScheduling"),
            ("resourceClaims", spec.resource_claims or None, "DRAWorkloadResourceClaims"),
            ("preemptionPolicy", spec.preemption_policy, "PodGroupPreemptionPolicy"),
        ):  # fmt: skip
            if value is not None and not GATES[gate]:
                out.append((("spec", field), gate))
    return out


def _template_fields(path: Path, t: PodGroupTemplate) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for field, value, gate in (
        ("schedulingConstraints", t.scheduling_constraints, "TopologyAwareWorkloadScheduling"),
        ("resourceClaims", t.resource_claims or None, "DRAWorkloadResourceClaims"),
        ("preemptionPolicy", t.preemption_policy, "PodGroupPreemptionPolicy"),
    ):
        if value is not None and not GATES[gate]:
            out.append(((*path, field), gate))
    return out


def without_disabled_fields(obj: T) -> T:
    """`obj` as the API server keeps it: the fields of gates that are off removed."""
    if not disabled_fields(obj):
        return obj
    if isinstance(obj, Workload):
        workload = msgspec.structs.replace(
            obj.spec,
            pod_group_templates=tuple(_template(t) for t in obj.spec.pod_group_templates),
            composite_pod_group_templates=(
                obj.spec.composite_pod_group_templates if GATES["CompositePodGroup"] else ()
            ),
        )
        return msgspec.structs.replace(obj, spec=workload)
    assert isinstance(obj, PodGroup)
    s = obj.spec
    spec = msgspec.structs.replace(
        s,
        parent_composite_pod_group_name=_kept(s.parent_composite_pod_group_name,
                                              "CompositePodGroup"),
        scheduling_constraints=_kept(s.scheduling_constraints, "TopologyAwareWorkloadScheduling"),
        resource_claims=s.resource_claims if GATES["DRAWorkloadResourceClaims"] else (),
        preemption_policy=_kept(s.preemption_policy, "PodGroupPreemptionPolicy"),
    )  # fmt: skip
    return msgspec.structs.replace(obj, spec=spec)


def _template(t: PodGroupTemplate) -> PodGroupTemplate:
    return msgspec.structs.replace(
        t,
        scheduling_constraints=_kept(t.scheduling_constraints, "TopologyAwareWorkloadScheduling"),
        resource_claims=t.resource_claims if GATES["DRAWorkloadResourceClaims"] else (),
        preemption_policy=_kept(t.preemption_policy, "PodGroupPreemptionPolicy"),
    )


_V = TypeVar("_V")


def _kept(value: _V, gate: str) -> _V | None:
    return value if GATES[gate] else None
