"""kubedra's resource.k8s.io and scheduling.k8s.io models against k8s.io/api's Go types,
field by field.

The oracle describes the JSON shape of each kind from the Go types of the pinned k8s.io/api
(`resource/v1`, `v1beta2` for DeviceTaintRule, `scheduling/v1beta1` for Workload and
PodGroup); the same description is derived from
kubedra's msgspec models. Every field upstream has must be modelled with the same JSON
shape, and kubedra must have no field upstream lacks.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import msgspec
import pytest

from kubedra.api.meta import KubeObject, Model, ObjectMeta
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup, Workload
from tests.conformance.oracle import Oracle

KINDS: dict[str, type[KubeObject]] = {
    "v1/DeviceClass": DeviceClass,
    "v1/ResourceClaim": ResourceClaim,
    "v1/ResourceClaimTemplate": ResourceClaimTemplate,
    "v1/ResourceSlice": ResourceSlice,
    "v1/DeviceTaintRule": DeviceTaintRule,
    "v1beta2/DeviceTaintRule": DeviceTaintRule,
    "scheduling/v1beta1/Workload": Workload,
    "scheduling/v1beta1/PodGroup": PodGroup,
}
_SCALARS: dict[Any, str] = {str: "string", int: "integer", bool: "boolean", Quantity: "quantity",
                            Any: "any"}  # fmt: skip


def shape(tp: Any, outer: frozenset[type] = frozenset()) -> Any:
    """The JSON shape of a model type, in the oracle's notation (a model inside itself is
    `{"recursive": name}`, as the oracle writes it)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is ObjectMeta:
        return "meta"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return shape(inner, outer)
    if origin is tuple:
        return {"list": shape(args[0], outer)}
    if origin is dict:
        return {"map": shape(args[1], outer)}
    if isinstance(tp, type) and tp in outer:
        return {"recursive": tp.__name__}
    if isinstance(tp, type) and issubclass(tp, Model):
        return {"object": {
            f.encode_name: shape(f.type, outer | {tp})
            for f in msgspec.structs.fields(tp)
            if f.encode_name != "x-kubedra-unknown-fields"
        }}  # fmt: skip
    raise TypeError(f"no JSON shape for {tp!r}")


def differences(ours: Any, theirs: Any, path: str) -> list[str]:
    """Where two shapes differ. Timestamps are strings in kubedra (RFC 3339 text)."""
    theirs = "string" if theirs == "time" else theirs
    if isinstance(ours, dict) and isinstance(theirs, dict) and ours.keys() == theirs.keys():
        ((key, a),) = ours.items()
        b = theirs[key]
        if key != "object":
            return differences(a, b, f"{path}[]")
        out = [f"{path}.{k}: missing in kubedra" for k in sorted(b.keys() - a.keys())]
        out += [f"{path}.{k}: not upstream" for k in sorted(a.keys() - b.keys())]
        return out + [d for k in sorted(a.keys() & b.keys())
                      for d in differences(a[k], b[k], f"{path}.{k}")]  # fmt: skip
    return [] if ours == theirs else [f"{path}: kubedra {ours} != upstream {theirs}"]


@pytest.fixture(scope="module")
def upstream(oracle: Oracle) -> dict[str, Any]:
    return oracle.ask("types")


@pytest.mark.parametrize("kind", list(KINDS))
def test_model_matches_upstream_types(kind: str, upstream: dict[str, Any]) -> None:
    assert differences(shape(KINDS[kind]), upstream[kind], kind) == []
