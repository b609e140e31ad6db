"""Consumable capacity: what one request consumes of a shareable device's capacities.

Upstream's rules (structured allocator, DRAConsumableCapacity and, since 1.37 beta,
DRAFractionalCapacityRange): a request names capacities by the device's own keys; an
unnamed capacity consumes its policy default, else all of it; a named one is rounded up to
the policy (the next valid value, or the next step of the range above its minimum) and must
then satisfy the policy. With fractional ranges the steps are counted in milli-units, so a
step of "250m" works; otherwise in whole units (Value(), fractions rounded up).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubedra.api.quantity import Quantity
from kubedra.api.resource import CapacityRequestPolicyRange, DeviceCapacity

_INT64_MAX = 2**63 - 1


class CapacityError(ValueError):
    """A request the range arithmetic cannot represent, or a negative result: upstream
    aborts the allocation instead of trying other devices."""


def consumption(
    requested: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    fractional: bool,
) -> dict[str, Quantity] | None:
    """Consumed amount per capacity of the device; None if the request cannot use the
    device (a capacity it lacks, or a policy the amount violates). Raises CapacityError."""
    asked = requested or {}
    if any(name not in capacity for name in asked):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():  # every amount first: errors win over a misfit
        try:
            value = _amount(asked.get(name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f'capacity "{name}": {exc}') from None
        if value.sign() < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        out[name] = value
    if any(_violates(out[name], cap, fractional) for name, cap in capacity.items()):
        return None
    return out


def _amount(requested: Quantity | None, cap: DeviceCapacity, fractional: bool) -> Quantity:
    policy = cap.request_policy
    if requested is None:
        default = policy.default if policy is not None else None
        return default if default is not None else cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        return _round_up_range(requested, policy.valid_range, fractional)
    for valid in policy.valid_values:
        if requested <= valid:
            return valid
    return requested


def _round_up_range(
    requested: Quantity, rng: CapacityRequestPolicyRange, fractional: bool
) -> Quantity:
    if requested < rng.min:
        return rng.min
    step = rng.step
    if step is None:
        return requested
    milli = _use_milli(rng, fractional)
    if milli:
        value = _exact_milli(requested)
        if value is None:
            raise _unrepresentable(f"request {requested} is not a representable milli value")
        base, unit = rng.min.milli_value(), step.milli_value()
    else:
        if requested.nanos > _INT64_MAX * 10**9:
            raise _unrepresentable(f"request {requested} exceeds MaxInt64")
        value, base, unit = requested.value(), rng.min.value(), step.value()
    added = value - base  # >= 0: the request is at least the minimum
    n = added // unit + (1 if added % unit else 0)
    if base >= 0 and n > (_INT64_MAX - base) // unit:
        limit = "the milli-value range" if milli else "MaxInt64"
        raise _unrepresentable(f"rounding request {requested} up to the next step passes {limit}")
    total = base + unit * n
    if not milli:
        return Quantity.from_int(total, step.fmt)
    if total % 1000 == 0:
        return Quantity.from_int(total // 1000, step.fmt)
    return Quantity.from_milli(total, step.fmt)


def _violates(value: Quantity, cap: DeviceCapacity, fractional: bool) -> bool:
    policy = cap.request_policy
    if policy is None:
        return False
    # DECISION (§7 item 28): "equals the default" compares values, not representations.
    if policy.default is not None and value == policy.default:
        return False
    rng = policy.valid_range
    if rng is not None:
        if rng.max is not None and value > rng.max:
            return True
        if rng.step is None:
            return False
        if _use_milli(rng, fractional):
            exact = _exact_milli(value)
            if exact is None:
                return True
            return _go_rem(exact - rng.min.milli_value(), rng.step.milli_value()) != 0
        return _go_rem(value.value() - rng.min.value(), rng.step.value()) != 0
    if policy.valid_values:
        return all(value != v for v in policy.valid_values)
    return False


def _use_milli(rng: CapacityRequestPolicyRange, fractional: bool) -> bool:
    """Milli arithmetic: the feature is on, min/max/step are whole milli-units and the step
    is at least 1m (upstream useMilli)."""
    if not fractional:
        return False
    bounds = [q for q in (rng.min, rng.max, rng.step) if q is not None]
    if any(_exact_milli(q) is None for q in bounds):
        return False
    return rng.step is None or rng.step.milli_value() >= 1


def _exact_milli(q: Quantity) -> int | None:
    """The value in milli-units when that is exact and fits an int64 (safeMilliValue)."""
    whole, rest = divmod(q.nanos, 10**6)
    return whole if rest == 0 and abs(whole) <= _INT64_MAX else None


def _go_rem(a: int, b: int) -> int:
    """Go's `%`: the remainder takes the dividend's sign."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _unrepresentable(detail: str) -> CapacityError:
    return CapacityError(
        f"capacity request cannot be represented in the device's range arithmetic: {detail}"
    )
