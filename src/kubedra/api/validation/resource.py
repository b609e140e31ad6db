"""API-server validation of the resource.k8s.io/v1 kinds, rule by rule.

Each rule follows upstream's `pkg/apis/resource/validation` together with the declarative
rules of `resource/v1` that 1.37 enforces, in meaning and in field paths: a map entry is
named `attributes[model]` and a problem with a map key is reported at the map; a repeated
item of a keyed list is reported at the item (`devices[1]`). Messages are worded like the
API server's field errors. CEL expressions are checked for length here and compiled by the
CEL layer (`kubedra.cel`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from msgspec.structs import astuple

from kubedra.api.bounds import INT64_MAX, INT64_MIN
from kubedra.api.codec import Key
from kubedra.api.defaults import with_defaults
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    ATTRIBUTE_VALUE_FIELDS,
    AllocatedDeviceStatus,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    CounterSet,
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactDeviceRequest,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.validation import limits, names
from kubedra.api.validation.core import node_selector
from kubedra.api.validation.meta import conditions, template_metadata
from kubedra.api.validation.report import Path, Report

ALLOCATION_MODES = ("All", "ExactCount")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
TOLERATION_OPERATORS = ("Equal", "Exists")
CONFIG_SOURCES = ("FromClaim", "FromClass")
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
# Upstream shortens long map keys in the paths of their entries (the key itself is checked
# in full): attribute and capacity names up to domain + '/' + identifier.
_MAP_KEY_PATH_LENGTH = limits.DEVICE_MAX_DOMAIN_LENGTH + 1 + limits.DEVICE_MAX_ID_LENGTH

# --- DeviceClass --------------------------------------------------------------------------


def validate_device_class(r: Report, dc: DeviceClass) -> None:
    spec: Path = ("spec",)
    _selectors(r, (*spec, "selectors"), dc.spec.selectors)
    if r.within((*spec, "config"), dc.spec.config, limits.DEVICE_CONFIG_MAX):
        for i, cfg in enumerate(dc.spec.config):
            _opaque(r, (*spec, "config", i, "opaque"), cfg.opaque)
    ern = dc.spec.extended_resource_name
    if ern is not None:
        r.valid((*spec, "extendedResourceName"), ern, names.extended_resource_name)


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
    r.name((*path, "driver"), opaque.driver, names.api_driver_name)
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
    r.name(("spec", "driver"), spec.driver, names.api_driver_name)
    if spec.driver != spec.driver.lower():
        # Upstream stores it (its rule checks the lower-cased name) and warns.
        r.warn(
            ("spec", "driver"),
            f"driver names should be lowercase; {spec.driver!r} contains uppercase characters",
        )
    r.name(("spec", "pool", "name"), spec.pool.name, names.pool_name)
    pool, pp = spec.pool, ("spec", "pool")
    if r.int64((*pp, "generation"), pool.generation, "ResourcePool") and pool.generation < 0:
        r.invalid((*pp, "generation"), pool.generation, "must be greater than or equal to 0")
    count = pool.resource_slice_count
    if r.int64((*pp, "resourceSliceCount"), count, "ResourcePool") and count <= 0:
        r.invalid((*pp, "resourceSliceCount"), count, "must be greater than zero")
    _slice_node_selection(r, rs)
    if spec.devices and spec.shared_counters:
        r.invalid(("spec",), "", "only one of `sharedCounters` or `devices` is allowed")
    _devices(r, rs)
    _counter_sets(r, ("spec", "sharedCounters"), spec.shared_counters)


def _slice_node_selection(r: Report, rs: ResourceSlice) -> None:
    """Exactly one of the four ways to say where the devices are; an empty or false value
    is invalid where it stands and does not count as a choice (upstream's reading)."""
    spec = rs.spec
    chosen = []
    if spec.node_name is not None:
        if spec.node_name:
            chosen.append("`nodeName`")
            r.name(("spec", "nodeName"), spec.node_name, names.dns_subdomain)
        else:
            r.invalid(("spec", "nodeName"), "", "must be either unset or set to a non-empty string")
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        node_selector(r, ("spec", "nodeSelector"), spec.node_selector)
        terms = spec.node_selector.node_selector_terms
        if len(terms) != 1:
            # One term only, so selectors of devices from several slices can be merged.
            r.invalid(
                ("spec", "nodeSelector", "nodeSelectorTerms"),
                len(terms),
                "must have exactly one node selector term",
            )
    for field, value in (
        ("allNodes", spec.all_nodes),
        ("perDeviceNodeSelection", spec.per_device_node_selection),
    ):
        if value:
            chosen.append(f"`{field}`")
        elif value is False:
            r.invalid(("spec", field), False, "must be either unset or set to true")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
    if not chosen:
        r.required(("spec",), f"{one_of} is required")
    elif len(chosen) > 1:
        r.invalid(
            ("spec",),
            "{" + ", ".join(chosen) + "}",
            f"{one_of} is required, but multiple fields are set",
        )


def _counter_sets(r: Report, path: Path, sets: Sequence[CounterSet]) -> None:
    if not r.within(path, sets, limits.SLICE_MAX_COUNTER_SETS):
        return
    for i, cs in enumerate(sets):
        r.name((*path, i, "name"), cs.name, names.dns_label)
        _counters(r, (*path, i, "counters"), cs.counters, limits.COUNTER_SET_MAX_COUNTERS)
    r.unique(path, (s.name for s in sets))


def _counters(r: Report, path: Path, counters: Mapping[str, object], limit: int) -> None:
    """A counter map: required, bounded, keys RFC 1123 labels (reported at the map)."""
    if not counters:
        r.required(path)
    elif r.within(path, counters, limit):
        for key in counters:
            detail = names.dns_label(key)
            if detail:
                r.invalid(path, key, detail)


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
    per_device = rs.spec.per_device_node_selection is True
    for i, device in enumerate(devices):
        _device(r, (*path, i), device, per_device)
    r.unique(path, (d.name for d in devices))


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
    values = _attributes(r, (*path, "attributes"), d)
    if values > limits.DEVICE_MAX_ATTRIBUTE_VALUES:
        r.invalid(
            path,
            values,
            "the total number of attribute values must not exceed "
            f"{limits.DEVICE_MAX_ATTRIBUTE_VALUES}",
        )
    _capacities(r, (*path, "capacity"), d)
    if d.taints:
        _taints(r, (*path, "taints"), d.taints)
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
    if d.binding_conditions or d.binding_failure_conditions:
        _binding_conditions(r, path, d.binding_conditions, d.binding_failure_conditions)


_FIRST_LIST_KIND = ATTRIBUTE_VALUE_FIELDS.index("ints")


def _value_count(values: tuple[object, ...]) -> int:
    """An attribute's values as upstream counts them: a list counts its items (an empty
    one, or none, counts one)."""
    return sum(len(v) for v in values[_FIRST_LIST_KIND:] if isinstance(v, tuple)) or 1


def _entry(path: Path, key: str) -> Path:
    """The path of a map entry; long keys shortened in the middle, as upstream's paths."""
    if len(key) > _MAP_KEY_PATH_LENGTH:
        keep = _MAP_KEY_PATH_LENGTH - 3
        key = f"{key[: (keep + 1) // 2]}...{key[len(key) - keep // 2 :]}"
    return (*path, Key(key))


def _qualified_name(r: Report, path: Path, key: str) -> None:
    """Check an attribute/capacity name (reported at the map, as upstream does); each valid
    name is checked once per process."""
    detail = names.qualified_name(key)
    if detail:
        r.invalid(path, key, detail)
        return
    warning = names.many_slashes(key)
    if warning:
        r.warn(path, f"{key!r} {warning}")
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


def _attributes(r: Report, path: Path, d: Device) -> int:
    """Check every attribute; returns how many values they hold.

    The hot loop of inventory validation (one pass per attribute): a name seen valid before
    and a single int, bool or short string cost a few tests; field paths are only built
    when there is something to report."""
    valid_names, valid_versions = _VALID_NAMES, _VALID_VERSIONS
    count = len(d.attributes)
    for key, attr in d.attributes.items():
        if key not in valid_names:
            _qualified_name(r, path, key)
        values = astuple(attr)
        if values.count(None) != _ONE_VALUE:
            _attribute_union(r, path, key, attr.values_set())
            _attribute_value(r, _entry(path, key), values)
            count += _value_count(values) - 1
        elif (text := values[_STRING]) is not None:
            if len(text) > _SHORT and len(text.encode()) > limits.ATTRIBUTE_MAX_VALUE_LENGTH:
                r.too_long((*_entry(path, key), "string"), limits.ATTRIBUTE_MAX_VALUE_LENGTH)
        elif (version := values[_VERSION]) is not None:
            if version not in valid_versions:
                _version(r, (*_entry(path, key), "version"), version)
        elif values[0] is not None or values[1] is not None:
            if values[0] is not None and not INT64_MIN <= values[0] <= INT64_MAX:
                r.int64((*_entry(path, key), "int"), values[0], "DeviceAttribute")
        else:
            _attribute_value(r, _entry(path, key), values)
            count += _value_count(values) - 1
    return count


# A string of at most this many characters is within the byte limit whatever its characters.
_SHORT = limits.ATTRIBUTE_MAX_VALUE_LENGTH // 4


def _attribute_value(r: Report, path: Path, values: tuple[object, ...]) -> None:
    """Every value form that is set, each checked as upstream checks it (also when more
    than one is set, which is an error of its own)."""
    for kind, value in zip(ATTRIBUTE_VALUE_FIELDS, values, strict=True):
        if value is None:
            continue
        if kind in ("string", "version"):
            _text_value(r, (*path, kind), kind, str(value))
        elif kind == "int":
            r.int64((*path, kind), value, "DeviceAttribute")  # type: ignore[arg-type]
        elif kind != "bool":
            items = value if isinstance(value, tuple) else ()
            if not items:
                r.invalid((*path, kind), [], "must not be empty if specified")
            for i, item in enumerate(items):
                if kind == "ints":
                    r.int64((*path, kind, i), item, "DeviceAttribute")
                elif kind != "bools":
                    _text_value(r, (*path, kind, i), kind[:-1], str(item))


def _text_value(r: Report, path: Path, kind: str, text: str) -> None:
    if kind == "version":
        _version(r, path, text)
    elif len(text.encode()) > limits.ATTRIBUTE_MAX_VALUE_LENGTH:
        r.too_long(path, limits.ATTRIBUTE_MAX_VALUE_LENGTH)


def _attribute_union(r: Report, path: Path, key: str, kinds: list[str]) -> None:
    """Not exactly one value. Upstream checks this twice, by hand at the shortened key and
    declaratively at the full one: a long key is reported at both."""
    shown = "{" + ", ".join(kinds) + "}"
    for entry in dict.fromkeys((_entry(path, key), (*path, Key(key)))):
        r.invalid(entry, shown, "exactly one value must be specified")


def _version(r: Report, path: Path, version: str) -> None:
    detail = names.version_value(version)
    if detail:
        r.invalid(path, version, detail)
    elif len(_VALID_VERSIONS) < _MEMO_LIMIT:
        _VALID_VERSIONS.add(version)


def _capacities(r: Report, path: Path, d: Device) -> None:
    for key, cap in d.capacity.items():
        if key not in _VALID_NAMES:
            _qualified_name(r, path, key)
        if cap.request_policy is None:
            continue
        policy_path = (*_entry(path, key), "requestPolicy")
        if d.allow_multiple_allocations is not True:
            r.forbidden(policy_path, "allowMultipleAllocations must be true")
        else:
            _request_policy(r, policy_path, cap.request_policy, cap.value)


def _request_policy(r: Report, path: Path, p: CapacityRequestPolicy, capacity: Quantity) -> None:
    if p.valid_values and p.valid_range is not None:
        r.forbidden(
            path,
            'exactly one policy can be specified, cannot specify "validValues" '
            'and "validRange" at the same time',
        )
    elif p.valid_values:
        if p.default is None:
            r.required((*path, "default"), "required when validValues is defined")
        else:
            _valid_values(r, (*path, "validValues"), p.default, p.valid_values, capacity)
    elif p.valid_range is not None:
        if p.default is None:
            r.required((*path, "default"), "required when validRange is defined")
        else:
            _valid_range(r, (*path, "validRange"), p.default, p.valid_range, capacity)


def _valid_values(
    r: Report, path: Path, default: Quantity, values: Sequence[Quantity], capacity: Quantity
) -> None:
    """Sorted, bounded, within capacity, no two equal in whole units, and holding the
    default. Upstream reports the order first, and a missing default even when the list
    is over its limit (it never looks inside an oversized list for it)."""
    for i in range(1, len(values)):
        if values[i - 1] > values[i]:
            r.invalid((*path, i), str(values[i]), "values must be sorted in ascending order")
    found = False
    if r.within(path, values, limits.CAPACITY_VALID_VALUES_MAX):
        for i, v in enumerate(values):
            if v > capacity:
                r.invalid((*path, i), str(v), f"option is larger than capacity value: {capacity}")
            found = found or v == default
        r.unique(path, (str(v.value()) for v in values))
    if not found:
        r.invalid(path, str(default), "default value is not valid according to the requestPolicy")


def _valid_range(
    r: Report, path: Path, default: Quantity, rng: CapacityRequestPolicyRange, capacity: Quantity
) -> None:
    """Min within capacity, default within [min, max], and, with a step, every bound a whole
    number of steps from min (upstream reports those at the step)."""
    low, high = rng.min, rng.max
    if low > capacity:
        r.invalid((*path, "min"), str(low), f"min is larger than capacity value: {capacity}")
    if default < low:
        r.invalid((*path, "default"), str(default), f"default is less than min: {low}")
    if high is not None:
        if low > high:
            r.invalid((*path, "max"), str(low), f"min is larger than max: {high}")
        if high > capacity:
            r.invalid((*path, "max"), str(high), f"max is larger than capacity value: {capacity}")
        if default > high:
            r.invalid((*path, "default"), str(default), f"default is more than max: {high}")
    if rng.step is not None:
        _step(r, path, default, rng, capacity)


_INT64_BOUND = "must not be larger than 9223372036854775807"


def _step(
    r: Report, path: Path, default: Quantity, rng: CapacityRequestPolicyRange, capacity: Quantity
) -> None:
    step = rng.step
    assert step is not None
    if step.sign() <= 0:
        r.invalid((*path, "step"), str(step), "must be greater than zero")
        return
    one_step = rng.min.add(step)
    if one_step > capacity:
        r.invalid(
            (*path, "step"),
            str(step),
            f"one step {one_step} is larger than capacity value: {capacity}",
        )
    # Upstream steps in whole units (Quantity.Value(), fractions rounded away from zero),
    # after refusing bounds whose whole-unit value int64 cannot hold.
    safe = True
    for field, q in (("default", default), ("min", rng.min), ("max", rng.max), ("step", step)):
        if q is not None and q.sign() < 0:
            r.invalid((*path, field), str(q), "must be greater than or equal to 0")
            safe = False
        elif q is not None and q.value() > INT64_MAX:
            r.invalid((*path, field), str(q), _INT64_BOUND)
            safe = False
    if not safe:
        return
    for q in (default, rng.max):
        if q is not None and (q.value() - rng.min.value()) % step.value():
            r.invalid(
                (*path, "step"),
                str(q),
                f"value is not a multiple of a given step ({step}) from ({rng.min})",
            )


def _consumptions(r: Report, path: Path, items: Sequence[DeviceCounterConsumption]) -> None:
    for i, c in enumerate(items):
        r.name((*path, i, "counterSet"), c.counter_set, names.dns_label)
        _counters(r, (*path, i, "counters"), c.counters, limits.COUNTER_CONSUMPTION_MAX_COUNTERS)
    r.unique(path, (c.counter_set for c in items))


def _device_node_selection(r: Report, path: Path, d: Device, per_device: bool) -> None:
    if not per_device:
        r.invalid(
            path,
            None,
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
        return
    chosen = []
    if d.node_name is not None:
        if d.node_name:
            chosen.append("`nodeName`")
            r.name((*path, "nodeName"), d.node_name, names.dns_subdomain)
        else:
            r.invalid((*path, "nodeName"), "", "must not be empty")
    if d.node_selector is not None:
        chosen.append("`nodeSelector`")
        node_selector(r, (*path, "nodeSelector"), d.node_selector)
    if d.all_nodes:
        chosen.append("`allNodes`")
    elif d.all_nodes is False:
        r.invalid((*path, "allNodes"), False, "must be either unset or set to true")
    one_of = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
    )
    if not chosen:
        r.required(path, one_of)
    elif len(chosen) > 1:
        r.invalid(path, "{" + ", ".join(chosen) + "}", one_of)


def _binding_conditions(
    r: Report, path: Path, conditions: Sequence[str], failures: Sequence[str]
) -> None:
    """Each list bounded and of label keys, no repeats, no overlap, and each list needs the
    other (reported at the missing one)."""
    bp, fp = (*path, "bindingConditions"), (*path, "bindingFailureConditions")
    for lp, items in ((bp, conditions), (fp, failures)):
        if r.within(lp, items, limits.MAX_BINDING_CONDITIONS):
            for i, c in enumerate(items):
                detail = names.label_key(c)
                if detail:
                    r.invalid((*lp, i), c, detail)
        r.unique(lp, items)
    for i, c in enumerate(failures):
        if c in conditions:
            r.invalid(
                (*fp, i), c, "bindingFailureConditions must not overlap with bindingConditions"
            )
    if failures and not conditions:
        r.invalid(bp, [], "bindingConditions are required to use bindingFailureConditions")
    if conditions and not failures:
        r.invalid(fp, [], "bindingFailureConditions are required to use bindingConditions")


def _taints(r: Report, path: Path, taints: Sequence[DeviceTaint]) -> None:
    """At most 16, each valid. Over the limit upstream still checks each effect (a rule it
    declares on the type, with no limit on the list)."""
    if r.within(path, taints, limits.DEVICE_MAX_TAINTS):
        for i, taint in enumerate(taints):
            validate_taint(r, (*path, i), taint)
    else:
        for i, taint in enumerate(taints):
            _taint_effect(r, (*path, i, "effect"), taint.effect)


def validate_taint(r: Report, path: Path, t: DeviceTaint) -> None:
    r.name((*path, "key"), t.key, names.label_key)
    if t.value:
        r.name((*path, "value"), t.value, names.label_value)
    _taint_effect(r, (*path, "effect"), t.effect)


def _taint_effect(r: Report, path: Path, effect: str | None) -> None:
    if not effect:
        r.required(path)
    elif effect not in TAINT_EFFECTS:
        r.unsupported(path, effect, TAINT_EFFECTS)


# --- ResourceClaim and ResourceClaimTemplate ----------------------------------------------

# The API server validates what its defaulting made of the manifest: `count: 0` is unset
# and becomes 1, a toleration without operator is `Equal`. Only claims have such defaults
# that validation sees; the timestamp is for taints, which claims do not have.
_NO_TAINTS = ""


def validate_resource_claim(r: Report, rc: ResourceClaim) -> None:
    rc = with_defaults(rc, _NO_TAINTS)
    validate_claim_spec(r, ("spec",), rc.spec)
    if rc.status is not None:
        _claim_status(r, rc.status, rc.spec)


def validate_resource_claim_template(r: Report, rct: ResourceClaimTemplate) -> None:
    rct = with_defaults(rct, _NO_TAINTS)
    if rct.spec.metadata is not None:
        template_metadata(r, ("spec", "metadata"), rct.spec.metadata)
    validate_claim_spec(r, ("spec", "spec"), rct.spec.spec)


def validate_claim_spec(r: Report, path: Path, spec: ResourceClaimSpec) -> None:
    devices = spec.devices
    dp = (*path, "devices")
    refs = _request_refs(devices)
    if r.within((*dp, "requests"), devices.requests, limits.DEVICE_REQUESTS_MAX):
        for i, request in enumerate(devices.requests):
            _request(r, (*dp, "requests", i), request)
        r.unique((*dp, "requests"), (q.name for q in devices.requests))
    if r.within((*dp, "constraints"), devices.constraints, limits.DEVICE_CONSTRAINTS_MAX):
        _constraints(r, (*dp, "constraints"), devices, refs)
    if r.within((*dp, "config"), devices.config, limits.DEVICE_CONFIG_MAX):
        for i, cfg in enumerate(devices.config):
            _refs(r, (*dp, "config", i, "requests"), cfg.requests, refs)
            _opaque(r, (*dp, "config", i, "opaque"), cfg.opaque)


def _request_refs(devices: DeviceClaim) -> frozenset[str]:
    """The names a constraint, config or result may use: `req` (a request without
    subrequests, or one with) and `req/sub`."""
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
            None,
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )
        _declared_rules(r, path, q.exactly, q.first_available)
    elif q.exactly is not None:
        _exact(r, (*path, "exactly"), q.exactly)
    else:
        fa = (*path, "firstAvailable")
        if r.within(fa, q.first_available, limits.FIRST_AVAILABLE_MAX):
            for i, s in enumerate(q.first_available):
                r.name((*fa, i, "name"), s.name, names.dns_label)
                _exact(r, (*fa, i), s)
            r.unique(fa, (s.name for s in q.first_available))


