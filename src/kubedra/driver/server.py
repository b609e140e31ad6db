"""The kubelet plugin: gRPC servers on the registration socket and on dra.sock.

dra.sock serves both `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` and `...v1beta1.DRAPlugin`
(advertised in that order), and the device health stream `v1.DRAResourceHealth`; the
registration socket serves `pluginregistration.Registration`.
The sockets are created last, once everything is ready, because the kubelet registers the
plugin as soon as the registration socket appears; they are removed on stop. Socket and
directory modes are set explicitly (`kubedra.driver.files`), whatever the umask.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from kubedra.driver import files
from kubedra.driver.grpc_api import (
    dra_v1,
    dra_v1_grpc,
    dra_v1beta1,
    dra_v1beta1_grpc,
    health_v1_grpc,
    registration,
    registration_grpc,
)
from kubedra.driver.health_service import SERVICE as HEALTH_SERVICE
from kubedra.driver.health_service import HealthStream
from kubedra.driver.kubelet import PLUGIN_TYPE, SUPPORTED_VERSIONS, PluginPaths, unix_target
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.prepare import ClaimRef, DeviceState, PrepareResult

log = get_logger("server")


def _refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]


def _prepare_response(pb: Any, results: dict[str, PrepareResult], share_ids: bool) -> Any:
    response = pb.NodePrepareResourcesResponse()
    for uid, result in results.items():
        entry = response.claims[uid]
        if result.error:
            entry.error = result.error
            continue
        for device in result.devices:
            out = entry.devices.add(
                request_names=device.request_names,
                pool_name=device.pool_name,
                device_name=device.device_name,
                cdi_device_ids=device.cdi_device_ids,
            )
            if share_ids and device.share_id:
                out.share_id = device.share_id
    return response


def _unprepare_response(pb: Any, errors: dict[str, str]) -> Any:
    response = pb.NodeUnprepareResourcesResponse()
    for uid, error in errors.items():
        response.claims[uid].error = error
    return response


def _servicer(base: type, pb: Any, state: DeviceState, share_ids: bool, version: str) -> Any:
    class Servicer(base):  # type: ignore[misc]
        def NodePrepareResources(self, request: Any, context: Any) -> Any:
            if request.claims:  # (none: the health probe, every few seconds)
                log_event(log, "NodePrepareResources", version=version, claims=len(request.claims))
            return _prepare_response(pb, state.prepare(_refs(request)), share_ids)

        def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
            log_event(log, "NodeUnprepareResources", version=version, claims=len(request.claims))
            return _unprepare_response(pb, state.unprepare(_refs(request)))

    return Servicer()


class RegistrationServicer(registration_grpc.RegistrationServicer):  # type: ignore[misc]
    def __init__(
        self,
        driver: str,
        endpoint: Path,
        on_status: Callable[[bool, str], None],
        services: tuple[str, ...] = SUPPORTED_VERSIONS,
    ) -> None:
        self.driver, self.endpoint, self.on_status = driver, endpoint, on_status
        self.services = services

    def GetInfo(self, request: Any, context: Any) -> Any:
        return registration.PluginInfo(
            type=PLUGIN_TYPE,
            name=self.driver,
            endpoint=str(self.endpoint),
            supported_versions=list(self.services),
        )

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.on_status(bool(request.plugin_registered), str(request.error))
        return registration.RegistrationStatusResponse()


class PluginServer:
    def __init__(
        self,
        state: DeviceState,
        paths: PluginPaths,
        max_workers: int = 8,
        health: HealthStream | None = None,
    ) -> None:
        """`health`: also serve the kubelet's device health stream on dra.sock (and
        advertise it at registration), which holds one worker for as long as it is open."""
        self.state, self.paths, self.driver = state, paths, state.driver
        self.health = health
        self.registered = threading.Event()
        self.registration_error = ""
        self._max_workers = max_workers
        self._servers: list[grpc.Server] = []

    def _on_status(self, registered: bool, error: str) -> None:
        self.registration_error = error
        if registered:
            self.registered.set()
        else:
            self.registered.clear()
        # No `error` field on success: a log shipper would read `error=null` as a failure.
        problem = {"error": error} if error else {}
        log_event(log, "registration status", logging.INFO, registered=registered, **problem)

    def _serve(self, socket: Path, add: Callable[[grpc.Server], None], own_dir: bool) -> None:
        files.ensure_dir(socket.parent, files.PLUGIN_DIR_MODE, own=own_dir)
        with contextlib.suppress(FileNotFoundError):
            socket.unlink()  # a stale socket of a previous run
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        add(server)
        if server.add_insecure_port(unix_target(socket)) == 0:
            raise OSError(f"cannot listen on {socket}")
        os.chmod(socket, files.SOCKET_MODE)  # bound, not yet listening: nobody connected yet
        server.start()
        self._servers.append(server)

    def start(self) -> None:
        state = self.state

        def add_dra(server: grpc.Server) -> None:
            v1 = _servicer(dra_v1_grpc.DRAPluginServicer, dra_v1, state, True, "v1")
            v1beta1 = _servicer(
                dra_v1beta1_grpc.DRAPluginServicer, dra_v1beta1, state, False, "v1beta1"
            )
            dra_v1_grpc.add_DRAPluginServicer_to_server(v1, server)
            dra_v1beta1_grpc.add_DRAPluginServicer_to_server(v1beta1, server)
            if self.health is not None:
                health_v1_grpc.add_DRAResourceHealthServicer_to_server(self.health, server)

        services = (*SUPPORTED_VERSIONS, *((HEALTH_SERVICE,) if self.health else ()))

        def add_registration(server: grpc.Server) -> None:
            servicer = RegistrationServicer(
                self.driver, self.paths.dra_socket, self._on_status, services
            )
            registration_grpc.add_RegistrationServicer_to_server(servicer, server)

        self._serve(self.paths.dra_socket, add_dra, own_dir=True)
        # plugins_registry is the kubelet's: created 0750 if missing, otherwise left alone
        self._serve(self.paths.registration_socket, add_registration, own_dir=False)
        log_event(
            log,
            "plugin serving",
            driver=self.driver,
            registration=str(self.paths.registration_socket),
            endpoint=str(self.paths.dra_socket),
        )

    def probe(self, timeout: float = 2.0) -> str | None:
        """Whether both sockets answer the kubelet's calls (the liveness check): GetInfo on
        the registration socket, an empty NodePrepareResources on dra.sock; the problem, or
        None. Upstream's example driver checks its plugin the same way."""
        calls: tuple[tuple[Path, Callable[[grpc.Channel], object]], ...] = (
            (
                self.paths.registration_socket,
                lambda ch: registration_grpc.RegistrationStub(ch).GetInfo(
                    registration.InfoRequest(), timeout=timeout
                ),
            ),
            (
                self.paths.dra_socket,
                lambda ch: dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
                    dra_v1.NodePrepareResourcesRequest(), timeout=timeout
                ),
            ),
        )
        for socket, call in calls:
            with grpc.insecure_channel(unix_target(socket)) as channel:
                try:
                    call(channel)
                except grpc.RpcError as err:
                    return f"{socket}: {err.code().name}: {err.details()}"
        return None

    def stop(self, grace: float = 2.0) -> None:
        for server in reversed(self._servers):
            server.stop(grace).wait()
        self._servers.clear()
        for socket in (self.paths.registration_socket, self.paths.dra_socket):
            with contextlib.suppress(FileNotFoundError):
                socket.unlink()
        log_event(log, "plugin stopped", driver=self.driver)

    def __enter__(self) -> PluginServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
