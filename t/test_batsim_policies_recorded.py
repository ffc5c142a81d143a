"""EASY++ and a grace time before preemption in real Batsim 4.2.1 runs
(``features/MANIFEST.json``, features ``easypp`` and ``grace``), and the same
sessions decided again by the batprotocol and legacy drivers.
"""

from __future__ import annotations

import csv
import json

from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from t.batsim_recordings import (
    BATSIM_DATA,
    by_instant,
    decisions_bp,
    decisions_legacy,
    manifest,
    message_pairs,
    to_batprotocol,
    to_legacy,
    v4_decisions,
    workload_job_number,
)

DATA = BATSIM_DATA / "features"
RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}


def run(feature: str):
    rec = RECORDINGS[feature]
    return rec, message_pairs(DATA / rec["file"])


def replayed_starts(rec: dict, options: dict) -> dict[int, float]:
    ref = replay(load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), EngineOptions.parse(options))
    return {r.job.id: r.start for r in ref.records if r.started}


def batsim_starts(pairs) -> dict[int, float]:
    """The last start of each job (a preempted best-effort job may start again)."""
    return {workload_job_number(j): t for t, kind, j, _ in v4_decisions(pairs) if kind == "execute"}


# -- EASY++ ----------------------------------------------------------------------


def test_easypp_starts_equal_the_replays_and_differ_from_plain_easy():
    rec, pairs = run("easypp")
    got = batsim_starts(pairs)
    expected = replayed_starts(rec, {"queue-policy": "easy", "predict-runtimes": True})
    assert got.keys() == expected.keys() and len(got) == rec["jobs"]
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1
    plain = replayed_starts(rec, {"queue-policy": "easy"})
    assert sum(abs(got[j] - plain[j]) > 1 for j in got) >= 3


def test_easypp_asked_batsim_to_call_back_for_its_corrections():
    _, pairs = run("easypp")
    calls = [e for _, reply in pairs for e in json.loads(reply)["events"] if e["type"] == "CALL_ME_LATER"]
    assert len(calls) >= 5


def test_batprotocol_and_legacy_decide_like_the_real_v4_easypp_run(tmp_path):
    rec, pairs = run("easypp")
    want = v4_decisions(pairs)
    bp = driver_for([*rec["args"], "--protocol", "batprotocol"])
    assert by_instant(decisions_bp([bp.handle(m) for m in to_batprotocol(pairs)])) == by_instant(want)
    assert bp.finished
    legacy = driver_for(
        [*rec["args"], "--protocol", "legacy", "--workload", str(DATA / rec["workload"]), "--nodes", str(rec["nodes"])]
    )
    got = decisions_legacy([legacy.handle(m) for m in to_legacy(pairs)])
    assert legacy.finished
    assert by_instant(got) == by_instant([(round(t, 6), k, j, a) for t, k, j, a in want])


# -- a grace time before preemption ----------------------------------------------------


def kills(pairs) -> list[tuple[float, str]]:
    return [(t, j) for t, kind, j, _ in v4_decisions(pairs) if kind == "kill"]


def test_the_first_preemption_came_the_grace_time_after_the_one_without_grace():
    """The same workload and policy without a grace time (the ``metadata``
    run) preempts first at 61.19 s; with ``--preempt-grace 60`` the kill goes
    out 60 s later (Batsim 4 has no signal to send at the notice)."""
    _, with_grace = run("grace")
    _, without = run("metadata")
    first, first_without = kills(with_grace)[0][0], kills(without)[0][0]
    assert abs(first - (first_without + 60)) < 0.01  # Batsim adds its message latency


def test_with_grace_starts_and_kills_equal_the_replays():
    rec, pairs = run("grace")
    got = batsim_starts(pairs)
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        EngineOptions.parse({"queue-policy": "easy", "preempt-grace": "60"}),
    )
    expected = {r.job.id: r.start for r in ref.records if r.started}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1
    killed = {workload_job_number(j) for _, j in kills(pairs)}
    assert killed == {r.job.id for r in ref.records if r.state == "COMPLETED_KILLED"}


def test_batprotocol_decides_like_the_real_v4_grace_run():
    rec, pairs = run("grace")
    driver = driver_for([*rec["args"], "--protocol", "batprotocol"])
    replies = [driver.handle(m) for m in to_batprotocol(pairs)]
    assert driver.finished
    assert by_instant(decisions_bp(replies)) == by_instant(v4_decisions(pairs))


# -- a victim taken again keeps its first notice's deadline --------------------------


def test_under_batsim_a_victim_taken_again_is_killed_at_its_first_notices_deadline():
    """The ``victim-again`` run (``victim_again4.json``'s description):
    best-effort job 3, noticed at t=40 for job 4 and spared at t=70, is
    taken by job 5 at t=80.  The driver kills it at t=100, 60 s after its
    one notice, not 60 s after the second taking (t=140); Batsim's own
    ``out_jobs.csv`` says so, and the replay of the same input decides the
    same starts and kills."""
    rec, pairs = run("victim-again")
    assert [(round(t, 1), workload_job_number(j)) for t, j in kills(pairs)] == [(100.0, 3)]
    got = batsim_starts(pairs)
    assert abs(got[4] - 70) < 0.01 and abs(got[5] - 100) < 0.01
    with open(DATA / rec["out_jobs"], newline="") as f:
        out = {int(r["job_id"]): r for r in csv.DictReader(f)}
    assert out[3]["final_state"] == "COMPLETED_KILLED" and abs(float(out[3]["finish_time"]) - 100) < 0.01
    assert abs(float(out[5]["starting_time"]) - 100) < 0.01
    expected = replayed_starts(rec, {"queue-policy": "easy", "preempt-grace": "60"})
    assert got.keys() == expected.keys() and max(abs(got[j] - expected[j]) for j in got) <= 0.1


def test_batprotocol_decides_like_the_real_v4_victim_again_run():
    rec, pairs = run("victim-again")
    driver = driver_for([*rec["args"], "--protocol", "batprotocol"])
    replies = [driver.handle(m) for m in to_batprotocol(pairs)]
    assert driver.finished
    assert by_instant(decisions_bp(replies)) == by_instant(v4_decisions(pairs))
