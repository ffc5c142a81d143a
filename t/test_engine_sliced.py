"""A pass cut into slices by its budget decides exactly what one unsliced pass decides.

The Flux module runs every pass in slices (``PASS_BUDGET`` of work per
reactor callback) so that no callback keeps the reactor long.  Over random
queues (shapes, time limits, priorities, queues, policies), with running jobs
and frees between passes, an engine whose stopwatch makes every slice stop
after a few steps must send the same responses, in the same order, with the
same R and annotations, as an engine running each pass in one call.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1


def jobspec(nnodes: int, nslots: int, cores: int, duration: float, queue: str | None) -> dict:
    if nnodes:
        res = [
            {
                "type": "node",
                "count": nnodes,
                "exclusive": True,
                "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": cores}]}],
            }
        ]
    else:
        res = [{"type": "slot", "count": nslots, "label": "task", "with": [{"type": "core", "count": cores}]}]
    system: dict = {"duration": duration}
    if queue is not None:
        system["queue"] = queue
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": system},
    }


job = st.tuples(
    st.integers(0, 2),  # whole nodes (0: slots)
    st.integers(1, 4),  # slots
    st.integers(1, 4),  # cores per slot
    st.sampled_from([0.0, 5.0, 10.0, 30.0, 100.0]),  # time limit (0: none)
    st.integers(0, 31),  # priority
    st.sampled_from([None, None, "batch", "debug"]),  # queue
)

policies = st.sampled_from(["fcfs", "easy", "conservative", "hybrid"])


def make(policy: str, sliced: bool) -> Engine:
    g = ResourceGraph.from_rv1(hosts_rv1([f"node{i}" for i in range(4)], 4))
    opts = [f"queue-policy={policy}", "reserve-depth=4" if policy == "hybrid" else "annotate-depth=64"]
    if not sliced:
        return Engine(g, opts)
    ticks = itertools.count()
    return Engine(g, opts, stopwatch=lambda: float(next(ticks)))  # one unit of work per reading


def decisions(responses) -> list:
    out = []
    for r in responses:
        ranks = str(r.resources.ranks) if r.resources is not None else None
        out.append((r.type, r.id, r.start, r.expiration, ranks, r.R, r.annotations, r.note))
    return out


def run(e: Engine, now: float, budget: float | None) -> tuple[list, int]:
    got, slices = [], 0
    while True:
        res = e.schedule(now, budget)
        got += res.responses
        slices += 1
        if not res.more:
            return decisions(got), slices


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=policies,
    jobs=st.lists(job, min_size=1, max_size=40),
    budget=st.integers(1, 5),
    frees=st.lists(st.integers(0, 10**6), max_size=6),
)
def test_a_sliced_pass_decides_exactly_what_an_unsliced_pass_decides(policy, jobs, budget, frees):
    ref, cut = make(policy, False), make(policy, True)
    for i, (nnodes, nslots, cores, duration, prio, queue) in enumerate(jobs, start=1):
        spec = jobspec(nnodes, nslots, cores, duration, queue)
        for e in (ref, cut):
            e.alloc(i, prio, 1, float(i), spec)
    now = 0.0
    for round_ in range(len(frees) + 1):
        want, _ = run(ref, now, None)
        got, _ = run(cut, now, budget)
        assert got == want, f"round {round_}"
        running = sorted(j.id for j in ref.running)
        assert running == sorted(j.id for j in cut.running)
        if round_ < len(frees) and running:
            victim = running[frees[round_] % len(running)]
            now += 1.0
            for e in (ref, cut):
                e.free(victim, None, True)


def test_the_budget_cuts_a_pass_into_several_slices():
    ref, cut = make("easy", False), make("easy", True)
    for i in range(1, 60):
        spec = jobspec(0, 1 + i % 3, 1, 10.0 + i % 5, None)
        for e in (ref, cut):
            e.alloc(i, 16, 1, float(i), spec)
    want, one = run(ref, 0.0, None)
    got, slices = run(cut, 0.0, 2)
    assert one == 1 and slices > 5
    assert got == want
    assert any(d[0] is ResponseType.SUCCESS for d in want) and any(d[0] is ResponseType.ANNOTATE for d in want)


class _Ticks:
    """A stopwatch that advances one unit per reading: ``budget=k`` cuts a pass after about k steps."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_a_pass_resumed_after_a_reservation_came_due_replans():
    """Found by the long model run (conservative): a pass cut short at t=101
    reserved jobs at t=121 (the end of a running job); resumed at t=151 it
    finished and sent ``t_estimate`` 121, a start time already in the past,
    and kept the stale plan.  Resumed once a reservation of its plan is due,
    a pass starts over at the new time."""
    g = ResourceGraph.from_rv1(hosts_rv1([f"node{i}" for i in range(2)], 4))
    e = Engine(g, ["queue-policy=conservative"], stopwatch=_Ticks())
    e.alloc(1, 0, 0, 100.0, jobspec(2, 1, 1, 21.0, None))  # both nodes until t=121
    assert [r.type for r in e.schedule(100.0).responses] == [ResponseType.SUCCESS]
    for jobid in range(2, 8):
        e.alloc(jobid, 0, 0, 101.0, jobspec(1, 1, 1, 10.0, None))
    first = e.schedule(101.0, budget=2)
    assert first.more, "the pass was cut short"
    sent = list(first.responses)
    now = 151.0  # job 1 overran its time limit (its free has not come yet)
    while True:
        r = e.schedule(now, budget=2)
        sent += r.responses
        if not r.more:
            break
        now += 1.0
    estimates = {x.id: x.annotations["sched"].get("t_estimate") for x in sent if x.type is ResponseType.ANNOTATE}
    late = {j: t for j, t in estimates.items() if t is not None and t < 151.0}
    assert not late, f"t_estimate in the past: {late}"
    assert all(s.start >= 151.0 for s in e.planner.reserved())
    e.check_invariants()
