"""forecast and when under run limits: a job a limit holds starts, in the
forecast, once its user's jobs have ended, and counts against the limit.

Hand-counted on 4 whole nodes of 4 cores, a limit of 2 nodes for user A.  At
0 user A submits jobs 1, 2, 3 (one node, 100 s each) and user B job 4 (3
nodes, 10 s).  The pass starts 1 and 2 on two nodes; job 3 is held by A's
limit (2 of 2 nodes in use); job 4 does not fit the 2 free nodes and waits
for A's jobs to end at 100 (3 nodes over [100, 110)).  The forecast starts
job 3 at 100, when 1 and 2 end (A then holds 1 node), on the fourth node
(job 4 holds the other three until 110).  Without the limit, the forecast
would start job 3 at once on a free node (it ends at 105, and job 4 still
finds its 3 nodes at 100): the start the pass never gives it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.engine.forecast import forecast, when
from fluxsched_py.engine.runlimits import RunLimits

from .test_engine_rfc27 import graph, jobspec

A, B, C = 1001, 1002, 1003
LIMIT = RunLimits.from_config({"policy": {"scheduler": {"limits": {"users": {str(A): {"nodes": 2}}}}}})
HELD = "user limit: 2 of 2 nodes in use"


def setup(policy, *options):
    e = Engine(graph(nodes=4, cores=4), [f"queue-policy={policy}", *options], limits=LIMIT)
    for jobid, user, n, d in ((1, A, 1, 100.0), (2, A, 1, 100.0), (3, A, 1, 100.0), (4, B, 3, 10.0)):
        e.alloc(jobid, 16, user, 0.0, jobspec(nnodes=n, duration=d))
    e.schedule(0.0)
    assert sorted(j.id for j in e.running) == [1, 2]
    return e


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_a_held_job_starts_when_its_users_jobs_end_and_its_reason_names_the_limit(policy):
    got = [(f.jobid, f.start, f.kind, f.reason) for f in forecast(setup(policy), 5.0)]
    assert got[0] == (3, 100.0, "held", HELD)
    assert got[1][:3] == (4, 100.0, "reservation")


def test_without_the_limit_the_same_queue_starts_job_3_at_once():
    # the oracle for what "held" replaces: job 3 on a free node from 0 (the pass starts it)
    e = Engine(graph(nodes=4, cores=4), ["queue-policy=easy"])
    for jobid, user, n, d in ((1, A, 1, 100.0), (2, A, 1, 100.0), (4, B, 3, 10.0)):
        e.alloc(jobid, 16, user, 0.0, jobspec(nnodes=n, duration=d))
    e.schedule(0.0)
    e.alloc(3, 16, A, 1.0, jobspec(nnodes=1, duration=100.0))
    f = {f.jobid: f for f in forecast(e, 5.0)}
    assert (f[3].start, f[3].kind) == (5.0, "forecast")


def test_under_fcfs_a_held_job_does_not_hold_back_the_jobs_behind_it():
    e = setup("fcfs", "reserve-depth=1")
    e.alloc(5, 16, B, 1.0, jobspec(nnodes=1, duration=20.0))
    e.schedule(1.0)
    # 3 starts at 100 when A's jobs end, on the fourth node; 4 (reserved by
    # fcfs) at 100 on A's two nodes and the other; 5 may not pass 4 (fcfs):
    # at 110, when 4 ends, not "not planned" behind a held job
    got = [(f.jobid, f.start, f.kind) for f in forecast(e, 5.0)]
    assert got == [(3, 100.0, "held"), (4, 100.0, "reservation"), (5, 110.0, "forecast")]


def test_the_hold_goes_once_the_users_job_ends():
    e = setup("easy")
    e.free(1)
    e.schedule(50.0)  # 3 starts (A holds 2 nodes again); 4 still waits, now for 2 and 3
    assert sorted(j.id for j in e.running) == [2, 3]
    got = [(f.jobid, f.start, f.kind) for f in forecast(e, 50.0)]
    assert got == [(4, 100.0, "reservation")]


def test_when_plans_a_probe_of_a_user_at_the_limit_after_its_jobs_and_another_users_at_once():
    e = setup("easy")
    # A's probe: A holds 2 nodes until 100, then job 3's one until 200; at 100
    # every node is taken (3, and 4 until 110): at 110, with A at 2 nodes again
    f = when(e, jobspec(nnodes=1, duration=50.0), 5.0, userid=A)
    assert (f.start, f.kind, f.reason, f.userid) == (110.0, "held", HELD, A)
    # B's probe: a free node from 5 to 55, before job 4 needs 3 nodes at 100
    f = when(e, jobspec(nnodes=1, duration=50.0), 5.0, userid=B)
    assert (f.start, f.kind, f.userid) == (5.0, "forecast", B)
    # 3 nodes: more than A's limit itself
    f = when(e, jobspec(nnodes=3, duration=5.0), 5.0, userid=A)
    assert (f.start, f.kind) == (None, "held")
    assert f.reason == "user limit: job needs 3 nodes, more than the limit of 2 (held until the limit is raised)"


def test_best_effort_jobs_are_never_held_in_the_forecast():
    e = setup("easy")
    spec = jobspec(nnodes=1, duration=50.0)
    spec["attributes"]["system"]["preemptible-after"] = 0
    f = when(e, spec, 5.0, userid=A)
    assert f.kind == "forecast" and f.start == 5.0


def test_the_when_rpc_takes_the_user_from_the_requests_credentials():
    from fluxsched_py.flux.control import ROLE_USER

    from .test_flux_driver import alloc, make, replies
    from .test_flux_driver import jobspec as flux_jobspec

    d, t = make(["queue-policy=easy"])  # 2 nodes of 4 cores; the clock reads 1000
    d.handle("sched-py.config-reload", "reload", {"policy": {"scheduler": {"limits": {"user": {"jobs": 1}}}}})
    assert replies(t, "reload") == [None]
    alloc(d, t, 1, flux_jobspec(ncores=4, nnodes=1, duration=100))  # user 0's one job, on one node
    probe = {"jobspec": flux_jobspec(ncores=4, nnodes=1, duration=10)}
    # user 0's probe once its job ends, at 1100; user 5's at once
    for uid, want in ((0, (1100.0, "held", "user limit: 1 of 1 running job in use")), (5, (1000.0, "forecast", None))):
        d.control.handle("sched-py.when", f"when-{uid}", probe, ROLE_USER, uid)
        (r,) = replies(t, f"when-{uid}")
        assert (r["t_estimate"], r["kind"], r["reason"], r["userid"]) == (*want, uid)


@st.composite
def limited_runs(draw):
    """Jobs of three users (one to three nodes, 10 to 200 s) on 4 nodes, and each user's node limit."""
    jobs = draw(
        st.lists(
            st.tuples(st.sampled_from([A, B, C]), st.integers(1, 3), st.integers(10, 200), st.integers(0, 50)),
            min_size=3,
            max_size=25,
        )
    )
    limits = draw(st.fixed_dictionaries({u: st.integers(1, 4) for u in (A, B, C)}))
    return jobs, limits


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limited_runs(), st.sampled_from(["fcfs", "easy", "conservative"]))
# Found by this test: the engine's reservation of a job later in the queue
# (job 5) was not counted when a job ahead of it (job 2, held) was placed.
@example(([(A, 2, 10, 0), (A, 3, 10, 0), (B, 1, 10, 0), (B, 1, 10, 0), (A, 1, 10, 0)], {A: 3, B: 2, C: 1}), "fcfs")
def test_the_forecast_keeps_every_users_limit_at_every_instant(run, policy):
    """Recounted from the forecast itself (an oracle apart from PlannedUsage):
    while a job the forecast places (``forecast`` or ``held``) runs, its
    user's running jobs (until their planned ends), the engine's
    reservations and the other placed jobs hold no more nodes than the
    user's limit; a held job with no start needs more than its limit alone.
    (The engine's own reservations are planned by the pass, which checks
    limits at the start of a job only: two of them may overlap past a
    limit, and the forecast shows them as they are.)"""
    jobs, limit = run
    conf = {"policy": {"scheduler": {"limits": {"users": {str(u): {"nodes": n} for u, n in limit.items()}}}}}
    e = Engine(graph(nodes=4, cores=4), [f"queue-policy={policy}"], limits=RunLimits.from_config(conf))
    now = 0.0
    for jobid, (user, n, d, gap) in enumerate(jobs, 1):
        now += gap
        e.alloc(jobid, 16, user, now, jobspec(nnodes=n, duration=float(d)))
        e.schedule(now)
        for j in [j for j in e.running if j.t_start + j.walltime <= now]:
            e.free(j.id)
        e.schedule(now)
    spans = [(now, e.planner.span(j.id).end, j.userid, len(j.resources.ranks)) for j in e.running]
    placed = []
    for f in forecast(e, now):
        job = e.job(f.jobid)
        if f.start is None:
            assert f.kind != "held" or job.request.nnodes > limit[job.userid], f
            continue
        span = (f.start, f.start + f.duration, f.userid, len(f.resources.ranks))
        spans.append(span)
        if f.kind in ("forecast", "held"):
            placed.append(span)
    for start, end, user, _ in placed:
        mine = [s for s in spans if s[2] == user]
        for t in {start} | {s[0] for s in mine if start < s[0] < end}:
            held = sum(s[3] for s in mine if s[0] <= t < s[1])
            assert held <= limit[user], (user, t, held, limit[user], mine)
