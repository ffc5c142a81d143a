"""Load scaling and windows of a trace (``--load-factor``, ``--skip``,
``--jobs``), checked job by job against the workload file read here with
``json``, independently of the replay's readers."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.replay.synthetic import EXAMPLE_NAME

from .conftest import REPO

EXAMPLE = REPO / "examples" / EXAMPLE_NAME
CLI = str(Path(sys.executable).with_name("fluxsched-py"))


def _trace() -> list[dict]:
    """The bundled workload's jobs, in submit order, as the file says."""
    jobs = json.loads(EXAMPLE.read_text())["jobs"]
    return sorted(jobs, key=lambda j: (j["subtime"], j["id"]))


def _replay(tmp_path: Path, *args: str) -> tuple[list[dict], str]:
    out = tmp_path / "out"
    p = subprocess.run(
        [CLI, "replay", "--queue-policy", "fcfs", "--output-dir", str(out), "--json", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    with open(out / "jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return sorted(rows, key=lambda r: (float(r["submission_time"]), int(r["job_id"]))), p.stderr


def test_load_factor_2_halves_every_inter_arrival_time(tmp_path: Path) -> None:
    trace = _trace()
    rows, err = _replay(tmp_path, "--load-factor", "2")
    assert [int(r["job_id"]) for r in rows] == [j["id"] for j in trace]
    assert float(rows[0]["submission_time"]) == pytest.approx(trace[0]["subtime"])
    for prev, job, rprev, row in zip(trace, trace[1:], rows, rows[1:], strict=False):
        want = (job["subtime"] - prev["subtime"]) / 2
        got = float(row["submission_time"]) - float(rprev["submission_time"])
        assert got == pytest.approx(want, abs=1e-6), job["id"]
    # sizes and run times are the trace's
    profiles = json.loads(EXAMPLE.read_text())["profiles"]
    for job, row in zip(trace, rows, strict=True):
        assert int(row["requested_number_of_resources"]) == job["res"]
        run = min(profiles[job["profile"]]["delay"], job["walltime"])
        assert float(row["execution_time"]) == pytest.approx(run)
    assert "load factor 2: inter-arrival times divided by 2" in err


def test_window_is_jobs_in_submit_order(tmp_path: Path) -> None:
    trace = _trace()
    rows, err = _replay(tmp_path, "--skip", "10", "--jobs", "25")
    assert [int(r["job_id"]) for r in rows] == [j["id"] for j in trace[10:35]]
    assert [float(r["submission_time"]) for r in rows] == pytest.approx([j["subtime"] for j in trace[10:35]])
    assert "jobs 11-35 of 300" in err
    rows, _ = _replay(tmp_path, "--skip", "290")
    assert [int(r["job_id"]) for r in rows] == [j["id"] for j in trace[290:]]


def test_window_then_load_factor_keeps_the_window_start(tmp_path: Path) -> None:
    trace = _trace()[100:110]
    rows, _ = _replay(tmp_path, "--skip", "100", "--jobs", "10", "--load-factor", "4")
    t0 = trace[0]["subtime"]
    assert [float(r["submission_time"]) for r in rows] == pytest.approx([t0 + (j["subtime"] - t0) / 4 for j in trace])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--load-factor", "0"], "--load-factor: must be a number above 0 and at most 1000, got 0"),
        (["--load-factor", "-1"], "--load-factor: must be a number above 0"),
        (["--load-factor", "nan"], "--load-factor: must be a number above 0"),
        (["--load-factor", "inf"], "--load-factor: must be a number above 0"),
        (["--load-factor", "1001"], "--load-factor: must be a number above 0 and at most 1000, got 1001"),
        (["--load-factor", "two"], "--load-factor: 'two' is not a number"),
        (["--skip", "-1"], "--skip: must be at least 0, got -1"),
        (["--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["--skip", "300"], "--skip 300: the workload has no job after the first 300"),
    ],
)
def test_bad_values_are_one_line(args: list[str], message: str) -> None:
    p = subprocess.run([CLI, "replay", *args], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert p.stderr.startswith("fluxsched-py replay: ")
