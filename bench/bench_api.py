"""Loading 5,000 ResourceSlices (8 devices x 12 attributes): kubedra against raw parsers.

Target (foundation issue): object construction and validation add at most 50% on top of
the raw parse time of the fastest loader for the same format, measured in the same run.
The model-layer candidates (msgspec Structs, pydantic v2) convert the same parsed data.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import yaml

from bench.harness import DATA_DIR, Row, best_of, sized
from kubedra.api.loader import load_text
from kubedra.api.validation import validate

SLICES, DEVICES, ATTRIBUTES = sized(5000, 500), 8, 12
TARGET_OVERHEAD = 0.5


def slice_doc(n: int) -> dict[str, Any]:
    node = f"node-{n:05d}"
    devices = []
    for i in range(DEVICES):
        attributes: dict[str, Any] = {
            "index": {"int": i},
            "minor": {"int": i},
            "uuid": {"string": f"GPU-{n:08x}-{i:04x}-4e5f-9a0b-1c2d3e4f5a6b"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "550.54.15"},
            "cudaDriverVersion": {"version": "12.4.0"},
            "pcieBusID": {"string": f"0000:{0x18 + i:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2:02x}"},
            "nvlinkDomain": {"int": n // 4},
        }
        devices.append({"name": f"gpu-{i}", "attributes": attributes,
                        "capacity": {"memory": {"value": "80Gi"}}})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com-abcde"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }


def write_inputs() -> tuple[Path, Path]:
    """The YAML stream and the JSON List, generated once into bench/.data."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    yaml_path, json_path = DATA_DIR / f"slices-{SLICES}.yaml", DATA_DIR / f"slices-{SLICES}.json"
    if not yaml_path.exists() or not json_path.exists():
        docs = [slice_doc(n) for n in range(SLICES)]
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        yaml_path.write_text(yaml.dump_all(docs, Dumper=dumper, sort_keys=False))
        json_path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    return yaml_path, json_path


def kubedra_load(text: str, name: str) -> None:
    result = load_text(text, name)
    assert len(result.objects) == SLICES and not result.problems
    for loaded in result.objects:
        assert not validate(loaded.obj)


def _raw_loaders() -> dict[str, dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    # JSON first: the YAML runs leave a large, fragmented heap behind them.
    loaders: dict[str, dict[str, Any]] = {
        "json": {"json (stdlib)": json.loads, "msgspec.json": lambda t: msgspec.json.decode(t)},
        "yaml": {"PyYAML CSafeLoader": lambda t: list(yaml.load_all(t, Loader=loader))},
    }
    try:
        import orjson

        loaders["json"]["orjson"] = orjson.loads
    except ImportError:
        pass
    return loaders


def model_layer_rows(items: list[dict[str, Any]]) -> list[Row]:
    """msgspec vs pydantic v2 converting the same parsed slices (the model-layer decision)."""
    from kubedra.api.codec import decode_object

    rows = [Row("api", "model layer: msgspec Structs (kubedra)",
                best_of(lambda: [decode_object(d) for d in items], 3) * 1e3, "ms")]
    try:
        from bench.pydantic_slice import ResourceSlice as PydanticSlice
    except ImportError:
        return rows
    pydantic_ms = best_of(lambda: [PydanticSlice.model_validate(d) for d in items], 3) * 1e3
    rows.append(Row("api", "model layer: pydantic v2 BaseModel", pydantic_ms, "ms"))
    return rows


def format_rows(fmt: str, text: str, loaders: dict[str, Any], repeat: int) -> list[Row]:
    """Raw parsers and kubedra on one text, interleaved so that machine noise hits both."""
    best = dict.fromkeys([*loaders, "kubedra"], float("inf"))
    for _ in range(repeat):
        for name, fn in loaders.items():
            best[name] = min(best[name], best_of(partial(fn, text), 1))
        best["kubedra"] = min(best["kubedra"], best_of(partial(kubedra_load, text, f"x.{fmt}"), 1))
    ours = best.pop("kubedra")
    rows = [Row("api", f"{fmt}: raw parse, {name}", s * 1e3, "ms") for name, s in best.items()]
    overhead = ours / min(best.values()) - 1
    rows.append(Row("api", f"{fmt}: kubedra load + validate", ours * 1e3, "ms",
                    note=f"{len(text) / 1e6:.1f} MB, {SLICES} slices"))
    rows.append(Row("api", f"{fmt}: overhead over fastest raw parse", overhead * 100, "%",
                    target=f"<= {TARGET_OVERHEAD * 100:.0f}%", ok=overhead <= TARGET_OVERHEAD))
    return rows


def reader_rows(texts: dict[str, str]) -> list[Row]:
    """The bounded readers on normal files: kubedra's event-driven YAML builder (every input
    bound checked) against PyYAML's own compose + construct (none checked), and the cost of
    the strict JSON pass (duplicate fields, number lengths) next to msgspec's decode."""
    from kubedra.api.json_reader import check_strict, json_objects
    from kubedra.api.yaml_reader import Loader, yaml_documents

    def pyyaml(text: str) -> None:
        loader = Loader(text)
        while loader.check_node():
            loader.construct_document(loader.get_node())

    raw = texts["json"].encode()
    items = [obj for _, obj, _ in json_objects(raw)]
    yaml_s = best_of(lambda: list(yaml_documents(texts["yaml"])), 2)
    pyyaml_s = best_of(lambda: pyyaml(texts["yaml"]), 2)
    strict_s = best_of(lambda: [check_strict(item) for item in items], 3)
    msgspec_s = best_of(lambda: msgspec.json.decode(raw), 3)
    return [
        Row("api", "yaml: PyYAML compose + construct (no bounds)", pyyaml_s * 1e3, "ms"),
        Row("api", "yaml: kubedra reader (all bounds checked)", yaml_s * 1e3, "ms",
            note=f"{(yaml_s / pyyaml_s - 1) * 100:+.0f}% vs PyYAML"),
        Row("api", "json: strict pass (duplicates, numbers)", strict_s * 1e3, "ms",
            note=f"{strict_s / msgspec_s:.1f}x msgspec's decode ({msgspec_s * 1e3:.0f} ms)"),
    ]  # fmt: skip


def run() -> list[Row]:
    yaml_path, json_path = write_inputs()
    texts = {"yaml": yaml_path.read_text(), "json": json_path.read_text()}
    rows: list[Row] = []
    for fmt, loaders in _raw_loaders().items():
        rows += format_rows(fmt, texts[fmt], loaders, repeat=5 if fmt == "json" else 2)
    rows += reader_rows(texts)
    rows += model_layer_rows(json.loads(texts["json"])["items"])
    return rows
