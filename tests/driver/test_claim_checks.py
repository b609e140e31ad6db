"""Prepare checks that the claim's allocation is for this node (its node selector) before it
touches a device. (An unreadable claim: tests/driver/test_api_outage.py, and RBAC on a real
API server in tests/e2e/test_driver_deploy.py.)"""

from __future__ import annotations

import msgspec
import pytest

from kubedra.api.core import Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubedra.api.resource import ResourceClaim
from kubedra.driver.kubelet import KubeletClient

from .conftest import NODE, make_claim


def _for(store, name: str, selector: NodeSelector | None) -> ResourceClaim:
    claim = make_claim(store, name, [("gpu", NODE, "gpu-0")])
    assert claim.status is not None and claim.status.allocation is not None
    allocation = msgspec.structs.replace(claim.status.allocation, node_selector=selector)
    status = msgspec.structs.replace(claim.status, allocation=allocation)
    return store.update_status(msgspec.structs.replace(claim, status=status))


def _names(*nodes: str) -> NodeSelector:
    field = NodeSelectorRequirement(key="metadata.name", operator="In", values=nodes)
    return NodeSelector(node_selector_terms=(NodeSelectorTerm(match_fields=(field,)),))


def _labelled(key: str, value: str) -> NodeSelector:
    label = NodeSelectorRequirement(key=key, operator="In", values=(value,))
    return NodeSelector(node_selector_terms=(NodeSelectorTerm(match_expressions=(label,)),))


def _prepare(agent, claim: ResourceClaim) -> tuple[list[str], str]:
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        answer = kubelet.prepare([("default", claim.metadata.uid, claim.name)])
    entry = answer.claims[claim.metadata.uid]
    return [d.device_name for d in entry.devices], entry.error


@pytest.mark.parametrize(
    ("selector", "admitted"),
    [
        (None, True),  # a claim written by hand or an older allocator: the pool decides
        (_names(NODE), True),  # what the allocator writes for node-local devices
        (_names("node-2"), False),
        (_labelled("rack", "r1"), True),
        (_labelled("rack", "r2"), False),
    ],
)
def test_the_allocation_must_select_this_node(store, agent, selector, admitted):
    node = store.get(Node, NODE)
    labels = {**node.metadata.labels, "rack": "r1"}
    store.update(msgspec.structs.replace(node, metadata=msgspec.structs.replace(
        node.metadata, labels=labels)))  # fmt: skip
    devices, error = _prepare(agent, _for(store, "placed", selector))
    if admitted:
        assert (devices, error) == (["gpu-0"], "")
    else:
        assert devices == []
        assert error == (
            "ResourceClaim default/placed is allocated for other nodes: "
            f"status.allocation.nodeSelector does not select node {NODE}"
        )
        assert not (agent.cdi / f"k8s.gpu.nvidia.com-claim_{_uid(store)}.json").exists()


def test_a_node_field_requirement_names_one_node(store, agent):
    """Upstream's node selector rules: `metadata.name In` takes exactly one value, so an
    allocation naming two nodes in one requirement is invalid, not "this node too"."""
    devices, error = _prepare(agent, _for(store, "placed", _names("node-2", NODE)))
    assert devices == [] and "exactly one value" in error, error


def _uid(store) -> str:
    return store.get(ResourceClaim, "placed").metadata.uid or ""
