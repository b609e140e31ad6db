"""Manifests checked against the cluster as it is now: what-if allocation and lint.

Both read the chosen store (a real cluster or the embedded one) and write nothing:
- `allocate --cluster`: would these claims fit now, on which node and devices, and if not,
  why on each group of nodes; the devices already held by allocated claims are taken.
- `lint --cluster`: selectors checked against the devices the cluster publishes: a class or
  request that admits no device anywhere, a selector that fails at run time on some device
  (upstream's scheduler then fails every node with such a device), a class named by a
  claim that exists neither in the files nor in the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubedra.allocator import allocate
from kubedra.allocator.inventory import DeviceEntry, Inventory
from kubedra.api.codec import format_path, plain
from kubedra.api.loader import LoadResult, Source
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
)
from kubedra.api.validation import ref_of
from kubedra.cel import CelCompileError, CelEvalError
from kubedra.cluster.store import Store
from kubedra.errors import Problem, Severity
from kubedra.scheduler.explain import (
    NodeGroup,
    explain_claims,
    group_json,
    group_reason,
    what_would_fit,
)
from kubedra.scheduler.scheduler import Scheduler

Path = tuple[str | int, ...]


# --- allocate --cluster -------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIf:
    """The answer for a set of claims: where they would go (or None) and every node group."""

    node: str | None
    results: list[Any] | None  # one AllocationResult per claim, when they fit
    groups: list[NodeGroup]


def allocate_now(store: Store, claims: Sequence[ResourceClaim], order: str, strict: bool) -> WhatIf:
    """Allocate `claims` together on the first node (by name) where they fit now, with the
    policy's device order, as `allocate -f` does on files; nothing is written."""
    scheduler = Scheduler(store, order, strict_cel=strict)
    groups = explain_claims(scheduler, claims)
    fitting = sorted(n for g in groups if g.fits for n in g.nodes)
    if not fitting:
        return WhatIf(None, None, groups)
    node = next(n for n in scheduler.nodes() if n.name == fitting[0])
    namespace = claims[0].namespace if claims else ""
    found = allocate(
        *scheduler.allocator_inputs(claims, node),
        order=scheduler.policy.device_order(scheduler.view(), node.name),
        **scheduler.allocator_options(namespace),
    )
    return WhatIf(node.name, list(found.results) if found.results is not None else None, groups)


def what_if_report(claims: Sequence[ResourceClaim], answer: WhatIf) -> dict[str, Any]:
    """The JSON/YAML shape: `allocate -f`'s claims list, plus the node groups behind it."""
    why = "; ".join(
        f"{len(g.nodes)} node(s) [{', '.join(g.nodes[:3])}]: {group_reason(g)}"
        for g in answer.groups
        if not g.fits
    )
    return {
        "claims": [
            {
                "namespace": c.namespace,
                "name": c.name,
                "allocation": plain(answer.results[i]) if answer.results else None,
                "reason": f"allocated on node {answer.node}"
                if answer.results
                else f"fits on no node: {why or 'no nodes'}",
            }
            for i, c in enumerate(claims)
        ],
        "node": answer.node,
        "nodeGroups": [group_json(g) for g in answer.groups],
        "whatWouldFit": what_would_fit(answer.groups),
    }


# --- lint --cluster -----------------------------------------------------------------------


def live_scheduler(store: Store, strict: bool) -> Scheduler:
    """A scheduler over the store's current state, used only to read it."""
    scheduler = Scheduler(store, strict_cel=strict)
    scheduler.refresh()
    return scheduler


def cluster_problems(scheduler: Scheduler, result: LoadResult, strict: bool) -> list[Problem]:
    """Warnings for the manifests' selectors, checked against the cluster's devices."""
    inventory = scheduler.inventory()
    classes: dict[str, DeviceClass] = dict(scheduler.classes())
    classes.update({o.obj.name: o.obj for o in result.objects if isinstance(o.obj, DeviceClass)})
    found: list[tuple[Problem, Source]] = []
    for loaded in result.objects:
        for problem in _object_problems(loaded.obj, classes, inventory, scheduler, strict):
            found.append((problem, loaded.source))
    return result.locate_all(found)


