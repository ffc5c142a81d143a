"""A platform's host properties in real Batsim 4.2.1 runs (``features/MANIFEST.json``,
features ``constraints`` and ``affinity``), decided again by the Batsim drivers.

The platform (24 CPU hosts, 8 ``gpu=a100`` hosts) and the constraints
workload are :mod:`t.test_batsim_constraints`'s.
"""

from __future__ import annotations

import json

import pytest

from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.batsim.v4 import Event, parse_job
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import load_platform
from t.batsim_recordings import (
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
from t.test_batsim_constraints import CPU_ONLY_JOBS, DATA, GPU_JOBS, GPU_RANKS, PLATFORM, WORKLOAD, replayed

RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}
RECORDING = RECORDINGS["constraints"]


def recorded():
    return message_pairs(DATA / RECORDING["file"])


def test_batsim_numbered_and_described_the_hosts_as_the_replay_reads_the_platform():
    (begins,) = [e for msg, _ in recorded()[:1] for e in json.loads(msg)["events"] if e["type"] == "SIMULATION_BEGINS"]
    hosts = begins["data"]["compute_resources"]
    graph = load_platform(PLATFORM)
    assert [(h["id"], h["name"]) for h in hosts] == [(r, graph.hostname(r)) for r in range(32)]
    assert {h["id"] for h in hosts if h["properties"].get("gpu") == "a100"} == GPU_RANKS


def test_under_batsim_each_constrained_job_ran_on_the_nodes_it_asked_for():
    decisions = v4_decisions(recorded())
    ran = {workload_job_number(j): set(a) for _, kind, j, a in decisions if kind == "execute"}
    rejected = {workload_job_number(j) for _, kind, j, _ in decisions if kind == "reject"}
    assert rejected == {27} and len(ran) == RECORDING["jobs"] - 1
    assert all(ran[j] <= GPU_RANKS for j in GPU_JOBS)
    assert all(not ran[j] & GPU_RANKS for j in CPU_ONLY_JOBS)


def test_under_batsim_starts_equal_the_replays_on_the_same_platform():
    expected = {r.job.id: r.start for r in replayed().records if r.started}
    got = {workload_job_number(j): t for t, kind, j, _ in v4_decisions(recorded()) if kind == "execute"}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1


def test_batprotocol_decides_like_the_real_v4_constraints_run():
    driver = driver_for([*RECORDING["args"], "--protocol", "batprotocol"])
    replies = [driver.handle(m) for m in to_batprotocol(recorded())]
    assert driver.finished
    assert by_instant(decisions_bp(replies)) == by_instant(v4_decisions(recorded()))


def test_legacy_decides_like_the_real_v4_constraints_run_with_the_platforms_properties():
    """Batsim 2.0's text protocol sends no host properties: ``--platform`` gives them."""
    legacy = ["--protocol", "legacy", "--workload", str(WORKLOAD), "--platform", str(PLATFORM)]
    driver = driver_for([*RECORDING["args"], *legacy])
    got = decisions_legacy([driver.handle(m) for m in to_legacy(recorded())])
    assert driver.finished
    assert by_instant(got) == by_instant([(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(recorded())])


def test_a_bad_constraint_is_a_protocol_error_naming_the_job():
    event = Event(0.0, "JOB_SUBMITTED", {"job_id": "w0!1", "job": {"res": 1, "constraints": {"propertys": []}}})
    with pytest.raises(ProtocolError, match=r"^job w0!1: constraints/propertys: unknown constraint operator"):
        parse_job(event)


# -- affinity ------------------------------------------------------------------


def affinity_run():
    rec = RECORDINGS["affinity"]
    return rec, message_pairs(DATA / rec["file"])


def test_under_batsim_carols_jobs_took_the_gpu_hosts_first():
    """carol's 20 best-effort jobs arrive at 0 on 32 free hosts: the first 8
    take the GPU hosts (24-31), the other 12 the lowest CPU hosts."""
    _, pairs = affinity_run()
    at_zero = {workload_job_number(j): a for t, kind, j, a in v4_decisions(pairs) if kind == "execute" and t < 1}
    carols = sorted(j for j in at_zero if j >= 100)
    assert len(carols) == 20
    assert set().union(*(at_zero[j] for j in carols[:8])) == GPU_RANKS
    assert not set().union(*(at_zero[j] for j in carols[8:])) & GPU_RANKS


def test_with_affinity_starts_and_ranks_equal_the_replays_with_the_same_option():
    rec, pairs = affinity_run()
    opts = EngineOptions.parse({"queue-policy": "easy", "affinity": "carol:gpu=a100"})
    ref = replay(load_workload(DATA / rec["workload"]), load_platform(PLATFORM), opts)
    expected = {r.job.id: r.start for r in ref.records if r.started and r.job.id < 100}
    got = {
        workload_job_number(j): t
        for t, kind, j, _ in v4_decisions(pairs)
        if kind == "execute" and workload_job_number(j) < 100
    }
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1
    first = {r.job.id: frozenset(r.ranks) for r in ref.records if r.job.id >= 100 and r.start == 0}
    batsim_first = {workload_job_number(j): a for t, kind, j, a in v4_decisions(pairs) if kind == "execute" and t < 1}
    assert first == {j: a for j, a in batsim_first.items() if j >= 100}


def test_batprotocol_decides_like_the_real_v4_affinity_run():
    rec, pairs = affinity_run()
    driver = driver_for([*rec["args"], "--protocol", "batprotocol"])
    replies = [driver.handle(m) for m in to_batprotocol(pairs)]
    assert driver.finished
    want = v4_decisions(pairs)
    assert {k for _, k, _, _ in want} == {"execute", "kill"}
    assert by_instant(decisions_bp(replies)) == by_instant(want)


def test_legacy_decides_like_the_real_v4_run_of_affinity_for_regular_jobs():
    """No job is preempted in the ``affinity-users`` run (``--policy low``;
    alice's regular jobs prefer the GPU hosts), so Batsim 2.0's text protocol
    can carry it; the option moved her jobs there."""
    rec = RECORDINGS["affinity-users"]
    pairs = message_pairs(DATA / rec["file"])
    legacy = ["--protocol", "legacy", "--workload", str(DATA / rec["workload"]), "--platform", str(PLATFORM)]
    driver = driver_for([*rec["args"], *legacy])
    got = decisions_legacy([driver.handle(m) for m in to_legacy(pairs)])
    assert driver.finished
    want = [(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs)]
    assert by_instant(got) == by_instant(want)
    alices = {j["id"] for j in json.loads((DATA / rec["workload"]).read_text())["jobs"] if j["user"] == "alice"}
    on_gpus = {workload_job_number(j) for _, _, j, a in want if a <= GPU_RANKS}
    options = EngineOptions.parse({"queue-policy": "easy", "policy": "low"})
    without = replay(load_workload(DATA / rec["workload"]), load_platform(PLATFORM), options)
    assert len(on_gpus & alices) >= 3
    assert not {r.job.id for r in without.records if set(r.ranks) <= GPU_RANKS} & alices
