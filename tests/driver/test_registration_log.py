"""The kubelet's registration status in the driver's log: `error` only when there is one
(a log shipper reads `error=null` as a failure)."""

from __future__ import annotations

import logging

import grpc

from kubedra.driver.grpc_api import registration, registration_grpc
from kubedra.driver.kubelet import unix_target
from kubedra.driver.logs import JsonLinesFormatter, KeyValueFormatter

from .conftest import Agent


def _notify(agent: Agent, registered: bool, error: str) -> None:
    with grpc.insecure_channel(unix_target(agent.paths.registration_socket)) as channel:
        stub = registration_grpc.RegistrationStub(channel)
        status = registration.RegistrationStatus(plugin_registered=registered, error=error)
        stub.NotifyRegistrationStatus(status, timeout=10)


def _status_lines(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage() == "registration status"]


def test_success_has_no_error_field_and_a_failure_names_it(
    agent: Agent, driver_log: list[logging.LogRecord]
) -> None:
    _notify(agent, True, "")
    _notify(agent, False, "plugin name already registered")
    ok, failed = _status_lines(driver_log)
    assert KeyValueFormatter().format(ok).endswith(' msg="registration status" registered=true')
    assert '"error"' not in JsonLinesFormatter().format(ok)
    assert KeyValueFormatter().format(failed).endswith(
        'registered=false error="plugin name already registered"')
