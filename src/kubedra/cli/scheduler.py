"""`kubedra scheduler run | check`: the long-running scheduler, and the allocation checker."""

from __future__ import annotations

import dataclasses
import sys

import click

from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals
from kubedra.cli.scheduling import POLICY_CHOICE
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.leader import LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S
from kubedra.cluster.rest import DEFAULT_BURST, DEFAULT_QPS
from kubedra.scheduler.plugins.gang import GANG_TIMEOUT_S
from kubedra.scheduler.runner import LEASE_NAMESPACE, LOST_LEASE, RunConfig, SchedulerRunner
from kubedra.scheduler.runner import exit_lost_lease as _exit_lost_lease
from kubedra.scheduler.verify import check_allocations


@click.group()
def scheduler() -> None:
    """Run kubedra's scheduler as a component, or check the cluster's allocations."""


@scheduler.command("run")
@click.option(
    "--scheduler-name",
    default="kubedra",
    show_default=True,
    help="Schedule the pods whose spec.schedulerName is this.",
)
@click.option("--policy", type=POLICY_CHOICE, default="first-fit", show_default=True)
@click.option("--metrics-port", type=int, help="Serve /metrics, /healthz, /readyz here.")
@click.option("--metrics-address", default="", help="Address to serve them on (default: all).")
@click.option(
    "--kube-api-qps",
    "qps",
    type=float,
    default=DEFAULT_QPS,
    show_default=True,
    help="Client rate limit (kube-scheduler's default).",
)
@click.option("--kube-api-burst", "burst", type=int, default=DEFAULT_BURST, show_default=True)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Elect one leader among replicas on a Lease.",
)
@click.option(
    "--leader-elect-resource-name",
    "lease_name",
    default="",
    help="The Lease's name (default: the scheduler name).",
)
@click.option(
    "--leader-elect-resource-namespace",
    "lease_namespace",
    default=LEASE_NAMESPACE,
    show_default=True,
)
@click.option(
    "--leader-elect-lease-duration",
    "lease_duration",
    type=float,
    default=LEASE_DURATION_S,
    show_default=True,
    help="Seconds.",
)
@click.option(
    "--leader-elect-renew-deadline",
    "renew_deadline",
    type=float,
    default=RENEW_DEADLINE_S,
    show_default=True,
    help="Seconds.",
)
@click.option(
    "--leader-elect-retry-period",
    "retry_period",
    type=float,
    default=RETRY_PERIOD_S,
    show_default=True,
    help="Seconds.",
)
@click.option(
    "--node-selector",
    default="",
    help="Label selector of the nodes this scheduler owns (default: all nodes).",
)
@click.option(
    "--shared-nodes",
    type=click.Choice(["refuse", "warn"]),
    default="refuse",
    show_default=True,
    help="An owned node where another scheduler's pods hold devices: leave its "
    "devices alone (refuse), or only warn.",
)
@click.option(
    "--binders",
    type=int,
    default=16,
    show_default=True,
    help="Binding cycles in flight at most (on a cluster).",
)
@click.option(
    "--gang-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=GANG_TIMEOUT_S,
    show_default=True,
    help="Seconds the reserved pods of a gang (PodGroup with minCount) wait for the rest "
    "of it before all are given back.",
)
@click.pass_obj
@fails_cleanly
def run(
    settings: Settings,
    scheduler_name: str,
    policy: str,
    metrics_port: int | None,
    metrics_address: str,
    qps: float,
    burst: int,
    leader_elect: bool,
    lease_name: str,
    lease_namespace: str,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    node_selector: str,
    shared_nodes: str,
    binders: int,
    gang_timeout: float,
) -> None:
    """Schedule pods until SIGINT/SIGTERM, on a cluster or the embedded store."""
    backend = dataclasses.replace(settings.backend, qps=qps, burst=burst)
    store = backend.open()
    # The election has a client of its own, as kube-scheduler's: renewing the lease never
    # waits behind the scheduler's own requests.
    election_store = backend.open() if leader_elect else None
    config = RunConfig(
        scheduler_name=scheduler_name,
        policy=policy,
        leader_elect=leader_elect,
        lease_name=lease_name,
        lease_namespace=lease_namespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        metrics_port=metrics_port,
        metrics_address=metrics_address,
        binders=binders,
        node_selector=node_selector,
        shared_nodes=shared_nodes,
        claim_controller=not isinstance(store, KubeStore),
        strict_cel=settings.strict,
        gang_timeout=gang_timeout,
    )
    runner = SchedulerRunner(store, config, election_store=election_store)
    stop = stop_on_signals()
    click.echo(
        f"kubedra scheduler {scheduler_name} ({policy}) on {backend.describe()}, "
        f"identity {runner.identity}",
        err=True,
    )
    if runner.run(stop) == LOST_LEASE:
        click.echo("error: lost the lease: exiting", err=True)
        _exit_lost_lease()


@scheduler.command("check")
@click.pass_obj
@fails_cleanly
def check(settings: Settings) -> None:
    """Verify every allocation against slices and classes (selectors, counts, constraints),
    no device in two claims, reservations of live pods, bound pods on admitted nodes."""
    problems = check_allocations(settings.open_store())
    for problem in problems:
        click.echo(problem)
    if problems:
        click.echo(f"{len(problems)} problem(s)", err=True)
        sys.exit(1)
    click.echo("every allocation is valid")
