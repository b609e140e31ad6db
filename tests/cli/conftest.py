"""Fixtures of the CLI tests: a store seeded through the real entry point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.api.manifests import slice_doc
from tests.cli.test_lint import kubedra

GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}}


def node_docs(name: str, memory: str) -> list[dict[str, Any]]:
    rs = slice_doc()
    rs["metadata"]["name"] = f"{name}-gpu"
    rs["spec"]["nodeName"] = rs["spec"]["pool"]["name"] = name
    rs["spec"]["devices"][0]["capacity"]["memory"]["value"] = memory
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    return [node, rs]


@pytest.fixture
def cluster(tmp_path: Path, seed_dir: Path) -> tuple[str, Path]:
    """A store with two one-GPU nodes (24Gi and 80Gi), the seed applied."""
    store = str(tmp_path / "state.db")
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(yaml.safe_dump_all(node_docs("small", "24Gi") + node_docs("big", "80Gi")))
    assert kubedra("--store", store, "apply", "-f", str(manifests)).returncode == 0
    applied = kubedra("--store", store, "apply", "-f", str(seed_dir))
    assert applied.returncode == 0, applied.stderr
    return store, tmp_path
