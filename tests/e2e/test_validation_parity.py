"""kubedra's validation against the real API server's, case by case (server-side dry-run).

Every case of kubedra's own validation table (tests/api/test_validation.py), and every
valid base manifest, is sent to kube-apiserver with `dryRun=All` and strict field
validation (kubectl's default), so nothing is written. For each: both accept, or both
reject and the server names the field path kubedra names. Known differences are listed
in KNOWN with the reason (mirrored in docs/compatibility.md); a new difference fails,
and so does a listed one that has gone away (so the list stays true).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.validation import validate
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.cluster.rest import Request
from kubedra.errors import KubedraError, NotFound, ValidationError
from tests.api import manifests
from tests.api.test_validation import ACCEPTED, CASES

# case id -> why kubedra and the API server disagree (docs/compatibility.md, "Validation").
KNOWN: dict[str, str] = {
    "list-attribute": "DRAListTypeAttributes is alpha and off in a default 1.37 server, which "
    "drops list values (the attribute is then empty); kubedra implements the feature",
    "capacity-without-value": "kubedra's model requires a capacity's `value` (upstream marks "
    "it required but reads a missing one as 0)",
    "empty-devices-with-counters": "an explicit `devices: []` is refused next to sharedCounters "
    "upstream; kubedra's model cannot tell an empty list from a missing one",
    "taint-rule-status": "the server drops a DeviceTaintRule's status on create; kubedra "
    "validates the status it was given",
    "admin-access-unlabelled-namespace": "needs the namespace's labels: the embedded store "
    "refuses it on create (tests/e2e/test_validation_store.py), stateless validation cannot",
    "count-beyond-int64": "both refuse; the server's JSON decoder names no field path, kubedra "
    "names the field",
}

BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "slice": manifests.slice_doc,
    "shared-device-slice": manifests.shared_device_slice_doc,
    "counters-slice": manifests.counters_slice_doc,
    "claim": manifests.claim_doc,
    "allocated-claim": manifests.allocated_claim_doc,
    "class": manifests.class_doc,
    "template": manifests.template_doc,
    "taint-rule": manifests.taint_rule_doc,
    "pod": manifests.pod_doc,
}


def kubedra_verdict(doc: dict[str, Any]) -> set[str]:
    """The field paths kubedra rejects the document at (empty: accepted). A claim with a
    status is judged in the server's two steps (see `server_verdict`): its status only
    once the rest of it is valid."""
    if "status" in doc and doc.get("kind") == "ResourceClaim":
        without_status = _errors({k: v for k, v in doc.items() if k != "status"})
        if without_status:
            return without_status
    return _errors(doc)


def _errors(doc: dict[str, Any]) -> set[str]:
    try:
        obj = decode_object(doc).obj
    except ValidationError as err:
        return {p.path for p in err.problems if p.is_error}
    return {p.path for p in validate(obj) if p.is_error}


def server_verdict(kube: KubeStore, doc: dict[str, Any]) -> set[str]:
    """The field paths the API server rejects the document at (empty: accepted)."""
    cls = next((c for c in RESOURCES if doc.get("kind") == c.KIND), None)
    assert cls is not None, doc.get("kind")
    res = RESOURCES[cls]
    meta = doc.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default") if res.namespaced else ""
    query = {"dryRun": "All", "fieldValidation": "Strict"}
    about = Request("create", res.full_name, namespace, str(meta.get("name") or ""), cls.KIND)
    path = res.path(namespace or None)
    doc = {**doc, "apiVersion": res.group_version}  # as KubeStore sends it (v1beta2 -> v1)
    body = json.dumps(doc).encode()
    try:
        if "status" in doc and cls.KIND == "ResourceClaim":
            return _status_verdict(kube, doc, res.path(namespace, meta["name"]), about)
        kube.client.request("POST", path, about, query=query, body=body)
    except ValidationError as err:
        return {p.path or "<object>" for p in err.problems}
    except NotFound as err:  # the URL names a namespace that cannot exist
        return {"metadata.namespace" if "namespaces" in str(err) else f"<{err}>"}
    except KubedraError as err:  # 400: undecodable or strict-decoding errors
        return {_path_in(str(err))}
    return set()


def _status_verdict(kube: KubeStore, doc: dict[str, Any], path: str, about: Request) -> set[str]:
    """Status is written through /status: create the claim for real, dry-run the status."""
    spec_only = {k: v for k, v in doc.items() if k != "status"}
    created = json.loads(
        kube.client.request(
            "POST", path.rsplit("/", 1)[0], about, body=json.dumps(spec_only).encode()
        )
    )
    try:
        with_status = {**created, "status": doc["status"]}
        kube.client.request(
            "PUT",
            path + "/status",
            about,
            body=json.dumps(with_status).encode(),
            query={"dryRun": "All", "fieldValidation": "Strict"},
        )
        return set()
    except ValidationError as err:
        return {p.path or "<object>" for p in err.problems}
    finally:
        kube.client.request("DELETE", path, about)


def _path_in(message: str) -> str:
    """The field named by a strict-decoding error: `unknown field "spec.x"`."""
    marker = 'unknown field "'
    if marker in message:
        return message.split(marker, 1)[1].split('"', 1)[0]
    return "<decode>"


# The known differences as cases: (id, base, dotted path, value, where both would reject,
# None where both would accept). Each must still disagree, or it leaves KNOWN.
DIFFERENT: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str | None]] = [
    ("list-attribute", manifests.slice_doc, "spec.devices.0.attributes", {"x": {"ints": [1]}}, None),
    ("capacity-without-value", manifests.slice_doc, "spec.devices.0.capacity", {"memory": {}}, None),
    ("empty-devices-with-counters", manifests.counters_slice_doc, "spec.devices", [], "spec"),
    ("taint-rule-status", manifests.taint_rule_doc, "status",
     {"conditions": [{"type": f"T{i}", "status": "True", "reason": "R",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"} for i in range(9)]}, None),
    ("admin-access-unlabelled-namespace", manifests.claim_doc,
     "spec.devices.requests.0.exactly.adminAccess", True, "spec.devices.requests[0].adminAccess"),
    ("count-beyond-int64", manifests.claim_doc, "spec.devices.requests.0.exactly.count", 2**63,
     "spec.devices.requests[0].exactly.count"),
]  # fmt: skip


def cases() -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(id, document, the path kubedra's table expects, None where both should accept)."""
    for name, base in BASES.items():
        yield f"valid-{name}", base(), None
    for case_id, base, path, value, where, _message in CASES:
        yield case_id, manifests.mutate(base(), path, value), where
    for case_id, base, path, value, _where, _warning in ACCEPTED:
        yield case_id, manifests.mutate(base(), path, value), None
    for case_id, base, path, value, where in DIFFERENT:
        yield case_id, manifests.mutate(base(), path, value), where


