"""Kubernetes resource quantities ("40Gi", "500m", "1e3") with exact integer arithmetic.

The value is held as a whole number of nano-units (value * 10**9), the finest precision
upstream's ``resource.Quantity`` keeps, so sums and comparisons are exact and never touch
floating point. Like upstream, a quantity remembers the suffix family it was written in and
prints a canonical form of that family. It also remembers whether upstream would hold it in
its fast int64 form (mantissa and decimal scale) or as an arbitrary-precision decimal: CEL's
`isInteger()`/`asInteger()` answer from that form (upstream's AsInt64), not from the value.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Final, final

__all__ = ["Format", "Quantity", "QuantityError", "parse_quantity"]


class QuantityError(ValueError):
    """Raised when text is not a quantity or a value cannot be converted as asked."""


class Format(enum.Enum):
    """The suffix family a quantity is printed in (upstream's ``Format``)."""

    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"
    DECIMAL_EXPONENT = "DecimalExponent"


# Upstream's error texts, kept verbatim so messages match what the API server reports.
_SPLIT_RE_TEXT: Final = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_ERR_FORMAT: Final = f"quantities must match the regular expression '{_SPLIT_RE_TEXT}'"
_ERR_SUFFIX: Final = "unable to parse quantity's suffix"
_ERR_TOO_LARGE: Final = "quantity is too large"
_ERR_NOT_INT: Final = "cannot convert value to integer"

# sign, integer digits, fraction digits, suffix. Matching the suffix loosely here and
# interpreting it afterwards lets us tell a malformed string from an unknown suffix.
_QUANTITY_RE: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT_RE: Final = re.compile(r"[eE]([+-]?[0-9]+)")

_NANO: Final = 10**9
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
# Upstream caps parsed BinarySI values at MaxInt64 whole units.
_BINARY_CAP_NANOS: Final = _INT64_MAX * _NANO
# Upstream accepts exponents that fit a negatable int32 and rejects the rest.
_MAX_EXPONENT: Final = 2**31 - 1
# Our own guard (upstream has none): keep every value's digits well under CPython's
# int/str conversion limit (4300 digits) so parsing and printing can never blow up.
_MAX_DIGITS: Final = 4000

_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60,
}  # fmt: skip
_DECIMAL_BY_EXPONENT: Final = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _div_away(value: int, divisor: int) -> int:
    """Divide, rounding any remainder away from zero, as upstream's RoundUp does."""
    quotient, remainder = divmod(abs(value), divisor)
    if remainder:
        quotient += 1
    return quotient if value >= 0 else -quotient


