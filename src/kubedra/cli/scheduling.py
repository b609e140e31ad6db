"""`kubedra schedule | explain | devices | allocate`: placement, and why."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import click
from click.shell_completion import CompletionItem

from kubedra.allocator import AllocatedState, Blocker, Inventory, NodeInfo, allocate, diagnose
from kubedra.allocator.blockers import holders_of
from kubedra.allocator.inventory import rule_matches
from kubedra.allocator.types import DeviceRef
from kubedra.api.codec import plain
from kubedra.api.core import Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    Device,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup
from kubedra.cli.bound import explain_bound
from kubedra.cli.columns import device_memory, device_product
from kubedra.cli.complete import kinds, node_names, object_names
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.lint import checked_load
from kubedra.cli.output import table
from kubedra.cli.resources import resolve
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.store import DEFAULT_NAMESPACE, Store
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import (
    NodeGroup,
    explain_claims,
    explain_gang,
    gang_json,
    group_json,
    pod_claims,
    what_would_fit,
)
from kubedra.scheduler.funnels import format_funnel
from kubedra.scheduler.policies import POLICIES, make_policy
from kubedra.scheduler.scheduler import SCHEDULER_NAMES, Scheduler
from kubedra.scheduler.sharing import scheduler_of
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
                f"-> {o.node} ({', '.join(o.devices + o.joined) or 'no devices'})"
                if o.node
                else f"unschedulable: {o.message}"
            )
            click.echo(f"pod/{o.pod.split('/')[1]} {where}")
        if mode == "once":
            return
        time.sleep(0.5)


def explain_kinds(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """`pod`, `claim` and every kind's names (a kind alone, or KIND.FIELD, documents it)."""
    claim = [CompletionItem("claim")] if "claim".startswith(incomplete.lower()) else []
    return claim + kinds(ctx, param, incomplete)


