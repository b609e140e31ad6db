"""Upstream's kubelet side of the DRA plugin protocol, for the real-cluster tests.

`tools/kubeletclient` (Go, k8s.io/kubelet v0.37.2's generated packages; none of kubedra's
protos) registers with a running driver as the kubelet's plugin watcher does and calls it
as the kubelet's DRA manager does; its JSON answer lists what the kubelet would refuse
(`problems`) and resolves CDI device IDs with the CDI library, as a container runtime does.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubedra.api.resource import ResourceClaim
from kubedra.devcluster.gotool import KUBELET_CLIENT

ClaimLike = ResourceClaim | tuple[str, str, str]  # a claim, or (namespace, name, uid)


class KubeletRefused(Exception):
    """The kubelet would fail the whole call (registration refused, a gRPC error)."""


def _ref(claim: ClaimLike) -> str:
    if isinstance(claim, ResourceClaim):
        return f"{claim.namespace}/{claim.name}/{claim.metadata.uid}"
    return "/".join(claim)


@dataclass
class UpstreamKubelet:
    registration: Path
    cdi_dir: Path | None = None

    def call(
        self, command: str, *claims: ClaimLike, services: Sequence[str] | None = None
    ) -> dict[str, Any]:
        args = [str(KUBELET_CLIENT.build()), "-registration", str(self.registration)]
        if self.cdi_dir is not None:
            args += ["-cdi-dir", str(self.cdi_dir)]
        if services is not None:
            args += ["-services", ",".join(services)]
        done = subprocess.run(
            [*args, command, *(_ref(c) for c in claims)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise KubeletRefused(done.stderr.strip())
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def prepare(self, *claims: ClaimLike, **kwargs: Any) -> dict[str, Any]:
        return self.call("prepare", *claims, **kwargs)

    def unprepare(self, *claims: ClaimLike, **kwargs: Any) -> dict[str, Any]:
        return self.call("unprepare", *claims, **kwargs)


def devices(answer: dict[str, Any], claim: ResourceClaim) -> list[tuple[str, str, list[str]]]:
    """(pool, device, CDI ids) of one claim in a prepare answer."""
    entry = answer["claims"][claim.metadata.uid]
    return [(d["poolName"], d["deviceName"], d["cdiDeviceIDs"]) for d in entry["devices"]]
