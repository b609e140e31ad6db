"""Function overload declarations shared by the checker, cost estimator and compiler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubedra.cel.types import Type

Impl = Callable[..., object]


@dataclass(frozen=True, slots=True)
class Overload:
    """One typed signature of a function.

    `args` includes the receiver first for member functions. Size-dependent costs are in
    `kubedra.cel.callcost`, keyed by function name as upstream's cost estimators are.
    """

    id: str
    args: tuple[Type, ...]
    result: Type
    impl: Impl


@dataclass(slots=True)
class Library:
    """Functions keyed by (name, is_member)."""

    functions: dict[tuple[str, bool], list[Overload]] = field(default_factory=dict)

    def add(
        self,
        name: str,
        args: tuple[Type, ...],
        result: Type,
        impl: Impl,
        *,
        member: bool = False,
    ) -> None:
        """Declare one overload."""
        key = (name, member)
        overload_id = f"{name}_{'_'.join(str(a) for a in args)}"
        self.functions.setdefault(key, []).append(Overload(overload_id, args, result, impl))

    def lookup(self, name: str, member: bool) -> list[Overload]:
        return self.functions.get((name, member), [])

    def has_name(self, name: str) -> bool:
        return (name, False) in self.functions or (name, True) in self.functions

    def merged(self, other: Library) -> Library:
        out = Library({k: list(v) for k, v in self.functions.items()})
        for key, overloads in other.functions.items():
            out.functions.setdefault(key, []).extend(overloads)
        return out