def _declared_rules(
    r: Report, path: Path, exactly: ExactDeviceRequest, first: Sequence[DeviceSubRequest]
) -> None:
    """A request with both forms: upstream's handwritten rules stop at that error, but the
    rules it declares on the types still look into both (list sizes, subrequest names'
    uniqueness, class names of subrequests, allocation modes, tolerations)."""
    _declared_request_rules(r, (*path, "exactly"), exactly)
    fa = (*path, "firstAvailable")
    if r.within(fa, first, limits.FIRST_AVAILABLE_MAX):
        for i, s in enumerate(first):
            r.name((*fa, i, "deviceClassName"), s.device_class_name, names.dns_subdomain)
            _declared_request_rules(r, (*fa, i), s)
        r.unique(fa, (s.name for s in first))


def _declared_request_rules(
    r: Report, path: Path, q: ExactDeviceRequest | DeviceSubRequest
) -> None:
    r.within((*path, "selectors"), q.selectors, limits.DEVICE_SELECTORS_MAX)
    if q.allocation_mode not in ALLOCATION_MODES:
        r.unsupported((*path, "allocationMode"), q.allocation_mode or "", ALLOCATION_MODES)
    for i, t in enumerate(q.tolerations):
        _toleration_fields(r, (*path, "tolerations", i), t)


