"""Regenerate this package's protobuf and gRPC modules: `python -m kubedra.driver.proto.generate`.

Needs grpcio-tools (a dev dependency). protoc writes `import dra_v1_pb2`, which only works
with this directory on sys.path; the import is rewritten to the package-relative form so the
modules load as `kubedra.driver.proto.*`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = (
    "dra_v1.proto",
    "dra_v1beta1.proto",
    "dra_health_v1.proto",
    "pluginregistration.proto",
)
_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def generate(out_dir: Path = HERE) -> list[Path]:
    """Run protoc on every .proto here, writing *_pb2.py, *_pb2.pyi and *_pb2_grpc.py."""
    from grpc_tools import protoc  # dev dependency, imported only when regenerating

    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{HERE}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(str(HERE / p) for p in PROTOS),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    written = []
    for proto in PROTOS:
        stem = proto.removesuffix(".proto")
        grpc_module = out_dir / f"{stem}_pb2_grpc.py"
        text = grpc_module.read_text()
        grpc_module.write_text(_IMPORT.sub(r"from . import \1 as \2", text))
        stub = out_dir / f"{stem}_pb2.pyi"
        # Generated stubs follow protoc's style, not ours: keep ruff off them.
        stub.write_text("# ruff: noqa\n" + stub.read_text())
        written += [out_dir / f"{stem}_pb2.py", stub, grpc_module]
    return written


def main() -> int:
    for path in generate():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
