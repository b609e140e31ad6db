"""`kubedra.sim`: a trace-driven cluster simulator around the real kubedra scheduler.

Inputs (`trace`): the Alibaba openb CSVs or YAML clusters/workloads; conversion to DRA
objects (`convert`); the engine with the FGD saturation experiment and a replay with
departures (`engine`); measures (`metrics`); outputs and the results report (`report`);
entry points for the CLI (`cli`: `sim_run`, `sim_compare`, `sim_report`); gang jobs
against pod-by-pod placement (`gangs`, `python -m kubedra.sim.gangs`).
"""

from kubedra.sim.cli import sim_compare, sim_report, sim_run
from kubedra.sim.engine import RunResult, Simulation, run_replay, run_saturate, simulation
from kubedra.sim.metrics import ClusterState, FragMeter, typical_types
from kubedra.sim.trace import (
    Cluster,
    NodeSpec,
    TaskSpec,
    Workload,
    fgd_arrivals,
    load_cluster,
    load_workload,
)

__all__ = [
    "Cluster",
    "ClusterState",
    "FragMeter",
    "NodeSpec",
    "RunResult",
    "Simulation",
    "TaskSpec",
    "Workload",
    "fgd_arrivals",
    "load_cluster",
    "load_workload",
    "run_replay",
    "run_saturate",
    "sim_compare",
    "sim_report",
    "sim_run",
    "simulation",
    "typical_types",
]
