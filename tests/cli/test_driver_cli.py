"""`kubedra driver run | cleanup` through the real entry point."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.cli.test_lint import kubedra


def short_root() -> Path:
    """Unix socket paths are limited to 107 bytes: pytest's tmp_path can be too deep."""
    return Path(tempfile.mkdtemp(prefix="kd-"))


def test_nvml_without_a_driver_fails_with_one_clear_line(tmp_path: Path) -> None:
    run = kubedra("--store", str(tmp_path / "s.db"), "driver", "run", "--driver", "gpu.nvidia.com",
                  "--node", "n1", "--backend", "nvml", "--plugin-root", str(short_root()))
    assert run.returncode == 1
    assert run.stderr.startswith("error: NVML unavailable: ") and "Traceback" not in run.stderr


def test_simulated_driver_publishes_serves_and_cleans_up(tmp_path: Path) -> None:
    store, root = str(tmp_path / "s.db"), short_root()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubedra", "--store", store, "driver", "run", "--driver",
         "gpu.nvidia.com", "--node", "h100x8-0", "--backend", "simulated", "--profile", "h100x8",
         "--plugin-root", str(root), "--cdi-dir", str(tmp_path / "cdi")],
        stderr=subprocess.PIPE, text=True)
    socket = root / "plugins_registry" / "gpu.nvidia.com-reg.sock"
    deadline = time.monotonic() + 60
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert socket.exists() and (root / "plugins" / "gpu.nvidia.com" / "dra.sock").exists()
    slices = yaml.safe_load(kubedra("--store", store, "get", "rs", "-o", "yaml").stdout)["items"]
    assert [(s["spec"]["nodeName"], len(s["spec"]["devices"])) for s in slices] == [("h100x8-0", 8)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    run = kubedra("--store", store, "driver", "cleanup", "--driver", "gpu.nvidia.com", "--node",
                  "h100x8-0", "--plugin-root", str(root))
    assert run.stdout == "driver gpu.nvidia.com: 1 slice(s) removed from node h100x8-0\n"
    assert not socket.exists()
