"""`kubedra schedule | explain | devices | allocate`: placement, and why."""

from __future__ import annotations

import json
import sys
import time

import click

from kubedra.allocator import AllocatedState, Inventory, NodeInfo, allocate
from kubedra.api.codec import plain
from kubedra.api.core import Node, Pod
from kubedra.api.loader import load
from kubedra.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.output import table
from kubedra.cluster.kubernetes import KubeStore
from kubedra.scheduler.explain import NodeGroup, explain_claims, pod_claims
from kubedra.scheduler.funnels import format_funnel
from kubedra.scheduler.policies import POLICIES, make_policy
from kubedra.scheduler.scheduler import SCHEDULER_NAMES, Scheduler
from kubedra.scheduler.view import ClusterView

POLICY_CHOICE = click.Choice(sorted(POLICIES))


@click.command()
@click.option("--policy", type=POLICY_CHOICE, default="first-fit", show_default=True)
@click.option("--once", "mode", flag_value="once", default=True, help="One pass (default).")
@click.option("--watch", "mode", flag_value="watch", help="Keep scheduling as things change.")
@click.pass_obj
@fails_cleanly
def schedule(settings: Settings, policy: str, mode: str) -> None:
    """Schedule pending pods (schedulerName kubedra; on the embedded store also
    default-scheduler, as no other scheduler runs there)."""
    store = settings.open_store()
    cluster = isinstance(store, KubeStore)  # kube-scheduler and the claim controller run there
    scheduler = Scheduler(
        store,
        policy,
        strict_cel=settings.strict,
        scheduler_names=("kubedra",) if cluster else SCHEDULER_NAMES,
        claim_controller=not cluster,
    )
    while True:
        for o in scheduler.run_once():
            where = (
                f"-> {o.node} ({', '.join(o.devices) or 'no devices'})"
                if o.node
                else f"unschedulable: {o.message}"
            )
            click.echo(f"pod/{o.pod.split('/')[1]} {where}")
        if mode == "once":
            return
        time.sleep(0.5)


