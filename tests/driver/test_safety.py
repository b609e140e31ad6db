"""Hostile claim references and planted links cannot make the driver touch files outside its
directories; every bad reference gets its own per-claim error (the call itself succeeds, as
the kubelet expects). Real gRPC over the plugin's unix sockets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubedra.driver.files import UnsafePath, child
from kubedra.driver.kubelet import KubeletClient, PluginPaths

from .conftest import NODE, make_claim

MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS"},
}
GOOD_UID_UPPER = "0B7A3C52-8F1E-4C6B-9D2A-6E5F4A3B2C1D"
HOSTILE = [
    ("default", "x/../../victim", "c"),  # the reported traversal
    ("default", "../../../victim", "c"),
    ("default", "..", "c"),
    ("default", "", "c"),
    ("default", "/etc/passwd", "c"),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d/../x", "c"),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d\n", "c"),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d\x00", "c"),
    ("default", GOOD_UID_UPPER, "c"),  # the API server writes lower case
    ("default", "a" * 100_000, "c"),
    ("../etc", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d", "c"),
    ("Default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d", "c"),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d", "a/b"),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d", "x" * 254),
    ("default", "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d", ""),
]


@pytest.fixture
def kubelet(agent):
    with KubeletClient(agent.paths.registration_socket, timeout=10) as client:
        client.register()
        yield client


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if not p.is_socket()
    }


def test_traversal_through_the_claim_uid_deletes_nothing(store, agent, kubelet, short_dir):
    victim = short_dir / "victim.json"
    victim.write_text("{}")
    # what made `x/../../victim` reach outside: a directory named like the spec prefix
    (agent.cdi / "k8s.gpu.nvidia.com-claim_x").mkdir(parents=True)
    for call in (kubelet.unprepare, kubelet.prepare):
        answer = call([("default", "x/../../victim", "c")])
        assert answer.claims["x/../../victim"].error.startswith(
            "invalid claim reference: claim uid 'x/../../victim': must be a lower-case RFC 4122 "
            "UUID, as the API server generates for metadata.uid"
        )
    assert victim.read_text() == "{}"


@pytest.mark.parametrize("call", ["prepare", "unprepare"])
def test_every_hostile_reference_gets_its_own_error_and_changes_nothing(
    store, agent, kubelet, short_dir, call
):
    good = make_claim(store, "good", [("gpu", NODE, "gpu-0")])
    good_ref = ("default", good.metadata.uid, "good")
    kubelet.prepare([good_ref])
    before = _tree(short_dir)
    answer = getattr(kubelet, call)([*HOSTILE, good_ref])
    for ns, uid, name in HOSTILE:
        error = answer.claims[uid].error
        assert error.startswith("invalid claim reference: claim "), (ns, uid[:40], name)
        assert len(error) < 400  # a 100 KB uid is not echoed back
    assert answer.claims[good.metadata.uid].error == ""
    after = _tree(short_dir)
    if call == "unprepare":  # only the good claim's files went away
        gone = {k for k in before if k not in after}
        assert all(good.metadata.uid in k for k in gone) and gone
    else:
        assert before == after


def test_a_planted_symlink_is_refused_not_followed(store, agent, kubelet, short_dir):
    outside = short_dir / "outside.json"
    outside.write_text("keep")
    claim = make_claim(store, "linked", [("gpu", NODE, "gpu-1")])
    uid = claim.metadata.uid
    agent.cdi.mkdir(parents=True, exist_ok=True)
    link = agent.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json"
    link.symlink_to(outside)
    error = kubelet.prepare([("default", uid, "linked")]).claims[uid].error
    assert error == f"{link} is a symlink; the driver does not follow links"
    assert kubelet.unprepare([("default", uid, "linked")]).claims[uid].error == error
    assert outside.read_text() == "keep" and link.is_symlink()
    assert uid not in agent.state.prepared  # the failed prepare was rolled back


def test_a_symlinked_mps_directory_is_refused(store, agent, kubelet, short_dir):
    elsewhere = short_dir / "elsewhere"
    elsewhere.mkdir()
    (agent.paths.plugin_dir / "mps").symlink_to(elsewhere)
    claim = make_claim(store, "mps", [("gpu", NODE, "gpu-2")], config=[((), MPS)])
    uid = claim.metadata.uid
    error = kubelet.prepare([("default", uid, "mps")]).claims[uid].error
    assert error.endswith("mps is a symlink; the driver does not follow links")
    assert list(elsewhere.iterdir()) == []
    assert not (agent.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json").exists()


def test_child_takes_one_plain_component(tmp_path):
    for name in ("", ".", "..", "a/b", "../x", "x\0"):
        with pytest.raises(UnsafePath):
            child(tmp_path, name)
    os.symlink("/etc/hostname", tmp_path / "l")
    with pytest.raises(UnsafePath, match="is a symlink"):
        child(tmp_path, "l")
    assert child(tmp_path, "ok.json") == tmp_path / "ok.json"


@pytest.mark.parametrize("driver", ["../evil", "gpu.nvidia.com/../../x", "GPU.example.com", ""])
def test_driver_names_that_are_not_dns_subdomains_are_refused(driver, tmp_path):
    with pytest.raises(ValueError, match="driver name"):
        PluginPaths.for_driver(driver, tmp_path)


def test_refusals_are_per_claim_errors_not_internal_errors(store, agent, kubelet, driver_log):
    agent.cdi.mkdir(parents=True, exist_ok=True)
    claim = make_claim(store, "linked", [("gpu", NODE, "gpu-1")])
    (agent.cdi / f"k8s.gpu.nvidia.com-claim_{claim.metadata.uid}.json").symlink_to("/etc/hostname")
    kubelet.prepare([("default", claim.metadata.uid, "linked"), *HOSTILE[:3]])
    assert [r for r in driver_log if r.exc_info] == []  # no traceback for a refusal
