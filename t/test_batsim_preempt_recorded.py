"""Preemption under a real Batsim 4.2.1, from recorded traffic.

``t/data/batsim/MANIFEST.json`` ("preemption") says where each recording
comes from: Batsim's seed-1 HPC workload plus 2,000 one-node best-effort jobs
(``preemptible-after: 0``) at t=0, on 128 hosts, under fcfs, easy and
conservative.

* The v4 driver, fed Batsim's messages, sends the very replies it sent
  during the real run (same KILL_JOB and EXECUTE_JOB, same times).
* Every killed job is a best-effort one, killed once, and as many are killed
  as the offline replay preempts on the same workload.
* Every reply kills in at most one KILL_JOB, before any EXECUTE_JOB: Batsim
  charges simulated time per event of a reply (docs/rfcs/preemption.md).
* Every regular job starts, in Batsim's time, within 0.1 s of its start in a
  real Batsim run of the regular jobs alone (``regular_alone_starts``, from
  Batsim's out_jobs.csv), and within 0.1 s of the offline replay of the
  regular jobs alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluxsched_py.batsim.cli import make_driver
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload
from t.batsim_recordings import (
    message_pairs,
)

DATA = Path(__file__).parent / "data" / "batsim"
RECS = json.loads((DATA / "MANIFEST.json").read_text())["preemption"]


def pairs(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


@pytest.fixture(scope="module", params=RECS, ids=[r["options"]["queue-policy"] for r in RECS])
def rec(request):
    return request.param, pairs(request.param)


def test_three_policies_are_recorded():
    assert sorted(r["options"]["queue-policy"] for r in RECS) == ["conservative", "easy", "fcfs"]


def test_v4_driver_sends_the_recorded_replies(rec):
    meta, recorded = rec
    driver = make_driver("v4", EngineOptions.parse(meta["options"]))
    for i, (msg, reply) in enumerate(recorded):
        assert json.loads(driver.handle(msg)) == json.loads(reply), f"reply {i} differs"
    assert driver.finished


def regular_starts(recorded) -> tuple[set[str], dict[str, float], list[str]]:
    """Best-effort ids, the `now` of each EXECUTE_JOB, and the killed ids;
    checks that each reply kills in one KILL_JOB ahead of its EXECUTE_JOBs."""
    besteffort, starts, kills = set(), {}, []
    for msg, reply in recorded:
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_SUBMITTED" and "preemptible-after" in e["data"]["job"]:
                besteffort.add(e["data"]["job_id"])
        r = json.loads(reply)
        types = [e["type"] for e in r["events"]]
        assert types.count("KILL_JOB") <= 1 and ("KILL_JOB" not in types or types[0] == "KILL_JOB")
        for e in r["events"]:
            if e["type"] == "KILL_JOB":
                kills.extend(e["data"]["job_ids"])
            elif e["type"] == "EXECUTE_JOB":
                starts[e["data"]["job_id"]] = r["now"]
    return besteffort, starts, kills


def test_only_best_effort_jobs_are_killed_once_as_in_the_replay(rec):
    meta, recorded = rec
    besteffort, starts, kills = regular_starts(recorded)
    assert len(besteffort) == 2000
    assert set(kills) <= besteffort and len(kills) == len(set(kills))
    mixed = load_workload(DATA / "seed1_campaign2000.json.gz")
    result = replay(mixed, nodes_graph(meta["nodes"]), meta["options"])
    assert len(kills) == result.stats["preemptions"] == meta["batsim_out_jobs"]["COMPLETED_KILLED"]
    alone = Workload([j for j in mixed.jobs if j.preemptible_after is None], mixed.nb_res)
    expected = replay(alone, nodes_graph(meta["nodes"]), meta["options"]).starts()
    late = {k: starts[f"w0!{k}"] - t for k, t in expected.items()}
    assert len(late) == 250 and max(abs(d) for d in late.values()) < 0.1, max(late.values())


def test_regular_jobs_start_within_0_1_s_of_a_batsim_run_without_the_campaign(rec):
    meta, recorded = rec
    _, starts, _ = regular_starts(recorded)
    alone = meta["regular_alone_starts"]
    assert len(alone) == 250
    # The EXECUTE_JOB is applied at its reply's `now` (plus Batsim's
    # per-event charge, a few ms): compare decision times.
    late = [starts[f"w0!{i}"] - t for i, t in enumerate(alone)]
    assert max(abs(d) for d in late) < 0.1, max(late)
