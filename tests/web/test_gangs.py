"""The dashboard's pending view shows a gang's pending pods as one card per PodGroup, with
`kubedra explain podgroup`'s one-line verdict (the same function), its pods and minCount."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.scheduling import PodGroup
from kubedra.cluster import SqliteStore
from kubedra.errors import NotFound
from kubedra.web.mirror import Mirror
from kubedra.web.server import Server
from tests.scheduler.cluster import gpu_pod, gpu_template, new_store
from tests.scheduler.test_gang import member, pod_group, rack_node
from tests.web.test_server import get_json, request

VERDICT = (
    "unschedulable: needs 18 device(s) of class gpu in one example.com/rack; "
    "the largest rack has 16 free (rack-a)"
)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    """Two racks (16 and 8 GPUs), a gang of 3 x 6 GPUs for one rack, a gang short of pods,
    a pod of a PodGroup that does not exist, and a pod on its own."""
    store = new_store(tmp_path)
    rack_node(store, "a1", "rack-a")
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b")
    gpu_template(store, "six", 6)
    pod_group(store, "big", 3, key="example.com/rack")
    for i in range(3):
        member(store, f"w{i}", "big", "six")
    pod_group(store, "few", 2)
    member(store, "f0", "few", "six")
    member(store, "o0", "ghost", "six")
    gpu_pod(store, "solo", template="six")
    return store


def pending(server: Server) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        view: dict[str, Any] = get_json(server, "/api/pending")
        if view["total"] == 6 or time.monotonic() > deadline:
            return view


def test_gang_pods_are_one_card_per_podgroup_with_the_verdict(server: Server) -> None:
    view = pending(server)
    assert view["total"] == view["explained"] == 6
    gangs = {g["name"]: g for g in view["gangs"]}
    assert sorted(gangs) == ["big", "few", "ghost"]
    assert gangs["big"]["verdict"] == VERDICT
    assert gangs["big"]["pending"] == ["w0", "w1", "w2"] and gangs["big"]["minCount"] == 3
    assert gangs["few"]["verdict"] == "waiting for pods: has 1 of minCount 2 pod(s)"
    assert gangs["ghost"]["state"] == "waiting for its PodGroup"
    assert [p["name"] for p in view["pods"]] == ["solo"]  # the others are on their gang's card

    status, _, body = request(server, "/pending")
    assert status == 200
    page = html.unescape(body.decode())
    assert 'data-podgroup="default/big"' in page
    assert "PodGroup default/big" in page and VERDICT in page
    assert "3 pod(s), minCount 3, in one example.com/rack" in page
    assert "/pending?pod=default%2Fw0" in body.decode()  # each pod links its own explanation
    assert 'data-pod="default/solo"' in page and 'data-pod="default/w0"' not in page


class NoPodGroups(SqliteStore):
    """A cluster that does not serve scheduling.k8s.io/v1beta1."""

    def list(self, cls: Any, *args: Any, **kwargs: Any) -> Any:
        if cls is PodGroup:
            raise NotFound("the server could not find the requested resource (podgroups)")
        return super().list(cls, *args, **kwargs)


def test_the_mirror_goes_on_without_podgroups_where_they_are_not_served(
    tmp_path: Path,
) -> None:
    store = NoPodGroups(tmp_path / "state.db")
    mirror = Mirror(store, idle=0.2).start()
    try:
        assert mirror.error is None
        assert PodGroup.KIND in mirror.snapshot().objects  # empty: the gangs wait for it
    finally:
        mirror.stop()
