"""The replay's forecast accuracy (``replay --forecast``): each job's first
forecast (engine/forecast.py, at the first pass after its submission)
against its real start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.replay.metrics import summarize
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import load_workload, read_batsim

SEED1 = Path(__file__).parent / "data" / "batsim" / "example_workload_hpc_seed1_jobs250.json.gz"


def hand_workload():
    """2 nodes under easy.  A (2 nodes, walltime 100) ends at 60.  B (1 node)
    comes at 10: planned at 100 (A's walltime), starts at 60.  C (2 nodes,
    30 s) and D (1 node, walltime 200, runs 10 s) come at 20: planned
    after B's reservation, C at 150 (B's end), D at 180 (C's end; D beside
    B would overlap C).  Easy then: B at 60 (to 110), C is the head,
    reserved at 110, D cannot backfill (it would still run at 110), C at
    110, D at 140.  Every job that waited is 40 s early; A started at once,
    as forecast."""
    jobs = [
        ("A", 0, 2, 100, 60),
        ("B", 10, 1, 50, 50),
        ("C", 20, 2, 30, 30),
        ("D", 20, 1, 200, 10),
    ]
    return read_batsim(
        {
            "nb_res": 2,
            "jobs": [
                {"id": name, "subtime": t, "res": n, "walltime": w, "profile": f"p{r}"} for name, t, n, w, r in jobs
            ],
            "profiles": {f"p{r}": {"type": "delay", "delay": r} for *_, r in jobs},
        }
    )


def test_first_forecasts_by_hand():
    result = replay(hand_workload(), nodes_graph(2, 1), {"queue-policy": "easy"}, forecast=True)
    got = {r.job.name: (r.first_forecast, r.start) for r in result.records}
    assert got == {"A": (0.0, 0.0), "B": (100.0, 60.0), "C": (150.0, 110.0), "D": (180.0, 140.0)}
    s = summarize(result)
    assert (s.forecasted, s.forecast_mae) == (4, 30.0)


def test_without_forecast_nothing_is_measured():
    s = summarize(replay(hand_workload(), nodes_graph(2, 1), {"queue-policy": "easy"}))
    assert s.forecasted is None and "forecast_mae" not in s.as_dict()


@pytest.fixture(scope="module")
def seed1():
    return load_workload(str(SEED1))


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_forecasting_changes_no_decision(seed1, policy):
    a = replay(seed1, nodes_graph(128, 1), {"queue-policy": policy}, forecast=True)
    b = replay(seed1, nodes_graph(128, 1), {"queue-policy": policy})
    assert a.starts() == b.starts()
    assert [r.ranks for r in a.records] == [r.ranks for r in b.records]


def test_seed1_easy_forecast_is_no_worse_than_conservative_t_estimate(seed1):
    easy = summarize(replay(seed1, nodes_graph(128, 1), {"queue-policy": "easy"}, forecast=True))
    cons = summarize(replay(seed1, nodes_graph(128, 1), {"queue-policy": "conservative"}))
    assert easy.forecasted == 250  # every job: at its first pass each one was pending
    assert cons.estimated > 0 and cons.estimate_mae is not None
    assert easy.forecast_mae is not None and easy.forecast_mae <= cons.estimate_mae


def test_seed1_conservative_forecast_is_its_own_plan(seed1):
    # Under conservative, a waiting job's first forecast is the reservation
    # the policy gave it in that pass: the jobs that waited have the same
    # error as their t_estimate.
    result = replay(seed1, nodes_graph(128, 1), {"queue-policy": "conservative"}, forecast=True)
    waited = [r for r in result.records if r.first_estimate is not None]
    assert waited and all(r.first_forecast == pytest.approx(r.first_estimate) for r in waited)


def test_cli_reports_it_in_the_table_and_in_json():
    cmd = [sys.executable, "-m", "fluxsched_py", "replay", str(SEED1), "--nodes", "128", "--forecast"]
    out = subprocess.run([*cmd, "--queue-policy", "easy", "--json"], capture_output=True, text=True, check=True)
    (row,) = json.loads(out.stdout)
    keys = list(row)
    assert keys[keys.index("estimate_kept") + 1 :][:2] == ["forecasted", "forecast_mae"]
    assert row["forecasted"] == 250 and row["forecast_mae"] > 0
    table = subprocess.run([*cmd, "--compare", "easy"], capture_output=True, text=True, check=True).stdout
    assert "jobs given a forecast" in table and "forecast mean abs. error" in table
    plain = subprocess.run(cmd[:-1] + ["--compare", "easy"], capture_output=True, text=True, check=True).stdout
    assert "forecast" not in plain
