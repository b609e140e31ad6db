"""CDI (Container Device Interface) specs for prepared claims, drivers.md §6 and §1.9.

One transient spec file per claim in the CDI directory (`/var/run/cdi` on a node): vendor
`k8s.<driver>`, class `claim`, file `k8s.<driver>-claim_<claimUID>.json`, one CDI device per
allocated device named `<claimUID>-<device>`, so the fully qualified CDI id handed to the
kubelet is `k8s.<driver>/claim=<claimUID>-<device>` (the UID keeps a runtime's CDI cache
from ever returning a stale spec). cdiVersion 0.6.0 is the lowest that has the annotations
used here.

Container edits per driver:
- `gpu.nvidia.com`: spec-wide `NVIDIA_VISIBLE_DEVICES=<uuids of the claim's GPUs>` and the
  control nodes `/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/nvidia-uvm-tools`; per GPU
  `/dev/nvidia<minor>` (char 195:<minor>); on real GPUs the driver's user-space libraries and
  utilities found on the node (`CdiHost.mounts`, as NVIDIA's CDI generator mounts them), so
  no NVIDIA runtime hook is needed; MPS sharing adds `CUDA_MPS_PIPE_DIRECTORY`,
  `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` / `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` and per-claim
  host directories for the pipe and /dev/shm; the sharing choice is also an annotation.
  A MIG device the driver made for the claim (`kubedra.driver.mig`) is named by its MIG
  UUID in `NVIDIA_VISIBLE_DEVICES`, and gets its parent's `/dev/nvidia<minor>` plus the two
  capability nodes that grant access to its GPU instance and its compute instance,
  `/dev/nvidia-caps/nvidia-cap<N>` (N from the NVIDIA driver's capability files; the
  major is the node's `nvidia-caps` major, a stand-in on a simulated node).
- `tpu.google.com`: `/dev/vfio/vfio` and `/dev/vfio/<group>` per chip, `TPU_VISIBLE_CHIPS`.
- any other driver: `DRA_RESOURCE_DRIVER_NAME` and one `DRA_DEVICE_<NAME>=<device>` per device.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedra.api.resource import Device

CDI_VERSION = "0.6.0"
CDI_CLASS = "claim"
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
MISC_MAJOR, VFIO_MINOR = 10, 196  # /dev/vfio/vfio
# nvidia-uvm's and VFIO groups' majors are given out when their modules load; a simulated
# node has neither, so its spec names stand-ins from the range Linux reserves for local
# and experimental use (240-254), never looked up on the host.
STAND_IN_UVM_MAJOR, STAND_IN_VFIO_MAJOR, STAND_IN_CAPS_MAJOR = 240, 241, 242
MPS_PIPE_DIR = "/tmp/nvidia-mps"
CAPS_DIR = "/dev/nvidia-caps"


@dataclass(frozen=True)
class CdiHost:
    """What the node adds to a claim's CDI spec beside its devices.

    `stand_ins`: every device node fully specified (type, major, minor), so a runtime never
    looks it up on the host (the CDI library stats a node given by path alone and fails
    where it is missing): a simulated device is injectable on any host, its nodes exist in
    the container and opening them finds no driver. Real GPUs have their nodes on the host.
    `mounts`: host files a container needs, mounted at the same path (the NVIDIA driver's
    libraries and utilities on an NVML node)."""

    stand_ins: bool = True
    mounts: tuple[str, ...] = ()


SIMULATED = CdiHost()


def vendor(driver: str) -> str:
    return f"k8s.{driver}"


def kind(driver: str) -> str:
    return f"{vendor(driver)}/{CDI_CLASS}"


def spec_file_prefix(driver: str) -> str:
    return f"{vendor(driver)}-{CDI_CLASS}_"


def spec_file_name(driver: str, claim_uid: str) -> str:
    return f"{spec_file_prefix(driver)}{claim_uid}.json"


def qualified_name(driver: str, device_name: str) -> str:
    return f"{kind(driver)}={device_name}"


@dataclass(frozen=True)
class MigAccess:
    """What a container needs to use a MIG instance: its UUID and the minors of the
    capability nodes of its GPU instance and compute instance (`caps_major`: the node's
    nvidia-caps major, None when unknown)."""

    uuid: str
    gpu_instance_minor: int
    compute_instance_minor: int
    caps_major: int | None = None

    def nodes(self, host: CdiHost) -> list[dict[str, Any]]:
        major = STAND_IN_CAPS_MAJOR if host.stand_ins else self.caps_major
        return [
            char_node(f"{CAPS_DIR}/nvidia-cap{minor}", major, minor)
            for minor in (self.gpu_instance_minor, self.compute_instance_minor)
        ]


@dataclass
class AllocatedDevice:
    """One device of a claim as prepare sees it: the published device and its config
    (`mig`: the MIG instance made for it, when it is a MIG placement)."""

    request: str
    device: Device
    sharing: dict[str, Any] = field(default_factory=dict)
    mig: MigAccess | None = None

    def attribute(self, name: str) -> Any:
        attr = self.device.attributes.get(name)
        return None if attr is None else attr.value


def _minor(dev: AllocatedDevice) -> int | None:
    minor = dev.attribute("minor")
    if isinstance(minor, int):
        return minor
    match = re.match(r"^gpu-(\d+)(?:-|$)", dev.device.name)
    return int(match.group(1)) if match else None


def _uuid(dev: AllocatedDevice) -> Any:
    """What NVIDIA_VISIBLE_DEVICES names the device by: its MIG instance's UUID, or its own."""
    return dev.mig.uuid if dev.mig is not None else dev.attribute("uuid")


