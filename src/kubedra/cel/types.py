"""Static types used by the checker (a small subset of CEL's type system)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Type:
    """A CEL type; names starting with `_` are type parameters of overload signatures.

    `free` marks a dyn that stands for a type parameter nothing bound (`[]`,
    `optional.none()`): cel-go's checker would have inferred it from the context, so the
    aggregate-literal check accepts it where an explicit `dyn` is refused.
    """

    name: str
    params: tuple[Type, ...] = ()
    free: bool = field(default=False, compare=False)

    @property
    def is_param(self) -> bool:
        return self.name.startswith("_")

    def __str__(self) -> str:
        if self.name == "list":
            return f"list({self.params[0]})"
        if self.name == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.name == "optional_type":
            return f"optional_type({self.params[0]})"
        if self.name == "type" and self.params:
            return f"type({self.params[0]})"
        return self.name


INT = Type("int")
UINT = Type("uint")
DOUBLE = Type("double")
STRING = Type("string")
BYTES = Type("bytes")
BOOL = Type("bool")
NULL = Type("null_type")
DYN = Type("dyn")
FREE = Type("dyn", free=True)
# google.protobuf.Any: what attribute values are typed as where list attributes are off.
# Like dyn everywhere but as a comprehension range (cel-go's checker refuses that).
ANY = Type("any")
TYPE = Type("type")
QUANTITY = Type("kubernetes.Quantity")
SEMVER = Type("kubernetes.Semver")
DEVICE = Type("kubernetes.DRADevice")
IP = Type("net.IP")
CIDR = Type("net.CIDR")
URL = Type("kubernetes.URL")
NAMED_FORMAT = Type("kubernetes.NamedFormat")
A = Type("_A")
B = Type("_B")


def list_of(elem: Type) -> Type:
    return Type("list", (elem,))


def type_of(t: Type) -> Type:
    """The type of a type value: `type(int)` for `int` (cel-go keeps the parameter)."""
    return Type("type", (t,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


def optional_of(inner: Type) -> Type:
    return Type("optional_type", (inner,))


def is_dyn(t: Type) -> bool:
    return t.name in ("dyn", "any")


def has_dyn(t: Type) -> bool:
    """True when a runtime check is needed because part of the type is unknown."""
    return is_dyn(t) or any(has_dyn(p) for p in t.params)


def unify(param: Type, arg: Type, bound: dict[str, Type]) -> bool:
    """Match an argument type against an overload parameter, binding type parameters."""
    if param.is_param:
        seen = bound.get(param.name)
        if seen is None or is_dyn(seen):
            bound[param.name] = arg
            return True
        return is_dyn(arg) or _same(seen, arg, bound)
    if is_dyn(param) or is_dyn(arg):
        return True
    return _same(param, arg, bound)


def _same(a: Type, b: Type, bound: dict[str, Type]) -> bool:
    if a.name == b.name == "type":
        return True  # cel-go: any type value is assignable to any other
    if a.name != b.name or len(a.params) != len(b.params):
        return False
    return all(unify(p, q, bound) for p, q in zip(a.params, b.params, strict=True))


def substitute(t: Type, bound: dict[str, Type]) -> Type:
    """Replace bound type parameters; unbound ones become dyn."""
    if t.is_param:
        return bound.get(t.name, FREE)
    if not t.params:
        return t
    return Type(t.name, tuple(substitute(p, bound) for p in t.params))


def join(a: Type, b: Type, *, conditional: bool = False) -> Type | None:
    """The common type of two branches/elements, None if incompatible. As cel-go's
    mostGeneral, a dyn or `any` side is the result itself (`c ? true : attr` with an
    `any`-typed attribute is `any`). A free type parameter (of `[]`, `{}`,
    `optional.none()`) is bound by the other side, as cel-go's unification binds it:
    `[[], [1]]` is a list(list(int)), `[optional.none(), optional.of(1)]` a
    list(optional_type(int)).

    Two type values always join (cel-go assigns any type value to any other): a list
    literal keeps the first one's type, a conditional (`conditional`) the second's, as
    cel-go's unification and element joining each pick their most general type."""
    if a.free:
        return b
    if b.free:
        return a
    if a == b:
        return a
    if is_dyn(a) or is_dyn(b):
        return next((t for t in (a, b) if is_dyn(t) and not t.free), DYN)
    if NULL in (a, b):
        # cel-go keeps the legacy nullness rule: null goes with message and opaque types
        # only (optionals, quantities, ...), and the first side's type is the result.
        other = b if a == NULL else a
        return a if other.name in _NULLABLE else None
    if a.name == b.name == "type":
        return b if conditional else a
    if a.name == b.name and len(a.params) == len(b.params):
        pairs = zip(a.params, b.params, strict=True)
        parts = [join(p, q, conditional=conditional) for p, q in pairs]
        if all(p is not None for p in parts):
            return Type(a.name, tuple(p for p in parts if p is not None))
    return None


_NULLABLE = frozenset({"optional_type", "kubernetes.Quantity", "kubernetes.Semver", "net.IP",
                       "net.CIDR", "kubernetes.URL", "kubernetes.NamedFormat",
                       "kubernetes.DRADevice"})  # fmt: skip


def equivalent(a: Type | None, b: Type | None) -> bool:
    """Same type, a free dyn standing for any type (cel-go's IsEquivalentType on types its
    checker fully inferred)."""
    if a is None or b is None:
        return a is b
    if a.free or b.free:
        return True
    return (
        a.name == b.name
        and len(a.params) == len(b.params)
        and all(equivalent(p, q) for p, q in zip(a.params, b.params, strict=True))
    )
