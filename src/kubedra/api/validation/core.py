"""API-server validation of the core/v1 subset: Pod, Node, Namespace (the scheduler's view)."""

from __future__ import annotations

from kubedra.api.core import Node, Pod, Toleration
from kubedra.api.validation import names
from kubedra.api.validation.report import Path, Report

NODE_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
POD_TOLERATION_OPERATORS = ("Equal", "Exists")


def validate_pod(r: Report, pod: Pod) -> None:
    spec = pod.spec
    claims = ("spec", "resourceClaims")
    r.unique(claims, (c.name for c in spec.resource_claims), "name")
    for i, claim in enumerate(spec.resource_claims):
        r.name((*claims, i, "name"), claim.name, names.dns_label)
        sources = [s for s in (claim.resource_claim_name, claim.resource_claim_template_name) if s]
        if len(sources) != 1:
            r.invalid(
                (*claims, i),
                claim.name,
                "must specify exactly one of `resourceClaimName` or `resourceClaimTemplateName`",
            )
        for field, value in (
            ("resourceClaimName", claim.resource_claim_name),
            ("resourceClaimTemplateName", claim.resource_claim_template_name),
        ):
            if value:
                r.name((*claims, i, field), value, names.dns_subdomain)
    pod_claims = {c.name for c in spec.resource_claims}
    if not spec.containers:
        r.required(("spec", "containers"))
    for group, containers in (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ):
        r.unique(("spec", group), (c.name for c in containers), "name")
        for i, c in enumerate(containers):
            r.name(("spec", group, i, "name"), c.name, names.dns_label)
            refs = c.resources.claims if c.resources else ()
            r.unique(
                ("spec", group, i, "resources", "claims"), (f"{x.name}/{x.request}" for x in refs)
            )
            for j, ref in enumerate(refs):
                if ref.name not in pod_claims:
                    r.invalid(
                        ("spec", group, i, "resources", "claims", j, "name"),
                        ref.name,
                        "must be the name of an entry in pod.spec.resourceClaims",
                    )
    for key, value in spec.node_selector.items():
        r.name(("spec", "nodeSelector", key), key, names.label_key)
        if names.label_value(value):
            r.invalid(("spec", "nodeSelector", key), value, names.label_value(value) or "")
    for i, t in enumerate(spec.tolerations):
        _pod_toleration(r, ("spec", "tolerations", i), t)
    if spec.node_name:
        r.name(("spec", "nodeName"), spec.node_name, names.dns_subdomain)


def _pod_toleration(r: Report, path: Path, t: Toleration) -> None:
    operator = t.operator or "Equal"
    if operator not in POD_TOLERATION_OPERATORS:
        r.unsupported((*path, "operator"), operator, POD_TOLERATION_OPERATORS)
    if t.key:
        r.name((*path, "key"), t.key, names.label_key)
    elif operator != "Exists":
        r.invalid((*path, "operator"), operator, "operator must be Exists when `key` is empty")
    if operator == "Exists" and t.value:
        r.invalid((*path, "value"), t.value, "value must be empty when `operator` is 'Exists'")
    if t.effect and t.effect not in NODE_TAINT_EFFECTS:
        r.unsupported((*path, "effect"), t.effect, NODE_TAINT_EFFECTS)


def validate_node(r: Report, node: Node) -> None:
    for i, taint in enumerate(node.spec.taints if node.spec else ()):
        path = ("spec", "taints", i)
        r.name((*path, "key"), taint.key, names.label_key)
        if taint.effect not in NODE_TAINT_EFFECTS:
            r.unsupported((*path, "effect"), taint.effect, NODE_TAINT_EFFECTS)
