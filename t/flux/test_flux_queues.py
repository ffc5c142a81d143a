"""Named queues under a real flux-core: each queue is scheduled on its own.

flux-core turns a queue's ``requires`` into a ``properties`` constraint on
each job submitted to it (``flux submit -q debug`` gets
``constraints: {properties: [debug]}``).  Here ranks 0-1 carry ``batch``
and ranks 2-3 ``debug``.  Under fcfs the blocked head of ``batch`` must not
hold back a ``debug`` job, which a single queue would do.

====  =====  =====  ====  ===============================================
job   queue  nodes  runs  why it is there
====  =====  =====  ====  ===============================================
A     batch  2      4 s   takes both batch nodes
B     batch  2      1 s   batch's head: waits for A
C     debug  1      1 s   behind B in submit order, in another queue: starts
                          at once
====  =====  =====  ====  ===============================================
"""

from __future__ import annotations

import pytest

from .instance import Instance

CONF = [
    'queues.batch.requires=["batch"]',
    'queues.debug.requires=["debug"]',
    'policy.jobspec.defaults.system.queue="batch"',
]


@pytest.fixture(scope="module")
def inst():
    i = Instance(1, conf=CONF)
    try:
        i.use_scheduler(None)
        i.set_resources(4, 4, properties={"batch": "0-1", "debug": "2-3"})
        yield i
    finally:
        i.stop()


def alloc_time(inst: Instance, jobid: str) -> float:
    ev = {e["name"]: e for e in inst.eventlog(jobid)}
    assert "alloc" in ev, f"job {jobid} never started: {list(ev)}"
    return ev["alloc"]["timestamp"]


@pytest.mark.parametrize("args", [["queue-policy=fcfs"], ["queue-policy=easy", "queue-policy-per-queue=batch:fcfs"]])
def test_a_blocked_queue_head_does_not_hold_back_another_queue(inst, args):
    inst.use_scheduler("sched-py", *args, "policy=low")
    per_queue = inst.json("module", "stats", "sched-py")["options"]["queue-policy-per-queue"]
    assert per_queue == ({"batch": "fcfs"} if len(args) > 1 else {})
    inst.run("queue", "stop", "--all")
    ids = {}
    for name, queue, nodes, runs in [("A", "batch", 2, "4s"), ("B", "batch", 2, "1s"), ("C", "debug", 1, "1s")]:
        ids[name] = inst.submit(
            "-q",
            queue,
            f"-N{nodes}",
            "--exclusive",
            "-t",
            "100s",
            f"--setattr=system.exec.test.run_duration={runs}",
            f"--job-name={name}",
            "true",
        )
    inst.run("queue", "start", "--all")
    inst.wait_event(ids["C"], "alloc")
    # B is still waiting for A, in its own queue, when C has started
    out = inst.run("jobs", "-no", "{name} {status} {annotations.sched.queue} {annotations.sched.jobs_ahead}", ids["B"])
    assert out.split() == ["B", "SCHED", "batch", "0"], out
    for name in ids:
        inst.wait_event(ids[name], "clean", timeout=30)
    t = {name: alloc_time(inst, jobid) for name, jobid in ids.items()}
    assert t["A"] < t["C"] < t["B"], t
    ranks = {n: inst.run("job", "info", j, "R").count('"rank": "2"') for n, j in ids.items()}
    assert ranks["C"] == 1 and ranks["A"] == ranks["B"] == 0
