"""What a kubectl user types on day one (issue 38), on the embedded store: several kinds at
once, `all`, `events`, group-qualified kinds, TYPE/NAME, -o jsonpath|custom-columns, -w,
--show-labels, `apply -n`, `delete -l|--all`, `describe KIND` without a name, `devices -o
wide`, and `delete` waiting for finalizers as kubectl does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import GPU_CLASS
from tests.cli.test_lint import kubedra


@pytest.fixture
def placed(cluster: tuple[str, Path]) -> str:
    """The CLI fixture's store with the seed scheduled (the claim allocated and reserved)."""
    store, _ = cluster
    assert "-> big" in kubedra("--store", store, "schedule").stdout
    return store


def ok(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    run = kubedra("--store", store, *args)
    assert run.returncode == 0, run.stderr
    return run


def rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


# --- get ---------------------------------------------------------------------------------


def test_get_several_kinds_prints_a_table_per_kind_with_kind_prefixed_names(placed: str) -> None:
    out = ok(placed, "get", "rc,pods").stdout
    claims, pods = out.split("\n\n")
    assert [r[:2] for r in rows(claims)] == [
        ["NAME", "STATE"], ["resourceclaim.resource.k8s.io/vllm-gpu-claim", "allocated,reserved"]]
    assert [r[:3] for r in rows(pods)] == [["NAME", "STATUS", "NODE"], ["pod/vllm-inference", "Scheduled", "big"]]
    listed = json.loads(ok(placed, "get", "rc,pods", "-o", "json").stdout)
    assert listed["kind"] == "List"
    assert [i["kind"] for i in listed["items"]] == ["ResourceClaim", "Pod"]


def test_get_all_is_kubectls_category_and_type_slash_name_works(placed: str) -> None:
    assert rows(ok(placed, "get", "all").stdout)[1][0] == "pod/vllm-inference"
    named = ok(placed, "get", "pod/vllm-inference", "rc/vllm-gpu-claim", "-o", "name").stdout
    assert named == "pod/vllm-inference\nresourceclaim.resource.k8s.io/vllm-gpu-claim\n"
    one = json.loads(ok(placed, "get", "pod/vllm-inference", "-o", "json").stdout)
    assert one["kind"] == "Pod"  # one name of one kind: the object, not a List
    mixed = kubedra("--store", placed, "get", "pod", "rc/vllm-gpu-claim")
    assert mixed.returncode == 2 and "resource/name form" in mixed.stderr


@pytest.mark.parametrize("kind", ["resourceclaim.resource.k8s.io", "resourceclaims.v1.resource.k8s.io",
                                  "ResourceClaims", "pods.v1", "nodes."])
def test_get_accepts_group_qualified_kinds(placed: str, kind: str) -> None:
    assert ok(placed, "get", kind, "-o", "name").stdout.count("/") >= 1


def test_get_with_a_wrong_group_is_refused(placed: str) -> None:
    run = kubedra("--store", placed, "get", "resourceclaims.apps")
    assert run.returncode == 1
    assert run.stderr == 'error: the server doesn\'t have a resource type "resourceclaims.apps"\n'


def test_get_events_lists_what_objects_record_as_kubectl_shows_events(placed: str) -> None:
    table = rows(ok(placed, "get", "events").stdout)
    assert table[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    reasons = {(r[2], r[3]) for r in table[1:]}
    assert reasons == {("Scheduled", "pod/vllm-inference"), ("Allocated", "resourceclaim/vllm-gpu-claim"),
                       ("Reserved", "resourceclaim/vllm-gpu-claim")}
    assert all(re.fullmatch(r"\d+s", r[0]) for r in table[1:])  # every event has its time
    everywhere = rows(ok(placed, "get", "ev", "-A").stdout)
    assert everywhere[0][:2] == ["NAMESPACE", "LAST SEEN"] and everywhere[1][0] == "default"
    listed = json.loads(ok(placed, "get", "events", "-o", "json").stdout)
    scheduled = next(e for e in listed["items"] if e["reason"] == "Scheduled")
    assert scheduled["involvedObject"]["kind"] == "Pod" and scheduled["kind"] == "Event"
    assert ok(placed, "get", "events", "-n", "other").stderr == "No resources found in other namespace.\n"


def test_jsonpath_output_as_kubectl(placed: str) -> None:
    names = ok(placed, "get", "no", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert names == "big small"  # no newline added, as kubectl
    ranged = ok(placed, "get", "rs", "-o",
                'jsonpath={range .items[*]}{.spec.nodeName}{"\\t"}{.spec.devices[0].name}{"\\n"}{end}')
    assert ranged.stdout == "big\tgpu-0\nsmall\tgpu-0\n"
    one = ok(placed, "get", "rc", "vllm-gpu-claim", "-o", "jsonpath={.status.allocation.devices.results[0].pool}")
    assert one.stdout == "big"
    filtered = ok(placed, "get", "no", "-o", 'jsonpath={.items[?(@.metadata.name=="small")].kind}')
    assert filtered.stdout == "Node"
    assert ok(placed, "get", "no", "-o", "jsonpath={.items[0].nosuch}").stdout == ""
    broken = kubedra("--store", placed, "get", "no", "-o", "jsonpath={.items[0")
    assert broken.returncode == 1 and broken.stderr == "error: error parsing jsonpath {.items[0, unclosed action\n"


def test_custom_columns_output_as_kubectl(placed: str, tmp_path: Path) -> None:
    spec = "NAME:.metadata.name,NODE:.spec.nodeName,CLAIMS:.spec.resourceClaims[*].name,NONE:.status.nosuch"
    assert rows(ok(placed, "get", "po", "-o", f"custom-columns={spec}").stdout) == [
        ["NAME", "NODE", "CLAIMS", "NONE"], ["vllm-inference", "big", "gpu-claim", "<none>"]]
    (tmp_path / "cols").write_text("NAME   DRIVER\n.metadata.name   {.spec.driver}\n")
    assert rows(ok(placed, "get", "rs", "-o", f"custom-columns-file={tmp_path / 'cols'}").stdout) == [
        ["NAME", "DRIVER"], ["big-gpu", "gpu.nvidia.com"], ["small-gpu", "gpu.nvidia.com"]]
    bad = kubedra("--store", placed, "get", "po", "-o", "custom-columns=NAME")
    assert bad.returncode == 1 and "expected <header>:<json-path-expr>" in bad.stderr
    unknown = kubedra("--store", placed, "get", "po", "-o", "table")
    assert unknown.returncode == 1 and 'output format "table"' in unknown.stderr


def test_show_labels_adds_a_labels_column(placed: str, tmp_path: Path) -> None:
    labelled = dict(GPU_CLASS, metadata={"name": "gpu", "labels": {"tier": "a", "app": "x"}})
    (tmp_path / "dc.yaml").write_text(yaml.safe_dump(labelled))
    ok(placed, "apply", "-f", str(tmp_path / "dc.yaml"))
    table = rows(ok(placed, "get", "dc", "--show-labels").stdout)
    assert table[0] == ["NAME", "AGE", "LABELS"]
    assert {r[0]: r[2] for r in table[1:]} == {"gpu": "app=x,tier=a", "high-memory-gpu": "<none>"}


def test_watch_prints_the_list_then_each_change(placed: str, tmp_path: Path) -> None:
    watcher = subprocess.Popen([sys.executable, "-m", "kubedra", "--store", placed, "get", "dc", "-w"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().split() == ["NAME", "AGE"]
        assert watcher.stdout.readline().split()[0] == "high-memory-gpu"
        (tmp_path / "dc.yaml").write_text(yaml.safe_dump(GPU_CLASS))
        ok(placed, "apply", "-f", str(tmp_path / "dc.yaml"))
        assert watcher.stdout.readline().split()[0] == "gpu"
        ok(placed, "delete", "dc", "gpu")
        assert watcher.stdout.readline().split()[0] == "gpu"  # the deletion, as kubectl prints it
    finally:
        watcher.terminate()
        watcher.wait(10)
    many = kubedra("--store", placed, "get", "rc,po", "-w")
    assert many.returncode == 2 and "one kind" in many.stderr


# --- describe ------------------------------------------------------------------------------


def test_describe_a_kind_without_a_name_describes_each_object(placed: str) -> None:
    out = ok(placed, "describe", "rs").stdout
    first, second = out.split("\n\n\n")  # kubectl's separator: two blank lines
    assert first.startswith("Name:         big-gpu\n") and second.startswith("Name:         small-gpu\n")
    by_prefix = ok(placed, "describe", "no", "sm").stdout
    assert by_prefix.startswith("Name:         small\n") and "Name:         big" not in by_prefix
    none = ok(placed, "describe", "rc", "-l", "app=nothing")
    assert (none.stdout, none.stderr) == ("", "No resources found in default namespace.\n")
    missing = kubedra("--store", placed, "describe", "rc", "zzz")
    assert missing.returncode == 1 and 'ResourceClaim "zzz" not found' in missing.stderr


def test_describe_keeps_map_keys_as_they_are(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    ok(store, "cluster", "create", "--node-profile", "h100x8=1")
    out = ok(store, "describe", "no", "h100x8-0").stdout
    assert re.search(r"^    cpu:  \d+$", out, re.M) and "Cpu:" not in out
    assert re.search(r"^    nvidia\.com/gpu:  8$", out, re.M) and "Nvidia.com" not in out
    assert "  Capacity:" in out and "Allocatable:" in out  # field names still labelled


def test_claim_events_have_an_age(placed: str) -> None:
    out = ok(placed, "describe", "rc", "vllm-gpu-claim").stdout
    events = out[out.index("Events:"):].splitlines()[2:]
    assert [line.split()[1] for line in events] == ["Allocated", "Reserved"]
    assert all(re.fullmatch(r"\d+s", line.split()[2]) for line in events), events
    claim = json.loads(ok(placed, "get", "rc", "vllm-gpu-claim", "-o", "json").stdout)
    stamp = claim["status"]["allocation"]["allocationTimestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)


# --- apply -n, and the warnings ------------------------------------------------------------


def _namespace(store: str, name: str) -> None:
    doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    run = kubedra("--store", store, "apply", "-f", "-", stdin=yaml.safe_dump(doc))
    assert run.returncode == 0, run.stderr


def test_apply_n_puts_objects_in_the_namespace_and_refuses_another(cluster: tuple[str, Path],
                                                                   seed_dir: Path) -> None:
    store, _ = cluster
    _namespace(store, "team")
    run = ok(store, "apply", "-n", "team", "-f", str(seed_dir / "02-resourceclaim-vllm.yaml"))
    assert run.stdout == "resourceclaim.resource.k8s.io/vllm-gpu-claim created\n"
    assert rows(ok(store, "get", "rc", "-n", "team").stdout)[1][0] == "vllm-gpu-claim"
    elsewhere = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "t", "namespace": "default"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "x"}}]}}}}
    refused = kubedra("--store", store, "apply", "-n", "team", "-f", "-", stdin=yaml.safe_dump(elsewhere))
    assert refused.returncode == 1
    assert ('the namespace from the provided object "default" does not match the namespace "team". '
            "You must pass '--namespace=default' to perform this operation.") in refused.stderr
    assert kubedra("--store", store, "get", "rct", "t").returncode == 1


