"""`dev-cluster up --feature-gates`: the gates reach every component, and GenericWorkload
brings the API version it is served under and the PodGroup protection controller (no
binaries needed: the command lines only)."""

from __future__ import annotations

from pathlib import Path

from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.cli.devcluster import expand_gates
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.pki import Pki

PORTS = {"etcd": 1, "etcd-peer": 2, "apiserver": 3, "kcm": 4, "sched": 5}


def args(cluster: DevCluster, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "apiserver": cluster._apiserver_args(Pki(tmp_path), PORTS),
        "kcm": cluster._kcm_args(Pki(tmp_path), PORTS),
        "scheduler": cluster._scheduler_args(PORTS),
    }


def flag(argv: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")), None)


def test_workload_gates_serve_the_api_and_run_the_protection_controller(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path, feature_gates=expand_gates("workloads"))
    assert cluster.feature_gates == WORKLOAD_FEATURE_GATES
    got = args(cluster, tmp_path)
    for component in got.values():
        assert flag(component, "feature-gates") == WORKLOAD_FEATURE_GATES
    assert flag(got["apiserver"], "runtime-config") == "scheduling.k8s.io/v1beta1=true"
    assert "podgroup-protection-controller" in (flag(got["kcm"], "controllers") or "").split(",")


def test_without_the_gate_nothing_extra(tmp_path: Path) -> None:
    for gates in ("", "GenericWorkload=true,GenericWorkload=false", "DRAListTypeAttributes=true"):
        cluster = DevCluster(tmp_path, feature_gates=gates, runtime_config="resource.k8s.io/v1beta2=true")
        got = args(cluster, tmp_path)
        assert flag(got["apiserver"], "runtime-config") == "resource.k8s.io/v1beta2=true"
        assert "podgroup-protection" not in (flag(got["kcm"], "controllers") or "")


def test_the_shorthand_mixes_with_other_gates() -> None:
    assert expand_gates("workloads, DRAListTypeAttributes=true") == (
        f"{WORKLOAD_FEATURE_GATES},DRAListTypeAttributes=true")
    assert expand_gates("") == ""