def _exact(r: Report, path: Path, q: ExactDeviceRequest | DeviceSubRequest) -> None:
    r.name((*path, "deviceClassName"), q.device_class_name, names.dns_subdomain)
    _selectors(r, (*path, "selectors"), q.selectors)
    _allocation_mode(r, path, q.allocation_mode, q.count)
    # Upstream declares at most 16 tolerations but does not enforce it (1.37).
    if len(q.tolerations) > limits.MAX_TOLERATIONS:
        r.warn(
            (*path, "tolerations"),
            f"{len(q.tolerations)} tolerations: the API documents "
            f"at most {limits.MAX_TOLERATIONS} (not enforced in "
            "Kubernetes 1.37; a later release may refuse more)",
        )
    for i, t in enumerate(q.tolerations):
        _toleration(r, (*path, "tolerations", i), t)
    if q.capacity is not None:
        # Upstream does not check these names; one that no device can publish never matches.
        for key in q.capacity.requests:
            detail = names.qualified_name(key)
            if detail:
                r.warn(
                    _entry((*path, "capacity", "requests"), key),
                    f"{key!r} is no capacity name a device can publish: {detail}",
                )


def _allocation_mode(r: Report, path: Path, mode: str | None, count: int | None) -> None:
    """Upstream's rule on the defaulted request: 0 is an unset count."""
    struct = "ExactDeviceRequest" if path[-1] == "exactly" else "DeviceSubRequest"
    if not r.int64((*path, "count"), count, struct):
        return
    count = count or 0
    if mode == "All":
        if count:
            r.invalid((*path, "count"), count, "must not be specified when allocationMode is 'All'")
    elif mode == "ExactCount":
        if count <= 0:
            r.invalid((*path, "count"), count, "must be greater than zero")
    else:
        r.unsupported((*path, "allocationMode"), mode or "", ALLOCATION_MODES)