def _warnings(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in run.stderr.splitlines() if ": warning: " in line]


def test_warnings_come_once_with_the_change_that_brings_them(tmp_path: Path, seed_dir: Path) -> None:
    store = str(tmp_path / "s.db")
    first = ok(store, "apply", "-f", str(seed_dir))
    assert len(_warnings(first)) == 4
    for args in (["apply"], ["apply", "--dry-run=server"], ["diff"]):
        again = ok(store, *args, "-f", str(seed_dir))
        assert again.stderr == "", args  # nothing changes: nothing to warn about
    # The client dry run merges without the store's defaults, so it sees the claim's
    # defaulted allocationMode as a change (as kubectl's does): its warnings, only its.
    client = ok(store, "apply", "--dry-run=client", "-f", str(seed_dir))
    assert "resourceclaim.resource.k8s.io/vllm-gpu-claim configured (dry run)" in client.stdout
    assert {w.split(":")[0] for w in _warnings(client)} == {str(seed_dir / "02-resourceclaim-vllm.yaml")}
    assert ok(store, "diff", "-f", str(seed_dir)).stdout == ""
    changed = tmp_path / "seed"
    changed.mkdir()
    for path in seed_dir.iterdir():
        (changed / path.name).write_text(path.read_text())
    claim = changed / "02-resourceclaim-vllm.yaml"
    claim.write_text(claim.read_text().replace("name: vllm-gpu-claim", "name: vllm-gpu-claim\n  labels: {a: b}"))
    diffed = kubedra("--store", store, "diff", "-f", str(changed))
    assert diffed.returncode == 1
    assert [w.split(":")[0] for w in _warnings(diffed)] == [str(claim)] * 2  # the claim's only
    applied = ok(store, "apply", "-f", str(changed))
    assert [w.split(":")[0] for w in _warnings(applied)] == [str(claim)] * 2
    assert "resourceclaim.resource.k8s.io/vllm-gpu-claim configured" in applied.stdout