def agrees(kubedra: set[str], server: set[str], expected: str | None) -> bool:
    """Both accept, or both reject at the same field paths (the expected one among them)."""
    if expected is None:
        return not kubedra and not server
    return expected in server and kubedra == server


@pytest.fixture(scope="module")
def verdicts(cluster: Any) -> dict[str, tuple[set[str], set[str], str | None]]:
    kube = cluster.store()
    return {
        cid: (kubedra_verdict(doc), server_verdict(kube, doc), where) for cid, doc, where in cases()
    }


Verdicts = dict[str, tuple[set[str], set[str], str | None]]


def disagreements(
    verdicts: Verdicts, agree: Callable[[set[str], set[str], str | None], bool],
    known: Iterable[str],
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The cases where kubedra and the server disagree (case -> both verdicts), those of
    them not listed as `known`, and the known ones that agree now."""
    differ = {
        cid: f"kubedra {sorted(k)} / server {sorted(s)}"
        for cid, (k, s, where) in verdicts.items()
        if not agree(k, s, where)
    }
    unexplained = {cid: why for cid, why in differ.items() if cid not in known}
    return differ, unexplained, sorted(set(known) - set(differ))


def test_validation_agrees_with_the_api_server(verdicts: Verdicts) -> None:
    differ, unexplained, gone = disagreements(verdicts, agrees, KNOWN)
    total = len(verdicts)
    print(
        f"\nvalidation parity: {total - len(differ)}/{total} agree; "
        f"{len(differ)} known differences"
    )
    assert not unexplained, json.dumps(unexplained, indent=1)
    assert not gone, f"listed in KNOWN but now agree: {gone}"
