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
from fluxsched_py.replay.platform import nodes_R
from fluxsched_py.resource import ResourceGraph


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
    g = ResourceGraph.from_rv1(nodes_R([f"node{i}" for i in range(4)], 4))
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
