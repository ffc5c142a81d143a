"""engine/forecast.py: a start for every pending job, and for a job not submitted.

Hand-planned on 4 whole nodes under easy (reserve-depth 1): job 1 holds
every node over [0, 100); job 2 (2 nodes, 50 s) is the head and holds the
engine's reservation at 100; job 3 (4 nodes, 10 s) gets none from easy;
job 4 (1 node, 30 s).  Planned in queue order around job 2's reservation:
job 3 waits for job 2 to end (150), job 4 fits beside job 2 at 100.
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import Engine
from fluxsched_py.engine.forecast import forecast, when

from .test_engine_rfc27 import graph, jobspec


@pytest.fixture
def engine():
    e = Engine(graph(nodes=4, cores=4), ["queue-policy=easy"])
    e.alloc(1, 16, 100, 0.0, jobspec(nnodes=4, duration=100.0))
    e.schedule(0.0)
    for jobid, n, d in ((2, 2, 50.0), (3, 4, 10.0), (4, 1, 30.0)):
        e.alloc(jobid, 16, 100 + jobid, float(jobid), jobspec(nnodes=n, duration=d))
    e.schedule(5.0)
    return e


def spans(e):
    return sorted((s.jobid, s.start, s.end, s.running, str(s.resources.ranks)) for s in e.planner.spans())


def test_every_pending_job_gets_a_start_in_start_order(engine):
    got = [(f.jobid, f.start, f.kind) for f in forecast(engine, 5.0)]
    assert got == [(2, 100.0, "reservation"), (4, 100.0, "forecast"), (3, 150.0, "forecast")]


def test_the_reservation_is_the_engines_own(engine):
    (span,) = engine.planner.reserved()
    f = {f.jobid: f for f in forecast(engine, 5.0)}
    assert f[2].start == span.start and f[2].ranks() == str(span.resources.ranks)
    assert f[4].ranks() and not (set(f[4].resources.ranks) & set(span.resources.ranks))
    assert f[3].ranks() == "0-3"
    assert f[4].hosts(engine.graph) == [f"node{r}" for r in f[4].resources.ranks]


def test_reason_and_owner_come_from_the_job(engine):
    f = {f.jobid: f for f in forecast(engine, 5.0)}
    assert f[3].userid == 103 and f[3].duration == 10.0
    assert f[3].reason == engine.job(3).reply.sent.get("reason_pending") and f[3].reason


def test_a_forecast_changes_nothing_in_the_engine(engine):
    before = spans(engine)
    forecast(engine, 5.0)
    when(engine, jobspec(nnodes=1, duration=10.0), 5.0)
    assert spans(engine) == before
    assert engine.pending_count == 3 and engine.job(-1) is None


def test_the_limit_bounds_the_jobs_planned(engine):
    got = [(f.jobid, f.start, f.kind) for f in forecast(engine, 5.0, limit=1)]
    assert got == [(2, 100.0, "reservation"), (3, None, "not planned"), (4, None, "not planned")]


def test_estimates_are_never_in_the_past(engine):
    # at 120, job 1 is overdue (still running, its end unknown): the engine's
    # reservation stands, from now on; nothing else has a start
    got = [(f.jobid, f.start, f.kind) for f in forecast(engine, 120.0)]
    assert got == [(2, 120.0, "reservation"), (3, None, "unknown"), (4, None, "unknown")]


def test_when_plans_after_every_job_ahead(engine):
    # ahead: 2 over [100,150) on 2 nodes, 4 over [100,130) on 1, 3 over [150,160) on all
    f = when(engine, jobspec(nnodes=3, duration=10.0), 5.0)
    assert (f.start, f.kind, len(f.resources.ranks)) == (160.0, "forecast", 3)


def test_when_with_a_higher_priority_passes_the_unreserved_jobs(engine):
    # only job 2's reservation is ahead: 2 of 4 nodes are busy until 150
    f = when(engine, jobspec(nnodes=3, duration=10.0), 5.0, priority=20)
    assert f.start == 150.0
    f = when(engine, jobspec(nnodes=2, duration=10.0), 5.0, priority=20)
    assert f.start == 100.0 and not set(f.resources.ranks) & set(engine.planner.reserved()[0].resources.ranks)


def test_when_refuses_what_never_fits(engine):
    with pytest.raises(ValueError, match="node"):
        when(engine, jobspec(nnodes=5, duration=10.0), 5.0)
    with pytest.raises(ValueError, match="invalid jobspec"):
        when(engine, {"version": 1}, 5.0)


def test_the_budget_bounds_the_work(engine):
    ticks = iter(range(100))  # one second per reading
    got = [(f.jobid, f.kind) for f in forecast(engine, 5.0, budget=2.5, stopwatch=lambda: next(ticks))]
    # read at the start (0), then before jobs 2 (1 s), 3 (2 s: planned) and 4 (3 s: over)
    assert got == [(2, "reservation"), (3, "forecast"), (4, "not planned")]
    ticks = iter(range(100))
    f = when(engine, jobspec(nnodes=1, duration=10.0), 5.0, budget=1.5, stopwatch=lambda: next(ticks))
    assert f.kind == "partial forecast"


def test_under_fcfs_no_job_is_forecast_before_the_one_ahead_of_it():
    # The same jobs under fcfs: job 4 (1 node) would fit beside job 2 at 100
    # in a conservative plan, but fcfs starts it only after job 3 (150..160).
    e = Engine(graph(nodes=4, cores=4), ["queue-policy=fcfs"])
    e.alloc(1, 16, 100, 0.0, jobspec(nnodes=4, duration=100.0))
    e.schedule(0.0)
    for jobid, n, d in ((2, 2, 50.0), (3, 4, 10.0), (4, 1, 30.0)):
        e.alloc(jobid, 16, 100 + jobid, float(jobid), jobspec(nnodes=n, duration=d))
    e.schedule(5.0)
    got = [(f.jobid, f.start) for f in forecast(e, 5.0)]
    assert got == [(2, 100.0), (3, 150.0), (4, 160.0)]
