"""One line per device funnel, as `kubedra explain` prints it and FailedScheduling events
carry it: how many devices were left after each stage of the allocator's filtering."""

from __future__ import annotations

from kubedra.allocator import RequestFunnel


def format_funnel(f: RequestFunnel) -> str:
    stages = " -> ".join(f"{count} {stage}" for stage, count in f.rows())
    need = f"need {f.wanted}" if f.mode == "ExactCount" else "need all"
    return f"{f.request} ({need}): {stages}"
