"""The kubelet side of the plugin protocol: socket layout and a client that acts as the kubelet.

Layout (drivers.md §5.1), root default /var/lib/kubelet:
`<root>/plugins_registry/<driver>-reg.sock` (registration, watched by the kubelet) and
`<root>/plugins/<driver>/dra.sock` (DRA service); the plugin directory also holds the
checkpoint. `KubeletClient` does what the kubelet's plugin manager does: GetInfo, version
choice, NotifyRegistrationStatus, then NodePrepareResources / NodeUnprepareResources on the
advertised endpoint with the chosen service version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from kubedra.api.validation import names
from kubedra.driver.grpc_api import (
    dra_v1,
    dra_v1_grpc,
    dra_v1beta1,
    dra_v1beta1_grpc,
    registration,
    registration_grpc,
)

DEFAULT_ROOT = Path("/var/lib/kubelet")
PLUGIN_TYPE = "DRAPlugin"
SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # preference order
KUBELET_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # what a 1.34+ kubelet speaks
UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL


@dataclass(frozen=True)
class PluginPaths:
    registration_socket: Path
    dra_socket: Path
    plugin_dir: Path

    @classmethod
    def for_driver(
        cls,
        driver: str,
        root: Path = DEFAULT_ROOT,
        plugin_dir: Path | None = None,
        registry_dir: Path | None = None,
    ) -> PluginPaths:
        detail = names.driver_name(driver)
        if detail:  # the name becomes a file name: it must not be able to leave the directory
            raise ValueError(f"driver name {driver[:80]!r}: {detail}")
        plugin_dir = plugin_dir or root / "plugins" / driver
        registry_dir = registry_dir or root / "plugins_registry"
        paths = cls(registry_dir / f"{driver}-reg.sock", plugin_dir / "dra.sock", plugin_dir)
        for sock in (paths.registration_socket, paths.dra_socket):
            if len(str(sock)) > UNIX_PATH_MAX:
                raise ValueError(f"unix socket path too long ({len(str(sock))} > 107): {sock}")
        return paths


def unix_target(path: Path) -> str:
    return f"unix://{path}" if str(path).startswith("/") else f"unix:{path}"


class RegistrationRejected(RuntimeError):
    pass


class KubeletClient:
    """A kubelet stand-in speaking gRPC over the driver's real unix sockets."""

    def __init__(self, registration_socket: Path, timeout: float = 45.0) -> None:
        self.registration_socket, self.timeout = registration_socket, timeout
        self.info: Any = None
        self.version = ""
        self._channels: list[grpc.Channel] = []
        self._dra: Any = None
        self._pb: Any = None

    def _channel(self, path: Path) -> grpc.Channel:
        channel = grpc.insecure_channel(unix_target(path))
        self._channels.append(channel)
        return channel

    def register(self, accept: bool = True) -> Any:
        """GetInfo, check type and versions, NotifyRegistrationStatus; returns PluginInfo."""
        reg = registration_grpc.RegistrationStub(self._channel(self.registration_socket))
        info = reg.GetInfo(registration.InfoRequest(), timeout=self.timeout)
        error = ""
        if info.type != PLUGIN_TYPE:
            error = f"plugin type {info.type!r} is not {PLUGIN_TYPE}"
        version = next((v for v in info.supported_versions if v in KUBELET_VERSIONS), "")
        if not error and not version:
            error = f"none of the versions {list(info.supported_versions)} is supported"
        ok = accept and not error
        status = registration.RegistrationStatus(
            plugin_registered=ok, error=error or ("" if accept else "rejected by test kubelet")
        )
        reg.NotifyRegistrationStatus(status, timeout=self.timeout)
        if not ok:
            raise RegistrationRejected(status.error)
        self.info, self.version = info, version
        channel = self._channel(Path(info.endpoint))
        if version == "v1.DRAPlugin":
            self._dra, self._pb = dra_v1_grpc.DRAPluginStub(channel), dra_v1
        else:
            self._dra, self._pb = dra_v1beta1_grpc.DRAPluginStub(channel), dra_v1beta1
        return info

    def _claims(self, claims: Iterable[tuple[str, str, str]]) -> list[Any]:
        return [self._pb.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]

    def prepare(self, claims: Iterable[tuple[str, str, str]]) -> Any:
        """(namespace, uid, name) per claim -> NodePrepareResourcesResponse."""
        if self._dra is None:
            raise RuntimeError("register() first")
        request = self._pb.NodePrepareResourcesRequest(claims=self._claims(claims))
        return self._dra.NodePrepareResources(request, timeout=self.timeout)

    def unprepare(self, claims: Iterable[tuple[str, str, str]]) -> Any:
        if self._dra is None:
            raise RuntimeError("register() first")
        request = self._pb.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        return self._dra.NodeUnprepareResources(request, timeout=self.timeout)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        self._channels.clear()

    def __enter__(self) -> KubeletClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
