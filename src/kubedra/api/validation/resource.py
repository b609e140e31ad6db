"""API-server validation of the resource.k8s.io/v1 kinds, rule by rule.

Each rule follows upstream's `pkg/apis/resource/validation` in meaning (limits, one-of
rules, name formats); messages are worded like the API server's field errors. CEL
expressions are checked for length here and compiled by the CEL layer (`kubedra.cel`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from msgspec.structs import astuple

from kubedra.api.bounds import INT64_MAX, INT64_MIN
from kubedra.api.core import NodeSelector
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    ATTRIBUTE_VALUE_FIELDS,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequirements,
    CounterSet,
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceSelector,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.validation import limits, names
from kubedra.api.validation.report import Path, Report

ALLOCATION_MODES = ("All", "ExactCount")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
TOLERATION_OPERATORS = ("Equal", "Exists")
CONFIG_SOURCES = ("FromClaim", "FromClass")
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"

# --- DeviceClass --------------------------------------------------------------------------


def validate_device_class(r: Report, dc: DeviceClass) -> None:
    spec: Path = ("spec",)
    _selectors(r, (*spec, "selectors"), dc.spec.selectors)
    if r.within((*spec, "config"), dc.spec.config, limits.DEVICE_CONFIG_MAX):
        for i, cfg in enumerate(dc.spec.config):
            _opaque(r, (*spec, "config", i, "opaque"), cfg.opaque)
    ern = dc.spec.extended_resource_name
    if ern is not None:
        r.name((*spec, "extendedResourceName"), ern, names.extended_resource_name)


def _selectors(r: Report, path: Path, selectors: Sequence[DeviceSelector]) -> None:
    if not r.within(path, selectors, limits.DEVICE_SELECTORS_MAX):
        return
    for i, sel in enumerate(selectors):
        if sel.cel is None:
            r.required((*path, i, "cel"))
            continue
        expr_path = (*path, i, "cel", "expression")
        if not sel.cel.expression:
            r.required(expr_path)
        elif len(sel.cel.expression.encode()) > limits.CEL_EXPRESSION_MAX_LENGTH:
            r.too_long(expr_path, limits.CEL_EXPRESSION_MAX_LENGTH)


def _opaque(r: Report, path: Path, opaque: OpaqueDeviceConfiguration | None) -> None:
    if opaque is None:
        r.required(path, "exactly one configuration type (opaque) is required")
        return
    r.name((*path, "driver"), opaque.driver, names.driver_name)
    params = opaque.parameters
    if params is None:
        r.required((*path, "parameters"))
    elif not isinstance(params, dict):
        r.invalid(
            (*path, "parameters"), "<value omitted>", "parameters must be a valid JSON object"
        )
    elif len(msgspec.json.encode(params)) > limits.OPAQUE_PARAMETERS_MAX_LENGTH:
        # Upstream measures the raw bytes of the `parameters` JSON as sent, which kubectl
        # sends compact (no spaces, UTF-8 unescaped): the compact encoding is the measure.
        r.too_long((*path, "parameters"), limits.OPAQUE_PARAMETERS_MAX_LENGTH)


# --- ResourceSlice ------------------------------------------------------------------------


def validate_resource_slice(r: Report, rs: ResourceSlice) -> None:
    spec = rs.spec
    r.name(("spec", "driver"), spec.driver, names.driver_name)
    r.name(("spec", "pool", "name"), spec.pool.name, names.pool_name)
    pool, pp = spec.pool, ("spec", "pool")
    if r.int64((*pp, "generation"), pool.generation, "ResourcePool") and pool.generation < 0:
        r.invalid((*pp, "generation"), pool.generation, "must be greater than or equal to 0")
    count = pool.resource_slice_count
    if r.int64((*pp, "resourceSliceCount"), count, "ResourcePool") and count <= 0:
        r.invalid((*pp, "resourceSliceCount"), count, "must be greater than zero")
    _slice_node_selection(r, rs)
    if spec.devices and spec.shared_counters:
        r.forbidden(("spec",), "only one of `sharedCounters` or `devices` is allowed")
    _counter_sets(r, ("spec", "sharedCounters"), spec.shared_counters)
    _devices(r, rs)


def _slice_node_selection(r: Report, rs: ResourceSlice) -> None:
    spec = rs.spec
    chosen = [
        f
        for f, on in (
            ("nodeName", spec.node_name is not None),
            ("nodeSelector", spec.node_selector is not None),
            ("allNodes", spec.all_nodes is not None),
            ("perDeviceNodeSelection", spec.per_device_node_selection is not None),
        )
        if on
    ]
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
    if not chosen:
        r.required(("spec",), f"{one_of} is required")
    elif len(chosen) > 1:
        r.invalid(
            ("spec",),
            "{" + ", ".join(f"`{c}`" for c in chosen) + "}",
            f"{one_of} is required, but multiple fields are set",
        )
    if spec.node_name is not None:
        r.name(("spec", "nodeName"), spec.node_name, names.dns_subdomain)
    if spec.node_selector is not None:
        _node_selector(r, ("spec", "nodeSelector"), spec.node_selector, single_term=True)
    if spec.all_nodes is False:
        r.invalid(("spec", "allNodes"), False, "must be true when set")
    if spec.per_device_node_selection is False:
        r.invalid(("spec", "perDeviceNodeSelection"), False, "must be true when set")


def _node_selector(r: Report, path: Path, sel: NodeSelector, single_term: bool) -> None:
    terms = sel.node_selector_terms
    if single_term and len(terms) != 1:
        r.invalid(
            (*path, "nodeSelectorTerms"), len(terms), "must have exactly one node selector term"
        )
    for i, term in enumerate(terms):
        for group, reqs in (
            ("matchExpressions", term.match_expressions),
            ("matchFields", term.match_fields),
        ):
            for j, req in enumerate(reqs):
                rp = (*path, "nodeSelectorTerms", i, group, j)
                r.name((*rp, "key"), req.key, names.label_key)
                _selector_operator(r, rp, req.operator, len(req.values))


NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def _selector_operator(r: Report, path: Path, operator: str, n_values: int) -> None:
    if operator not in NODE_SELECTOR_OPERATORS:
        r.unsupported((*path, "operator"), operator, NODE_SELECTOR_OPERATORS)
    elif operator in ("In", "NotIn") and n_values == 0:
        r.required((*path, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
    elif operator in ("Exists", "DoesNotExist") and n_values:
        r.forbidden(
            (*path, "values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    elif operator in ("Gt", "Lt") and n_values != 1:
        r.required(
            (*path, "values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"
        )


def _counter_sets(r: Report, path: Path, sets: Sequence[CounterSet]) -> None:
    if not r.within(path, sets, limits.SLICE_MAX_COUNTER_SETS):
        return
    r.unique(path, (s.name for s in sets), "name")
    for i, cs in enumerate(sets):
        r.name((*path, i, "name"), cs.name, names.dns_label)
        _counters(r, (*path, i, "counters"), cs.counters, limits.COUNTER_SET_MAX_COUNTERS)


def _counters(r: Report, path: Path, counters: Mapping[str, object], limit: int) -> None:
    if not counters:
        r.required(path)
    elif r.within(path, counters, limit):
        for key in counters:
            detail = names.dns_label(key)
            if detail:
                r.invalid((*path, key), key, detail)


def _devices(r: Report, rs: ResourceSlice) -> None:
    path: Path = ("spec", "devices")
    devices = rs.spec.devices
    limit = limits.SLICE_MAX_DEVICES
    if len(devices) > limits.SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES and any(
        d.taints or d.consumes_counters or _has_list_attribute(d) for d in devices
    ):
        limit = limits.SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES
    if not r.within(path, devices, limit):
        return
    r.unique(path, (d.name for d in devices), "name")
    per_device = rs.spec.per_device_node_selection is True
    for i, device in enumerate(devices):
        _device(r, (*path, i), device, per_device)


def _has_list_attribute(d: Device) -> bool:
    return any(v is not None for a in d.attributes.values() for v in astuple(a)[_FIRST_LIST_KIND:])


def _device(r: Report, path: Path, d: Device, per_device: bool) -> None:
    # Inventories are large and almost always valid: every optional group is skipped with
    # one test when it is empty, so a plain device costs little more than its attributes.
    if d.name not in _VALID_DEVICE_NAMES:
        _device_name(r, path, d.name)
    total = len(d.attributes) + len(d.capacity)
    if total > limits.DEVICE_MAX_ATTRIBUTES_AND_CAPACITIES:
        r.invalid(
            path,
            total,
            "the total number of attributes and capacities must not exceed "
            f"{limits.DEVICE_MAX_ATTRIBUTES_AND_CAPACITIES}",
        )
    else:
        _attributes(r, (*path, "attributes"), d)
        _capacities(r, (*path, "capacity"), d)
    if d.consumes_counters:
        cp = (*path, "consumesCounters")
        if r.within(cp, d.consumes_counters, limits.DEVICE_MAX_COUNTER_CONSUMPTIONS):
            _consumptions(r, cp, d.consumes_counters)
    if (
        per_device
        or d.node_name is not None
        or d.node_selector is not None
        or d.all_nodes is not None
    ):
        _device_node_selection(r, path, d, per_device)
    if d.taints and r.within((*path, "taints"), d.taints, limits.DEVICE_MAX_TAINTS):
        for i, taint in enumerate(d.taints):
            validate_taint(r, (*path, "taints", i), taint)
    if d.binding_conditions or d.binding_failure_conditions:
        _binding_conditions(r, path, d)


_FIRST_LIST_KIND = ATTRIBUTE_VALUE_FIELDS.index("ints")


def _qualified_name(r: Report, path: Path, key: str) -> None:
    """Check an attribute/capacity name; each valid name is checked once per process."""
    detail = names.qualified_name(key)
    if detail:
        r.invalid((*path, key), key, detail)
    elif len(_VALID_NAMES) < _MEMO_LIMIT:
        _VALID_NAMES.add(key)


_MEMO_LIMIT = 100_000
_VALID_DEVICE_NAMES: set[str] = set()


def _device_name(r: Report, path: Path, name: str) -> None:
    r.name((*path, "name"), name, names.dns_label)
    if name and not names.dns_label(name) and len(_VALID_DEVICE_NAMES) < _MEMO_LIMIT:
        _VALID_DEVICE_NAMES.add(name)


_VALID_NAMES: set[str] = set()
_VALID_VERSIONS: set[str] = set()
_ONE_VALUE = len(ATTRIBUTE_VALUE_FIELDS) - 1  # Nones in the astuple() of a one-value attribute
_STRING, _VERSION = ATTRIBUTE_VALUE_FIELDS.index("string"), ATTRIBUTE_VALUE_FIELDS.index("version")


def _attributes(r: Report, path: Path, d: Device) -> None:
    # The hot loop of inventory validation (one pass per attribute): field paths are only
    # built when there is something to report.
    valid_names, valid_versions = _VALID_NAMES, _VALID_VERSIONS
    for key, attr in d.attributes.items():
        if key not in valid_names:
            _qualified_name(r, path, key)
        values = astuple(attr)
        if values.count(None) != _ONE_VALUE:
            kinds = "{" + ", ".join(attr.values_set()) + "}"
            r.invalid((*path, key), kinds, "exactly one value must be specified")
        elif (text := values[_STRING]) is not None:
            if len(text) > limits.ATTRIBUTE_MAX_VALUE_LENGTH:
                r.too_long((*path, key, "string"), limits.ATTRIBUTE_MAX_VALUE_LENGTH)
        elif (version := values[_VERSION]) is not None:
            if version not in valid_versions:
                _version(r, (*path, key, "version"), version)
        elif values[0] is None and values[1] is None:
            kind = attr.values_set()[0]
            _list_attribute(r, (*path, key, kind), kind, attr.value)
        elif (number := values[0]) is not None and not INT64_MIN <= number <= INT64_MAX:
            r.int64((*path, key, "int"), number, "DeviceAttribute")


def _version(r: Report, path: Path, version: str) -> None:
    detail = names.version_value(version)
    if detail:
        r.invalid(path, version, detail)
    elif len(_VALID_VERSIONS) < _MEMO_LIMIT:
        _VALID_VERSIONS.add(version)


def _scalar_text(r: Report, path: Path, kind: str, value: str | None) -> None:
    text = value or ""
    if kind == "version":
        detail = names.version_value(text)
        if detail:
            r.invalid(path, text, detail)
    elif len(text) > limits.ATTRIBUTE_MAX_VALUE_LENGTH:
        r.too_long(path, limits.ATTRIBUTE_MAX_VALUE_LENGTH)


def _list_attribute(r: Report, path: Path, kind: str, values: object) -> None:
    items = values if isinstance(values, tuple) else ()
    if not items:
        r.required(path, "a list attribute must have at least one value")
    for i, item in enumerate(items):
        if kind in ("strings", "versions"):
            _scalar_text(r, (*path, i), kind[:-1], str(item))
        elif kind == "ints":
            r.int64((*path, i), item, "DeviceAttribute")


def _capacities(r: Report, path: Path, d: Device) -> None:
    for key, cap in d.capacity.items():
        if key not in _VALID_NAMES:
            _qualified_name(r, path, key)
        if cap.request_policy is not None:
            if d.allow_multiple_allocations is not True:
                r.forbidden((*path, key, "requestPolicy"), "allowMultipleAllocations must be true")
            _request_policy(r, (*path, key, "requestPolicy"), cap.request_policy, cap.value)


def _request_policy(r: Report, path: Path, p: CapacityRequestPolicy, capacity: Quantity) -> None:
    if p.valid_values and p.valid_range is not None:
        r.forbidden(
            path,
            'exactly one policy can be specified, cannot specify "validValues" '
            'and "validRange" at the same time',
        )
        return
    if p.valid_values:
        _valid_values(r, path, p, capacity)
    elif p.valid_range is not None:
        _valid_range(r, path, p, capacity)


def _valid_values(r: Report, path: Path, p: CapacityRequestPolicy, capacity: Quantity) -> None:
    if p.default is None:
        r.required((*path, "default"), "required when validValues is defined")
    values = p.valid_values
    if not r.within((*path, "validValues"), values, limits.CAPACITY_VALID_VALUES_MAX):
        return
    for i, v in enumerate(values):
        if i and v <= values[i - 1]:
            r.invalid((*path, "validValues", i), str(v), "values must be sorted in ascending order")
        if v > capacity:
            r.invalid(
                (*path, "validValues", i),
                str(v),
                f"option is larger than capacity value: {capacity}",
            )
    if p.default is not None and p.default not in values:
        r.invalid(
            (*path, "default"),
            str(p.default),
            "default value is not valid according to the requestPolicy",
        )


def _valid_range(r: Report, path: Path, p: CapacityRequestPolicy, capacity: Quantity) -> None:
    rng = p.valid_range
    assert rng is not None
    rp = (*path, "validRange")
    if p.default is None:
        r.required((*path, "default"), "required when validRange is defined")
    if rng.min > capacity:
        r.invalid((*rp, "min"), str(rng.min), "min is larger than capacity value")
    if p.default is not None and p.default < rng.min:
        r.invalid((*path, "default"), str(p.default), "default is less than min")
    if rng.max is not None:
        if rng.max < rng.min:
            r.invalid((*rp, "max"), str(rng.max), "max is less than min")
        if rng.max > capacity:
            r.invalid((*rp, "max"), str(rng.max), "max is larger than capacity value")
        if p.default is not None and p.default > rng.max:
            r.invalid((*path, "default"), str(p.default), "default is more than max")
    if rng.step is not None:
        _step(r, path, p, capacity)


def _step(r: Report, path: Path, p: CapacityRequestPolicy, capacity: Quantity) -> None:
    rng = p.valid_range
    assert rng is not None and rng.step is not None
    # Upstream steps in whole units (Quantity.Value()); fractions are truncated.
    step, low = rng.step.value(), rng.min.value()
    if step <= 0:
        r.invalid((*path, "validRange", "step"), str(rng.step), "step must be greater than zero")
        return
    if low + step > capacity.value():
        r.invalid(
            (*path, "validRange", "step"),
            str(rng.step),
            f"one step {rng.step} is larger than capacity value: {capacity}",
        )
    for field, q in (("default", p.default), ("max", rng.max)):
        if q is not None and (q.value() - low) % step:
            fp = (*path, field) if field == "default" else (*path, "validRange", field)
            r.invalid(
                fp, str(q), f"value is not a multiple of a given step ({rng.step}) from ({rng.min})"
            )


def _consumptions(r: Report, path: Path, items: Sequence[DeviceCounterConsumption]) -> None:
    r.unique(path, (c.counter_set for c in items), "counterSet")
    for i, c in enumerate(items):
        r.name((*path, i, "counterSet"), c.counter_set, names.dns_label)
        _counters(r, (*path, i, "counters"), c.counters, limits.COUNTER_CONSUMPTION_MAX_COUNTERS)


def _device_node_selection(r: Report, path: Path, d: Device, per_device: bool) -> None:
    chosen = [
        f
        for f, on in (
            ("nodeName", d.node_name is not None),
            ("nodeSelector", d.node_selector is not None),
            ("allNodes", d.all_nodes is not None),
        )
        if on
    ]
    if per_device and len(chosen) != 1:
        r.invalid(
            path,
            "{" + ", ".join(chosen) + "}",
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
    elif not per_device and chosen:
        r.invalid(
            path,
            "{" + ", ".join(chosen) + "}",
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
    if d.node_name is not None:
        r.name((*path, "nodeName"), d.node_name, names.dns_subdomain)
    if d.node_selector is not None:
        _node_selector(r, (*path, "nodeSelector"), d.node_selector, single_term=False)
    if d.all_nodes is False:
        r.invalid((*path, "allNodes"), False, "must be true when set")


def _binding_conditions(r: Report, path: Path, d: Device) -> None:
    for field, conds in (
        ("bindingConditions", d.binding_conditions),
        ("bindingFailureConditions", d.binding_failure_conditions),
    ):
        if r.within((*path, field), conds, limits.MAX_BINDING_CONDITIONS):
            r.unique((*path, field), conds)
            for i, c in enumerate(conds):
                r.name((*path, field, i), c, names.label_key)
    if d.binding_failure_conditions and not d.binding_conditions:
        r.invalid(
            (*path, "bindingFailureConditions"),
            list(d.binding_failure_conditions),
            "bindingConditions are required to use bindingFailureConditions",
        )
    if d.binding_conditions and not d.binding_failure_conditions:
        r.invalid(
            (*path, "bindingConditions"),
            list(d.binding_conditions),
            "bindingFailureConditions are required to use bindingConditions",
        )
    overlap = set(d.binding_conditions) & set(d.binding_failure_conditions)
    if overlap:
        r.invalid(
            (*path, "bindingFailureConditions"),
            sorted(overlap),
            "bindingFailureConditions must not overlap with bindingConditions",
        )


def validate_taint(r: Report, path: Path, t: DeviceTaint) -> None:
    r.name((*path, "key"), t.key, names.label_key)
    if t.value:
        r.name((*path, "value"), t.value, names.label_value)
    if not t.effect:
        r.required((*path, "effect"))
    elif t.effect not in TAINT_EFFECTS:
        r.unsupported((*path, "effect"), t.effect, TAINT_EFFECTS)


# --- ResourceClaim and ResourceClaimTemplate ----------------------------------------------


def validate_resource_claim(r: Report, rc: ResourceClaim) -> None:
    validate_claim_spec(r, ("spec",), rc.spec)
    if rc.status is not None:
        _claim_status(r, rc.status, rc.spec)


def validate_resource_claim_template(r: Report, rct: ResourceClaimTemplate) -> None:
    meta = rct.spec.metadata
    if meta is not None:
        for field in ("name", "generate_name", "namespace", "uid"):
            if getattr(meta, field):
                camel = "generateName" if field == "generate_name" else field
                r.forbidden(
                    ("spec", "metadata", camel),
                    "only labels and annotations may be set in a template's metadata",
                )
    validate_claim_spec(r, ("spec", "spec"), rct.spec.spec)


def validate_claim_spec(r: Report, path: Path, spec: ResourceClaimSpec) -> None:
    devices = spec.devices
    dp = (*path, "devices")
    refs = _request_refs(devices)
    if r.within((*dp, "requests"), devices.requests, limits.DEVICE_REQUESTS_MAX):
        r.unique((*dp, "requests"), (q.name for q in devices.requests), "name")
        for i, request in enumerate(devices.requests):
            _request(r, (*dp, "requests", i), request)
    if r.within((*dp, "constraints"), devices.constraints, limits.DEVICE_CONSTRAINTS_MAX):
        _constraints(r, (*dp, "constraints"), devices, refs)
    if r.within((*dp, "config"), devices.config, limits.DEVICE_CONFIG_MAX):
        for i, cfg in enumerate(devices.config):
            _refs(r, (*dp, "config", i, "requests"), cfg.requests, refs)
            _opaque(r, (*dp, "config", i, "opaque"), cfg.opaque)


def _request_refs(devices: DeviceClaim) -> frozenset[str]:
    """The names a constraint, config or result may use: `req` and `req/sub`."""
    out = set()
    for q in devices.requests:
        out.add(q.name)
        out.update(f"{q.name}/{s.name}" for s in q.first_available)
    return frozenset(out)


def _request(r: Report, path: Path, q: DeviceRequest) -> None:
    r.name((*path, "name"), q.name, names.dns_label)
    if q.exactly is None and not q.first_available:
        r.required(path, "exactly one of `exactly` or `firstAvailable` is required")
    elif q.exactly is not None and q.first_available:
        r.invalid(
            path,
            "{`exactly`, `firstAvailable`}",
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )
    if q.exactly is not None:
        e = q.exactly
        _exact(
            r,
            (*path, "exactly"),
            e.device_class_name,
            e.selectors,
            e.allocation_mode,
            e.count,
            e.tolerations,
            e.capacity,
        )
    fa = (*path, "firstAvailable")
    if r.within(fa, q.first_available, limits.FIRST_AVAILABLE_MAX):
        r.unique(fa, (s.name for s in q.first_available), "name")
        for i, s in enumerate(q.first_available):
            r.name((*fa, i, "name"), s.name, names.dns_label)
            _exact(
                r,
                (*fa, i),
                s.device_class_name,
                s.selectors,
                s.allocation_mode,
                s.count,
                s.tolerations,
                s.capacity,
            )


def _exact(
    r: Report,
    path: Path,
    class_name: str,
    selectors: Sequence[DeviceSelector],
    mode: str | None,
    count: int | None,
    tolerations: Sequence[DeviceToleration],
    capacity: CapacityRequirements | None,
) -> None:
    r.name((*path, "deviceClassName"), class_name, names.dns_subdomain)
    _selectors(r, (*path, "selectors"), selectors)
    # Upstream's only upper bound on count is int64's: validation accepts any positive
    # count, and the allocator refuses more than 32 devices for one claim.
    struct = "ExactDeviceRequest" if path[-1] == "exactly" else "DeviceSubRequest"
    in_range = r.int64((*path, "count"), count, struct)
    if mode is not None and mode not in ALLOCATION_MODES:
        r.unsupported((*path, "allocationMode"), mode, ALLOCATION_MODES)
    elif in_range and mode == "All" and count is not None:
        r.invalid((*path, "count"), count, "must not be specified when allocationMode is 'All'")
    elif in_range and mode != "All" and count is not None and count <= 0:
        r.invalid((*path, "count"), count, "must be greater than zero")
    if r.within((*path, "tolerations"), tolerations, limits.MAX_TOLERATIONS):
        for i, t in enumerate(tolerations):
            _toleration(r, (*path, "tolerations", i), t)
    if capacity is not None:
        for key in capacity.requests:
            detail = names.qualified_name(key)
            if detail:
                r.invalid((*path, "capacity", "requests", key), key, detail)


def _toleration(r: Report, path: Path, t: DeviceToleration) -> None:
    operator = t.operator or "Equal"
    if t.key:
        r.name((*path, "key"), t.key, names.label_key)
    elif operator != "Exists":
        r.invalid(
            (*path, "operator"),
            operator,
            "operator must be Exists when `key` is empty, "
            'which means "match all values and all keys"',
        )
    if operator not in TOLERATION_OPERATORS:
        r.unsupported((*path, "operator"), operator, TOLERATION_OPERATORS)
    elif operator == "Exists" and t.value:
        r.invalid((*path, "value"), t.value, "must be empty for operator `Exists`")
    elif t.value:
        r.name((*path, "value"), t.value, names.label_value)
    if t.effect and t.effect not in TAINT_EFFECTS:
        r.unsupported((*path, "effect"), t.effect, TAINT_EFFECTS)
    r.int64((*path, "tolerationSeconds"), t.toleration_seconds, "DeviceToleration")
    if t.toleration_seconds is not None and t.effect != "NoExecute":
        r.invalid(
            (*path, "tolerationSeconds"),
            t.toleration_seconds,
            "only valid for the NoExecute effect",
        )


def _refs(r: Report, path: Path, refs: Sequence[str], known: frozenset[str]) -> None:
    r.unique(path, refs)
    for i, ref in enumerate(refs):
        if ref not in known:
            r.invalid(
                (*path, i),
                ref,
                "must be the name of a request in the claim or the name "
                "of a request and a subrequest separated by '/'",
            )


def _constraints(r: Report, path: Path, devices: DeviceClaim, known: frozenset[str]) -> None:
    for i, c in enumerate(devices.constraints):
        cp = (*path, i)
        if r.within((*cp, "requests"), c.requests, limits.DEVICE_REQUESTS_MAX):
            _refs(r, (*cp, "requests"), c.requests, known)
        if c.match_attribute is None and c.distinct_attribute is None:
            r.required(cp, 'exactly one of "matchAttribute" or "distinctAttribute" is required')
        elif c.match_attribute is not None and c.distinct_attribute is not None:
            r.invalid(
                cp,
                "{`matchAttribute`, `distinctAttribute`}",
                'exactly one of "matchAttribute" or "distinctAttribute" is required, '
                "but multiple fields are set",
            )
        for field, value in (
            ("matchAttribute", c.match_attribute),
            ("distinctAttribute", c.distinct_attribute),
        ):
            if value is not None:
                r.name((*cp, field), value, names.fully_qualified_name)


def _claim_status(r: Report, st: ResourceClaimStatus, spec: ResourceClaimSpec) -> None:
    path: Path = ("status",)
    if st.allocation is not None:
        _allocation(r, (*path, "allocation"), st.allocation, _request_refs(spec.devices))
    elif st.reserved_for:
        r.forbidden((*path, "reservedFor"), "may not be specified when `allocated` is not set")
    rf = (*path, "reservedFor")
    if r.within(rf, st.reserved_for, limits.RESERVED_FOR_MAX):
        r.unique(rf, (c.uid for c in st.reserved_for), "uid")
        for i, c in enumerate(st.reserved_for):
            for field in ("resource", "name", "uid"):
                if not getattr(c, field):
                    r.required((*rf, i, field))
    allocated = set()
    if st.allocation is not None:
        allocated = {
            (x.driver, x.pool, x.device, x.share_id) for x in st.allocation.devices.results
        }
    for i, ds in enumerate(st.devices):
        if (ds.driver, ds.pool, ds.device, ds.share_id) not in allocated:
            r.invalid(
                (*path, "devices", i),
                f"{ds.driver}/{ds.pool}/{ds.device}",
                "must be an allocated device in the claim",
            )
        r.within(
            (*path, "devices", i, "conditions"), ds.conditions, limits.DEVICE_STATUS_MAX_CONDITIONS
        )


def _allocation(r: Report, path: Path, a: AllocationResult, known: frozenset[str]) -> None:
    rp = (*path, "devices", "results")
    if r.within(rp, a.devices.results, limits.ALLOCATION_RESULTS_MAX):
        for i, res in enumerate(a.devices.results):
            if res.request not in known:
                r.invalid(
                    (*rp, i, "request"),
                    res.request,
                    "must be the name of a request in the claim or the name of a request "
                    "and a subrequest separated by '/'",
                )
            r.name((*rp, i, "driver"), res.driver, names.driver_name)
            r.name((*rp, i, "pool"), res.pool, names.pool_name)
            r.name((*rp, i, "device"), res.device, names.dns_label)
            if res.share_id is not None:
                r.name((*rp, i, "shareID"), res.share_id, names.share_id)
    cp = (*path, "devices", "config")
    if r.within(cp, a.devices.config, limits.ALLOCATION_CONFIG_MAX):
        for i, cfg in enumerate(a.devices.config):
            if cfg.source not in CONFIG_SOURCES:
                r.unsupported((*cp, i, "source"), cfg.source, CONFIG_SOURCES)
            _refs(r, (*cp, i, "requests"), cfg.requests, known)
            _opaque(r, (*cp, i, "opaque"), cfg.opaque)
    if a.node_selector is not None:
        _node_selector(r, (*path, "nodeSelector"), a.node_selector, single_term=False)


# --- DeviceTaintRule ----------------------------------------------------------------------


def validate_device_taint_rule(r: Report, rule: DeviceTaintRule) -> None:
    sel = rule.spec.device_selector
    if sel is not None:
        sp = ("spec", "deviceSelector")
        r.name((*sp, "driver"), sel.driver, names.driver_name, required=False)
        r.name((*sp, "pool"), sel.pool, names.pool_name, required=False)
        r.name((*sp, "device"), sel.device, names.dns_label, required=False)
    validate_taint(r, ("spec", "taint"), rule.spec.taint)
    if rule.status is not None:
        r.within(("status", "conditions"), rule.status.conditions, limits.TAINT_RULE_MAX_CONDITIONS)