@click.command()
@click.argument("kind", shell_complete=explain_kinds)
@click.argument("name", required=False, shell_complete=object_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@click.option(
    "--recursive", is_flag=True, help="Field documentation: the whole tree of field names."
)
@click.pass_obj
@fails_cleanly
def explain(
    settings: Settings, kind: str, name: str | None, namespace: str, output: str, recursive: bool
) -> None:
    """Why a pod or claim fits where it does, or nowhere (`explain pod|claim NAME`): per
    node group the funnels and the blockers, and what would make it fit (for a bound pod:
    its devices, the selectors they passed, and the funnel before the bind). `explain
    podgroup NAME` (pg): whether the gang is scheduled, waits, or fits nowhere and why, in
    one line with the numbers; then its pods and its PodGroup's condition. Without a
    NAME, as kubectl explain, the documentation of a kind or field: `explain rc`,
    `explain resourceclaim.spec.devices`, `explain pod.spec.resourceClaims`."""
    if name is None:
        if output != "text":
            raise click.UsageError("-o json is for `explain pod|claim|podgroup NAME`")
        sys.stdout.write(_field_docs(kind, recursive))
        return
    cls = _explained_kind(kind)
    store = settings.open_store()
    if cls is PodGroup:
        _explain_gang(store, name, namespace, settings.strict, output)
        return
    if cls is Pod:
        pod = store.get(Pod, name, namespace)
        if pod.spec.node_name:
            _explain_bound(store, pod, settings.strict, output)
            return
        names = _names(store, pod)
        scheduler = Scheduler(store, strict_cel=settings.strict, scheduler_names=names)
        head = f"pod {namespace}/{name}", "pending"
        groups = explain_claims(scheduler, pod_claims(scheduler, pod), pod)
    else:
        scheduler = Scheduler(store, strict_cel=settings.strict)
        claim = store.get(ResourceClaim, name, namespace)
        allocated = claim.status is not None and claim.status.allocation is not None
        head = f"claim {namespace}/{name}", "allocated" if allocated else "not allocated"
        groups = explain_claims(scheduler, [claim], None)
    if output == "json":
        click.echo(json.dumps(explanation_json(*head, groups), indent=2))
        return
    click.echo(f"{head[0]}: {head[1]}")
    sys.stdout.write(format_groups(groups))


def _explained_kind(kind: str) -> type[KubeObject]:
    """The kind `explain KIND NAME` explains placement for: a pod or a claim."""
    try:
        cls = ResourceClaim if kind.lower() == "claim" else resolve(kind)
    except KeyError:
        cls = None
    if cls not in (Pod, ResourceClaim, PodGroup):
        raise click.UsageError(
            f"explain KIND NAME says why a pod, claim or pod group is placed or pending (pod, "
            f"po, claim, rc, podgroup, pg), not a {kind}; `explain {kind}` without a name "
            "documents its fields"
        )
    assert cls is not None
    return cls


def _explain_gang(store: Store, name: str, namespace: str, strict: bool, output: str) -> None:
    """`explain podgroup NAME`: the verdict in one line, the pods, the condition."""
    gang = explain_gang(Scheduler(store, strict_cel=strict), namespace, name)
    if output == "json":
        click.echo(json.dumps(gang_json(gang), indent=2))
        return
    click.echo(f"podgroup {namespace}/{name}: {gang.verdict}")
    wanted = f"minCount {gang.min_count}" if gang.min_count else "no PodGroup"
    where = f", all in one {gang.topology_key}" if gang.topology_key else ""
    click.echo(f"pods: {len(gang.members)} ({wanted}{where})")
    for m in gang.members:
        says = f"on {m.node}" if m.node else "pending" + (f": {m.message}" if m.message else "")
        click.echo(f"  {m.name}: {says}")
    if gang.min_count:
        click.echo(f"condition: {gang.condition or 'none yet (the scheduler has not tried it)'}")


def _field_docs(path: str, recursive: bool) -> str:
    """`explain KIND[.FIELD...]`: kubectl explain's answer, from the models' docstrings."""
    from kubedra.cli.fields import explain_fields

    head, *fields = path.split(".")
    cls = ResourceClaim if head.lower() == "claim" else resolve(head)
    try:
        return explain_fields(cls, fields, recursive)
    except KeyError as err:
        raise KubedraError(str(err.args[0])) from None


def _names(store: Store, pod: Pod) -> tuple[str, ...]:
    """The scheduler a pending pod waits for: on a cluster the one it names (kube-scheduler's
    pods are another scheduler's there); on the embedded store kubedra, whatever it names."""
    if isinstance(store, KubeStore):
        return (scheduler_of(pod),)
    return SCHEDULER_NAMES


def explanation_json(subject: str, state: str, groups: list[NodeGroup]) -> dict[str, Any]:
    """`explain -o json`: the text's content for tools."""
    return {
        "object": subject,
        "state": state,
        "nodeGroups": [group_json(g) for g in groups],
        "whatWouldFit": what_would_fit(groups),
    }


def _explain_bound(store: Store, pod: Pod, strict: bool, output: str) -> None:
    lines, groups = explain_bound(store, pod, strict)
    if output == "json":
        state = f"bound to {pod.spec.node_name}"
        report = explanation_json(f"pod {pod.namespace}/{pod.name}", state, groups)
        click.echo(json.dumps({**report, "devices": [line.strip() for line in lines]}, indent=2))
        return
    click.echo(f"pod {pod.namespace}/{pod.name}: bound to {pod.spec.node_name}")
    click.echo("devices:" if lines else "devices: none (the pod claims no devices)")
    for line in lines:
        click.echo(line)
    click.echo("funnel per node group, as the scheduler saw it before the bind:")
    sys.stdout.write(format_groups(groups))


def format_groups(groups: list[NodeGroup], max_names: int = 3) -> str:
    out = []
    for g in groups:
        names = ", ".join(g.nodes[:max_names]) + (
            f", +{len(g.nodes) - max_names}" if len(g.nodes) > max_names else ""
        )
        out.append(f"  {len(g.nodes)} node(s) [{names}]: {g.summary}\n")
        if not g.fits:
            out.extend(f"    blocked: {b}\n" for b in g.blockers if b.detail != g.summary)
        for f in g.funnels:
            out.append("    " + format_funnel(f) + "\n")
    hints = what_would_fit(groups)
    if hints:
        out.append("what would make it fit:\n")
        out.extend(f"  {hint}\n" for hint in hints)
    return "".join(out)


@click.command()
@click.option("--node", help="Only this node.", shell_complete=node_names)
@click.option(
    "--free",
    is_flag=True,
    help="Only devices still allocatable (admin access does not consume a device).",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "wide", "json"]),
    default="table",
    help="wide: also each device's pool, slice and capacities.",
)
@click.pass_obj
@fails_cleanly
def devices(settings: Settings, node: str | None, free: bool, output: str) -> None:
    """The device inventory of the cluster, and which claim holds each device. A --node
    that does not exist is an error (as `kubectl get node NAME`)."""
    store = settings.open_store()
    holders = _holders(store.list(ResourceClaim, None))
    rules = store.list(DeviceTaintRule, None)
    rows = []
    selector = f"spec.nodeName={node}" if node else None
    for rs in store.list(ResourceSlice, field_selector=selector):
        for d in rs.spec.devices:
            held = holders.get((rs.spec.driver, rs.spec.pool.name, d.name), [])
            consumed = [claim for claim, admin in held if not admin]
            if free and consumed:
                continue
            row = _device_row(rs, d, consumed, [c for c, admin in held if admin])
            rows.append(row | {"taints": _taints(rs, d, rules)})
    if node and not rows:
        store.get(Node, node, "")  # NotFound: `error: Node "x" not found`, exit 1
    rows.sort(key=lambda r: (str(r["node"]), str(r["driver"]), str(r["device"])))
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    header = ["NODE", "DRIVER", "DEVICE", "PRODUCT", "MEMORY", "HEALTH", "HELD BY"]
    wide = ["POOL", "SLICE", "CAPACITY"] if output == "wide" else []
    cells = [_device_cells(r) + (_wide_cells(r) if wide else []) for r in rows]
    sys.stdout.write(table(header + wide, cells))


