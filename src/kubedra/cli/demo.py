"""`kubedra demo`: the seed scenario end to end, in under 40 readable lines.

A fresh store with a mixed cluster, the seed manifests applied verbatim, one scheduling
pass, and then: where the vLLM pod went and why every other device was excluded (funnel
counts per node group), a workload that cannot fit and its explanation, and the same
request under the device-plugin model (`nvidia.com/gpu: 1`) for contrast.

The demo has its own store, `.kubedra/demo.db`, so it never touches the one the README's
commands build (`.kubedra/state.db`). Given a store with `--store` or KUBEDRA_STORE, it
replaces it only when it is empty or the user agrees (`--yes`, or a yes at the prompt).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TextIO

import click

from kubedra.api.codec import decode_object
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.kinds import ALL_KINDS
from kubedra.api.loader import load_paths
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cli.cluster import create_nodes
from kubedra.cli.columns import device_memory, device_product
from kubedra.cli.context import Settings
from kubedra.cli.lint import lint_problems
from kubedra.cli.scheduling import format_groups
from kubedra.cluster import SqliteStore
from kubedra.cluster.sqlite import SYSTEM_NAMESPACES
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import explain_claims, pod_claims
from kubedra.scheduler.scheduler import Scheduler

SEED_DIR = Path(__file__).resolve().parents[3] / "examples" / "seed"
DEMO_PATH = ".kubedra/demo.db"
CLUSTER = [("h100x8", 2), ("l4x4", 2), ("a100-40x8-mig", 1), ("tpu-v5e-2x4", 1)]
TOO_BIG = {  # 16 H100-class GPUs on one node: no node has them
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "train-16-gpus", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "high-memory-gpu", "count": 16}}
            ]
        }
    },
}


def run_demo(
    out: TextIO, settings: Settings, seed_dir: Path = SEED_DIR, replace: bool = False
) -> int:
    settings.embedded_path("demo")  # refuses a real cluster
    path = settings.backend.store or DEMO_PATH
    if settings.backend.store and not replace:
        _agree_to_replace(path)
    store = _fresh_store(path)
    nodes = create_nodes(store, CLUSTER)
    out.write(
        f"cluster: {len(nodes)} nodes ({', '.join(f'{c}x {p}' for p, c in CLUSTER)}) in {path}\n"
    )
    if _apply_seed(out, store, seed_dir, settings.strict):
        return 1
    scheduler = Scheduler(store, "first-fit", strict_cel=settings.strict)
    explanation = explain_claims(
        scheduler,
        pod_claims(scheduler, _pod(store, "vllm-inference")),
        _pod(store, "vllm-inference"),
    )
    outcomes = scheduler.run_once()
    placed = next((o for o in outcomes if o.pod == "default/vllm-inference"), None)
    if placed is None or placed.node is None:
        out.write(f"vllm-inference: not scheduled: {placed.message if placed else '?'}\n")
        return 1
    claim = store.get(ResourceClaim, "vllm-gpu-claim")
    out.write(
        f"\nvllm-inference -> node {placed.node}, device {', '.join(placed.devices)}"
        f" ({_product(claim, store)})\n"
    )
    out.write("why (request gpu: devices per stage, per node group):\n")
    out.write(format_groups(explanation))
    _too_big(out, store, scheduler)
    _device_plugin(out, store)
    kubedra = f"{_command()} --store {path}"
    out.write(f"\nnext: {kubedra} explain pod vllm-inference   |   {kubedra} devices\n")
    return 0


def _command() -> str:
    """`kubedra` as the reader can type it in a new shell: by name where it is on PATH,
    else its path (`make demo` runs it from .venv, which a new shell does not activate)."""
    found = shutil.which("kubedra")
    argv0 = Path(sys.argv[0])
    if argv0.name == "kubedra" and (found is None or Path(found).resolve() != argv0.resolve()):
        return os.path.relpath(argv0) if argv0.is_absolute() else str(argv0)
    return "kubedra"


def _agree_to_replace(path: str) -> None:
    """A store the user named is replaced only when empty or with their agreement."""
    if not Path(path).exists():
        return
    store = SqliteStore(path)
    held = sum(1 for kind in ALL_KINDS for obj in store.list(kind, None) if not _system(obj))
    store.close()
    if not held:
        return
    question = f"{path} holds {held} object(s); the demo replaces the whole store"
    if not sys.stdin.isatty():
        raise KubedraError(f"{question}: pass --yes to agree, or give another --store")
    if not click.confirm(f"{question}. Go on?", default=False, err=True):
        raise KubedraError(f"{path} left as it was")


def _system(obj: KubeObject) -> bool:
    """The namespaces every store starts with are no content of the user's."""
    return isinstance(obj, Namespace) and obj.name in SYSTEM_NAMESPACES


