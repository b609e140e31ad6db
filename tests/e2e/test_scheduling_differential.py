"""scheduling.k8s.io/v1beta1 validation against the real API server: every case of
tests/api/test_scheduling_validation.py (invalid, accepted, status, update) and the valid
bases, sent to kube-apiserver 1.37 with kubedra's feature gates (`WORKLOAD_FEATURE_GATES`:
GenericWorkload, DRAWorkloadResourceClaims, TopologyAwareWorkloadScheduling; the API version
enabled) with `dryRun=All` and strict field validation. For each: both accept, or both
reject at the same set of field paths. Creates are dry runs; a status or update case
creates its base for real, dry-runs the write, and deletes the base.

Known differences are listed in KNOWN with the reason (mirrored in docs/compatibility.md);
a new difference fails, and so does a listed one that has gone away. Then the example
`examples/gang-training` goes through kubedra's own apply, get, describe and delete on the
same cluster.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.api.validation import validate
from kubedra.api.validation.update import validate_update
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.cluster.rest import Request
from kubedra.devcluster.binaries import Binaries
from kubedra.devcluster.harness import DevCluster
from kubedra.errors import KubedraError, NotFound, ValidationError
from tests.api.manifests import DELETE, grouped_pod_doc, mutate, pod_group_doc, workload_doc
from tests.api.test_scheduling_validation import ACCEPTED, CASES, STATUS_CASES, UPDATES
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra
from tests.e2e.test_validation_parity import Verdicts, disagreements

STRICT = {"dryRun": "All", "fieldValidation": "Strict"}

# case id -> why kubedra and the API server disagree (docs/compatibility.md).
KNOWN: dict[str, str] = {
    "pg-priority-set": "the Priority admission plugin refuses a pod group priority that is not "
    "its class's (403, no field path); stateless validation only warns, the embedded store "
    "refuses it on create (tests/cluster/test_scheduling_store.py)",
    "pg-priority-class-missing": "admission refuses a priorityClassName naming no PriorityClass "
    "(403); kubedra has no PriorityClass kind and accepts the name",
    "pg-priority-class-system": "admission gives a system class's priority (2000001000), which "
    "validation then refuses at spec.priority; stateless kubedra sees no priority (the embedded "
    "store refuses it on create)",
    "pg-min-count-beyond-int32": "both refuse; the server's JSON decoder names no field path, "
    "kubedra names the field",
}

# The known differences as cases (id, base, dotted path, value).
DIFFERENT: list[tuple[str, Callable[[], dict[str, Any]], str, Any]] = [
    ("pg-priority-set", pod_group_doc, "spec.priority", 5),
    ("pg-priority-class-missing", pod_group_doc, "spec.priorityClassName", "high"),
    ("pg-priority-class-system", pod_group_doc, "spec.priorityClassName", "system-node-critical"),
    ("pg-min-count-beyond-int32", pod_group_doc, "spec.schedulingPolicy.gang.minCount", 2**31),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, control_plane: Binaries) -> Iterator[DevCluster]:
    """A control plane that serves scheduling.k8s.io/v1beta1 with kubedra's gates."""
    folder = tmp_path_factory.mktemp("workload-cluster")
    with DevCluster(folder, feature_gates=WORKLOAD_FEATURE_GATES) as running:
        yield running


# --- verdicts -----------------------------------------------------------------------------


def kubedra_errors(doc: dict[str, Any], old: dict[str, Any] | None = None) -> set[str]:
    """The field paths kubedra rejects a document at (empty: accepted); with `old`, as an
    update of it."""
    try:
        new = decode_object(doc).obj
    except ValidationError as err:
        return {p.path for p in err.problems if p.is_error}
    problems = validate(new)
    if old is not None:
        problems += validate_update(decode_object(old).obj, new)
    return {p.path for p in problems if p.is_error}


def _refusal(err: Exception) -> set[str]:
    if isinstance(err, ValidationError):
        return {p.path or "<object>" for p in err.problems}
    text = str(err)
    if "forbidden" in text.lower():
        return {"<admission>"}
    marker = 'unknown field "'
    if marker in text:
        return {t.split('"', 1)[0] for t in text.split(marker)[1:]}
    return {"<decode>"}


class Server:
    """Dry-run writes to the cluster, each answered by the paths the server refuses."""

    def __init__(self, kube: KubeStore) -> None:
        self.kube = kube

    def _where(self, doc: dict[str, Any]) -> tuple[str, Request]:
        cls = next(c for c in RESOURCES if doc["kind"] == c.KIND)
        res = RESOURCES[cls]
        name = str((doc.get("metadata") or {}).get("name") or "")
        return res.path("default"), Request("create", res.full_name, "default", name, cls.KIND)

    def create(self, doc: dict[str, Any]) -> set[str]:
        path, about = self._where(doc)
        try:
            self.kube.client.request("POST", path, about, query=STRICT, body=json.dumps(doc).encode())
        except (KubedraError, NotFound) as err:
            return _refusal(err)
        return set()

    def write_over(self, base: dict[str, Any], change: Callable[[dict[str, Any]], dict[str, Any]],
                   subresource: str = "") -> set[str]:
        """Create `base` for real, dry-run a PUT of `change(created)`, delete the base."""
        path, about = self._where(base)
        created = json.loads(self.kube.client.request("POST", path, about,
                                                      body=json.dumps(base).encode()))
        url = f"{path}/{created['metadata']['name']}"
        try:
            self.kube.client.request("PUT", url + subresource, about, query=STRICT,
                                     body=json.dumps(change(created)).encode())
        except (KubedraError, NotFound) as err:
            return _refusal(err)
        finally:
            self._remove(url, about)
        return set()

    def _remove(self, url: str, about: Request) -> None:
        """Delete, and take off the PodGroup protection finalizer if its controller has not
        yet (nothing but this test uses the group)."""
        self.kube.client.request("DELETE", url, about)
        for _ in range(50):
            try:
                current = json.loads(self.kube.client.request("GET", url, about))
            except NotFound:
                return
            if current["metadata"].get("finalizers"):
                current["metadata"]["finalizers"] = []
                with contextlib.suppress(KubedraError, NotFound):
                    self.kube.client.request("PUT", url, about, body=json.dumps(current).encode())
            time.sleep(0.1)


