"""CDI specs a container runtime can inject anywhere: a simulated device's nodes are fully
specified (a runtime never stats them on a host without GPUs: `failed to stat CDI host
device "/dev/nvidia-uvm"` was the first hour on a real node), and on real GPUs the spec
mounts the NVIDIA driver's user-space files found on the node."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.catalog import PROFILES
from kubedra.driver.backends.nvidia_files import driver_files
from kubedra.driver.cdi import AllocatedDevice, CdiHost, build_spec


def _devices(profile: str) -> list[tuple[str, AllocatedDevice]]:
    out = []
    for inventory in PROFILES[profile].inventories("n"):
        out += [(inventory.driver, AllocatedDevice("r", device)) for device in inventory.devices]
    return out


def _nodes(spec: dict[str, object]) -> list[dict[str, object]]:
    edits = [spec["containerEdits"], *(d["containerEdits"] for d in spec["devices"])]  # type: ignore[union-attr]
    return [node for e in edits for node in e.get("deviceNodes", [])]  # type: ignore[union-attr]


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_simulated_device_node_is_fully_specified(profile: str) -> None:
    """The guard for the class: every device of every catalog profile, one claim each."""
    for driver, device in _devices(profile):
        spec, _ = build_spec(driver, "uid", [device])
        for node in _nodes(spec):
            assert node.get("type") == "c" and isinstance(node.get("major"), int), (profile, node)
            assert isinstance(node.get("minor"), int), (profile, node)


def test_real_gpus_use_the_hosts_nodes_and_driver_files() -> None:
    (driver, device), *_ = _devices("h100x8")
    host = CdiHost(stand_ins=False, mounts=("/usr/lib/x86_64-linux-gnu/libcuda.so.1",))
    spec, _ = build_spec(driver, "uid", [device], host=host)
    nodes = {n["path"]: n for n in _nodes(spec)}
    assert nodes["/dev/nvidia-uvm"] == {"path": "/dev/nvidia-uvm"}  # its major is the host's
    assert nodes["/dev/nvidia0"] == {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}
    assert spec["containerEdits"]["mounts"] == [  # type: ignore[index]
        {"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
         "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
         "options": ["ro", "nosuid", "nodev", "bind"]}]  # fmt: skip


def test_driver_files_are_found_where_the_driver_installed_them(tmp_path: Path) -> None:
    for name in ("usr/lib64/libcuda.so.1", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                 "usr/lib64/libnvidia-ml.so.1", "usr/bin/nvidia-smi", "usr/bin/unrelated"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert driver_files(tmp_path) == (
        "/usr/lib64/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",  # the first directory wins
        "/usr/bin/nvidia-smi",
    )
    assert driver_files(tmp_path / "empty") == ()
