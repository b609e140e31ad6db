"""`kubedra sim run | compare` through the real entry point on a tiny CSV trace."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_lint import kubedra

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,V100M32\nn1,64000,262144,2,T4\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "p0,1000,1024,1,1000,,LS,Running,0,100,0\n"
    "p1,1000,1024,1,500,,LS,Running,1,100,1\n"
    "p2,1000,1024,2,1000,V100M32,LS,Running,2,100,2\n"
)


def test_sim_run_and_compare_write_outputs(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    args = ["--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv")]
    run = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "one"))
    assert run.returncode == 0, run.stderr
    assert "first-fit" in run.stdout
    assert (tmp_path / "one" / "saturate-first-fit.csv").is_file()
    assert (tmp_path / "one" / "allocation.png").is_file()
    both = kubedra("sim", "compare", "--policy", "fragmentation", "--policy", "device-plugin",
                   *args, "--out", str(tmp_path / "two"))
    assert both.returncode == 0, both.stderr
    lines = both.stdout.splitlines()
    assert any(line.startswith("fragmentation ") for line in lines)
    assert any(line.startswith("device-plugin ") for line in lines)
    missing = kubedra("sim", "run", "--policy", "first-fit", "--nodes", str(tmp_path / "x.csv"),
                      "--pods", str(tmp_path / "pods.csv"), "--out", str(tmp_path / "three"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")


def test_sim_replay_at_a_scaled_load(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    args = ["--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv")]
    out = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "r"),
                  "--mode", "replay", "--load", "2")
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "r" / "replay-first-fit.csv").read_text().splitlines()
    times = [float(r.split(",")[0]) for r in rows[1:]]
    # 345,500 milli-s of GPU work offered at twice the 4,000 milli of capacity takes 43.2 s:
    # the 2 s of arrivals stretch 21.6x (p1 at 21.6 s, p2 at 43.2 s), runtimes unchanged
    # (the last end: p2 at 43.2 + 98 s).
    assert times[:3] == [0.0, 21.5938, 43.1875] and times[-1] == 141.1875
    bad = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "b"), "--load", "0")
    assert bad.returncode == 2 and "--load" in bad.stderr
