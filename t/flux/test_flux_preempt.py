"""Preemption under a real flux-core (docs/rfcs/preemption.md).

Four fake nodes, mock execution.  Best-effort jobs (``-S
preemptible-after=N``) fill the instance; a regular two-node job then
arrives.  With ``preemptible-after=0`` it starts within 10 s, and exactly
two best-effort jobs end with a ``preempt`` exception whose note names it;
the others keep running, and ``flux resource list`` agrees.  With
``preemptible-after=60`` it waits, and its ``reason_pending`` and
``t_estimate`` say until when.
"""

from __future__ import annotations

import time

import pytest

from .instance import Instance, sched_py_instance


@pytest.fixture()
def inst():
    with sched_py_instance(1, 4, 4, "queue-policy=easy") as i:
        yield i


def fill(inst: Instance, after: int) -> list[str]:
    ids = [
        inst.submit(
            "-N1", "--exclusive", "-S", f"preemptible-after={after}", "-t", "1h",
            "--setattr=system.exec.test.run_duration=3600s", "true",
        )
        for _ in range(4)
    ]  # fmt: skip
    for j in ids:
        inst.wait_event(j, "alloc", timeout=30)
    return ids


def exceptions(inst: Instance, jobid: str) -> list[dict]:
    return [e["context"] for e in inst.eventlog(jobid) if e["name"] == "exception"]


def test_a_regular_job_preempts_exactly_two_best_effort_jobs(inst):
    besteffort = fill(inst, 0)
    t0 = time.monotonic()
    regular = inst.submit("-N2", "--exclusive", "-t", "100s", "--setattr=system.exec.test.run_duration=60s", "true")
    inst.wait_event(regular, "alloc", timeout=10)
    assert time.monotonic() - t0 < 10
    preempted = {j: exceptions(inst, j) for j in besteffort if exceptions(inst, j)}
    assert len(preempted) == 2, preempted
    for ctx in preempted.values():
        (e,) = ctx
        assert e["type"] == "preempt" and e["severity"] == 0 and regular in e["note"], e
    for j in set(besteffort) - set(preempted):
        assert "exception" not in {e["name"] for e in inst.eventlog(j)}
        assert inst.run("jobs", "-no", "{state}", j).strip() == "RUN"
    for j in preempted:
        inst.wait_event(j, "clean", timeout=30)
    assert inst.run("resource", "list", "-s", "allocated", "-no", "{nnodes}").strip() == "4"
    stats = inst.json("module", "stats", "sched-py")
    assert stats["engine"]["preemptions"] == 2


def test_a_protected_window_makes_the_regular_job_wait_and_says_until_when(inst):
    besteffort = fill(inst, 60)
    started = min(next(e["timestamp"] for e in inst.eventlog(j) if e["name"] == "alloc") for j in besteffort)
    regular = inst.submit("-N2", "--exclusive", "-t", "100s", "--setattr=system.exec.test.run_duration=60s", "true")
    time.sleep(3)
    out = inst.run("jobs", "-no", "{state} {annotations.sched.t_estimate}", regular).split()
    assert out[0] == "SCHED", out
    assert abs(float(out[1]) - (started + 60)) < 5, (out, started)
    reason = inst.run("jobs", "-no", "{annotations.sched.reason_pending}", regular)
    assert "reserved to start at" in reason, reason
    assert not any(exceptions(inst, j) for j in besteffort)
