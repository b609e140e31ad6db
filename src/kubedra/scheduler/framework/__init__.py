"""The scheduling framework: extension points, the cycle state, and the runtime that runs
a profile's plugins at each point for one pod (upstream's `pkg/scheduler/framework`).
"""

from __future__ import annotations

from kubedra.scheduler.framework.cycle import Framework
from kubedra.scheduler.framework.interfaces import ALLOW, Candidate, Handle, Plugin, Verdict
from kubedra.scheduler.framework.registry import PluginFactory, Registry, build
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.framework.status import Unschedulable, Waiting

__all__ = [
    "ALLOW",
    "Candidate",
    "CycleState",
    "Diagnosis",
    "Framework",
    "Handle",
    "Plugin",
    "PluginFactory",
    "PodInfo",
    "Registry",
    "Unschedulable",
    "Verdict",
    "Waiting",
    "build",
]