def _toleration(r: Report, path: Path, t: DeviceToleration) -> None:
    """Upstream's device toleration rules (not the Pod ones: any key with any operator,
    tolerationSeconds with any effect)."""
    _toleration_fields(r, path, t)
    if (t.operator or "Equal") == "Equal":
        r.valid((*path, "value"), t.value or "", names.label_value)
    elif t.operator == "Exists" and t.value:
        r.invalid((*path, "value"), t.value, "must be empty for operator `Exists`")
    r.int64((*path, "tolerationSeconds"), t.toleration_seconds, "DeviceToleration")


def _toleration_fields(r: Report, path: Path, t: DeviceToleration) -> None:
    """The rules upstream declares on the type (and so applies wherever a toleration is):
    key, operator, effect. The API defaults a missing operator to Equal everywhere."""
    if t.key:
        r.valid((*path, "key"), t.key, names.label_key)
    operator = t.operator or "Equal"
    if operator not in TOLERATION_OPERATORS:
        r.unsupported((*path, "operator"), operator, TOLERATION_OPERATORS)
    if t.effect and t.effect not in TAINT_EFFECTS:
        r.unsupported((*path, "effect"), t.effect, TAINT_EFFECTS)


def _refs(r: Report, path: Path, refs: Sequence[str], known: frozenset[str]) -> None:
    """References to requests: bounded, each one of this claim's, no repeats."""
    if r.within(path, refs, limits.DEVICE_REQUESTS_MAX):
        for i, ref in enumerate(refs):
            _ref(r, (*path, i), ref, known)
        r.unique(path, refs)


