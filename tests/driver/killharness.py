"""kill -9 the driver (a real `kubedra driver run` process) at random moments of a stream of
NodePrepareResources / NodeUnprepareResources calls, restart it, check after every restart:

- no temporaries in the plugin or CDI directory; the checkpoint passes its checksum;
- checkpoint entries == CDI specs on disk (same UIDs, same content) == MPS host dirs, and
  every checkpointed claim's status.devices lists its devices as Ready;
- every claim whose prepare the kubelet saw succeed is still prepared, with the same devices,
  and every claim whose unprepare it saw succeed is not;
- a prepare after the restart returns the same devices (idempotent);
- with `mig` (claims on MIG placements of a simulated `h100x8-mig` node): the GPUs hold exactly
  the instances the checkpointed claims record, none pending is left, and each claim's CDI
  spec names its instances' MIG UUIDs.

`python -m tests.driver.killharness --kills 100` prints the figures; the test runs fewer.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubedra.catalog import profile
from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver.backends.simnvml import STATE_FILE, SimulatedNvml
from kubedra.driver.checkpoint import Checkpoint, PreparedClaim
from kubedra.driver.kubelet import KubeletClient

from .conftest import make_claim
from .driverproc import GPU as GPU_DRIVER
from .driverproc import DriverProcess, disk_problems, status_problems

NODE = "sim-1"
MIG_PROFILE = "h100x8-mig"
MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
}
Devices = tuple[tuple[str, str], ...]  # (device, first CDI id) per device


@dataclass
class KillReport:
    kills: int = 0
    prepares_acknowledged: int = 0
    unprepares_acknowledged: int = 0
    restarts_with_repairs: int = 0
    repairs: dict[str, int] = field(default_factory=dict)
    recoveries: int = 0
    idempotent_prepares: int = 0
    kills_with_violations: int = 0
    violations: list[str] = field(default_factory=list)

    def table(self) -> str:
        rows = [
            ("kills survived (restart + all invariants)", self.kills - self.kills_with_violations),
            ("kills", self.kills),
            ("prepares acknowledged", self.prepares_acknowledged),
            ("unprepares acknowledged", self.unprepares_acknowledged),
            ("restarts that repaired files", self.restarts_with_repairs),
            *((f"  {k}", v) for k, v in sorted(self.repairs.items())),
            ("checkpoint recoveries (should be 0)", self.recoveries),
            ("prepares re-checked after restart", self.idempotent_prepares),
            ("invariant violations after restart", len(self.violations)),
        ]
        return "\n".join(f"{name:<45} {value:>8}" for name, value in rows)


def _devices(entry: object) -> Devices:
    return tuple((d.device_name, d.cdi_device_ids[0]) for d in entry.devices)  # type: ignore[attr-defined]


class Kubelet:
    """What the kubelet knows: the acknowledged state of each claim."""

    def __init__(self, refs: list[tuple[str, str, str]], mig: bool = False) -> None:
        self.refs, self.mig = refs, mig
        self.state: dict[str, Devices | None] = {}  # uid -> devices if prepared, None if not
        self.first_answer: dict[str, Devices] = {}
        self.report = KillReport()

    def stream(self, driver: DriverProcess, rng: random.Random, stop: threading.Event) -> None:
        try:
            with KubeletClient(driver.paths.registration_socket, timeout=10) as kubelet:
                kubelet.register()
                while not stop.is_set():
                    batch = rng.sample(self.refs, rng.randint(1, 4))
                    for _, uid, _ in batch:
                        self.state.pop(uid, None)  # in flight: unknown until acknowledged
                    if rng.random() < 0.6:
                        answer = kubelet.prepare(batch)
                        for _, uid, _ in batch:
                            entry = answer.claims[uid]
                            if not entry.error:
                                self.state[uid] = _devices(entry)
                                self.first_answer.setdefault(uid, self.state[uid])
                                self.report.prepares_acknowledged += 1
                    else:
                        answer = kubelet.unprepare(batch)
                        for _, uid, _ in batch:
                            if not answer.claims[uid].error:
                                self.state[uid] = None
                                self.report.unprepares_acknowledged += 1
        except grpc.RpcError:
            pass  # the driver was killed

    def check(self, driver: DriverProcess, cdi: Path, when: str) -> None:
        claims, problems = disk_problems(driver.paths.plugin_dir, cdi)
        if self.mig:
            problems += mig_problems(driver.paths.plugin_dir, claims)
        store = SqliteStore(driver.store)
        try:
            problems += status_problems(store, claims)
        finally:
            store.close()
        for uid, devices in self.state.items():
            if devices is not None and uid not in claims:
                problems.append(f"acknowledged prepare lost: {uid}")
            elif devices is not None and _devices(claims[uid]) != devices:
                problems.append(f"devices changed: {uid}")
            elif devices is None and uid in claims:
                problems.append(f"acknowledged unprepare undone: {uid}")
        prepared = [r for r in self.refs if self.state.get(r[1]) is not None]
        with KubeletClient(driver.paths.registration_socket, timeout=10) as kubelet:
            kubelet.register()
            answer = kubelet.prepare(prepared) if prepared else None
        for _, uid, _ in prepared:
            assert answer is not None
            got = _devices(answer.claims[uid])
            self.report.idempotent_prepares += 1
            if answer.claims[uid].error or got != self.first_answer[uid]:
                problems.append(f"prepare after restart differs: {uid} {answer.claims[uid].error}")
        self.report.violations += [f"{when}: {p}" for p in problems]
        self.report.kills_with_violations += bool(problems)


def mig_problems(plugin_dir: Path, claims: dict[str, PreparedClaim]) -> list[str]:
    """How the simulated GPUs' instances disagree with the checkpointed claims."""
    hardware = SimulatedNvml(profile(MIG_PROFILE), NODE, plugin_dir / STATE_FILE)
    have = {
        (gpu, gi["id"], ci["uuid"])
        for gpu, found in hardware.instances().items()
        for gi in found
        for ci in gi["computeInstances"] or [{"uuid": "(no compute instance)"}]
    }
    want = {
        (r.gpu_minor, r.gpu_instance_id, r.mig_uuid) for c in claims.values() for r in c.mig
    }
    problems = [f"MIG instance no claim holds: {i}" for i in sorted(have - want, key=str)]
    problems += [f"MIG instance of a claim missing: {i}" for i in sorted(want - have, key=str)]
    snapshot = Checkpoint(plugin_dir, GPU_DRIVER, NODE).read()
    if snapshot is not None and snapshot.pending:
        problems.append(f"MIG instances left pending: {len(snapshot.pending)}")
    for uid, claim in sorted(claims.items()):
        env = claim.cdi_spec.get("containerEdits", {}).get("env", [])
        visible = ",".join(r.mig_uuid for r in claim.mig)
        if f"NVIDIA_VISIBLE_DEVICES={visible}" not in env:
            problems.append(f"CDI spec does not name the claim's MIG instances: {uid}")
    return problems


