"""FCFS forecasts taken again where a search would find them again.

After a pass where only jobs that ended before the head's forecast freed
anything, :class:`~fluxsched_py.policy.fcfs.FCFSPolicy` leaves the
forecasts of the last pass reserved instead of searching (``_stands``).  The
oracle is the policy with that shortcut taken out: every forecast searched
at every pass after a change.  Both must post the same ``t_estimate`` for
every pending job after every pass, and start every job at the same time
on the same nodes, including with priorities changed mid-run and several
reservation depths.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.engine.states import JobState
from fluxsched_py.policy import FCFSPolicy
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .test_policy_conservative import busy_workloads


class SearchEveryForecast(FCFSPolicy):
    """The oracle: fcfs searching every forecast after a change."""

    @staticmethod
    def _stands(ctx, chain, stamp):
        return False


def _estimating(*args, **kwargs):
    """An engine that shows every forecast, as under Flux (the replay asks for none)."""
    return Engine(*args, **{**kwargs, "estimates": True})


def _searching(depth):
    def factory(*args, **kwargs):
        e = _estimating(*args, **kwargs)
        e.queue_policy = SearchEveryForecast() if depth is None else SearchEveryForecast(depth)
        return e

    return factory


def _estimates(log):
    """A check callback that logs, after each pass, every pending job's estimate."""

    def check(engine):
        engine.check_invariants()
        log.append(sorted((j.id, j.estimate) for j in engine.table.jobs.values() if j.state is JobState.PENDING))

    return check


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.sampled_from([None, 1, 3, 0]))
def test_forecasts_taken_again_equal_searching_them(wl, depth):
    nodes, jobs = wl
    opts = {"queue-policy": "fcfs"}
    if depth is not None:
        opts["reserve-depth"] = depth
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    fast_log, slow_log = [], []
    fast = replay(w, nodes_graph(nodes), opts, check=_estimates(fast_log), engine_factory=_estimating)
    slow = replay(w, nodes_graph(nodes), opts, check=_estimates(slow_log), engine_factory=_searching(depth))
    assert [(r.start, r.ranks, r.first_estimate) for r in fast.records] == [
        (r.start, r.ranks, r.first_estimate) for r in slow.records
    ]
    assert fast_log == slow_log


def spans(e):
    return sorted((s.jobid, s.start, s.end, s.running, str(s.resources.ranks)) for s in e.planner.spans())


@st.composite
def event_runs(draw):
    """Random events for two engines in step: submissions (some urgent,
    going ahead of the queue), early ends, priority changes (which reorder
    the forecasts) and time passing."""
    return draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("alloc"), st.integers(1, 4), st.integers(5, 60), st.sampled_from([16, 16, 20])),
                st.tuples(st.just("end"), st.integers(0, 50)),
                st.tuples(st.just("prio"), st.integers(0, 50), st.integers(0, 31)),
                st.tuples(st.just("tick"), st.integers(1, 20)),
            ),
            min_size=5,
            max_size=60,
        )
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_runs(), st.sampled_from([None, 2, 0]), st.sampled_from([1, 2]))
def test_with_priorities_and_early_ends_every_plan_equals_searching(events, depth, cores):
    """The whole plan (every running and reserved span, on which ranks) and
    every estimate agree after each pass, on one- and two-core nodes."""
    from .test_engine_rfc27 import graph, jobspec

    opts = ["queue-policy=fcfs"] + ([] if depth is None else [f"reserve-depth={depth}"])
    fast = Engine(graph(nodes=4, cores=cores), opts)
    slow = Engine(graph(nodes=4, cores=cores), opts)
    slow.queue_policy = SearchEveryForecast() if depth is None else SearchEveryForecast(depth)
    now, nextid = 0.0, 1
    for ev in events:
        ids = sorted(fast.table.jobs)
        if ev[0] == "alloc":
            for e in (fast, slow):
                e.alloc(nextid, ev[3], 100, now, jobspec(nnodes=ev[1], duration=float(ev[2])))
            nextid += 1
        elif ev[0] == "end":
            running = [j for j in ids if fast.table.jobs[j].state is JobState.RUNNING]
            if running:
                jobid = running[ev[1] % len(running)]
                for e in (fast, slow):
                    e.free(jobid)
        elif ev[0] == "prio":
            pending = [j for j in ids if fast.table.jobs[j].state is JobState.PENDING]
            if pending:
                jobid = pending[ev[1] % len(pending)]
                for e in (fast, slow):
                    e.prioritize([(jobid, ev[2])])
        else:
            now += ev[1]
        for e in (fast, slow):
            e.schedule(now)
        assert spans(fast) == spans(slow)
        assert [(j.id, j.state, j.estimate) for j in fast.table.jobs.values()] == [
            (j.id, j.state, j.estimate) for j in slow.table.jobs.values()
        ]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.booleans())
def test_without_estimates_fcfs_makes_no_forecast_and_the_same_starts(wl, besteffort):
    """The replay command's default (``annotate-depth=0``: nothing shows ``t_estimate``) against the
    Flux module's: every job starts at the same time on the same nodes;
    only the second plans forecasts.  With a best-effort job in the
    workload the plan is read (preemption follows it), so both forecast."""
    nodes, jobs = wl
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    if besteffort:
        first = min(w.jobs, key=lambda j: j.submit)  # the plan is read from the first pass on
        request = dataclasses.replace(node_request(1, 50.0), preemptible_after=0.0)
        be = WorkloadJob(10_000, "be", first.submit, request, 50.0, 10.0, 1)
        w = Workload([*w.jobs, be], nodes)
    silent = replay(w, nodes_graph(nodes), {"queue-policy": "fcfs", "annotate-depth": 0})  # the CLI's default
    shown = replay(w, nodes_graph(nodes), {"queue-policy": "fcfs"}, engine_factory=_estimating)
    assert [(r.start, r.ranks) for r in silent.records] == [(r.start, r.ranks) for r in shown.records]
    waited = [r for r in shown.records if r.start is not None and r.start > r.job.submit]
    if besteffort:
        assert [r.first_estimate for r in silent.records] == [r.first_estimate for r in shown.records]
    else:
        assert all(r.first_estimate is None for r in silent.records)
        # a job that waited at the head was forecast (one further back may start before its turn comes)
        assert not waited or any(r.first_estimate is not None for r in shown.records)