def _ref(r: Report, path: Path, ref: str, known: frozenset[str]) -> None:
    """`req` or `req/sub`: each part a request name, and naming one of this claim's."""
    parts = ref.split("/")
    if len(parts) <= 2:
        for part in parts:
            r.valid(path, part, names.dns_label)
    if len(parts) > 2 or ref not in known:
        r.invalid(path, ref, REQUEST_REF)


def _constraints(r: Report, path: Path, devices: DeviceClaim, known: frozenset[str]) -> None:
    for i, c in enumerate(devices.constraints):
        cp = (*path, i)
        _refs(r, (*cp, "requests"), c.requests, known)
        if c.match_attribute is None and c.distinct_attribute is None:
            r.required(cp, 'exactly one of "matchAttribute" or "distinctAttribute" is required')
        elif c.match_attribute is not None and c.distinct_attribute is not None:
            # Accepted upstream; its allocator (and kubedra's) applies matchAttribute only.
            r.warn(
                cp,
                'both "matchAttribute" and "distinctAttribute" are set: only '
                "matchAttribute is applied",
            )
        for field, value in (
            ("matchAttribute", c.match_attribute),
            ("distinctAttribute", c.distinct_attribute),
        ):
            if value is not None:
                r.valid((*cp, field), value, names.fully_qualified_name)