def _object_problems(
    obj: KubeObject,
    classes: Mapping[str, DeviceClass],
    inventory: Inventory,
    scheduler: Scheduler,
    strict: bool,
) -> Iterator[Problem]:
    def warn(path: Path, message: str) -> Problem:
        return Problem(message, format_path(path), ref_of(obj), severity=Severity.WARNING)

    for path, expressions, subject in _selections(obj, classes):
        if expressions is None:
            yield warn(path, f"{subject}: no such DeviceClass in the files or in the cluster")
            continue
        tally = _tally(inventory, expressions, scheduler, strict)
        if tally.compile_error:
            continue  # lint's own CEL check reports it
        if tally.errors:
            example, error = tally.first_error
            yield warn(
                path,
                f"{subject}: a selector fails at run time on {tally.errors} of "
                f"{tally.devices} devices in the cluster (e.g. {example}: {error}); "
                "upstream's scheduler fails every node with such a device",
            )
        if not tally.admitted:
            yield warn(
                path,
                f"{subject} admits no device in the cluster "
                f"({tally.devices} devices: {tally.by_driver()})",
            )


@dataclass
class _Tally:
    devices: int = 0
    admitted: int = 0
    errors: int = 0
    first_error: tuple[str, str] = ("", "")
    compile_error: bool = False
    drivers: Counter[str] | None = None

    def by_driver(self) -> str:
        counts = self.drivers or Counter()
        return ", ".join(f"{d} {n}" for d, n in sorted(counts.items())) or "none published"


def _tally(
    inventory: Inventory, expressions: Sequence[str], scheduler: Scheduler, strict: bool
) -> _Tally:
    tally = _Tally(drivers=Counter())
    for entry in inventory.entries():
        tally.devices += 1
        assert tally.drivers is not None
        tally.drivers[entry.ref.driver] += 1
        try:
            tally.admitted += _admits(inventory, expressions, entry, strict)
        except CelCompileError:
            tally.compile_error = True
            return tally
        except CelEvalError as err:
            if not tally.errors:
                tally.first_error = (str(entry.ref), str(err))
            tally.errors += 1
    return tally


def _admits(
    inventory: Inventory,
    expressions: Sequence[str],
    entry: DeviceEntry,
    strict: bool,
) -> bool:
    """All selectors true, evaluated as the allocator does (every one, so a run-time error
    behind a false selector is still seen, as upstream evaluates the class's selectors in
    order and stops at an error)."""
    return all(inventory.matches(e, entry, strict=strict) for e in expressions)


def _selections(
    obj: KubeObject, classes: Mapping[str, DeviceClass]
) -> Iterator[tuple[Path, list[str] | None, str]]:
    """(path, the CEL expressions a device must pass or None for a missing class, what)."""
    if isinstance(obj, DeviceClass):
        yield ("spec", "selectors"), _cel(obj.spec.selectors), f"DeviceClass {obj.name}"
    elif isinstance(obj, ResourceClaim):
        yield from _claim_selections(("spec",), obj.spec, classes)
    elif isinstance(obj, ResourceClaimTemplate):
        yield from _claim_selections(("spec", "spec"), obj.spec.spec, classes)


def _claim_selections(
    path: Path, spec: ResourceClaimSpec, classes: Mapping[str, DeviceClass]
) -> Iterator[tuple[Path, list[str] | None, str]]:
    for i, request in enumerate(spec.devices.requests):
        at = (*path, "devices", "requests", i)
        options = (
            [(("exactly",), request.exactly)]
            if request.exactly
            else [(("firstAvailable", k), sub) for k, sub in enumerate(request.first_available)]
        )
        for where, option in options:
            if option is None:
                continue
            name = option.device_class_name
            subject = f"request {request.name!r} (class {name})"
            found = classes.get(name)
            if found is None:
                yield (*at, *where, "deviceClassName"), None, f"DeviceClass {name}"
                continue
            expressions = _cel(found.spec.selectors) + _cel(option.selectors)
            yield (*at, *where), expressions, subject


def _cel(selectors: Sequence[DeviceSelector]) -> list[str]:
    return [s.cel.expression for s in selectors if s.cel is not None and s.cel.expression]
