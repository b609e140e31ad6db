"""Faults injected on purpose into a simulated node's devices, so tests and demos can break a
GPU on demand: `kubedra driver fault --driver D --node N --device DEV --kind K [--clear]`.

The file `faults.json` in the driver's plugin directory (what `--plugin-root`/`--plugin-dir`
name) holds the node's injected faults; the running driver's simulated backend reads it at
every health check (a fraction of a second), so the command reaches that driver without a
socket of its own and a fault survives a driver restart, as a broken GPU does. Writers hold
a lock on `faults.lock` and replace the file whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from kubedra.driver.health import Fault, FaultKind

FILE, LOCK = "faults.json", "faults.lock"
# What each kind looks like when injected (the value is the taint's; the message the pod's).
INJECTED = {
    FaultKind.LOST: Fault(FaultKind.LOST, "", "GPU has fallen off the bus (injected)"),
    FaultKind.XID: Fault(FaultKind.XID, "74", "Xid 74: NVLink error (injected)"),
    FaultKind.ECC: Fault(FaultKind.ECC, "dbe", "double-bit ECC error (injected)"),
    FaultKind.THERMAL: Fault(FaultKind.THERMAL, "slowdown", "too hot: slowdown (injected)"),
    FaultKind.POWER: Fault(FaultKind.POWER, "brake", "power brake slowdown (injected)"),
}


def inject(
    plugin_dir: Path, node: str, device: str, kind: FaultKind | None, clear: bool = False
) -> None:
    """Add a fault of `kind` to `device` on `node`, or with `clear` remove it (every fault
    of the device when `kind` is None)."""
    with _locked(plugin_dir):
        data = _read(plugin_dir)
        if data.get("node") not in (None, node):
            raise ValueError(
                f"{plugin_dir / FILE} holds the faults of node {data['node']}, not {node}: is "
                "this the plugin directory of the driver on that node?"
            )
        devices = _devices(data)
        kinds = {k for k in devices.get(device, []) if kind is not None and k != kind.value}
        if not clear and kind is not None:
            kinds.add(kind.value)
        if kinds:
            devices[device] = sorted(kinds)
        else:
            devices.pop(device, None)
        _write(plugin_dir, {"node": node, "devices": devices})


def read(plugin_dir: Path, node: str) -> Mapping[str, tuple[Fault, ...]]:
    """The node's injected faults per device (nothing when no file, or another node's)."""
    data = _read(plugin_dir)
    if data.get("node") != node:
        return {}
    known = {k.value for k in FaultKind}
    return {
        device: tuple(INJECTED[FaultKind(k)] for k in kinds if k in known)
        for device, kinds in _devices(data).items()
    }


def _read(plugin_dir: Path) -> dict[str, object]:
    try:
        data = json.loads((plugin_dir / FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _devices(data: Mapping[str, object]) -> dict[str, list[str]]:
    devices = data.get("devices")
    if not isinstance(devices, dict):
        return {}
    listed = {d: kinds for d, kinds in devices.items() if isinstance(kinds, list)}
    return {str(d): [str(k) for k in kinds] for d, kinds in listed.items()}


def _write(plugin_dir: Path, data: Mapping[str, object]) -> None:
    scratch = plugin_dir / f".{FILE}.{os.getpid()}"
    scratch.write_text(json.dumps(data, sort_keys=True))
    os.replace(scratch, plugin_dir / FILE)


@contextlib.contextmanager
def _locked(plugin_dir: Path) -> Iterator[None]:
    if not plugin_dir.is_dir():
        raise ValueError(f"{plugin_dir} does not exist: no driver runs with this plugin directory")
    with open(plugin_dir / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
