"""API-server validation of the core/v1 subset: Pod, Node, Namespace (the scheduler's view),
and node selectors, which resource.k8s.io reuses."""

from __future__ import annotations

from kubedra.api.core import Container, Node, NodeSelector, NodeSelectorRequirement, Pod, Toleration
from kubedra.api.validation import names
from kubedra.api.validation.report import Path, Report

NODE_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
POD_TOLERATION_OPERATORS = ("Equal", "Exists")
NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def validate_pod(r: Report, pod: Pod) -> None:
    spec = pod.spec
    claims = ("spec", "resourceClaims")
    seen: set[str] = set()
    for i, claim in enumerate(spec.resource_claims):
        _pod_claim(r, (*claims, i), claim.name, seen)
        sources = [claim.resource_claim_name, claim.resource_claim_template_name]
        if None not in sources:
            r.invalid(
                (*claims, i),
                claim.name,
                "at most one of `resourceClaimName` or "
                "`resourceClaimTemplateName` may be specified",
            )
        elif sources == [None, None]:
            r.invalid(
                (*claims, i),
                claim.name,
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )
        for field, value in zip(
            ("resourceClaimName", "resourceClaimTemplateName"), sources, strict=True
        ):
            if value is not None:
                r.valid((*claims, i, field), value, names.dns_subdomain)
    if not spec.containers:
        r.required(("spec", "containers"))
    pod_claims = {c.name for c in spec.resource_claims if c.name}
    for group, containers in (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ):
        r.unique(("spec", group), (c.name for c in containers), "name")
        for i, c in enumerate(containers):
            r.name(("spec", group, i, "name"), c.name, names.dns_label)
            _container_claims(r, ("spec", group, i, "resources", "claims"), c, pod_claims)
    for key, value in spec.node_selector.items():
        r.valid(("spec", "nodeSelector"), key, names.label_key)
        r.valid(("spec", "nodeSelector"), value, names.label_value)
    for i, t in enumerate(spec.tolerations):
        _pod_toleration(r, ("spec", "tolerations", i), t)
    if spec.node_name:
        r.name(("spec", "nodeName"), spec.node_name, names.dns_subdomain)
    if spec.scheduling_group is not None:
        # A one-member union today: the group must be named (a PodGroup's name).
        where = ("spec", "schedulingGroup", "podGroupName")
        pod_group = spec.scheduling_group.pod_group_name
        if pod_group is None:
            r.invalid(where, None, "must specify one of: `podGroupName`")
        else:
            r.valid(where, pod_group, names.dns_subdomain)


def _pod_claim(r: Report, path: Path, name: str, seen: set[str]) -> None:
    if not name:
        r.required((*path, "name"))
    elif name in seen:
        r.duplicate((*path, "name"), name)
    else:
        r.valid((*path, "name"), name, names.dns_label)
        seen.add(name)


def _container_claims(r: Report, path: Path, c: Container, pod_claims: set[str]) -> None:
    """Each reference names a pod claim, once: a whole claim, or requests of it, not both."""
    refs = c.resources.claims if c.resources else ()
    seen: set[str] = set()  # `claim` for a whole claim, `claim/request` for one request
    for j, ref in enumerate(refs):
        if not ref.name:
            r.required((*path, j))
        elif ref.name in seen:
            r.duplicate((*path, j), ref.name)
        else:
            key = ref.name
            if ref.request:
                r.valid((*path, j, "request"), ref.request, names.dns_label)
                key = f"{ref.name}/{ref.request}"
            if key in seen:
                r.duplicate((*path, j), key)
            elif not ref.request and any(s.startswith(f"{ref.name}/") for s in seen):
                r.duplicate((*path, j), ref.name)  # the whole claim, after one of its requests
            seen.add(key)
        if ref.name and ref.name not in pod_claims:
            detail = "must be one of the names in pod.spec.resourceClaims"
            if not pod_claims:
                detail += " which is empty"
            r.add((*path, j), f"Not found: {ref.name!r}: {detail}")


def _pod_toleration(r: Report, path: Path, t: Toleration) -> None:
    """core/v1's toleration rules (stricter than a device toleration's)."""
    operator = t.operator or ""
    if t.key:
        r.valid((*path, "key"), t.key, names.label_key)
    elif operator != "Exists":
        r.invalid(
            (*path, "operator"),
            operator,
            "operator must be Exists when `key` is empty, "
            'which means "match all values and all keys"',
        )
    if t.toleration_seconds is not None and t.effect != "NoExecute":
        r.invalid(
            (*path, "effect"),
            t.effect or "",
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        )
    if operator in ("Equal", ""):
        r.valid((*path, "operator"), t.value or "", names.label_value)
    elif operator == "Exists":
        if t.value:
            r.invalid(
                (*path, "operator"), t.value, "value must be empty when `operator` is 'Exists'"
            )
    else:
        r.unsupported((*path, "operator"), operator, POD_TOLERATION_OPERATORS)
    if t.effect and t.effect not in NODE_TAINT_EFFECTS:
        r.unsupported((*path, "effect"), t.effect, NODE_TAINT_EFFECTS)


def node_selector(r: Report, path: Path, sel: NodeSelector) -> None:
    """core/v1's NodeSelector: at least one term; label requirements on label keys and
    values, field requirements on `metadata.name` only."""
    terms = (*path, "nodeSelectorTerms")
    if not sel.node_selector_terms:
        r.required(terms, "must have at least one node selector term")
        return
    for i, term in enumerate(sel.node_selector_terms):
        for j, req in enumerate(term.match_expressions):
            _label_requirement(r, (*terms, i, "matchExpressions", j), req)
        for j, req in enumerate(term.match_fields):
            _field_requirement(r, (*terms, i, "matchFields", j), req)


def _label_requirement(r: Report, path: Path, req: NodeSelectorRequirement) -> None:
    n = len(req.values)
    if req.operator in ("In", "NotIn"):
        if not n:
            r.required((*path, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
    elif req.operator in ("Exists", "DoesNotExist"):
        if n:
            r.forbidden(
                (*path, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
    elif req.operator in ("Gt", "Lt"):
        if n != 1:
            r.required(
                (*path, "values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
    else:
        r.invalid((*path, "operator"), req.operator, "not a valid selector operator")
    r.valid((*path, "key"), req.key, names.label_key)
    for k, value in enumerate(req.values):
        r.valid((*path, "values", k), value, names.label_value)


def _field_requirement(r: Report, path: Path, req: NodeSelectorRequirement) -> None:
    if req.operator in ("In", "NotIn"):
        if len(req.values) != 1:
            r.required(
                (*path, "values"),
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
    else:
        r.invalid((*path, "operator"), req.operator, "not a valid selector operator")
    if req.key != "metadata.name":
        r.invalid((*path, "key"), req.key, "not a valid field selector key")
        return
    for k, value in enumerate(req.values):
        r.valid((*path, "values", k), value, names.dns_subdomain)


def validate_node(r: Report, node: Node) -> None:
    for i, taint in enumerate(node.spec.taints if node.spec else ()):
        path = ("spec", "taints", i)
        r.name((*path, "key"), taint.key, names.label_key)
        if taint.effect not in NODE_TAINT_EFFECTS:
            r.unsupported((*path, "effect"), taint.effect, NODE_TAINT_EFFECTS)
