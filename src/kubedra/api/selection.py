"""Node selection semantics of core/v1: node selector terms, taints and tolerations.

Used by the scheduler (pod placement) and the allocator (ResourceSlice and device node
selectors), so both read the same rules: terms are ORed, the requirements of a term are
ANDed, and `matchFields` supports `metadata.name`, as upstream's node affinity does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubedra.api.core import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)


class NodeSelectorError(ValueError):
    """A requirement that cannot be evaluated (unknown operator, bad value count or integer).

    Validation rejects these when objects are written; the allocator still meets them in
    per-device selectors (not validated upstream) and reports them as upstream does.
    """


def node_selector_matches(
    selector: NodeSelector, node_name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a node matches any term of the selector (no terms: no node)."""
    return any(term_matches(t, node_name, labels) for t in selector.node_selector_terms)


def term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    """All requirements of a term hold; an empty term matches nothing (upstream rule)."""
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node_name}
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        field_matches(r, fields) for r in term.match_fields
    )


def field_matches(req: NodeSelectorRequirement, fields: Mapping[str, str]) -> bool:
    """A `matchFields` requirement: In/NotIn with one value; a field the node lacks reads as
    the empty string (upstream's field selectors)."""
    if req.operator not in ("In", "NotIn") or len(req.values) != 1:
        raise NodeSelectorError(
            f"{req.key}: field selectors support In and NotIn with exactly one value"
        )
    equal = fields.get(req.key, "") == req.values[0]
    return equal if req.operator == "In" else not equal


def selector_problems(selector: NodeSelector) -> list[str]:
    """Every malformed requirement of every non-empty term, as upstream's
    `nodeaffinity.NewNodeSelector` finds them before matching anything (DRA's node
    selection is strict: one bad term fails the selector even if another would match)."""
    problems = []
    for i, term in enumerate(selector.node_selector_terms):
        for kind, reqs, check in (
            ("matchExpressions", term.match_expressions, requirement_matches),
            ("matchFields", term.match_fields, field_matches),
        ):
            for j, req in enumerate(reqs):
                try:
                    check(req, {})
                except NodeSelectorError as exc:
                    problems.append(f"nodeSelectorTerms[{i}].{kind}[{j}]: {exc}")
    return problems


def requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    """One requirement against labels (or fields); raises NodeSelectorError when malformed."""
    op, value = req.operator, values.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op in ("Exists", "DoesNotExist"):
        if req.values:
            raise NodeSelectorError(f"values must be empty for operator {op}")
        return (value is not None) == (op == "Exists")
    if op in ("Gt", "Lt"):
        if len(req.values) != 1:
            raise NodeSelectorError(f"for '{op}' operator, exactly one value is required")
        try:
            bound = int(req.values[0])
        except ValueError:
            raise NodeSelectorError(f"for '{op}' operator, the value must be an integer") from None
        try:
            have = int(value) if value is not None else None
        except ValueError:
            return False
        return have is not None and (have > bound if op == "Gt" else have < bound)
    raise NodeSelectorError(f'"{op}" is not a valid label selector operator')


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint (empty key with Exists: every taint)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if (toleration.operator or "Equal") == "Exists":
        return True
    return (toleration.value or "") == (taint.value or "")


def untolerated(
    taints: Sequence[Taint],
    tolerations: Sequence[Toleration],
    effects: frozenset[str] = frozenset({"NoSchedule", "NoExecute"}),
) -> Taint | None:
    """The first taint with a blocking effect that no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
