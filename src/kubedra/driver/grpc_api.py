"""The generated modules, typed `Any` for our code: protoc's gRPC modules are untyped, and
routing them through one place keeps `mypy --strict` on everything else."""

from __future__ import annotations

from typing import Any

from kubedra.driver.proto import dra_health_v1_pb2 as _health
from kubedra.driver.proto import dra_health_v1_pb2_grpc as _health_grpc
from kubedra.driver.proto import dra_v1_pb2 as _dra_v1
from kubedra.driver.proto import dra_v1_pb2_grpc as _dra_v1_grpc
from kubedra.driver.proto import dra_v1beta1_pb2 as _dra_v1beta1
from kubedra.driver.proto import dra_v1beta1_pb2_grpc as _dra_v1beta1_grpc
from kubedra.driver.proto import pluginregistration_pb2 as _reg
from kubedra.driver.proto import pluginregistration_pb2_grpc as _reg_grpc

dra_v1: Any = _dra_v1
dra_v1_grpc: Any = _dra_v1_grpc
dra_v1beta1: Any = _dra_v1beta1
dra_v1beta1_grpc: Any = _dra_v1beta1_grpc
registration: Any = _reg
registration_grpc: Any = _reg_grpc
health_v1: Any = _health
health_v1_grpc: Any = _health_grpc
