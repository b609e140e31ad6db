"""Prepare-time MIG on a real node (upstream's kubelet and containerd, Debian's runc): the chart's
driver on the simulated `h100x8-mig` profile (H100s in MIG mode, their instances kept by
`SimulatedNvml` in the driver's plugin directory on the host). A pod asking for a 3g.40gb
partition gets a freshly made instance, visible in its container through CDI; deleting the
pod destroys the instance and the slice offers the placement again.

Needs root (namespaces, mounts, cgroups): skipped otherwise, with that reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedra.catalog import profile
from kubedra.devcluster.pki import REAL_NODE
from kubedra.driver.backends.nvml import mig_placement
from kubedra.driver.backends.simnvml import STATE_FILE, SimulatedNvml
from tests.conftest import REPO
from tests.e2e.realnode import DRIVER, Node, install_chart, real_node_cluster, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a real node needs root")
EXAMPLE = REPO / "examples" / "mig-3g40gb"
PROFILE = "h100x8-mig"
VALUES = f"""
driver:
  drivers:
    - name: {DRIVER}
      backend: simulated
      profile: {PROFILE}
"""
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, control_plane: object) -> Iterator[Node]:
    folder = tmp_path_factory.mktemp("real-mig")
    values = folder / "values-mig.yaml"
    values.write_text(VALUES)
    with real_node_cluster(folder / "cluster") as running:
        TIMINGS["helm install --wait (s)"] = install_chart(running, "-f", str(values))
        yield running
    print("\nreal node MIG timings:", {k: round(v, 2) for k, v in TIMINGS.items()})


def _hardware(node: Node) -> SimulatedNvml:
    """The node's simulated GPUs, as the driver in its pod sees them."""
    plugin_dir = node.layout.path("kubelet", "plugins", DRIVER)
    return SimulatedNvml(profile(PROFILE), REAL_NODE, Path(plugin_dir) / STATE_FILE)


def _pool(node: Node) -> tuple[list[str], dict[str, Any]]:
    """The devices and counter sets the driver publishes for the real node."""
    slices = node.json("get", "resourceslices")["items"]
    devices = sorted(d["name"] for s in slices for d in s["spec"].get("devices", []))
    counters = {c["name"]: c["counters"] for s in slices for c in s["spec"].get("sharedCounters", [])}
    return devices, counters


def test_a_pod_gets_a_fresh_mig_instance_and_deleting_it_destroys_the_instance(node: Node) -> None:
    hardware = _hardware(node)
    assert hardware.instances() == {}
    devices, counters = _pool(node)
    assert len(devices) == 8 * 26 and "gpu-0-mig-3g40gb-9-4" in devices
    started = time.monotonic()
    node.kubectl("apply", "-f", str(EXAMPLE))
    node.wait("--for=condition=Ready pod/mig-inference", timeout=180)
    TIMINGS["MIG pod Ready after apply (s)"] = time.monotonic() - started
    (claim,) = node.json("get", "resourceclaims")["items"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    placement = mig_placement(result["device"])
    assert placement is not None and "-mig-3g40gb-" in result["device"], result
    gpu, profile_id, start = placement
    index = int(gpu.removeprefix("gpu-"))
    # Exactly that instance exists, with one compute instance: the claim's MIG device.
    ((on, (gi,)),) = hardware.instances().items()
    assert (on, gi["profileId"], gi["start"], gi["size"]) == (index, profile_id, start, 4)
    (ci,) = gi["computeInstances"]
    # The container got it through CDI: its UUID and its access capabilities.
    logs = node.kubectl("logs", "mig-inference").splitlines()
    assert f"NVIDIA_VISIBLE_DEVICES={ci['uuid']}" in logs, logs
    caps = {
        f"nvidia-cap{hardware.mig_capability_minor(index, gi['id'], None)}",
        f"nvidia-cap{hardware.mig_capability_minor(index, gi['id'], ci['id'])}",
    }
    assert caps <= set(logs), logs
    uid = claim["metadata"]["uid"]
    assert node.checkpoint_claims() == [uid]
    written = node.json("get", "resourceclaim", claim["metadata"]["name"])["status"]["devices"]
    assert written[0]["data"]["uuid"] == ci["uuid"]
    # Deleting the pod unprepares the claim: the instance is destroyed, the placement free.
    started = time.monotonic()
    node.kubectl("delete", "pod", "mig-inference", "--wait=true", "--timeout=120s")
    wait_until(lambda: not hardware.instances() and not node.checkpoint_claims(), 60,
               "the instance destroyed and the claim unprepared")  # fmt: skip
    TIMINGS["instance destroyed after pod delete (s)"] = time.monotonic() - started
    assert node.cdi_specs == []
    assert node.json("get", "resourceclaims")["items"] == []
    assert _pool(node) == (devices, counters)  # the slice offers everything again
    node.kubectl("delete", "-f", str(EXAMPLE), "--ignore-not-found=true")