def _fresh_store(path: str) -> SqliteStore:
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)
    return SqliteStore(path)


def _apply_seed(out: TextIO, store: SqliteStore, seed_dir: Path, strict: bool) -> bool:
    result = load_paths([str(seed_dir)])
    problems = lint_problems(result, strict)
    out.write(
        f"applied {seed_dir.name}/ ({len(result.objects)} objects), with "
        f"{len(problems)} warning(s):\n"
    )
    for p in problems:
        where = f"{Path(p.file).name}:{p.line}"
        text = _short(p.message)
        out.write(f"  {where} {p.ref.kind} {p.ref.name}: {p.path}: {text}\n")
    if any(p.is_error for p in problems):
        return True
    for loaded in result.objects:
        store.create(loaded.obj)
    return False


def _short(message: str) -> str:
    """One readable line: the rewrite of a portability warning, else the first clause."""
    if "Portable form: " in message:
        rewrite = message.split("Portable form: ", 1)[1].split(" (drivers publishing", 1)[0]
        return f"not portable (upstream fails it); portable form: {rewrite}"
    return message if len(message) < 140 else message.split(":", 1)[0] + " (see kubedra lint)"


def _pod(store: SqliteStore, name: str) -> Pod:
    return store.get(Pod, name)


def _product(claim: ResourceClaim, store: SqliteStore) -> str:
    result = claim.status.allocation.devices.results[0]  # type: ignore[union-attr]
    for rs in store.list(ResourceSlice, field_selector=f"spec.nodeName={result.pool}"):
        for d in rs.spec.devices:
            if rs.spec.driver == result.driver and d.name == result.device:
                return f"{device_product(d) or d.name}, {device_memory(d) or '?'}"
    return result.device


def _too_big(out: TextIO, store: SqliteStore, scheduler: Scheduler) -> None:
    store.create(decode_object(TOO_BIG).obj)
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-16", "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "train-16-gpus"}],
            "containers": [{"name": "train", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    store.create(decode_object(doc).obj)
    (outcome,) = [o for o in scheduler.run_once() if o.pod == "default/train-16"]
    out.write(f"\ntrain-16 (16 GPUs > 40Gi on one node): {outcome.message}\n")
    claim = store.get(ResourceClaim, "train-16-gpus")
    groups = explain_claims(scheduler, [claim], _pod(store, "train-16"))
    out.write(format_groups(groups))


def _device_plugin(out: TextIO, store: SqliteStore) -> None:
    """The device-plugin model: `nvidia.com/gpu: 1` fits any node with a free GPU count,
    whatever the GPU's memory (GPU Feature Discovery's labels say what it would get)."""
    fits = []
    for node in store.list(Node):
        count = (node.status.allocatable if node.status else {}).get("nvidia.com/gpu")
        if count is not None and count.value() >= 1:
            labels = node.metadata.labels
            memory = labels.get("nvidia.com/gpu.memory", "")
            fits.append(
                (
                    node.name,
                    labels.get("nvidia.com/gpu.product", "?"),
                    int(memory) if memory.isdigit() else 0,
                )
            )
    out.write(f"\ndevice plugin, same pod with nvidia.com/gpu: 1 -> any of {len(fits)} nodes:\n")
    for name, product, mib in fits:
        verdict = "   <- not more than 40Gi: the seed class rejects it" if mib <= 40 * 1024 else ""
        out.write(f"  {name} ({product}, {mib} MiB){verdict}\n")