def _env_name(device_name: str) -> str:
    return "DRA_DEVICE_" + re.sub(r"[^A-Z0-9]", "_", device_name.upper())


def char_node(path: str, major: int | None = None, minor: int | None = None) -> dict[str, Any]:
    """A CDI device node: fully specified when the numbers are known, else by path (the
    runtime then reads type and numbers from the host's node)."""
    if major is None or minor is None:
        return {"path": path}
    return {"path": path, "type": "c", "major": major, "minor": minor}


def build_spec(
    driver: str,
    claim_uid: str,
    devices: list[AllocatedDevice],
    mps_dir: Path | None = None,
    host: CdiHost = SIMULATED,
) -> tuple[dict[str, Any], list[str]]:
    """The CDI spec of one claim and the CDI id of each device (same order). `mps_dir` is the
    claim's host directory for MPS (its `pipe` and `shm` are mounted into the containers)."""
    spec_edits: dict[str, Any] = {"env": [f"DRA_RESOURCE_DRIVER_NAME={driver}"]}
    cdi_devices: list[dict[str, Any]] = []
    annotations: dict[str, str] = {"kubedra.io/claim-uid": claim_uid}
    ids: list[str] = []
    uvm = STAND_IN_UVM_MAJOR if host.stand_ins else None
    if driver == "gpu.nvidia.com":
        uuids = [u for u in (_uuid(d) for d in devices) if isinstance(u, str)]
        spec_edits["env"].append(f"NVIDIA_VISIBLE_DEVICES={','.join(uuids) or 'void'}")
        spec_edits["deviceNodes"] = [
            char_node("/dev/nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR),
            char_node("/dev/nvidia-uvm", uvm, 0),
            char_node("/dev/nvidia-uvm-tools", uvm, 1),
        ]
        if host.mounts:
            spec_edits["mounts"] = [
                {"hostPath": m, "containerPath": m, "options": ["ro", "nosuid", "nodev", "bind"]}
                for m in host.mounts
            ]
    elif driver == "tpu.google.com":
        chips = [str(d.attribute("index")) for d in devices if d.attribute("index") is not None]
        spec_edits["env"].append(f"TPU_VISIBLE_CHIPS={','.join(chips)}")
        spec_edits["deviceNodes"] = [char_node("/dev/vfio/vfio", MISC_MAJOR, VFIO_MINOR)]
    mps = [d for d in devices if d.sharing.get("strategy") == "MPS"]
    if mps and mps_dir is not None:
        pipe, shm = mps_dir / "pipe", mps_dir / "shm"
        spec_edits["env"].append(f"CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE_DIR}")
        sharing = mps[0].sharing
        if "activeThreadPercentage" in sharing:
            pct = sharing["activeThreadPercentage"]
            spec_edits["env"].append(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={pct}")
        limits = [
            f"{i}={d.sharing['pinnedDeviceMemoryLimit']}"
            for i, d in enumerate(mps)
            if "pinnedDeviceMemoryLimit" in d.sharing
        ]
        if limits:
            spec_edits["env"].append(f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={','.join(limits)}")
        spec_edits.setdefault("mounts", []).extend([
            {"hostPath": str(pipe), "containerPath": MPS_PIPE_DIR, "options": ["rw", "bind"]},
            {
                "hostPath": str(shm),
                "containerPath": "/dev/shm",
                "options": ["rw", "nosuid", "nodev", "bind"],
            },
        ])
    for dev in devices:
        name = f"{claim_uid}-{dev.device.name}"
        edits: dict[str, Any] = {}
        if driver == "gpu.nvidia.com":
            minor = _minor(dev)
            if minor is not None:
                edits["deviceNodes"] = [
                    {
                        "path": f"/dev/nvidia{minor}",
                        "type": "c",
                        "major": NVIDIA_MAJOR,
                        "minor": minor,
                    }
                ]
            if dev.mig is not None:
                edits.setdefault("deviceNodes", []).extend(dev.mig.nodes(host))
            edits["env"] = [
                f"NVIDIA_DRA_DEVICE_{_env_name(dev.device.name)[11:]}={dev.device.name}"
            ]
        elif driver == "tpu.google.com":
            group = dev.attribute("index") if host.stand_ins else None
            vfio = STAND_IN_VFIO_MAJOR if isinstance(group, int) else None
            edits["deviceNodes"] = [char_node(f"/dev/vfio/{dev.device.name}", vfio, group)]
        else:
            edits["env"] = [f"{_env_name(dev.device.name)}={dev.device.name}"]
        entry: dict[str, Any] = {"name": name, "containerEdits": edits}
        if dev.sharing:
            entry["annotations"] = {
                f"{driver}/sharing": json.dumps(dev.sharing, sort_keys=True, separators=(",", ":"))
            }
        cdi_devices.append(entry)
        ids.append(qualified_name(driver, name))
    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": kind(driver),
        "annotations": annotations,
        "containerEdits": spec_edits,
        "devices": cdi_devices,
    }
    return spec, ids


def retarget_mig(
    spec: dict[str, Any],
    cdi_device: str,
    old_uuid: str,
    new: MigAccess,
    host: CdiHost = SIMULATED,
) -> dict[str, Any]:
    """`spec` with CDI device `cdi_device` moved from the MIG instance `old_uuid` to `new`
    (the instance was made again): its UUID in NVIDIA_VISIBLE_DEVICES, its capability nodes."""
    out: dict[str, Any] = json.loads(json.dumps(spec))
    edits = out.setdefault("containerEdits", {})
    prefix = "NVIDIA_VISIBLE_DEVICES="
    env = []
    for line in edits.get("env", []):
        if line.startswith(prefix):
            names = [new.uuid if n == old_uuid else n for n in line[len(prefix) :].split(",")]
            line = prefix + ",".join(names)
        env.append(line)
    edits["env"] = env
    for device in out.get("devices", []):
        if device.get("name") != cdi_device:
            continue
        device_edits = device.setdefault("containerEdits", {})
        nodes = [
            n for n in device_edits.get("deviceNodes", [])
            if not str(n.get("path", "")).startswith(f"{CAPS_DIR}/")
        ]  # fmt: skip
        device_edits["deviceNodes"] = nodes + new.nodes(host)
    return out
