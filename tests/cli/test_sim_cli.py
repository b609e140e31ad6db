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


def test_sim_replay_of_a_stream_at_a_load(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    args = ["--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv"), "--mode", "replay"]
    out = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "r"),
                  "--load", "2", "--horizon-h", "0.5", "--cluster-share", "0.5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("policy") and "first-fit" in out.stdout
    rows = [r.split(",") for r in (tmp_path / "r" / "replay-first-fit.csv").read_text().splitlines()]
    times = [float(r[0]) for r in rows[1:]]
    # one node of each kind (share 0.5 of two single-node kinds rounds up); at twice the
    # capacity in offered work the one V100 node queues pods within the half hour
    assert 0 < times[0] < 1800 and max(float(r[rows[0].index("pending")]) for r in rows[1:]) > 0
    bad = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "b"), "--load", "0")
    assert bad.returncode == 2 and "--load" in bad.stderr
    share = kubedra("sim", "run", "--policy", "first-fit", *args, "--out", str(tmp_path / "s"),
                    "--load", "1", "--cluster-share", "1.5")
    assert share.returncode == 2 and "--cluster-share" in share.stderr


def test_sim_report_asks_for_its_output_and_names_a_missing_data_folder(tmp_path: Path) -> None:
    unnamed = kubedra("sim", "report")
    assert unnamed.returncode == 2 and "--out" in unnamed.stderr
    missing = kubedra("sim", "report", "--out", str(tmp_path / "r.md"), "--data", str(tmp_path / "none"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")
    assert str(tmp_path / "none") in missing.stderr and "Traceback" not in missing.stderr
    assert not (tmp_path / "r.md").exists()