def _changed(path: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda created: mutate(created, path, value)


def _status(status: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda created: {**created, "status": status}


def cases() -> Iterator[tuple[str, str, dict[str, Any], Any, str | None]]:
    """(id, how, document, what the server write needs, the path kubedra's table expects
    or None where both should accept). `how`: create, status or update."""
    for base in (workload_doc, pod_group_doc, grouped_pod_doc):
        yield f"valid-{base.__name__}", "create", base(), None, None
    for cid, base, path, value, where, _ in CASES:
        yield cid, "create", mutate(base(), path, value), None, where
    for cid, base, path, value, _, _ in ACCEPTED:
        yield cid, "create", mutate(base(), path, value), None, None
    for cid, base, path, value in DIFFERENT:
        yield cid, "create", mutate(base(), path, value), None, "<known>"
    for cid, status, where, _ in STATUS_CASES:
        yield cid, "status", {**pod_group_doc(), "status": status}, status, where
    for cid, base, path, value, where, _ in UPDATES:
        yield cid, "update", mutate(base(), path, value), (base(), path, value), where


def verdict(server: Server, how: str, doc: dict[str, Any], extra: Any) -> tuple[set[str], set[str]]:
    """(kubedra's paths, the server's paths) for one case."""
    if how == "create":
        return kubedra_errors(doc), server.create(doc)
    if how == "status":
        spec_only = {k: v for k, v in doc.items() if k != "status"}
        return kubedra_errors(doc), server.write_over(spec_only, _status(extra), "/status")
    base, path, value = extra
    return kubedra_errors(mutate(base, path, value), base), server.write_over(
        base, _changed(path, value)
    )


def agrees(ours: set[str], theirs: set[str], expected: str | None) -> bool:
    if expected is None:
        return not ours and not theirs
    return ours == theirs and (expected in theirs or expected == "<known>")


@pytest.fixture(scope="module")
def verdicts(cluster: DevCluster) -> dict[str, tuple[set[str], set[str], str | None]]:
    kube = cluster.store()
    server = Server(kube)
    started = time.monotonic()
    out = {}
    for cid, how, doc, extra, where in cases():
        ours, theirs = verdict(server, how, doc, extra)
        out[cid] = (ours, theirs, where)
    print(f"\nscheduling differential: {len(out)} cases in {time.monotonic() - started:.1f} s")
    kube.close()
    return out


def test_scheduling_validation_agrees_with_the_api_server(verdicts: Verdicts) -> None:
    differ, unexplained, gone = disagreements(verdicts, agrees, KNOWN)
    total = len(verdicts)
    rejected = sum(1 for k, s, _ in verdicts.values() if k and k == s)
    print(f"scheduling differential: {total - len(differ)}/{total} agree "
          f"({rejected} rejected by both at the same paths); {len(differ)} known differences")
    assert not unexplained, json.dumps(unexplained, indent=1)
    assert not gone, f"listed in KNOWN but now agree: {gone}"


def test_a_pod_group_is_stored_as_the_embedded_store_stores_it(cluster: DevCluster) -> None:
    """Defaults and admission: the server's PodGroup and the embedded store's agree on what
    a manifest becomes (disruptionMode single, priority 0, status empty, gated-off fields
    dropped); the server adds its protection finalizer, which kubedra does not."""
    from kubedra.api.codec import to_dict
    from kubedra.api.scheduling import PodGroup
    from kubedra.cluster.sqlite import SqliteStore

    doc = mutate(mutate(pod_group_doc(), "spec.disruptionMode", DELETE),
                 "spec.preemptionPolicy", "Never")
    kube = cluster.store()
    try:
        theirs = kube.create(decode_object(doc).obj, dry_run=True)
    finally:
        kube.close()
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "s.db")
        ours = store.create(decode_object(doc).obj)
        store.close()
    assert isinstance(theirs, PodGroup) and isinstance(ours, PodGroup)
    assert to_dict(ours)["spec"] == to_dict(theirs)["spec"]
    assert to_dict(ours).get("status") == to_dict(theirs).get("status") == {}
    assert theirs.metadata.finalizers == ("scheduling.k8s.io/podgroup-protection",)


def test_the_gang_example_through_kubedra_on_the_cluster(cluster: DevCluster) -> None:
    example = str(REPO / "examples" / "gang-training")
    applied = run_kubedra(cluster, "apply", "-f", example)
    assert applied.returncode == 0, applied.stderr
    assert "workload.scheduling.k8s.io/trainer created" in applied.stdout
    assert "podgroup.scheduling.k8s.io/trainer-workers created" in applied.stdout
    listed = run_kubedra(cluster, "get", "podgroups")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n")[1].split()[:4] == ["trainer-workers", "Gang", "trainer", "Pending"]
    described = run_kubedra(cluster, "describe", "workload", "trainer")
    assert described.returncode == 0 and "workers" in described.stdout, described.stderr
    deleted = run_kubedra(cluster, "delete", "-f", example, "--timeout", "60s")
    assert deleted.returncode == 0, deleted.stderr
    gone = run_kubedra(cluster, "get", "podgroups")
    assert "trainer-workers" not in gone.stdout