def test_apply_to_an_object_being_deleted_warns_as_kubectl(placed: str, seed_dir: Path) -> None:
    ok(placed, "delete", "rc", "vllm-gpu-claim", "--wait=false")  # the pod still holds it
    run = ok(placed, "apply", "-f", str(seed_dir / "02-resourceclaim-vllm.yaml"))
    assert "Warning: Detected changes to resource vllm-gpu-claim which is currently being deleted.\n" in run.stderr
    assert run.stdout == "resourceclaim.resource.k8s.io/vllm-gpu-claim unchanged\n"


# --- delete ----------------------------------------------------------------------------------


def test_delete_by_selector_and_all(placed: str, tmp_path: Path) -> None:
    docs = [dict(GPU_CLASS, metadata={"name": f"c{i}", "labels": {"tier": tier}})
            for i, tier in enumerate(["a", "a", "b"])]
    (tmp_path / "dcs.yaml").write_text(yaml.safe_dump_all(docs))
    ok(placed, "apply", "-f", str(tmp_path / "dcs.yaml"))
    assert ok(placed, "delete", "dc", "-l", "tier=a").stdout == (
        'deviceclass.resource.k8s.io "c0" deleted\ndeviceclass.resource.k8s.io "c1" deleted\n')
    assert ok(placed, "delete", "dc", "-l", "tier=zzz").stdout == "No resources found\n"
    everything = ok(placed, "delete", "po", "--all").stdout
    assert everything == 'pod "vllm-inference" deleted from default namespace\n'
    assert ok(placed, "get", "po").stderr == "No resources found in default namespace.\n"
    both = kubedra("--store", placed, "delete", "dc", "c2", "-l", "tier=b")
    assert both.returncode == 2 and "name cannot be provided" in both.stderr


