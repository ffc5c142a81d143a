"""EASY when every running job has no time limit: no waiting job has a start
time, and the pass must not pay a full search for each of them.

The oracle for each job the pass held without a search is the planner itself:
``Planner.earliest`` for that job finds no start time either.
"""

from __future__ import annotations

from fluxsched_py.engine import ResponseType

from .test_engine_queues import engine, qjob


def test_waiting_jobs_behind_unlimited_jobs_cost_one_search_not_one_each():
    e = engine(nodes=4, options=["queue-policy=easy", "annotate-depth=unlimited"])
    for jobid in range(1, 5):
        e.alloc(jobid, 16, 1, float(jobid), qjob(nnodes=1, duration=0))  # no time limit
    assert len([r for r in e.schedule(0.0).responses if r.type is ResponseType.SUCCESS]) == 4
    n = 2000
    for jobid in range(5, 5 + n):
        e.alloc(jobid, 16, 1, float(jobid), qjob(nnodes=1, duration=0))
    before = e.stats["matches"]
    out = e.schedule(1.0).responses
    assert e.stats["matches"] - before < 50  # was 2 per waiting job
    reasons = {r.id: r.annotations["sched"].get("reason_pending") for r in out if r.type is ResponseType.ANNOTATE}
    assert len(reasons) == n and e.pending_count == n
    for jobid in (5, 6, 1000, 4 + n):
        assert "no start time can be estimated" in reasons[jobid]
        job = e.job(jobid)
        assert e.planner.earliest(job.request, 1.0, job.duration) is None


def test_a_smaller_job_behind_a_never_starting_one_still_gets_its_reservation():
    e = engine(nodes=4, options=["queue-policy=easy"])
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=2, duration=0))  # holds 2 nodes forever
    e.alloc(2, 16, 1, 2.0, qjob(nnodes=2, duration=100))  # 2 nodes until 100
    e.schedule(0.0)
    e.alloc(3, 16, 1, 3.0, qjob(nnodes=4, duration=10))  # can never start: held down
    e.alloc(4, 16, 1, 4.0, qjob(nnodes=4, duration=20))  # bigger-or-equal, longer: held without a search
    e.alloc(5, 16, 1, 5.0, qjob(nnodes=2, duration=10))  # smaller: the head, reserved at 100
    out = e.schedule(1.0).responses
    est = {r.id: r.annotations["sched"].get("t_estimate") for r in out if r.type is ResponseType.ANNOTATE}
    assert est.get(5) == 100.0 and est.get(3) is None and est.get(4) is None
