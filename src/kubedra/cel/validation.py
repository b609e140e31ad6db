"""CEL checks of API objects: what the API server compiles, and kubedra's portability lint.

The API server compiles every selector of a DeviceClass, ResourceClaim and template when it
is written (syntax, types, the estimated cost limit). kubedra adds three warnings: a bare
`device.capacity["memory"]` that only kubedra's lenient mode resolves (with the portable
rewrite), a constant argument that `quantity()`/`semver()`/`ip()`/`cidr()` reject (upstream
fails only at run time), and a class that admits devices of any driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.validation import limits, ref_of
from kubedra.api.validation.report import Path, Report, show
from kubedra.cel.errors import CelCompileError
from kubedra.cel.lint import bad_literals, bare_lookups, constrained_drivers, portable_rewrite
from kubedra.cel.selector import compile_selector
from kubedra.errors import Problem

# Drivers that publish a well-known bare name, for the rewrite hint when the manifests at
# hand have no ResourceSlice that publishes it (see docs in drivers' READMEs: NVIDIA, AMD
# and Intel GPU drivers all publish a `memory` capacity; NVIDIA the GPU attributes).
WELL_KNOWN_DOMAINS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("capacity", "memory"): ("gpu.nvidia.com", "gpu.amd.com", "gpu.intel.com"),
    ("attributes", "productName"): ("gpu.nvidia.com", "gpu.amd.com"),
    ("attributes", "architecture"): ("gpu.nvidia.com",),
    ("attributes", "driverVersion"): ("gpu.nvidia.com", "gpu.amd.com"),
    ("attributes", "cudaComputeCapability"): ("gpu.nvidia.com",),
    ("attributes", "uuid"): ("gpu.nvidia.com", "tpu.google.com"),
}

KnownDomains = Mapping[tuple[str, str], Sequence[str]]


def published_names(slices: Sequence[ResourceSlice]) -> dict[tuple[str, str], list[str]]:
    """(map, bare name) -> drivers whose slices publish it unqualified, in first-seen order."""
    out: dict[tuple[str, str], list[str]] = {}
    for rs in slices:
        for device in rs.spec.devices:
            for map_name, keys in (
                ("attributes", device.attributes),
                ("capacity", device.capacity),
            ):
                for key in keys:
                    drivers = out.setdefault((map_name, key), [])
                    if "/" not in key and rs.spec.driver not in drivers:
                        drivers.append(rs.spec.driver)
    return out


def selectors_of(obj: KubeObject) -> Iterator[tuple[Path, DeviceSelector]]:
    """Every selector of a class, claim or template, with its field path; none of a list
    over its API limit (validation reports it as too many, and compiling thousands of
    expressions first would only delay that)."""
    if isinstance(obj, DeviceClass):
        yield from _selectors(("spec", "selectors"), obj.spec.selectors)
    elif isinstance(obj, ResourceClaim):
        yield from _claim_selectors(("spec",), obj.spec)
    elif isinstance(obj, ResourceClaimTemplate):
        yield from _claim_selectors(("spec", "spec"), obj.spec.spec)


def _selectors(
    path: Path, selectors: Sequence[DeviceSelector]
) -> Iterator[tuple[Path, DeviceSelector]]:
    if len(selectors) <= limits.DEVICE_SELECTORS_MAX:
        for i, sel in enumerate(selectors):
            yield (*path, i), sel


def _claim_selectors(path: Path, spec: ResourceClaimSpec) -> Iterator[tuple[Path, DeviceSelector]]:
    requests = spec.devices.requests
    for i, request in enumerate(requests if len(requests) <= limits.DEVICE_REQUESTS_MAX else ()):
        rp = (*path, "devices", "requests", i)
        if request.exactly is not None:
            yield from _selectors((*rp, "exactly", "selectors"), request.exactly.selectors)
        subs = request.first_available
        for k, sub in enumerate(subs if len(subs) <= limits.FIRST_AVAILABLE_MAX else ()):
            yield from _selectors((*rp, "firstAvailable", k, "selectors"), sub.selectors)


def cel_problems(
    obj: KubeObject, *, strict: bool = False, known: KnownDomains | None = None
) -> list[Problem]:
    """Compile errors of every selector of `obj`, then the portability warnings."""
    r = Report(ref_of(obj))
    admitted: list[frozenset[str] | None] = []
    compiled = True
    for path, sel in selectors_of(obj):
        if sel.cel is None or not sel.cel.expression:
            continue  # reported by API validation
        expr_path = (*path, "cel", "expression")
        expression = sel.cel.expression
        try:
            compile_selector(expression, strict=strict)
        except CelCompileError as err:
            _compile_error(r, expr_path, expression, str(err))
            compiled = False
            continue
        if not strict:
            _bare_lookup_warnings(r, expr_path, expression, known or {})
        _bad_literal_warnings(r, expr_path, expression)
        admitted.append(constrained_drivers(expression))
    # Which drivers a broken selector admits is unknown: only warn when all compiled.
    if (
        isinstance(obj, DeviceClass)
        and compiled
        and len(obj.spec.selectors) <= limits.DEVICE_SELECTORS_MAX
        and all(a is None for a in admitted)
    ):
        _any_driver_warning(r, obj)
    return r.problems


def candidate_domains(map_name: str, key: str, known: KnownDomains) -> list[str]:
    """Drivers that may mean a bare name: those whose slices publish it, else well-known ones."""
    return list(known.get((map_name, key)) or WELL_KNOWN_DOMAINS.get((map_name, key), ()))


def _compile_error(r: Report, path: Path, expression: str, message: str) -> None:
    if "exceeds cost limit" in message:
        r.forbidden(path, message)
    else:
        r.invalid(path, expression, message)


def _bare_lookup_warnings(r: Report, path: Path, expression: str, known: KnownDomains) -> None:
    for hit in bare_lookups(expression):
        domains = candidate_domains(hit.map, hit.key, known)
        domain = domains[0] if domains else "<driver-domain>"
        also = (
            f" (drivers publishing {hit.map} {show(hit.key)}: {', '.join(domains)})"
            if len(domains) > 1
            else ""
        )
        r.warn(
            path,
            f"not portable: device.{hit.map}[{show(hit.key)}] names no driver domain; "
            "upstream Kubernetes keys this map by domain and fails at run time, only "
            "kubedra's lenient mode resolves it to the device's own driver domain. "
            f"Portable form: {portable_rewrite(expression, domain)}{also}",
        )


def _bad_literal_warnings(r: Report, path: Path, expression: str) -> None:
    for bad in bad_literals(expression):
        r.warn(
            path,
            f"{bad.call} at line {bad.line}, column {bad.column} can never succeed: "
            f"{bad.error}. The API server accepts it (upstream parses the argument only "
            "when the selector runs), so every evaluation of this selector fails at "
            "scheduling time",
        )


def _any_driver_warning(r: Report, dc: DeviceClass) -> None:
    r.warn(
        ("spec", "selectors"),
        "this class admits devices of every driver: no selector tests "
        "device.driver, so any device whose attributes and capacity match (a NIC, a TPU, "
        'another vendor\'s GPU) can be allocated; add e.g. device.driver == "gpu.nvidia.com"',
    )
