"""The embedded store's create against the real API server's, request for request: the
namespaces a cluster starts with, a namespace that does not exist, admin access outside a
labelled namespace, a pasted resourceVersion and a pasted uid. The server side is sent as kubectl sends it (the manifest as written)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Namespace
from kubedra.cluster import SqliteStore
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.cluster.rest import Request
from kubedra.cluster.sqlite import SYSTEM_NAMESPACES
from kubedra.errors import KubedraError, ValidationError
from tests.api.manifests import claim_doc

PASTED_UID = "11111111-1111-1111-1111-111111111111"


def _claim(name: str, **meta: Any) -> dict[str, Any]:
    doc = claim_doc()
    doc["metadata"].update(name=name, **meta)
    return doc


def _admin_claim(name: str) -> dict[str, Any]:
    doc = _claim(name)
    doc["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return doc


def on_server(kube: KubeStore, doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(outcome, stored metadata): outcome is `created` or the server's message."""
    res = RESOURCES[type(decode_object(doc).obj)]
    ns = doc["metadata"].get("namespace", "default")
    about = Request("create", res.full_name, ns, doc["metadata"]["name"], doc["kind"])
    try:
        body = kube.client.request("POST", res.path(ns), about, body=json.dumps(doc).encode())
    except ValidationError as err:
        return f"invalid at {sorted(p.path for p in err.problems)}", {}
    except KubedraError as err:
        return _message(str(err)), {}
    return "created", json.loads(body)["metadata"]


def in_store(store: SqliteStore, doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    try:
        created = store.create(decode_object(doc).obj)
    except ValidationError as err:
        return f"invalid at {sorted(p.path for p in err.problems)}", {}
    except KubedraError as err:
        return _message(str(err)), {}
    return "created", {"uid": created.metadata.uid}


def _message(text: str) -> str:
    """The server's own words, without kubedra's `server: verb resource:` prefix or the
    object kubedra names first."""
    for known in ("resourceVersion should not be set on objects to be created", "not found"):
        if known in text:
            return text[text.index('namespaces "') :] if known == "not found" else known
    return text


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def test_both_start_with_the_same_namespaces(kube: KubeStore, store: SqliteStore) -> None:
    on_cluster = {n.name for n in kube.list(Namespace)}
    assert set(SYSTEM_NAMESPACES) <= on_cluster
    assert {n.name for n in store.list(Namespace)} == set(SYSTEM_NAMESPACES)


@pytest.mark.parametrize(
    ("case", "doc"),
    [
        ("missing-namespace", _claim("store-ns", namespace="no-such-team")),
        ("pasted-resource-version", _claim("store-rv", resourceVersion="42")),
        ("system-namespace", _claim("store-sys", namespace="kube-public")),
        ("admin-access-unlabelled-namespace", _admin_claim("store-admin")),
    ],
)
def test_create_has_the_same_outcome(
    kube: KubeStore, store: SqliteStore, case: str, doc: dict[str, Any]
) -> None:
    server, _ = on_server(kube, doc)
    embedded, _ = in_store(store, doc)
    assert embedded == server, case


def test_a_pasted_uid_is_replaced_by_both(kube: KubeStore, store: SqliteStore) -> None:
    doc = _claim("store-uid", uid=PASTED_UID)
    server, stored = on_server(kube, doc)
    embedded, kept = in_store(store, doc)
    assert (server, embedded) == ("created", "created")
    assert stored["uid"] != PASTED_UID and kept["uid"] != PASTED_UID
