"""Scheduling decisions do not change when the engine gets faster.

Digests of what every job got (start time, ranks, first ``t_estimate``) under
conservative and hybrid (and fcfs/easy on the synthetic trace), recorded
before the planner/policy speed-ups and stored in
``t/data/replay/digests.json``.  A change that alters any decision on these
workloads fails here; to re-record after an *intended* behaviour change, run
``python -m t.test_replay_regression --write``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.synthetic import write_synthetic_swf

from .conftest import shared_path

DIGESTS = Path(__file__).resolve().parent / "data" / "replay" / "digests.json"


#: case name -> (workload, nodes, engine options)
CASES: dict[str, tuple[str, int, dict]] = {}
for _pol, _opts in (
    ("conservative", {"queue-policy": "conservative"}),
    ("hybrid", {"queue-policy": "hybrid"}),
    ("hybrid4", {"queue-policy": "hybrid", "reserve-depth": 4}),
):
    CASES[f"seed1-{_pol}"] = ("seed1", 128, _opts)
    CASES[f"paper-{_pol}"] = ("paper", 32, _opts)
    CASES[f"swf5k-{_pol}"] = ("swf5k", 256, {**_opts, "annotate-depth": 0})
    # Overloaded (offered load 1.1): queues deeper than hybrid's 64 reservations.
    CASES[f"swf2k-overload-{_pol}"] = ("swf2k-overload", 256, {**_opts, "annotate-depth": 0})
CASES["swf5k-easy"] = ("swf5k", 256, {"queue-policy": "easy", "annotate-depth": 0})
# fcfs forecasts where a driver shows t_estimate (annotations on, as under
# Flux); without them it makes none, with the same starts (its digest's
# started and sum_start are the first one's: t/test_policy_fcfs_forecasts.py).
CASES["swf5k-fcfs"] = ("swf5k", 256, {"queue-policy": "fcfs"})
CASES["swf5k-fcfs-silent"] = ("swf5k", 256, {"queue-policy": "fcfs", "annotate-depth": 0})

_WORKLOADS: dict[str, object] = {}


def workload(name: str, tmp: Path):
    if name not in _WORKLOADS:
        if name == "seed1":
            path = shared_path("conformance/batsim/workloads/example_workload_hpc_seed1_jobs250.json")
        elif name == "paper":
            path = shared_path("conformance/batsim/workloads/test_batsim_paper_workload_seed1.json")
        elif name == "swf5k":
            path = tmp / "swf5k.swf"
            write_synthetic_swf(path, 5000, 256)
        else:
            path = tmp / "swf2k-overload.swf"
            write_synthetic_swf(path, 2000, 256, seed=2, load=1.1)
        _WORKLOADS[name] = load_workload(path)
    return _WORKLOADS[name]


def digest(result) -> dict:
    rows = []
    for rec in sorted(result.records, key=lambda r: r.job.id):
        ranks = None if rec.ranks is None else rec.ranks.encode()
        rows.append([rec.job.id, rec.start, ranks, rec.first_estimate, rec.state])
    blob = json.dumps(rows, separators=(",", ":")).encode()
    started = [r.start for r in result.records if r.start is not None]
    return {
        "jobs": len(rows),
        "started": len(started),
        "sum_start": round(sum(started), 3),
        "sha256": hashlib.sha256(blob).hexdigest(),
    }


def run_case(name: str, tmp: Path) -> dict:
    wname, nodes, opts = CASES[name]
    return digest(replay(workload(wname, tmp), nodes_graph(nodes), opts))


@pytest.mark.parametrize("name", sorted(CASES))
def test_decisions_unchanged(name, tmp_path):
    expected = json.loads(DIGESTS.read_text())
    assert name in expected, f"no recorded digest for {name}"
    assert run_case(name, tmp_path) == expected[name]


def test_fcfs_without_estimates_starts_every_job_as_with_them():
    expected = json.loads(DIGESTS.read_text())
    a, b = expected["swf5k-fcfs"], expected["swf5k-fcfs-silent"]
    assert (a["started"], a["sum_start"]) == (b["started"], b["sum_start"]) and a["sha256"] != b["sha256"]


if __name__ == "__main__":  # pragma: no cover - re-recording tool
    import tempfile

    if "--write" not in sys.argv:
        sys.exit("usage: python -m t.test_replay_regression --write")
    with tempfile.TemporaryDirectory() as d:
        out = {}
        for n in sorted(CASES):
            out[n] = run_case(n, Path(d))
            print(n, out[n], flush=True)
    DIGESTS.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
