"""fcfs's repaired re-plan gives the forecasts of a re-plan from scratch.

After something is freed, fcfs re-plans its forecasts; where every job ahead
is back where it was, a job whose old place provably stays its earliest is
put back without a search (``Pass.restore``).  The oracle is the re-plan
without that shortcut (every forecast searched again, as before it
existed): after every pass, each reservation (job, start, nodes) and each
job's ``t_estimate`` must be the same.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.engine.passctx import Pass
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request


@st.composite
def workloads(draw):
    nodes = draw(st.integers(2, 16))
    n = draw(st.integers(1, 40))
    jobs = []
    for i in range(n):
        submit = draw(st.integers(0, 80))
        res = draw(st.integers(1, nodes))
        wall = draw(st.integers(1, 60))
        run = draw(st.integers(1, wall))
        jobs.append((i, float(submit), res, float(wall), float(run)))
    return nodes, jobs


def plans(nodes, jobs, options, monkeypatch=None):
    """Every pass's plan: the reservations and the estimates of pending jobs."""
    seen = []

    def snapshot(engine):
        engine.check_invariants()
        spans = sorted((s.jobid, s.start, int(s.bits)) for s in engine.planner.reserved())
        estimates = sorted((j.id, j.estimate) for j in engine.table.jobs.values() if j.estimate is not None)
        seen.append((spans, estimates))

    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    replay(w, nodes_graph(nodes), options, check=snapshot)
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from([1, 2, 3, 8, 0]))
def test_repaired_forecasts_equal_a_re_plan_from_scratch(wl, depth):
    nodes, jobs = wl
    options = {"queue-policy": "fcfs", "reserve-depth": depth}
    repaired = plans(nodes, jobs, options)
    restore = Pass.restore
    Pass.restore = lambda self, job, not_before, after: None  # the oracle: search every forecast
    try:
        scratch = plans(nodes, jobs, options)
    finally:
        Pass.restore = restore
    assert repaired == scratch


def test_a_re_plan_keeps_forecasts_an_early_end_cannot_move():
    """An 8-node machine: a 6-node job holds it until 100; an 8-node head
    waits (forecast 100), three more behind it (200, 300, 400).  Two
    one-node jobs end early, at 5 and at 10, where their walltimes ended at
    50, before the head's forecast.  At 5 every forecast is searched again
    (those made as jobs arrived were not searched in order); at 10 the head
    is, and the three behind it are put back without a search."""
    calls = {"restored": 0}
    restore = Pass.restore

    def counting(self, job, not_before, after):
        got = restore(self, job, not_before, after)
        calls["restored"] += got is not None
        return got

    jobs = [
        (0, 0.0, 6, 100.0, 100.0),
        (1, 0.0, 1, 50.0, 5.0),
        (2, 0.0, 1, 50.0, 10.0),
        (3, 1.0, 8, 100.0, 100.0),  # the head
        (4, 2.0, 8, 100.0, 100.0),
        (5, 3.0, 8, 100.0, 100.0),
        (6, 4.0, 8, 100.0, 100.0),
    ]
    Pass.restore = counting
    try:
        seen = plans(8, jobs, {"queue-policy": "fcfs"})
    finally:
        Pass.restore = restore
    assert calls["restored"] == 3
    Pass.restore = lambda self, job, not_before, after: None
    try:
        assert plans(8, jobs, {"queue-policy": "fcfs"}) == seen
    finally:
        Pass.restore = restore


# One step of the job-manager and the resource module, against two engines.
steps = st.one_of(
    st.tuples(
        st.just("alloc"),
        st.integers(1, 4),
        st.sampled_from([10.0, 30.0, 100.0]),
        st.integers(0, 31),
        st.booleans(),  # node[N] exclusive > slot > core[1] (the fast path restore needs), else core[4]
    ),
    st.tuples(st.just("end"), st.integers(0, 99)),  # a running job ends (often before its walltime)
    st.tuples(st.just("cancel"), st.integers(0, 99)),
    st.tuples(st.just("prioritize"), st.integers(0, 99), st.integers(0, 31)),
    st.tuples(st.just("down"), st.integers(0, 3)),
    st.tuples(st.just("up"), st.integers(0, 3)),
    st.tuples(st.just("time"), st.sampled_from([1.0, 5.0, 20.0])),
)


class _Side:
    """An engine and what the test knows of it: pending and running job ids."""

    def __init__(self, restore: bool) -> None:
        from fluxsched_py.resource import ResourceGraph

        from .test_engine_model import instance_R

        self.restore = restore
        self.engine = Engine(ResourceGraph.from_rv1(instance_R(0, 4)), ["queue-policy=fcfs", "reserve-depth=4"])
        self.pending: list[int] = []
        self.running: list[int] = []

    def call(self, fn, *args, **kwargs):
        saved = Pass.restore
        if not self.restore:
            Pass.restore = lambda self, job, not_before, after: None
        try:
            return fn(*args, **kwargs)
        finally:
            Pass.restore = saved

    def plan(self, now: float) -> tuple:
        res = self.call(self.engine.schedule, now)
        out = []
        for r in res.responses:
            out.append((r.id, r.type.name, r.annotations))
            if r.type.name == "SUCCESS":
                self.pending.remove(r.id)
                self.running.append(r.id)
            elif r.type.name in ("DENY", "CANCEL") and r.id in self.pending:
                self.pending.remove(r.id)
        spans = sorted((s.jobid, s.start, int(s.bits)) for s in self.engine.planner.reserved())
        return out, spans


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=60))
def test_repaired_forecasts_equal_a_re_plan_under_cancels_priorities_and_down_nodes(script):
    """The same, driven through the engine's API with what the replay never
    does: cancels, priority changes, nodes going down and up."""
    from .test_engine_model import jobspec

    def spec_of(nnodes: int, duration: float, whole: bool) -> dict:
        spec = jobspec(nnodes, 0, duration, None)
        if whole:
            spec["resources"][0]["with"][0]["with"][0]["count"] = 1
        return spec

    sides = [_Side(True), _Side(False)]
    now, next_id = 100.0, 1
    for step in script:
        kind = step[0]
        for side in sides:
            e = side.engine
            if kind == "alloc":
                spec = spec_of(step[1], step[2], step[4])
                side.call(e.alloc, next_id, step[3], 0, now, spec)
                side.pending.append(next_id)
            elif kind == "end" and side.running:
                side.call(e.free, side.running.pop(step[1] % len(side.running)), None, True)
            elif kind == "cancel" and side.pending:
                side.call(e.cancel, side.pending[step[1] % len(side.pending)])
            elif kind == "prioritize" and side.pending:
                side.call(e.prioritize, [(side.pending[step[1] % len(side.pending)], step[2])])
            elif kind in ("down", "up"):
                side.call(e.resource_update, **{kind: str(step[1])})  # (its responses come at the pass)
        if kind == "alloc":
            next_id += 1
        elif kind == "time":
            now += step[1]
        assert sides[0].plan(now) == sides[1].plan(now), step