def _parse_repairs(log: str, report: KillReport) -> None:
    for line in log.splitlines():
        if "checkpoint unusable" in line:
            report.recoveries += 1
        if "checkpoint and CDI directory reconciled" in line:
            report.restarts_with_repairs += 1
            for key, value in re.findall(r"(\w+_\w+)=(\d+)", line):
                report.repairs[key] = report.repairs.get(key, 0) + int(value)


def run_kills(
    workdir: Path, kills: int, seed: int, claims: int = 12, mig: bool = False
) -> KillReport:
    """`mig`: each claim holds one or two 1g.10gb placements of its own (MIG instances are
    made and destroyed by its prepares and unprepares) on a simulated `h100x8-mig` node."""
    rng = random.Random(seed)
    store = SqliteStore(workdir / "state.db")
    refs = []
    places = [(gpu, start) for gpu in range(8) for start in range(7)]
    rng.shuffle(places)
    for i in range(claims):
        count = rng.randint(1, 2)
        if mig:
            devices = [f"gpu-{g}-mig-1g10gb-19-{s}" for g, s in (places.pop() for _ in range(count))]
            config = []
        else:
            devices = [f"gpu-{d}" for d in rng.sample(range(8), count)]
            config = [((), MPS)] if i % 4 == 0 else []
        claim = make_claim(store, f"c{i}", [("gpu", NODE, d) for d in devices], config=config)
        refs.append(("default", claim.metadata.uid, claim.metadata.name))
    store.close()
    driver = DriverProcess(
        workdir / "state.db",
        workdir / "kubelet",
        workdir / "cdi",
        profile=MIG_PROFILE if mig else "h100x8",
    )
    kubelet = Kubelet(refs, mig)
    try:
        driver.start()
        for kill in range(kills):
            stop = threading.Event()
            stream_rng = random.Random(rng.random())
            thread = threading.Thread(target=kubelet.stream, args=(driver, stream_rng, stop))
            thread.start()
            time.sleep(rng.uniform(0.05, 0.5))
            driver.kill()
            stop.set()
            thread.join(30)
            kubelet.report.kills += 1
            driver.start()
            kubelet.check(driver, workdir / "cdi", f"after kill {kill + 1}")
        driver.stop()
    finally:
        if driver.proc is not None:
            driver.kill()
    _parse_repairs(driver.log_text(), kubelet.report)
    return kubelet.report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--mig", action="store_true", help="claims on MIG placements")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kd-kill-", dir="/tmp"))
    try:
        start = time.monotonic()
        report = run_kills(workdir, args.kills, args.seed, mig=args.mig)
        print(report.table())
        print(f"{'seconds':<45} {time.monotonic() - start:>8.0f}")
        for violation in report.violations:
            print("VIOLATION", violation)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