def _claim_status(r: Report, st: ResourceClaimStatus, spec: ResourceClaimSpec) -> None:
    path: Path = ("status",)
    rf = (*path, "reservedFor")
    if r.within(rf, st.reserved_for, limits.RESERVED_FOR_MAX):
        for i, c in enumerate(st.reserved_for):
            for field in ("resource", "name", "uid"):
                if not getattr(c, field):
                    r.required((*rf, i, field))
        r.unique(rf, (c.uid for c in st.reserved_for))
    allocated = set()
    if st.allocation is not None:
        allocated = {
            (x.driver, x.pool, x.device, x.share_id or "") for x in st.allocation.devices.results
        }
    for i, ds in enumerate(st.devices):
        _device_status(r, (*path, "devices", i), ds, allocated)
    r.unique(
        (*path, "devices"),
        (f"{d.driver}/{d.pool}/{d.device}/{d.share_id or ''}" for d in st.devices),
    )
    if st.reserved_for and st.allocation is None:
        r.forbidden(rf, "may not be specified when `allocated` is not set")
    if st.allocation is not None:
        _allocation(r, (*path, "allocation"), st.allocation, _request_refs(spec.devices))


def _device_status(
    r: Report,
    path: Path,
    ds: AllocatedDeviceStatus,
    allocated: set[tuple[str, str, str, str]],
) -> None:
    r.name((*path, "driver"), ds.driver, names.api_driver_name)
    r.name((*path, "pool"), ds.pool, names.pool_name)
    r.name((*path, "device"), ds.device, names.dns_label)
    if ds.share_id is not None:
        r.valid((*path, "shareID"), ds.share_id, names.share_id)
    if (ds.driver, ds.pool, ds.device, ds.share_id or "") not in allocated:
        r.invalid(
            path, f"{ds.driver}/{ds.pool}/{ds.device}", "must be an allocated device in the claim"
        )
    # Upstream reports too many conditions and still checks each one.
    r.within((*path, "conditions"), ds.conditions, limits.DEVICE_STATUS_MAX_CONDITIONS)
    conditions(r, (*path, "conditions"), ds.conditions)


