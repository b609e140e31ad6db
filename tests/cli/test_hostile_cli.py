"""Hostile input through the real entry points (`lint`, `apply`, `allocate`): one clear
error with the file's name, exit 1, no traceback, nothing stored (issue 25)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.api.manifests import claim_doc
from tests.cli.test_commands import GPU_CLASS, node_docs
from tests.cli.test_lint import kubedra

BAD_UTF8 = b"apiVersion: v1\nkind: Node\nmetadata:\n  name: n\xff\n"
ALIAS_BOMB = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * 9) + "]\n" for i in range(8)
)


def _clean_failure(run: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert run.returncode == 1
    output = run.stdout + run.stderr
    assert "Traceback" not in output
    assert fragment in output, output


@pytest.mark.parametrize("command", ["lint", "apply -f", "allocate -f"])
def test_invalid_utf8_names_the_file_everywhere(tmp_path: Path, command: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(BAD_UTF8)
    run = kubedra("--store", str(tmp_path / "s.db"), *command.split(), str(path))
    _clean_failure(run, f"{path}:4: cannot parse: invalid UTF-8 (byte 0xff at offset 45, column 10)")


def test_deep_json_on_stdin() -> None:
    deep = "[" * 2000 + "]" * 2000
    run = kubedra("lint", "-", stdin='{"apiVersion": "v1", "kind": "Node", "x": ' + deep + "}")
    _clean_failure(run, "-: nested too deeply: more than 100 levels")


def test_alias_bomb_is_refused_by_apply_and_nothing_is_stored(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    _clean_failure(kubedra("--store", store, "apply", "-f", str(path)),
                   f"{path}:8: document contains excessive aliasing")  # fmt: skip
    assert not Path(store).exists() or Path(store).stat().st_size < 1 << 20
    assert kubedra("--store", store, "get", "pods").stdout == ""


def _allocate_input(tmp_path: Path, expression: str, count: int = 1) -> Path:
    claim = claim_doc()
    claim["spec"]["devices"] = {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]
    }
    gpu_class = dict(GPU_CLASS, spec={"selectors": [{"cel": {"expression": expression}}]})
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all([*node_docs("n1", "80Gi"), gpu_class, claim]))
    return path


def test_allocate_validates_like_apply(tmp_path: Path) -> None:
    path = _allocate_input(tmp_path, 'device.driver == "gpu.nvidia.com"', count=2**63)
    _clean_failure(kubedra("allocate", "-f", str(path)),
                   "exactly.count: json: cannot unmarshal number 9223372036854775808")  # fmt: skip
    fine = _allocate_input(tmp_path, 'device.driver == "gpu.nvidia.com"')
    assert kubedra("allocate", "-f", str(fine)).returncode == 0


def test_allocate_refuses_a_cel_bomb_before_running_it(tmp_path: Path) -> None:
    bomb = ("device.driver == 'gpu.nvidia.com' && cel.bind(s, lists.range(100000)"
            ".map(i, 'abcdefghij').join(''), lists.range(100).map(i, s).join('').size() > 0)")  # fmt: skip
    start = time.perf_counter()
    run = kubedra("allocate", "-f", str(_allocate_input(tmp_path, bomb)))
    _clean_failure(run, "too complex, exceeds cost limit")
    assert time.perf_counter() - start < 10


GPU = "(device.driver == 'gpu.nvidia.com')"


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [("(" * 100 + GPU + ")" * 100, None),  # cel-go's limits allow these two
     ("!" * 400 + GPU, None),
     ("(" * 300 + GPU + ")" * 300, "expression recursion limit exceeded"),
     ("-" * 300 + "1 < 0 || " + GPU, None),
     (GPU + " && " + "9" * 5000 + " > 0", "invalid int literal"),
     (GPU + " && lists.range(30000000).size() > 0", "too complex, exceeds cost limit"),
     (GPU + " && '%.10000009e'.format([1.0]).size() > 0", "would build a string")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["lint", "apply -f", "allocate -f"])
def test_hostile_cel_through_every_entry_point(tmp_path: Path, command: str, expression: str,
                                               fragment: str | None) -> None:  # fmt: skip
    path = _allocate_input(tmp_path, expression)
    start = time.perf_counter()
    run = kubedra("--store", str(tmp_path / "s.db"), *command.split(), str(path))
    assert time.perf_counter() - start < 10
    if fragment is None:
        assert run.returncode == 0, run.stdout + run.stderr
    elif fragment == "would build a string" and command != "allocate -f":
        assert run.returncode == 0  # within the estimate: refused only when it runs
    else:
        _clean_failure(run, fragment)
