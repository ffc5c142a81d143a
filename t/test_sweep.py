"""``fluxsched-py sweep``: the grid, the pool, the outputs, failed runs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.replay import load_workload, replay, summarize
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.synthetic import write_synthetic_swf
from fluxsched_py.sweep import RunSpec, expand, run_one


def test_expand_is_the_full_product_in_order():
    specs = expand(["a.swf", "b.swf"], ["fcfs", "easy"], ["first"], {"nodes": ["8", "16"]})
    assert len(specs) == 8
    assert [(s.workload, s.queue_policy, s.options["nodes"]) for s in specs[:4]] == [
        ("a.swf", "fcfs", "8"),
        ("a.swf", "fcfs", "16"),
        ("a.swf", "easy", "8"),
        ("a.swf", "easy", "16"),
    ]
    assert len({s.label for s in specs}) == 8
    assert RunSpec.from_json(specs[3].to_json()) == specs[3]


@pytest.mark.parametrize("nodes", [16, 12])
def test_run_one_matches_a_direct_replay(tmp_path, nodes):
    """On 12 nodes the 16-node jobs are rejected: the row has the metrics, and is failed (docs/guide/sweeps.md)."""
    swf = tmp_path / "w.swf"
    write_synthetic_swf(swf, 80, 16, seed=3)
    row = run_one(RunSpec(str(swf), "conservative", "first", {"nodes": str(nodes)}), tmp_path / "out")
    result = replay(load_workload(swf), nodes_graph(nodes), {"queue-policy": "conservative"})
    direct = summarize(result)
    for key in ("jobs", "started", "rejected", "makespan", "mean_wait", "mean_bsld", "utilization"):
        assert row[key] == pytest.approx(getattr(direct, key)), key
    assert Path(row["jobs_csv"]).is_file() and row["nb_nodes"] == nodes
    rejected = [r.job.name for r in result.records if r.state == "REJECTED"]
    if nodes == 16:
        assert row["status"] == "ok" and not rejected, row
    else:
        assert row["status"] == "failed" and len(rejected) == row["rejected"] > 5
        ids = ", ".join(str(i) for i in rejected[:5])
        assert row["error"].startswith(f"{len(rejected)} of 80 jobs rejected (ids {ids}, ...): "), row["error"]


def test_rows_say_how_they_were_made(tmp_path):
    import hashlib

    from fluxsched_py import __version__

    swf = tmp_path / "w.swf"
    write_synthetic_swf(swf, 30, 8, seed=4)
    spec = RunSpec(str(swf), "easy", "high", {"nodes": "8", "cores-per-node": "4", "reserve-depth": "2"})
    row = run_one(spec, tmp_path / "out")
    assert row["status"] == "ok", row
    assert row["workload"] == str(swf) and row["workload_sha256"] == hashlib.sha256(swf.read_bytes()).hexdigest()
    assert (row["nodes"], row["cores"], row["queue_policy"], row["placement_policy"]) == (8, 32, "easy", "high")
    assert row["walltime_model"] == "runtime" and row["options"] == {"reserve-depth": 2}
    assert row["version"] == __version__


def test_run_one_turns_an_error_into_a_row(tmp_path):
    row = run_one(RunSpec(str(tmp_path / "absent.swf"), "easy", "first"), tmp_path)
    assert row["status"] == "failed" and "absent.swf" in row["error"]
    assert row["queue_policy"] == "easy" and row["workload"].endswith("absent.swf")


def test_sweep_cli_pool_outputs_and_failed_runs(tmp_path):
    pytest.importorskip("matplotlib")
    swf = tmp_path / "small.swf"
    write_synthetic_swf(swf, 60, 16, seed=5)
    out = tmp_path / "out"
    broken = tmp_path / "broken.swf"  # readable, but no SWF: its runs fail, the others go on
    broken.write_text("1 0 -1 x y z\n")
    cmd = [sys.executable, "-m", "fluxsched_py", "sweep", str(swf), str(broken)]
    cmd += ["--queue-policy", "fcfs,easy", "-j", "2", "-o", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr  # some runs failed
    rows = json.loads((out / "sweep.json").read_text())
    with (out / "sweep.csv").open() as f:
        csv_rows = list(csv.DictReader(f))
    assert [r["label"] for r in rows] == [r["label"] for r in csv_rows]
    assert [(Path(r["workload"]).name, r["queue_policy"], r["status"]) for r in rows] == [
        ("small.swf", "fcfs", "ok"),
        ("small.swf", "easy", "ok"),
        ("broken.swf", "fcfs", "failed"),
        ("broken.swf", "easy", "failed"),
    ]
    for r in rows[:2]:
        direct = summarize(replay(load_workload(swf), nodes_graph(16), {"queue-policy": r["queue_policy"]}))
        assert r["makespan"] == pytest.approx(direct.makespan) and r["started"] == direct.started
    failed_lines = [line for line in p.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed_lines) == 2 and all("broken.swf" in line and "queue_policy=" in line for line in failed_lines)
    assert "fcfs" in p.stdout and "failed" in p.stdout  # the comparison table
    page = (out / "report" / "index.html").read_text()
    # labels keep only what varies; the table keeps the failed runs
    assert "small fcfs" in page and "small easy" in page and "broken easy" in page
    assert (out / "report" / "gantt-small_fcfs.png").is_file()
    assert not (out / "report" / "gantt-broken_fcfs.png").exists()


def test_sweep_rejects_an_unknown_policy_in_one_line_status_2(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "sweep", "--queue-policy", "fcfs,nope", "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "'nope'" in p.stderr
    assert not (tmp_path / "o").exists()


def _sweep(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    return subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "sweep", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def test_workloads_with_the_same_file_name_keep_their_own_runs(tmp_path):
    for sub, seed in (("a", 1), ("b", 2)):
        (tmp_path / sub).mkdir()
        write_synthetic_swf(tmp_path / sub / "w.swf", 20, 8, seed=seed)
    out = tmp_path / "out"
    p = _sweep(
        str(tmp_path / "a" / "w.swf"),
        str(tmp_path / "b" / "w.swf"),
        "--queue-policy",
        "easy",
        "-j",
        "1",
        "--no-report",
        "-o",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    rows = json.loads((out / "sweep.json").read_text())
    assert [r["label"] for r in rows] == ["a/w/easy/first", "b/w/easy/first"]
    csvs = [Path(r["jobs_csv"]) for r in rows]
    assert csvs[0] != csvs[1] and all(c.is_file() for c in csvs)
    for r, sub in zip(rows, ("a", "b"), strict=True):  # each run's jobs.csv is its own workload's schedule
        direct = summarize(replay(load_workload(tmp_path / sub / "w.swf"), nodes_graph(8), {"queue-policy": "easy"}))
        assert r["makespan"] == pytest.approx(direct.makespan)
        assert r["workload_sha256"] != rows[0 if sub == "b" else 1]["workload_sha256"]


def test_a_grid_over_the_cap_is_refused_in_one_line(tmp_path):
    out = tmp_path / "o"
    p = _sweep("--nodes", ",".join(str(n) for n in range(1, 400)), "-o", str(out))  # 3 x 399 runs
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "1197 runs is more than --max-runs 1000" in p.stderr and not out.exists()
    p = _sweep("--max-runs", "2", "-o", str(out))
    assert p.returncode == 2 and "3 runs is more than --max-runs 2" in p.stderr and not out.exists()
    example = str(REPO / "examples" / "synthetic_seed42_64nodes.json")
    p = _sweep(example, example, "-o", str(out))
    assert p.returncode == 2 and p.stderr.endswith("workload given twice\n") and not out.exists()


def test_a_bad_option_is_reported_before_the_workload_is_looked_up(tmp_path):
    p = _sweep("--policy", "lowest", "-o", str(tmp_path / "o"), cwd=tmp_path, env=_installed_env(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "lowest" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def _installed_env(tmp_path: Path) -> dict:
    """The package alone, outside the repository, as a non-editable ``pip install .`` leaves it."""
    import os
    import shutil

    site = tmp_path / "site"
    if not site.exists():
        shutil.copytree(REPO / "fluxsched_py", site / "fluxsched_py", ignore=shutil.ignore_patterns("__pycache__"))
    return {**os.environ, "PYTHONPATH": str(site)}


REPO = Path(__file__).resolve().parents[1]


def test_sweep_with_no_workload_uses_the_bundled_example_when_installed(tmp_path):
    import hashlib

    out = tmp_path / "o"
    env = _installed_env(tmp_path)
    p = _sweep("--queue-policy", "easy", "-j", "1", "--no-report", "-o", str(out), cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads((out / "sweep.json").read_text())
    bundled = REPO / "examples" / "synthetic_seed42_64nodes.json"
    assert not Path(row["workload"]).is_relative_to(REPO)
    assert row["workload_sha256"] == hashlib.sha256(bundled.read_bytes()).hexdigest()  # the same workload
    direct = summarize(replay(load_workload(bundled), nodes_graph(64), {"queue-policy": "easy"}))
    assert row["makespan"] == pytest.approx(direct.makespan) and row["jobs"] == 300


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_sigterm_stops_the_workers_and_keeps_finished_rows(tmp_path, how):
    """SIGTERM to the sweep, or Ctrl-C (SIGINT to its whole process group, as a terminal sends it)
    mid-sweep: exit within seconds, no worker left, no half-written file, finished rows kept."""
    import os
    import signal
    import time

    swf = tmp_path / "big.swf"
    write_synthetic_swf(swf, 3000, 64, seed=9)
    small = tmp_path / "small.swf"
    write_synthetic_swf(small, 20, 64, seed=9)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fluxsched_py", "sweep", str(small), str(swf), "--queue-policy", "fcfs,easy"]
    cmd += ["--nodes", "16,24,32,48", "-j", "2", "--no-report", "--no-progress", "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any((out / "runs").glob("big*")) and time.monotonic() < deadline:
            time.sleep(0.2)  # the small workload's runs are done, the big ones under way
        time.sleep(1.0)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert children, "no worker processes to stop"
        t0 = time.monotonic()
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (143 if how == "SIGTERM" else 130), err
    assert took < 10, took
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid
    assert err.strip().count("\n") == 0 and ("SIGTERM" if how == "SIGTERM" else "interrupted") in err, err
    assert not list(out.rglob("*.part"))
    rows = json.loads((out / "sweep.json").read_text())
    assert len(rows) == 16
    finished = [r for r in rows if r["status"] != "interrupted"]
    assert any(r["workload"] == str(small) for r in finished)
    for r in finished:  # every jobs.csv written is complete
        with open(r["jobs_csv"]) as f:
            assert sum(1 for _ in f) == r["jobs"] + 1
    assert os.path.getsize(out / "sweep.csv") > 0
