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


def test_run_one_matches_a_direct_replay(tmp_path):
    swf = tmp_path / "w.swf"
    write_synthetic_swf(swf, 80, 16, seed=3)
    row = run_one(RunSpec(str(swf), "conservative", "first", {"nodes": "12"}), tmp_path / "out")
    direct = summarize(replay(load_workload(swf), nodes_graph(12), {"queue-policy": "conservative"}))
    assert row["status"] == "ok", row
    for key in ("jobs", "started", "makespan", "mean_wait", "mean_bsld", "utilization"):
        assert row[key] == pytest.approx(getattr(direct, key)), key
    assert Path(row["jobs_csv"]).is_file() and row["nb_nodes"] == 12


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
