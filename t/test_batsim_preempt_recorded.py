"""Preemption under a real Batsim 4.2.1, from recorded traffic.

``t/data/batsim/MANIFEST.json`` ("preemption") says where the recording comes
from: Batsim's seed-1 HPC workload plus 2,000 one-node best-effort jobs
(``preemptible-after: 0``) at t=0, on 128 hosts, under easy.

* The v4 driver, fed Batsim's messages, sends the very replies it sent
  during the real run (same KILL_JOB and EXECUTE_JOB, same times).
* Every killed job is a best-effort one, killed once, and as many are killed
  as the offline replay preempts on the same workload.
* Every regular job starts, in Batsim's time, within 0.3 s of its start in
  the offline replay of the regular jobs alone.  Not within 0.1 s: Batsim
  charges simulated time for each kill before the EXECUTE_JOB that follows
  it (rfcs/preemption.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluxsched_py.batsim.cli import Recorder, make_driver
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload

DATA = Path(__file__).parent / "data" / "batsim"
(REC,) = json.loads((DATA / "MANIFEST.json").read_text())["preemption"]


def pairs() -> list[tuple[bytes, bytes]]:
    msgs = Recorder.load(DATA / REC["file"])
    assert [d for d, _ in msgs] == ["in", "out"] * (len(msgs) // 2)
    return [(msgs[i][1], msgs[i + 1][1]) for i in range(0, len(msgs), 2)]


@pytest.fixture(scope="module")
def recorded():
    return pairs()


def test_v4_driver_sends_the_recorded_replies(recorded):
    driver = make_driver("v4", EngineOptions.parse(REC["options"]))
    for i, (msg, reply) in enumerate(recorded):
        assert json.loads(driver.handle(msg)) == json.loads(reply), f"reply {i} differs"
    assert driver.finished


def test_only_best_effort_jobs_are_killed_once_as_in_the_replay(recorded):
    besteffort, starts, kills = set(), {}, []
    for msg, reply in recorded:
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_SUBMITTED" and "preemptible-after" in e["data"]["job"]:
                besteffort.add(e["data"]["job_id"])
        r = json.loads(reply)
        for e in r["events"]:
            if e["type"] == "KILL_JOB":
                kills.extend(e["data"]["job_ids"])
            elif e["type"] == "EXECUTE_JOB":
                starts[e["data"]["job_id"]] = r["now"]
    assert len(besteffort) == 2000
    assert set(kills) <= besteffort and len(kills) == len(set(kills))
    mixed = load_workload(DATA / "seed1_campaign2000.json.gz")
    result = replay(mixed, nodes_graph(REC["nodes"]), REC["options"])
    assert len(kills) == result.stats["preemptions"] == REC["batsim_out_jobs"]["COMPLETED_KILLED"]
    alone = Workload([j for j in mixed.jobs if j.preemptible_after is None], mixed.nb_res)
    expected = replay(alone, nodes_graph(REC["nodes"]), REC["options"]).starts()
    late = {k: starts[f"w0!{k}"] - t for k, t in expected.items()}
    assert len(late) == 250 and max(abs(d) for d in late.values()) < 0.3, max(late.values())
