"""Closures for comprehension macros (all, exists, exists_one, map, filter, cel.bind, the
two-variable forms and sortBy), following the error rules of cel-go's macro expansions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from kubedra.cel import ast
from kubedra.cel import runtime as rt
from kubedra.cel.errors import CostLimitExceeded
from kubedra.cel.ext_lists import sort_by_keys
from kubedra.cel.values import MapBuilder, Optional, no_such_overload

Frame = list[object]
Fn = Callable[[Frame], object]
Builder = Callable[[Fn, list[Fn], int, int], Fn]


def build_comprehension(
    node: ast.Comprehension, rng: Fn, args: list[Fn], slot: int, slot2: int, cost: int | None
) -> Fn:
    """Closure for `node`; `cost` (per iteration) enables runtime cost charging."""
    if node.kind == "bind":
        init, body = args

        def bind(f: Frame) -> object:
            f[slot] = init(f)
            return body(f)

        return bind
    if node.kind in ("optMap", "optFlatMap"):
        return _optional_map(rng, args[0], slot, node.kind == "optFlatMap")
    if cost is not None:
        args = [_charged(args[0], cost), *args[1:]]
    builder = _BUILDERS[node.kind]
    if node.var2 is not None:
        return builder(_pairs(rng), args, slot, slot2)
    return builder(_singles(rng), args, slot, slot2)


def _optional_map(rng: Fn, body: Fn, slot: int, flat: bool) -> Fn:
    """optMap: `opt.hasValue() ? optional.of(expr[x := opt.value()]) : optional.none()`;
    optFlatMap: the same without wrapping (the expression is itself an optional)."""

    def optional_map(f: Frame) -> object:
        opt = rng(f)
        if type(opt) is not Optional:
            raise no_such_overload("hasValue", opt)
        if not opt.present:
            return Optional.NONE
        f[slot] = opt.value
        out = body(f)
        if not flat:
            return Optional(out)
        if type(out) is not Optional:
            raise no_such_overload("optFlatMap", out)
        return out

    return optional_map


def _charged(fn: Fn, cost: int) -> Fn:
    def charged(f: Frame) -> object:
        rt.charge(f, cost)
        return fn(f)

    return charged


def _singles(rng: Fn) -> Fn:
    """Range for one-variable macros: list elements or map keys."""
    return lambda f: ((x, None) for x in rt.iterate(rng(f)))


def _pairs(rng: Fn) -> Fn:
    """Range for two-variable macros: (index, element) or (key, value)."""

    def pairs(f: Frame) -> Iterator[tuple[object, object]]:
        value = rt.iterate(rng(f))
        if isinstance(value, Mapping):
            return iter(value.items())
        return enumerate(value)

    return pairs


def _items(items: Fn, f: Frame) -> Iterator[tuple[object, object]]:
    return items(f)  # type: ignore[return-value]


def _quantifier(want: bool) -> Builder:
    """all (want False stops) / exists (want True stops); other values' errors are deferred."""

    def build(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
        (pred,) = args

        def quantifier(f: Frame) -> object:
            error: Exception | None = None
            for x, y in _items(items, f):
                f[slot] = x
                if slot2 >= 0:
                    f[slot2] = y
                try:
                    value = pred(f)
                except CostLimitExceeded:
                    raise
                except Exception as exc:
                    error = error or exc
                    continue
                if value is want:
                    return want
                if value is not (not want):
                    error = error or rt.as_bool_error(value)
            if error is not None:
                raise error
            return not want

        return quantifier

    return build


def _exists_one(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    (pred,) = args

    def exists_one(f: Frame) -> object:
        count = 0
        for x, y in _items(items, f):
            f[slot] = x
            if slot2 >= 0:
                f[slot2] = y
            value = pred(f)
            if value is True:
                count += 1
            elif value is not False:
                raise rt.as_bool_error(value)
        return count == 1

    return exists_one


def _mapper(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    """map(x, t), map(x, p, t), filter(x, p), transformList(i, v, [p,] t)."""
    transform = args[-1]
    keep = args[0] if len(args) == 2 else None

    def mapper(f: Frame) -> object:
        out: list[object] = []
        for x, y in _items(items, f):
            f[slot] = x
            if slot2 >= 0:
                f[slot2] = y
            if keep is None or _truth(keep(f)):
                out.append(transform(f))
        return out

    return mapper


def _filter(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    (pred,) = args

    def filtered(f: Frame) -> object:
        out: list[object] = []
        for x, _ in _items(items, f):
            f[slot] = x
            if _truth(pred(f)):
                out.append(x)
        return out

    return filtered


def _transform_map(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    transform = args[-1]
    keep = args[0] if len(args) == 2 else None

    def transform_map(f: Frame) -> object:
        out = MapBuilder()  # keys keep their CEL types (a list's int indexes, a map's keys)
        for x, y in _items(items, f):
            f[slot] = x
            f[slot2] = y
            if keep is None or _truth(keep(f)):
                out.insert(x, transform(f))
        return out.build()

    return transform_map


def _transform_map_entry(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    """transformMapEntry(k, v, [p,] m): the union of the maps `m` made per entry; a key
    made twice is an error (cel-go's cel.@mapInsert of a whole map)."""
    transform = args[-1]
    keep = args[0] if len(args) == 2 else None

    def transform_map_entry(f: Frame) -> object:
        out = MapBuilder()
        for x, y in _items(items, f):
            f[slot] = x
            f[slot2] = y
            if keep is None or _truth(keep(f)):
                made = transform(f)
                if not isinstance(made, Mapping):
                    raise no_such_overload("cel.@mapInsert", made)
                for key, value in made.items():
                    out.insert(key, value)
        return out.build()

    return transform_map_entry


def _sort_by(items: Fn, args: list[Fn], slot: int, slot2: int) -> Fn:
    """ext.Lists sortBy(x, key): a stable sort of the elements by a computed key."""
    (key,) = args

    def sort_by(f: Frame) -> object:
        elements: list[object] = []
        keys: list[object] = []
        for x, _ in _items(items, f):
            f[slot] = x
            elements.append(x)
            keys.append(key(f))
        return sort_by_keys(elements, keys)

    return sort_by


def _truth(value: object) -> bool:
    if value is True or value is False:
        return value
    raise rt.as_bool_error(value)


_BUILDERS: dict[str, Builder] = {
    "all": _quantifier(False),
    "exists": _quantifier(True),
    "exists_one": _exists_one,
    "existsOne": _exists_one,
    "map": _mapper,
    "map_filter": _mapper,
    "transformList": _mapper,
    "filter": _filter,
    "transformMap": _transform_map,
    "transformMapEntry": _transform_map_entry,
    "sortBy": _sort_by,
}
