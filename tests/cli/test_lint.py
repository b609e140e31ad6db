"""`kubedra lint` through the real entry point: output lines and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.api.manifests import claim_doc, mutate


def kubedra(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubedra", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def test_seed_lints_with_warnings_and_exit_zero(seed_dir: Path) -> None:
    run = kubedra("lint", str(seed_dir))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    claim_file = seed_dir / "02-resourceclaim-vllm.yaml"
    assert (
        f"{claim_file}:9: ResourceClaim vllm-gpu-claim: spec.devices.requests[0].deviceClassName: "
        "warning: v1beta1-style request field moved to "
        "spec.devices.requests[0].exactly.deviceClassName (resource.k8s.io/v1 shape)"
    ) in lines


def test_strict_turns_warnings_into_failure(seed_dir: Path) -> None:
    assert kubedra("lint", "--strict", str(seed_dir)).returncode == 1
    assert kubedra("--strict", "lint", str(seed_dir)).returncode == 1


def test_clean_manifest_prints_nothing_and_exits_zero(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(claim_doc()))
    run = kubedra("lint", str(path))
    assert (run.returncode, run.stdout) == (0, "")


def test_errors_exit_one_with_file_line_object_and_path(tmp_path: Path) -> None:
    doc = mutate(claim_doc(), "spec.devices.requests.0.exactly.count", -1)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = kubedra("lint", str(path))
    assert run.returncode == 1
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "count: -1" in t)
    assert run.stdout.splitlines() == [
        f"{path}:{line}: ResourceClaim default/train: spec.devices.requests[0].exactly.count: "
        "Invalid value: -1: must be greater than zero"
    ]


def test_reads_stdin() -> None:
    doc = mutate(claim_doc(), "metadata.name", "Bad_Name")
    run = kubedra("lint", "-", stdin=yaml.safe_dump(doc))
    assert run.returncode == 1
    assert run.stdout.startswith("-:")
    assert "ResourceClaim default/Bad_Name: metadata.name: Invalid value" in run.stdout


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    run = kubedra("lint", str(tmp_path / "nope.yaml"))
    assert run.returncode == 1
    assert "cannot read: No such file or directory" in run.stdout


def test_seed_class_gets_the_portability_and_multi_driver_warnings(seed_dir: Path) -> None:
    lines = kubedra("lint", str(seed_dir)).stdout.splitlines()
    class_file = seed_dir / "01-deviceclass-high-memory-gpu.yaml"
    portable = [line for line in lines if "not portable" in line]
    assert len(portable) == 1
    assert portable[0].startswith(
        f"{class_file}:9: DeviceClass high-memory-gpu: spec.selectors[0].cel.expression: warning: "
    )
    assert ('Portable form: device.driver == "gpu.nvidia.com" && '
            'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))') in portable[0]
    assert any(line.startswith(f"{class_file}:8: DeviceClass high-memory-gpu: spec.selectors: "
                               "warning: this class admits devices of every driver") for line in lines)


def test_strict_compiles_the_seed_class_as_upstream_does(seed_dir: Path) -> None:
    run = kubedra("lint", "--strict", str(seed_dir))
    assert run.returncode == 1
    errors = [line for line in run.stdout.splitlines() if ": warning: " not in line]
    assert len(errors) == 1
    assert "spec.selectors[0].cel.expression: Invalid value: " in errors[0]
    assert "found no matching overload for 'isGreaterThan'" in errors[0]


def test_cel_syntax_error_has_path_and_position(tmp_path: Path) -> None:
    doc = mutate(claim_doc(), "spec.devices.requests.0.exactly.selectors",
                 [{"cel": {"expression": 'device.driver == "a" &&'}}])
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = kubedra("lint", str(path))
    assert run.returncode == 1
    (line,) = run.stdout.splitlines()
    assert "ResourceClaim default/train: spec.devices.requests[0].exactly.selectors[0].cel.expression: " in line
    assert "compilation failed: ERROR: <input>:1:" in line


def test_rewrite_uses_the_driver_of_slices_in_the_same_input(tmp_path: Path) -> None:
    from tests.api.manifests import slice_doc

    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "big"},
          "spec": {"selectors": [{"cel": {"expression": 'device.driver == "tpu.google.com" && '
                                          'device.capacity["memory"].isGreaterThan(quantity("1Gi"))'}}]}}
    tpu = mutate(slice_doc(), "spec.driver", "tpu.google.com")
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([dc, tpu]))
    run = kubedra("lint", str(tmp_path))
    assert run.returncode == 0
    assert 'Portable form: device.driver == "tpu.google.com" && device.capacity["tpu.google.com"].memory' in run.stdout
    assert "admits devices of every driver" not in run.stdout