def _device_row(
    rs: ResourceSlice, device: Device, consumed: list[str], admin: list[str]
) -> dict[str, Any]:
    return {
        "node": rs.spec.node_name or "<none>",
        "driver": rs.spec.driver,
        "device": device.name,
        "product": device_product(device),
        "memory": device_memory(device) or None,
        "heldBy": consumed or None,
        "adminAccessBy": admin,
        "pool": rs.spec.pool.name,
        "slice": rs.name,
        "capacity": {name: str(c.value) for name, c in sorted(device.capacity.items())},
    }


def _taints(
    rs: ResourceSlice, device: Device, rules: Sequence[DeviceTaintRule]
) -> list[dict[str, str]]:
    """The device's taints: those its driver publishes (a health fault) and those of the
    DeviceTaintRules that select it (KEP-5055: both keep new claims off the device, a
    NoExecute one also evicts its pods)."""
    ref = DeviceRef(rs.spec.driver, rs.spec.pool.name, device.name)
    taints = [*device.taints, *(r.spec.taint for r in rules if rule_matches(r, ref))]
    return [{"key": t.key, "value": t.value or "", "effect": t.effect or ""} for t in taints]


def _health(taints: list[dict[str, str]]) -> str:
    """HEALTH: `Healthy`, or the taints as kubectl prints a node's, the key's domain left
    out (`xid=79:NoExecute`)."""
    return ",".join(
        f"{t['key'].rpartition('/')[2]}{'=' + t['value'] if t['value'] else ''}:{t['effect']}"
        for t in taints
    ) or "Healthy"


def _wide_cells(row: dict[str, Any]) -> list[str]:
    """`-o wide`'s POOL, SLICE and CAPACITY (`name=value,...`, domain left out)."""
    capacity = ",".join(f"{k.rpartition('/')[2]}={v}" for k, v in row["capacity"].items())
    return [row["pool"], row["slice"], capacity or "<none>"]


def _holders(claims: Sequence[ResourceClaim]) -> dict[tuple[str, str, str], list[tuple[str, bool]]]:
    """(driver, pool, device) -> the claims holding it, each with whether it holds it with
    admin access (upstream: such an allocation does not make the device unavailable)."""
    out: dict[tuple[str, str, str], list[tuple[str, bool]]] = {}
    for claim in claims:
        alloc = claim.status.allocation if claim.status else None
        for r in alloc.devices.results if alloc else ():
            out.setdefault((r.driver, r.pool, r.device), []).append(
                (f"{claim.namespace}/{claim.name}", bool(r.admin_access))
            )
    return out


def _device_cells(row: dict[str, Any]) -> list[str]:
    held = [*(row["heldBy"] or ()), *(f"{c} (admin access)" for c in row["adminAccessBy"])]
    return [str(row[k]) for k in ("node", "driver", "device", "product")] + [
        row["memory"] or "",
        _health(row["taints"]),
        ",".join(held) or "<free>",
    ]