def _allocation(r: Report, path: Path, a: AllocationResult, known: frozenset[str]) -> None:
    rp = (*path, "devices", "results")
    if r.within(rp, a.devices.results, limits.ALLOCATION_RESULTS_MAX):
        for i, res in enumerate(a.devices.results):
            _ref(r, (*rp, i, "request"), res.request, known)
            r.name((*rp, i, "driver"), res.driver, names.api_driver_name)
            r.name((*rp, i, "pool"), res.pool, names.pool_name)
            r.name((*rp, i, "device"), res.device, names.dns_label)
            if res.binding_conditions or res.binding_failure_conditions:
                _binding_conditions(
                    r, (*rp, i), res.binding_conditions, res.binding_failure_conditions
                )
            for j, t in enumerate(res.tolerations):
                _toleration(r, (*rp, i, "tolerations", j), t)
            if res.share_id is not None:
                r.valid((*rp, i, "shareID"), res.share_id, names.share_id)
    cp = (*path, "devices", "config")
    if r.within(cp, a.devices.config, limits.ALLOCATION_CONFIG_MAX):
        for i, cfg in enumerate(a.devices.config):
            if not cfg.source:
                r.required((*cp, i, "source"))
            elif cfg.source not in CONFIG_SOURCES:
                r.unsupported((*cp, i, "source"), cfg.source, CONFIG_SOURCES)
            _refs(r, (*cp, i, "requests"), cfg.requests, known)
            _opaque(r, (*cp, i, "opaque"), cfg.opaque)
    if a.node_selector is not None:
        node_selector(r, (*path, "nodeSelector"), a.node_selector)


# --- DeviceTaintRule ----------------------------------------------------------------------


def validate_device_taint_rule(r: Report, rule: DeviceTaintRule) -> None:
    sel = rule.spec.device_selector
    if sel is not None:
        sp = ("spec", "deviceSelector")
        for field, value, check in (
            ("driver", sel.driver, names.api_driver_name),
            ("pool", sel.pool, names.pool_name),
            ("device", sel.device, names.dns_label),
        ):
            if value is not None:
                r.name((*sp, field), value, check)
    validate_taint(r, ("spec", "taint"), rule.spec.taint)
    if rule.status is not None:
        r.within(("status", "conditions"), rule.status.conditions, limits.TAINT_RULE_MAX_CONDITIONS)
