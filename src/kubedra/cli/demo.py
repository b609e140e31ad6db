"""`kubedra demo`: the seed scenario, as far as the landed components carry it.

The foundation loads and validates the seed manifests verbatim and shows the v1 form it
stores; later stages (allocator, store, scheduler) extend this into a placement.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from kubedra.api.codec import dump_yaml
from kubedra.api.loader import load_paths
from kubedra.cli.lint import lint_problems

SEED_DIR = Path(__file__).resolve().parents[3] / "examples" / "seed"


def run_demo(out: TextIO, seed_dir: Path = SEED_DIR) -> int:
    """Print the seed's problems and its stored (v1) form; 0 unless it has errors."""
    result = load_paths([str(seed_dir)])
    problems = lint_problems(result)
    out.write(f"kubedra demo: {len(result.objects)} objects from {seed_dir}\n")
    for problem in problems:
        out.write(f"  {problem}\n")
    out.write("stored as resource.k8s.io/v1:\n")
    out.write(dump_yaml(o.obj for o in result.objects))
    return 1 if any(p.is_error for p in problems) else 0
