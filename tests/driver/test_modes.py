"""File modes do not follow the umask: `kubedra driver run` under umask 000 (a real process)."""

from __future__ import annotations

import stat
from pathlib import Path

from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver.kubelet import KubeletClient

from .conftest import make_claim
from .driverproc import DriverProcess

MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS"},
}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_modes_under_umask_000(short_dir: Path) -> None:
    store = SqliteStore(short_dir / "state.db")
    claims = [
        make_claim(store, "a", [("gpu", "sim-1", "gpu-0")]),
        make_claim(store, "b", [("gpu", "sim-1", "gpu-1")], config=[((), MPS)]),
    ]
    store.close()
    root = short_dir / "kubelet"
    loose = root / "plugins" / "gpu.nvidia.com"
    loose.mkdir(parents=True)
    loose.chmod(0o777)  # what an earlier version left under umask 000: tightened at start
    (root / "plugins").chmod(0o777)  # the kubelet's own directory: its mode is not ours
    driver = DriverProcess(short_dir / "state.db", root, short_dir / "run" / "cdi", umask=0)
    try:
        driver.start()
        with KubeletClient(driver.paths.registration_socket, timeout=10) as kubelet:
            kubelet.register()
            for claim in claims:  # two saves: the second keeps the first as last-good
                answer = kubelet.prepare([("default", claim.metadata.uid, claim.metadata.name)])
                assert answer.claims[claim.metadata.uid].error == ""
        plugin, cdi = driver.paths.plugin_dir, driver.cdi
        uid_b = claims[1].metadata.uid
        expected = {
            plugin: 0o750,
            root / "plugins_registry": 0o750,  # created by the driver: the kubelet's mode
            driver.paths.registration_socket: 0o600,
            driver.paths.dra_socket: 0o600,
            plugin / "checkpoint.json": 0o600,
            plugin / "checkpoint.last-good.json": 0o600,
            plugin / "driver.lock": 0o600,
            plugin / "mps": 0o750,
            plugin / "mps" / uid_b: 0o755,
            plugin / "mps" / uid_b / "pipe": 0o755,
            plugin / "mps" / uid_b / "shm": 0o755,
            short_dir / "run": 0o755,
            cdi: 0o755,
            **{spec: 0o644 for spec in cdi.glob("*.json")},
        }
        assert len(list(cdi.glob("*.json"))) == 2
        assert {str(p): oct(_mode(p)) for p in expected} == {
            str(p): oct(m) for p, m in expected.items()
        }
        assert _mode(root / "plugins") == 0o777  # the kubelet's directory, not the driver's
    finally:
        assert driver.stop() == 0
