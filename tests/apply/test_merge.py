"""The three-way merge on its own: plain dicts in, plain dict out (kubectl apply's rules)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubedra.api.merge import MergeList, three_way_merge
from kubedra.api.merge_keys import merge_lists

POD = merge_lists("Pod")


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def container(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def test_fields_set_by_others_are_kept() -> None:
    applied = pod(containers=[container("c", image="a")])
    live = copy.deepcopy(applied)
    live["spec"]["nodeName"] = "node-1"
    live["metadata"].update(labels={"ctl": "x"}, finalizers=["example.com/f"], uid="u-1")
    assert three_way_merge(applied, applied, live, POD) == live


def test_a_field_dropped_since_the_last_apply_is_removed() -> None:
    last = pod(containers=[container("c")], priorityClassName="high")
    last["metadata"]["labels"] = {"team": "a", "tier": "gold"}
    now = pod(containers=[container("c")])
    now["metadata"]["labels"] = {"team": "a"}
    live = copy.deepcopy(last)
    live["metadata"]["labels"]["ctl"] = "x"  # someone else's label stays
    merged = three_way_merge(last, now, live, POD)
    assert "priorityClassName" not in merged["spec"]
    assert merged["metadata"]["labels"] == {"team": "a", "ctl": "x"}


def test_without_last_applied_nothing_is_removed() -> None:
    """Objects created without the annotation (create, kubectl create): a two-way merge."""
    live = pod(containers=[container("c")], priorityClassName="high")
    now = pod(containers=[container("c", image="b")])
    merged = three_way_merge(None, now, live, POD)
    assert merged["spec"] == {"containers": [container("c", image="b")], "priorityClassName": "high"}


def test_changed_values_win_and_maps_merge_by_key() -> None:
    last = pod(nodeSelector={"zone": "a", "gpu": "h100"})
    now = pod(nodeSelector={"zone": "b"})
    live = pod(nodeSelector={"zone": "a", "gpu": "h100", "added": "by-webhook"})
    assert three_way_merge(last, now, live, POD)["spec"]["nodeSelector"] == {
        "zone": "b",
        "added": "by-webhook",
    }


def test_merge_key_lists_merge_item_by_item() -> None:
    last = pod(containers=[container("app", image="v1", env=[{"name": "A", "value": "1"},
                                                                {"name": "B", "value": "2"}])])
    now = pod(containers=[container("app", image="v2", env=[{"name": "A", "value": "9"}])])
    live = copy.deepcopy(last)
    live["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"  # default
    live["spec"]["containers"][0]["env"].append({"name": "INJECTED", "value": "x"})
    live["spec"]["containers"].append(container("sidecar", image="proxy"))  # injected
    (app, sidecar) = three_way_merge(last, now, live, POD)["spec"]["containers"]
    assert app == {
        "name": "app",
        "image": "v2",
        "terminationMessagePath": "/dev/termination-log",
        "env": [{"name": "A", "value": "9"}, {"name": "INJECTED", "value": "x"}],
    }
    assert sidecar == container("sidecar", image="proxy")


def test_an_item_dropped_from_the_manifest_is_removed_others_items_stay() -> None:
    last = pod(containers=[container("a"), container("b")])
    now = pod(containers=[container("a")])
    live = pod(containers=[container("a"), container("b"), container("injected")])
    names = [c["name"] for c in three_way_merge(last, now, live, POD)["spec"]["containers"]]
    assert names == ["a", "injected"]


def test_finalizers_merge_as_a_set() -> None:
    last = pod()
    last["metadata"]["finalizers"] = ["mine/a", "mine/b"]
    now = pod()
    now["metadata"]["finalizers"] = ["mine/a", "mine/c"]
    live = copy.deepcopy(last)
    live["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection", "mine/a", "mine/b"]
    merged = three_way_merge(last, now, live, POD)
    assert merged["metadata"]["finalizers"] == [
        "resource.kubernetes.io/delete-protection",
        "mine/a",
        "mine/c",
    ]


def test_atomic_lists_are_replaced_whole() -> None:
    """Tolerations (no patch strategy upstream) and every resource.k8s.io list."""
    last = pod(tolerations=[{"key": "a", "operator": "Exists"}])
    now = pod(tolerations=[{"key": "b", "operator": "Exists"}])
    live = pod(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "c", "operator": "Exists"}])
    assert three_way_merge(last, now, live, POD)["spec"]["tolerations"] == [
        {"key": "b", "operator": "Exists"}
    ]
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]
    claim_now = {"spec": {"devices": {"requests": requests}}}
    claim_live = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "count": 1, "allocationMode": "ExactCount"}}]}}}
    merged = three_way_merge(claim_now, claim_now, claim_live, merge_lists("ResourceClaim"))
    assert merged["spec"]["devices"]["requests"] == requests


def test_retain_keys_switches_a_union_member() -> None:
    """A pod claim moved from a template to a named claim drops the template name, even
    without a last-applied configuration to say it was there."""
    live = pod(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    now = pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}])
    assert three_way_merge(None, now, live, POD)["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimName": "c"}
    ]


def test_manifest_order_wins_others_items_keep_their_place() -> None:
    live = pod(containers=[container("x"), container("a"), container("b")])
    now = pod(containers=[container("b"), container("a")])
    names = [c["name"] for c in three_way_merge(now, now, live, POD)["spec"]["containers"]]
    assert names == ["x", "b", "a"]


@pytest.mark.parametrize("strategy", [MergeList("name"), MergeList()])
def test_inputs_are_not_changed(strategy: MergeList) -> None:
    lists = {("items",): strategy}
    last = {"items": [{"name": "a"}] if strategy.key else ["a"], "m": {"k": 1}}
    now = {"items": [{"name": "b", "v": [1]}] if strategy.key else ["b"], "m": {"k": 2}}
    live = {"items": [{"name": "a"}, {"name": "c"}] if strategy.key else ["a", "c"], "m": {"k": 1}}
    frozen = copy.deepcopy((last, now, live))
    merged = three_way_merge(last, now, live, lists)
    assert (last, now, live) == frozen
    merged["m"]["k"] = 3
    for item in merged["items"]:
        if isinstance(item, dict):
            item.setdefault("v", []).append(2)
    assert (last, now, live) == frozen


def test_type_changes_replace() -> None:
    live = {"spec": {"x": [1, 2]}}
    now = {"spec": {"x": {"a": 1}}}
    assert three_way_merge(None, now, live, {})["spec"]["x"] == {"a": 1}
