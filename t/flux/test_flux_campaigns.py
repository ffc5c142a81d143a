"""Affinity and the sink effect under a real ``flux start`` (flux-core 0.88).

Four fake nodes of four cores, ranks 0-1 with the property ``lyon`` and 2-3
with ``grenoble`` (R's ``execution.properties``), mock execution.  sched-py
is loaded with ``policy=low`` (lowest ranks first), ``sink-jobs=2`` and an
affinity of this test's own user (by uid) for ``grenoble``.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from .instance import Instance, sched_py_instance


def runs(seconds: float) -> str:
    return f"--setattr=system.exec.test.run_duration={seconds}s"


@pytest.fixture(scope="module")
def inst():
    args = ("policy=low", "sink-jobs=2", f"affinity={os.getuid()}:grenoble,s:lyon")
    with sched_py_instance(4, 4, 4, *args, properties={"lyon": "0-1", "grenoble": "2-3"}) as i:
        yield i


def rank_of(inst: Instance, jobid: str) -> str:
    return json.loads(inst.run("job", "info", jobid, "R"))["execution"]["R_lite"][0]["rank"]


def test_affinity_places_a_users_job_on_its_site(inst):
    job = inst.submit("-N1", "--exclusive", runs(0.01), "true")
    inst.run("job", "wait-event", "-t", "30", job, "clean")
    assert rank_of(inst, job) == "2"  # grenoble's lowest rank, not rank 0


def test_the_sink_effect_drains_the_node_with_resource_drain(inst):
    # Campaign s prefers lyon (ranks 0-1): two 10 s jobs run there, one on each
    # rank.  Then a regular job holds rank 0 (its user prefers grenoble, which
    # is full with two long jobs, so it falls back to lyon) and s's next two
    # jobs land on rank 1, ending at once: each under a tenth of the median.
    camp = "--setattr=user.campaign=s"
    long_ = [inst.submit("-N1", "--exclusive", camp, runs(10), "true") for _ in range(2)]
    for j in long_:
        inst.run("job", "wait-event", "-t", "60", j, "clean")
    assert sorted(rank_of(inst, j) for j in long_) == ["0", "1"]
    hold = [inst.submit("-N1", "--exclusive", runs(300), "true") for _ in range(3)]
    for j in hold:
        inst.run("job", "wait-event", "-t", "30", j, "start")
    assert sorted(rank_of(inst, j) for j in hold) == ["0", "2", "3"]
    for _ in range(2):
        j = inst.submit("-N1", "--exclusive", camp, runs(0.01), "true")
        inst.run("job", "wait-event", "-t", "30", j, "clean")
        assert rank_of(inst, j) == "1"
    deadline = time.time() + 30
    while time.time() < deadline:
        drained = inst.run("resource", "drain", "-no", "{ranks} {reason}").strip()
        if drained:
            break
        time.sleep(0.2)
    assert drained.startswith("1 sink effect: the last 2 jobs of campaign s"), drained
    stats = json.loads(inst.run("module", "stats", "sched-py"))
    assert stats["campaigns"]["s"]["completed"] == 4
    inst.run("cancel", "--all", check=False)


def test_a_campaign_bound_holds_its_best_effort_jobs_and_names_the_bound():
    """``campaign-max-running=c:2``: of four best-effort jobs of campaign c
    on four free nodes, two run and two wait, named by the bound, until the
    first two end; a regular job is never held by it."""
    with sched_py_instance(1, 4, 4, "policy=low", "campaign-max-running=c:2") as inst:
        camp = ["--setattr=user.campaign=c", "-S", "preemptible-after=0"]
        jobs = [inst.submit("-N1", "--exclusive", *camp, runs(3), "true") for _ in range(4)]
        for j in jobs[:2]:
            inst.run("job", "wait-event", "-t", "30", j, "alloc")
        regular = inst.submit("-N1", "--exclusive", "--setattr=user.campaign=c", runs(0.01), "true")
        inst.run("job", "wait-event", "-t", "30", regular, "clean")  # counted, not held: it runs beside them
        for j in jobs[2:]:
            state = inst.run("jobs", "-no", "{state}", j).strip()
            reason = inst.run("jobs", "-no", "{annotations.sched.reason_pending}", j).strip()
            assert state == "SCHED", (state, reason)
            # 2 or 3: the regular job counts while it runs, and the pass after its end may not have annotated yet
            held = r"campaign c: [23] jobs running, its bound \(campaign-max-running c:2\)"
            assert re.fullmatch(held, reason), reason
        ends = []
        for j in jobs:
            inst.run("job", "wait-event", "-t", "60", j, "clean")
            ev = {e["name"]: e["timestamp"] for e in inst.eventlog(j)}
            ends.append((ev["alloc"], ev["finish"]))
        first_end = min(end for _, end in ends[:2])
        assert all(alloc >= first_end for alloc, _ in ends[2:]), ends
