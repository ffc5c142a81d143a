"""Engine.reconfigure: options changed on a running engine (``flux config reload``).

The oracle is a fresh engine started with the new options and fed the same
inputs: after the change, the reconfigured engine must start the same jobs
and post the same estimates, and lose none.
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import EngineError, ResponseType

from .test_engine_queues import engine, qjob, started
from .test_engine_rfc27 import estimates

# 4 nodes; job 1 holds 3 of them until t=100; 2 wants 4 nodes (the head);
# 3 wants 1 node for 50 s: fcfs keeps it behind the head, easy backfills it.
JOBS = [(1, qjob(nnodes=3, duration=100)), (2, qjob(nnodes=4, duration=100)), (3, qjob(nnodes=1, duration=50))]


def shown(responses):
    """What users see at the end: each job's sched annotations, diffs applied in order."""
    out: dict[int, dict] = {}
    for r in responses:
        if r.type is ResponseType.ANNOTATE:
            ann = out.setdefault(r.id, {})
            for k, v in r.annotations["sched"].items():
                if v is None:
                    ann.pop(k, None)
                else:
                    ann[k] = v
    return {j: a for j, a in out.items() if a}


def feed(e):
    out = []
    for jobid, spec in JOBS:
        out += e.alloc(jobid, 16, 1, float(jobid), spec)
        out += e.schedule(0.0).responses
    return out


def test_fcfs_to_easy_backfills_at_once_like_a_fresh_easy_engine():
    e = engine(options=["queue-policy=fcfs"])
    before = feed(e)
    assert started(before) == [1]  # fcfs: 3 waits behind 2
    e.reconfigure(["queue-policy=easy"])
    after = e.schedule(1.0).responses
    fresh = engine(options=["queue-policy=easy"])
    expect = feed(fresh) + fresh.schedule(1.0).responses
    assert started(after) == [j for j in started(expect) if j != 1] == [3]
    assert e.options.queue_policy == "easy" and e.queue_policy.name == "easy"
    assert shown(before + after)[2]["t_estimate"] == shown(expect)[2]["t_estimate"] == 100.0
    assert {j.id for j in e.running} == {1, 3} and [j.id for j in e.pending()] == [2]


def test_conservative_to_easy_drops_reservations_beyond_the_head():
    e = engine(options=["queue-policy=conservative"])
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=4, duration=100))
    for jobid in (2, 3, 4):
        e.alloc(jobid, 16, 1, float(jobid), qjob(nnodes=4, duration=100))
    first = e.schedule(0.0).responses
    assert sorted(estimates(first)) == [2, 3, 4]  # conservative: every waiting job reserved
    e.reconfigure(["queue-policy=easy"])
    out = e.schedule(1.0).responses
    ann = {r.id: r.annotations["sched"] for r in out if r.type is ResponseType.ANNOTATE}
    # easy reserves for the head only: the others' t_estimate is withdrawn (null)
    assert ann[3]["t_estimate"] is None and ann[4]["t_estimate"] is None
    assert 2 not in ann or ann[2].get("t_estimate", 100.0) == 100.0
    assert [s.jobid for s in e.planner.reserved()] == [2]
    assert e.pending_count == 3


def test_reserve_depth_and_per_queue_policy_change():
    e = engine(options=["queue-policy=conservative", "reserve-depth=1"])
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=4, duration=100))
    for jobid in (2, 3, 4):
        e.alloc(jobid, 16, 1, float(jobid), qjob("debug", nnodes=4, duration=100))
    assert sorted(estimates(e.schedule(0.0).responses)) == [2]
    e.reconfigure(["queue-policy=fcfs", "queue-policy-per-queue=debug:conservative", "reserve-depth=unlimited"])
    assert e.policy_for("debug").name == "conservative" and e.policy_for(None).name == "fcfs"
    assert sorted(estimates(e.schedule(1.0).responses)) == [3, 4]  # 2's estimate is unchanged, not re-sent
    assert sorted(s.jobid for s in e.planner.reserved()) == [2, 3, 4]


def test_a_bad_option_raises_and_leaves_the_engine_as_it_was():
    e = engine(options=["queue-policy=fcfs"])
    feed(e)
    with pytest.raises(EngineError, match="queue-policy='bogus'"):
        e.reconfigure(["queue-policy=bogus"])
    assert e.options.queue_policy == "fcfs" and e.queue_policy.name == "fcfs"
    assert e.schedule(1.0).responses == []  # nothing changed: no pass


def test_reconfigure_during_an_unfinished_pass_restarts_it():
    e = engine(nodes=64, options=["queue-policy=conservative"])
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=64, duration=100))
    for jobid in range(2, 200):
        e.alloc(jobid, 16, 1, float(jobid), qjob(nnodes=1 + jobid % 7, duration=10 + jobid))
    ticks = iter(range(10**9))
    e._stopwatch = lambda: next(ticks)  # every step spends the whole budget
    res = e.schedule(0.0, budget=1)
    assert res.more
    e.reconfigure(["queue-policy=easy"])
    e._stopwatch = lambda: 0
    e.schedule(1.0)
    assert [s.jobid for s in e.planner.reserved()] == [2]
    assert e.pending_count == 198


def test_a_smaller_reserve_depth_withdraws_the_reservations_beyond_it():
    e = engine(options=["queue-policy=conservative"])
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=4, duration=100))
    for jobid in (2, 3, 4):
        e.alloc(jobid, 16, 1, float(jobid), qjob(nnodes=4, duration=100))
    before = e.schedule(0.0).responses
    assert sorted(estimates(before)) == [2, 3, 4]
    e.reconfigure(["queue-policy=conservative", "reserve-depth=1"])
    after = e.schedule(1.0).responses
    assert sorted(shown(before + after)) == [2, 3, 4]  # still annotated (reason_pending) ...
    assert [j for j, a in shown(before + after).items() if "t_estimate" in a] == [2]  # ... one estimate
    assert [s.jobid for s in e.planner.reserved()] == [2]