def test_delete_waits_for_finalizers_so_apply_creates_again(placed: str, seed_dir: Path) -> None:
    """The issue's sequence: delete -f then apply -f of the seed left the pod waiting for a
    claim apply called unchanged; now delete returns once the claim is gone."""
    ok(placed, "delete", "-f", str(seed_dir))
    assert ok(placed, "get", "rc").stderr == "No resources found in default namespace.\n"
    again = ok(placed, "apply", "-f", str(seed_dir))
    assert "resourceclaim.resource.k8s.io/vllm-gpu-claim created" in again.stdout
    assert "pod/vllm-inference -> big" in ok(placed, "schedule").stdout


def test_delete_of_a_claim_in_use_times_out_as_kubectl(placed: str) -> None:
    started = time.monotonic()
    run = kubedra("--store", placed, "delete", "rc", "vllm-gpu-claim", "--timeout=1s")
    assert run.returncode == 1 and time.monotonic() - started < 20
    assert run.stdout == 'resourceclaim.resource.k8s.io "vllm-gpu-claim" deleted from default namespace\n'
    assert run.stderr == "error: timed out waiting for the condition on resourceclaims/vllm-gpu-claim\n"
    assert rows(ok(placed, "get", "rc").stdout)[1][1] == "deleted"  # still held by the pod
    ok(placed, "delete", "po", "vllm-inference")  # the pod goes, so the claim follows
    assert kubedra("--store", placed, "get", "rc", "vllm-gpu-claim").returncode == 1


# --- devices -----------------------------------------------------------------------------------


def test_devices_wide_and_an_unknown_node(placed: str) -> None:
    table = rows(ok(placed, "devices", "-o", "wide").stdout)
    assert table[0] == ["NODE", "DRIVER", "DEVICE", "PRODUCT", "MEMORY", "HEALTH", "HELD BY", "POOL", "SLICE", "CAPACITY"]
    assert table[1][-3:] == ["big", "big-gpu", "memory=80Gi"]
    missing = kubedra("--store", placed, "devices", "--node", "nosuch")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == 'error: Node "nosuch" not found\n'


def test_a_failed_apply_still_shows_every_warning(placed: str, seed_dir: Path, tmp_path: Path) -> None:
    claim = tmp_path / "claim.yaml"
    claim.write_text((seed_dir / "02-resourceclaim-vllm.yaml").read_text().replace("count: 1", "count: 2"))
    run = kubedra("--store", placed, "apply", "-f", str(claim))
    assert run.returncode == 1 and "field is immutable" in run.stderr
    assert len(_warnings(run)) == 2  # the v1beta1 conversions, which may explain the error