@final
class Quantity:
    """An immutable, hashable quantity, ordered and compared by value alone."""

    __slots__ = ("_amount", "_fmt", "_nanos", "_text")

    _nanos: int
    _fmt: Format
    _text: str | None
    _amount: Amount | None  # upstream's int64Amount (value, scale), None for an inf.Dec

    def __init__(
        self, nanos: int, fmt: Format = Format.DECIMAL_SI, amount: Amount | None = None
    ) -> None:
        """Build from a nano-unit count; prefer the ``from_*`` and ``parse`` constructors.

        Without `amount` the value is taken as upstream's NewScaledQuantity(nanos, Nano).
        """
        self._nanos = nanos
        self._fmt = fmt
        self._text = None
        self._amount = amount if amount is not None else _fits((nanos, -9))

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse the full upstream grammar; repeated strings are served from a cache."""
        return _parse_cached(text)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """Whole units, like upstream's NewQuantity."""
        return cls(value * _NANO, fmt, _fits((value, 0)))

    @classmethod
    def from_milli(cls, milli: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """Milli-units, like upstream's NewMilliQuantity."""
        return cls(milli * 10**6, fmt, _fits((milli, -3)))

    @classmethod
    def from_nanos(cls, nanos: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """Nano-units, like upstream's NewScaledQuantity(n, Nano)."""
        return cls(nanos, fmt)

    @property
    def nanos(self) -> int:
        """The exact value times 10**9."""
        return self._nanos

    @property
    def fmt(self) -> Format:
        """The suffix family this quantity prints in."""
        return self._fmt

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = _canonical(self._nanos, self._fmt)
        return text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos >= other._nanos

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1, as upstream's Cmp."""
        return (self._nanos > other._nanos) - (self._nanos < other._nanos)

    def add(self, other: Quantity) -> Quantity:
        """Exact sum; keeps self's format unless self is zero (upstream Add does the same)."""
        fmt = other._fmt if self._nanos == 0 else self._fmt
        return _result(self._nanos + other._nanos, fmt, _add(self._amount, other._amount))

    def sub(self, other: Quantity) -> Quantity:
        """Exact difference, with the same format rule as :meth:`add`."""
        fmt = other._fmt if self._nanos == 0 else self._fmt
        return _result(self._nanos - other._nanos, fmt, _add(self._amount, _neg(other._amount)))

    def neg(self) -> Quantity:
        """The negated value in the same format."""
        return _result(-self._nanos, self._fmt, _neg(self._amount))

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._nanos > 0) - (self._nanos < 0)

    def is_zero(self) -> bool:
        """True for any zero, whatever its suffix."""
        return self._nanos == 0

    def is_integer(self) -> bool:
        """CEL ``isInteger()``: upstream's AsInt64 succeeds, which needs the fast int64 form
        with a scale of zero or more: "1Gi" and "1e3" are integers, "1000m", "2.0" and
        "0.5Gi" are not, although their values are whole."""
        return self._int64() is not None

    def as_integer(self) -> int:
        """CEL ``asInteger()``: the value, if :meth:`is_integer` holds."""
        value = self._int64()
        if value is None:
            raise QuantityError(_ERR_NOT_INT)
        return value

    def _int64(self) -> int | None:
        if self._amount is None or self._amount[1] < 0:
            return None
        value, scale = self._amount
        whole = value * 10**scale
        return whole if _INT64_MIN <= whole <= _INT64_MAX else None

    def as_approximate_float(self) -> float:
        """Upstream's AsApproximateFloat64: the unscaled value times Go's Pow10(scale),
        rounded twice as Go's float arithmetic does (`100n` is 1.0000000000000001e-07).
        Parsing leaves an inf.Dec (values past int64) at nano scale; +/-inf out of range."""
        value, scale = self._amount if self._amount is not None else (self._nanos, -9)
        try:
            return float(value) if scale == 0 else float(value) * _go_pow10(scale)
        except OverflowError:
            return float("inf") if value > 0 else float("-inf")

    def value(self) -> int:
        """Upstream Value(): whole units, fractions rounded away from zero."""
        return _div_away(self._nanos, _NANO)

    def milli_value(self) -> int:
        """Upstream MilliValue(): milli-units, fractions rounded away from zero."""
        return _div_away(self._nanos, 10**6)


def _go_pow10(n: int) -> float:
    """Go's math.Pow10: a product (or quotient) of two table powers, so not always the
    correctly rounded 10**n."""
    if 0 <= n <= 308:
        return float(f"1e{32 * (n // 32)}") * float(f"1e{n % 32}")
    if -323 <= n < 0:
        return float(f"1e-{32 * (-n // 32)}") / float(f"1e{-n % 32}")
    return float("inf") if n > 0 else 0.0


Amount = tuple[int, int]  # upstream int64Amount: value * 10**scale, value an int64


def _fits(amount: Amount) -> Amount | None:
    return amount if _INT64_MIN <= amount[0] <= _INT64_MAX else None


def _neg(amount: Amount | None) -> Amount | None:
    return None if amount is None else _fits((-amount[0], amount[1]))


def _add(a: Amount | None, b: Amount | None) -> Amount | None:
    """Upstream int64Amount.Add: align to the smaller scale; overflow means an inf.Dec."""
    if a is None or b is None:
        return None
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    scale = min(a[1], b[1])
    aligned = [v * 10 ** (s - scale) for v, s in (a, b)]
    if any(not _INT64_MIN <= v <= _INT64_MAX for v in aligned):
        return None
    return _fits((aligned[0] + aligned[1], scale))


def _result(nanos: int, fmt: Format, amount: Amount | None) -> Quantity:
    quantity = Quantity(nanos, fmt)
    quantity._amount = amount
    return quantity


def parse_quantity(text: str) -> Quantity:
    """Alias of :meth:`Quantity.parse` for call sites that prefer a function."""
    return _parse_cached(text)


@functools.lru_cache(maxsize=65536)
def _parse_cached(text: str) -> Quantity:
    # Sharing one instance per string is safe because Quantity is immutable.
    return _parse(text)


def _parse(text: str) -> Quantity:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(_ERR_FORMAT)
    sign, whole, frac, suffix = match.groups()
    frac = frac or ""
    # Upstream's hand-written scanner also reads ".", "-" or a bare "Ki" as zero; we demand
    # at least one digit, as the grammar and the error message's regex intend.
    if not whole and not frac:
        raise QuantityError(_ERR_FORMAT)
    digits = (whole + frac).lstrip("0") or "0"
    fmt, nanos = _scale(digits, len(frac), suffix)
    if fmt is Format.BINARY_SI:
        # Upstream caps BinarySI at MaxInt64 units and prints sub-unit values as DecimalSI.
        nanos = min(nanos, _BINARY_CAP_NANOS)
        if 0 < nanos < _NANO:
            fmt = Format.DECIMAL_SI
    amount = (0, 0) if text == "0" else _fast_amount(whole.lstrip("0") or "0", frac, suffix)
    if amount is not None and sign == "-":
        amount = (-amount[0], amount[1])
    return _result(-nanos if sign == "-" else nanos, fmt, amount)


def _fast_amount(num: str, denom: str, suffix: str) -> Amount | None:
    """The int64 form ParseQuantity keeps when its fast path applies, else None."""
    binary = _BINARY_SUFFIXES.get(suffix)
    if binary is not None:
        if denom:
            return None
        precision = 15 - len(num) - int(binary * 3 / 10) - 1
        return _fits((int(num) << binary, 0)) if precision >= 0 else None
    exponent = _DECIMAL_SUFFIXES.get(suffix)
    if exponent is None:
        exponent = int(suffix[1:])  # validated by _scale: "e<n>" or "E<n>"
    scale = exponent - len(denom)
    if 18 - len(num) - len(denom) < 0 or scale < -9:
        return None
    return (int(num + denom), scale)


def _scale(digits: str, frac_len: int, suffix: str) -> tuple[Format, int]:
    """Turn the unsigned digits and suffix into (format, nanos), rounding up below 1n."""
    decimal_exp = _DECIMAL_SUFFIXES.get(suffix)
    if decimal_exp is not None:
        return Format.DECIMAL_SI, _decimal_nanos(digits, decimal_exp - frac_len)
    binary_exp = _BINARY_SUFFIXES.get(suffix)
    if binary_exp is not None:
        if len(digits) > _MAX_DIGITS:
            raise QuantityError(_ERR_TOO_LARGE)
        scaled = (int(digits) << binary_exp) * _NANO
        return Format.BINARY_SI, _div_away(scaled, 10**frac_len)
    match = _EXPONENT_RE.fullmatch(suffix)
    if match is None:
        raise QuantityError(_ERR_SUFFIX)
    exponent = int(match.group(1))
    if abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(_ERR_SUFFIX)
    return Format.DECIMAL_EXPONENT, _decimal_nanos(digits, exponent - frac_len)


def _decimal_nanos(digits: str, exponent: int) -> int:
    """digits * 10**exponent in nanos, without ever building a huge power of ten."""
    if digits == "0":
        return 0
    shift = exponent + 9
    if shift >= 0:
        if len(digits) + shift > _MAX_DIGITS + 9:
            raise QuantityError(_ERR_TOO_LARGE)
        return int(digits + "0" * shift)
    keep = len(digits) + shift
    if keep > _MAX_DIGITS + 9:
        raise QuantityError(_ERR_TOO_LARGE)
    if keep <= 0:
        return 1  # a non-zero amount below 1n still asks for something: round up to 1n
    head, tail = digits[:keep], digits[keep:]
    return int(head) + (1 if tail.strip("0") else 0)


def _canonical(nanos: int, fmt: Format) -> str:
    """Upstream's CanonicalizeBytes, restated over nano-units."""
    if nanos == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        binary = _canonical_binary(nanos)
        if binary is not None:
            return binary
        fmt = Format.DECIMAL_SI
    return _canonical_decimal(nanos, fmt)


def _canonical_binary(nanos: int) -> str | None:
    """Largest power-of-1024 suffix that keeps an integer mantissa, or None to fall back.

    Upstream prints BinarySI values under 1024 in magnitude, or with a fraction, as DecimalSI.
    """
    units, frac = divmod(abs(nanos), _NANO)
    if frac or units < 1024:
        return None
    power = 0
    while units % 1024 == 0:
        units //= 1024
        power += 1
    sign = "-" if nanos < 0 else ""
    if power >= len(_BINARY_BY_POWER):
        # Past "Ei" there is no binary suffix; upstream falls back to exponent notation.
        return _canonical_decimal(nanos, Format.DECIMAL_EXPONENT)
    return f"{sign}{units}{_BINARY_BY_POWER[power]}"


def _canonical_decimal(nanos: int, fmt: Format) -> str:
    """Mantissa without trailing zeros, exponent lowered to a multiple of three."""
    sign = "-" if nanos < 0 else ""
    text = str(abs(nanos))
    mantissa = text.rstrip("0")
    exponent = len(text) - len(mantissa) - 9
    pad = exponent % 3
    mantissa += "0" * pad
    exponent -= pad
    if fmt is Format.DECIMAL_SI:
        suffix = _DECIMAL_BY_EXPONENT.get(exponent)
        if suffix is not None:
            return f"{sign}{mantissa}{suffix}"
        # Beyond "E" there is no SI suffix; upstream switches to exponent notation.
    return f"{sign}{mantissa}e{exponent}" if exponent else f"{sign}{mantissa}"
