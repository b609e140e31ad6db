"""A pydantic v2 model of the ResourceSlice subset the load benchmark uses (comparison only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Attribute(_M):
    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None


class Capacity(_M):
    value: str


class Device(_M):
    name: str
    attributes: dict[str, Attribute] = {}
    capacity: dict[str, Capacity] = {}


class Pool(_M):
    name: str
    generation: int = 0
    resourceSliceCount: int = 0


class Spec(_M):
    driver: str
    nodeName: str | None = None
    pool: Pool
    devices: tuple[Device, ...] = ()


class Meta(_M):
    name: str


class ResourceSlice(_M):
    apiVersion: str
    kind: str
    metadata: Meta
    spec: Spec