@click.command("allocate")
@click.option("-f", "--filename", "paths", multiple=True, required=True)
@click.option("--node", help="Allocate for this node (default: the first node that fits).")
@click.option("--allocated", "allocated_file", help="Claims (with status) already holding devices.")
@click.option("--order", type=POLICY_CHOICE, default="first-fit", show_default=True)
@click.option("-o", "--output", type=click.Choice(["json", "yaml", "table"]), default="table")
@click.option(
    "--cluster",
    is_flag=True,
    help="Claims from the files, everything else (nodes, slices, classes, allocated claims) "
    "from the cluster or embedded store as it is now; nothing is written.",
)
@click.pass_obj
@fails_cleanly
def allocate_command(
    settings: Settings,
    paths: tuple[str, ...],
    node: str | None,
    allocated_file: str | None,
    order: str,
    output: str,
    cluster: bool,
) -> None:
    """Run the allocator on manifests (no store): slices, classes and claims from files,
    checked as `apply` checks them first (invalid input never reaches the allocator).
    With --cluster: would these claims fit on the cluster now, where, and if not why."""
    objects = _checked_objects(paths, settings.strict)
    if cluster:
        if node or allocated_file:
            raise click.UsageError(
                "--node and --allocated take their state from files: not with --cluster"
            )
        _allocate_on_cluster(settings, objects, order, output)
        return
    slices = [o for o in objects if isinstance(o, ResourceSlice)]
    classes = {o.name: o for o in objects if isinstance(o, DeviceClass)}
    claims = [
        o
        for o in objects
        if isinstance(o, ResourceClaim) and not (o.status and o.status.allocation)
    ]
    labels = {o.name: o.metadata.labels for o in objects if isinstance(o, Node)}
    held = _checked_objects([allocated_file], settings.strict) if allocated_file else []
    held_claims = [c for c in held if isinstance(c, ResourceClaim)]
    state = AllocatedState.from_claims(held_claims)
    inventory = Inventory.build(slices)
    names = [node] if node else sorted({s.spec.node_name for s in slices if s.spec.node_name})
    infos = [NodeInfo(n, labels.get(n, {})) for n in names]
    policy, view = make_policy(order), ClusterView(inventory, infos)
    reason, results, where = "no node named by the slices", None, None
    holders, nearest = holders_of(held_claims), -1.0
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
        why = diagnose(found.unsatisfiable, holders) if found.unsatisfiable else ()
        closeness = _closeness(why)
        if closeness > nearest:  # the nearest node's blockers, not the last one's
            nearest = closeness
            summary = found.unsatisfiable.summary if found.unsatisfiable else "no fit"
            blocked = f": {'; '.join(map(str, why))}" if why else ""
            reason = f"node {info.name}: {summary}{blocked}"
    report = [
        {
            "namespace": c.namespace or DEFAULT_NAMESPACE,
            "name": c.name,
            "allocation": plain(results[i]) if results else None,
            "reason": f"allocated on node {where}" if results else reason,
        }
        for i, c in enumerate(claims)
    ]
    _print_report(report, output)
    sys.exit(0 if results is not None else 1)


def _closeness(blockers: Sequence[Blocker]) -> float:
    """How near a node came: the smallest share of a need that a blocker leaves met."""
    return min((b.have / max(b.need, 1) for b in blockers), default=0.0)


def _allocate_on_cluster(
    settings: Settings, objects: Sequence[KubeObject], order: str, output: str
) -> None:
    from kubedra.cli.live import allocate_now, what_if_report

    claims = [o for o in objects if isinstance(o, ResourceClaim)]
    for other in (o for o in objects if not isinstance(o, ResourceClaim)):
        click.echo(
            f"warning: {other.KIND} {other.name} ignored: with --cluster the files give "
            "claims, the cluster everything else",
            err=True,
        )
    if not claims:
        raise click.UsageError("no ResourceClaim in the files")
    answer = allocate_now(settings.open_store(), claims, order, settings.strict)
    report = what_if_report(claims, answer)
    if output == "table":
        _print_report(report["claims"], output)
        if answer.results is None:
            sys.stdout.write(format_groups(answer.groups))
    elif output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        import yaml

        click.echo(yaml.safe_dump(report, sort_keys=False), nl=False)
    sys.exit(0 if answer.results is not None else 1)


def _checked_objects(paths: Sequence[str], strict: bool) -> list[KubeObject]:
    result, problems = checked_load(paths, strict)
    for warning in problems:
        click.echo(str(warning), err=True)
    return [o.obj for o in result.objects]


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
