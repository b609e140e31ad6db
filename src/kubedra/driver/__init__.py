"""`kubedra.driver`: the DRA node agent (kubelet plugin + ResourceSlice publisher).

- `backends`: inventories from real GPUs (`nvml`) or a catalog profile (`simulated`);
- `publisher`: the node's pool as ResourceSlices in the Store;
- `server` / `kubelet`: the kubelet's registration and DRA gRPC services on unix sockets;
- `prepare`, `config`, `cdi`: NodePrepareResources / NodeUnprepareResources; `mig`: the MIG
  instances prepare makes and unprepare destroys (dynamic MIG);
- `checkpoint`, `claimfiles`, `recovery`: the prepared claims on disk (commit record, CDI
  specs and host dirs derived from it, the start-up reconcile); `files`: the only way the
  driver touches the filesystem (modes, atomic writes, containment);
- `metrics`, `logs`: Prometheus metrics and structured logs;
- `run`: `run_driver` and `cleanup`, what the CLI calls.
"""

from __future__ import annotations

from kubedra.driver.run import DEFAULT_CDI_DIR, cleanup, run_driver

__all__ = ["DEFAULT_CDI_DIR", "cleanup", "run_driver"]