@click.command()
@click.argument("kind", type=click.Choice(["pod", "po", "claim", "rc"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_obj
@fails_cleanly
def explain(settings: Settings, kind: str, name: str, namespace: str) -> None:
    """Why a pod or claim fits where it does, or nowhere: funnels per node group."""
    store = settings.open_store()
    scheduler = Scheduler(store, strict_cel=settings.strict)
    if kind in ("pod", "po"):
        pod = store.get(Pod, name, namespace)
        head = f"pod {namespace}/{name}: " + (
            f"bound to {pod.spec.node_name}" if pod.spec.node_name else "pending"
        )
        claims, subject = pod_claims(scheduler, pod), pod
    else:
        claim = store.get(ResourceClaim, name, namespace)
        allocated = claim.status is not None and claim.status.allocation is not None
        head = f"claim {namespace}/{name}: " + ("allocated" if allocated else "not allocated")
        claims, subject = [claim], None
    click.echo(head)
    if subject is not None and subject.spec.node_name:
        return
    sys.stdout.write(format_groups(explain_claims(scheduler, claims, subject)))


def format_groups(groups: list[NodeGroup], max_names: int = 3) -> str:
    out = []
    for g in groups:
        names = ", ".join(g.nodes[:max_names]) + (
            f", +{len(g.nodes) - max_names}" if len(g.nodes) > max_names else ""
        )
        out.append(f"  {len(g.nodes)} node(s) [{names}]: {g.summary}\n")
        for f in g.funnels:
            out.append("    " + format_funnel(f) + "\n")
    return "".join(out)


@click.command()
@click.option("--node", help="Only this node.")
@click.option("--free", is_flag=True, help="Only devices nobody holds.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.pass_obj
@fails_cleanly
def devices(settings: Settings, node: str | None, free: bool, output: str) -> None:
    """The device inventory of the cluster, and which claim holds each device."""
    store = settings.open_store()
    holders: dict[tuple[str, str, str], list[str]] = {}
    for claim in store.list(ResourceClaim, None):
        alloc = claim.status.allocation if claim.status else None
        for r in alloc.devices.results if alloc else ():
            holders.setdefault((r.driver, r.pool, r.device), []).append(
                f"{claim.namespace}/{claim.name}"
            )
    rows = []
    selector = f"spec.nodeName={node}" if node else None
    for rs in store.list(ResourceSlice, field_selector=selector):
        for d in rs.spec.devices:
            held = holders.get((rs.spec.driver, rs.spec.pool.name, d.name), [])
            if free and held:
                continue
            product = next(
                (
                    a.string
                    for k, a in d.attributes.items()
                    if k.rpartition("/")[2] in ("productName", "accelerator", "type") and a.string
                ),
                "",
            )
            memory = next((str(c.value) for k, c in d.capacity.items() if k.endswith("memory")), "")
            rows.append(
                [
                    rs.spec.node_name or "<none>",
                    rs.spec.driver,
                    d.name,
                    product,
                    memory,
                    ",".join(held) or "<free>",
                ]
            )
    rows.sort()
    if output == "json":
        keys = ("node", "driver", "device", "product", "memory", "heldBy")
        click.echo(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], indent=2))
    else:
        sys.stdout.write(table(["NODE", "DRIVER", "DEVICE", "PRODUCT", "MEMORY", "HELD BY"], rows))


@click.command("allocate")
@click.option("-f", "--filename", "paths", multiple=True, required=True)
@click.option("--node", help="Allocate for this node (default: the first node that fits).")
@click.option("--allocated", "allocated_file", help="Claims (with status) already holding devices.")
@click.option("--order", type=POLICY_CHOICE, default="first-fit", show_default=True)
@click.option("-o", "--output", type=click.Choice(["json", "yaml", "table"]), default="table")
@click.pass_obj
@fails_cleanly
def allocate_command(
    settings: Settings,
    paths: tuple[str, ...],
    node: str | None,
    allocated_file: str | None,
    order: str,
    output: str,
) -> None:
    """Run the allocator on manifests (no store): slices, classes and claims from files."""
    objects = [o.obj for o in load(paths)]
    slices = [o for o in objects if isinstance(o, ResourceSlice)]
    classes = {o.name: o for o in objects if isinstance(o, DeviceClass)}
    claims = [
        o
        for o in objects
        if isinstance(o, ResourceClaim) and not (o.status and o.status.allocation)
    ]
    labels = {o.name: o.metadata.labels for o in objects if isinstance(o, Node)}
    held = [o.obj for o in load([allocated_file])] if allocated_file else []
    state = AllocatedState.from_claims([c for c in held if isinstance(c, ResourceClaim)])
    inventory = Inventory.build(slices)
    names = [node] if node else sorted({s.spec.node_name for s in slices if s.spec.node_name})
    infos = [NodeInfo(n, labels.get(n, {})) for n in names]
    policy, view = make_policy(order), ClusterView(inventory, infos)
    reason, results, where = "no node named by the slices", None, None
    for info in infos:
        found = allocate(
            claims,
            info,
            inventory,
            classes,
            state,
            strict_cel=settings.strict,
            order=policy.device_order(view, info.name),
        )
        if found.results is not None:
            results, where = found.results, info.name
            break
        reason = (
            f"node {info.name}: {found.unsatisfiable.summary if found.unsatisfiable else 'no fit'}"
        )
    report = [
        {
            "namespace": c.namespace,
            "name": c.name,
            "allocation": plain(results[i]) if results else None,
            "reason": f"allocated on node {where}" if results else reason,
        }
        for i, c in enumerate(claims)
    ]
    _print_report(report, output)
    sys.exit(0 if results is not None else 1)


def _print_report(report: list[dict[str, object]], output: str) -> None:
    if output == "json":
        click.echo(json.dumps({"claims": report}, indent=2))
    elif output == "yaml":
        import yaml

        click.echo(yaml.safe_dump({"claims": report}, sort_keys=False), nl=False)
    else:
        rows = []
        for entry in report:
            alloc = entry["allocation"]
            devices = (
                ",".join(f"{r['pool']}/{r['device']}" for r in alloc["devices"]["results"])
                if isinstance(alloc, dict)
                else "<none>"
            )
            rows.append([f"{entry['namespace']}/{entry['name']}", devices, str(entry["reason"])])
        sys.stdout.write(table(["CLAIM", "DEVICES", "REASON"], rows))
