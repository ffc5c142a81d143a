"""Conservative backfilling never delays a reservation (DESIGN.md, Measures).

Property: on random node-exclusive workloads where every job runs its full
walltime, no job starts later than its first ``t_estimate``.  Compression
(reservations only move earlier) makes it hold when jobs end early too.  The
resource invariants are checked after every pass.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.policy import ConservativePolicy
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .test_policy_textbook import textbook


def check(engine):
    engine.check_invariants()


@st.composite
def workloads(draw, full_walltime=True):
    nodes = draw(st.integers(2, 12))
    n = draw(st.integers(1, 25))
    jobs = []
    for i in range(n):
        submit = draw(st.integers(0, 60))
        res = draw(st.integers(1, nodes))
        wall = draw(st.integers(1, 40))
        run = wall if full_walltime else draw(st.integers(1, wall))
        jobs.append((i, float(submit), res, float(wall), float(run)))
    return nodes, jobs


def assert_no_start_after_first_estimate(records) -> None:
    """Every job ran, none later than the first ``t_estimate`` posted for it."""
    for rec in records:
        assert rec.start is not None
        if rec.first_estimate is not None:
            assert rec.start <= rec.first_estimate + 1e-9, (rec.job.id, rec.start, rec.first_estimate)


def _replay(nodes, jobs, options):
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    return replay(w, nodes_graph(nodes), options, check=check)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(full_walltime=True))
def test_conservative_no_job_starts_after_its_first_t_estimate(wl):
    nodes, jobs = wl
    assert_no_start_after_first_estimate(_replay(nodes, jobs, {"queue-policy": "conservative"}).records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(full_walltime=False))
def test_conservative_compression_never_delays_when_jobs_end_early(wl):
    nodes, jobs = wl
    r = _replay(nodes, jobs, {"queue-policy": "conservative"})
    for rec in r.records:
        if rec.first_estimate is not None:
            assert rec.start <= rec.first_estimate + 1e-9


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(full_walltime=False), st.sampled_from(["fcfs", "easy"]))
def test_fcfs_and_easy_equal_textbook_on_random_workloads(wl, policy):
    nodes, jobs = wl
    got = _replay(nodes, jobs, {"queue-policy": policy}).starts()
    assert got == textbook(jobs, nodes, easy=policy == "easy")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(full_walltime=False), st.integers(1, 4))
def test_hybrid_every_job_runs_and_invariants_hold(wl, depth):
    nodes, jobs = wl
    r = _replay(nodes, jobs, {"queue-policy": "hybrid", "reserve-depth": depth})
    assert all(rec.start is not None for rec in r.records)


class ReplanEverything(ConservativePolicy):
    """The oracle: conservative backfilling as the paper states it, every
    reservation taken out at every pass after a change and searched for
    from now over every candidate time (no log of gains, no repair)."""

    def run(self, ctx):
        depth = self.reserve_depth or None
        reserved = 0
        for job in ctx.jobs():
            if not ctx.compress and (depth is None or reserved < depth):
                kept = ctx.reservation(job)
                if kept is not None and kept.start > ctx.now:
                    reserved += 1
                    yield
                    continue
            old = ctx.unreserve(job)
            if depth is not None and reserved >= depth:
                if ctx.nothing_free():
                    return
                if ctx.hopeless(job):
                    ctx.hold(job, "depth")
                    yield
                    continue
                rs = ctx.fits_now(job)
                if rs is not None:
                    ctx.start(job, rs)
                else:
                    ctx.failed(job)
                    ctx.hold(job, "depth")
                yield
                continue
            keep_old = old is not None and old.start > ctx.now and ctx.still_free(job, old)
            est = ctx.earliest(job)  # from now, everywhere
            if est is not None and est.start <= ctx.now:
                ctx.start(job, est.placement)
            elif keep_old and (est is None or est.start >= old.start):
                ctx.reserve(job, old)
                reserved += 1
            elif est is not None:
                ctx.reserve(job, est)
                reserved += 1
            else:
                ctx.hold(job, "down")
            yield


def _replanning(depth):
    def factory(*args, **kwargs):
        from fluxsched_py.engine import Engine

        e = Engine(*args, **kwargs)
        e.queue_policy = ReplanEverything(depth)
        return e

    return factory


@st.composite
def busy_workloads(draw):
    """Bigger and busier than :func:`workloads`: queues long enough that
    reservations cascade when jobs end early."""
    nodes = draw(st.integers(4, 24))
    n = draw(st.integers(10, 60))
    jobs = []
    for i in range(n):
        submit = draw(st.integers(0, 200))
        res = draw(st.integers(1, nodes))
        wall = draw(st.integers(5, 120))
        run = draw(st.integers(1, wall))
        jobs.append((i, float(submit), res, float(wall), float(run)))
    return nodes, jobs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.sampled_from([None, 1, 3]))
def test_repair_changes_no_decision(wl, depth):
    """Reservations repaired from the log of gains (kept when nothing freed
    could let them start earlier, else searched where something was freed)
    give the same starts, placements and estimates as re-planning every
    reservation with a full search at every pass."""
    nodes, jobs = wl
    opts = {"queue-policy": "conservative" if depth is None else "hybrid"}
    if depth is not None:
        opts["reserve-depth"] = depth
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    fast = replay(w, nodes_graph(nodes), opts, check=check)
    slow = replay(w, nodes_graph(nodes), opts, engine_factory=_replanning(depth))
    assert [(r.start, r.ranks, r.first_estimate) for r in fast.records] == [
        (r.start, r.ranks, r.first_estimate) for r in slow.records
    ]
