"""Node selector matching (standard node-affinity rules) for slices and devices."""

from __future__ import annotations

from kubedra.allocator.types import NodeInfo
from kubedra.api.core import NodeSelector
from kubedra.api.selection import NodeSelectorError, node_selector_matches, selector_problems

__all__ = ["NodeSelectorError", "node_matches", "selector_matches"]


def selector_matches(selector: NodeSelector, node: NodeInfo) -> bool:
    """True if any term matches; raises NodeSelectorError if any requirement of any term
    is malformed (upstream NodeMatches parses the whole selector first)."""
    problems = selector_problems(selector)
    if problems:
        raise NodeSelectorError("failed to parse node selector: " + "; ".join(problems))
    return node_selector_matches(selector, node.name, node.labels)


def node_matches(
    node: NodeInfo, node_name: str | None, all_nodes: bool | None, selector: NodeSelector | None
) -> bool:
    """Upstream NodeMatches: nodeName equality, allNodes, or the selector."""
    if node_name:
        return node_name == node.name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node)
    return False
