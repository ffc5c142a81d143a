"""Counted reservations (``reservation-nodes=counted``) against textbook
conservative backfilling.

The oracle below is an independent node-count simulation of Mu'alem and
Feitelson's conservative backfilling (no planner, no matcher, no node
names): a profile of free nodes over time, every pending job given the
earliest start where enough nodes are free throughout its walltime, in queue
order, and, when a job ended (compression), each reservation in queue order
taken out and put back at the earliest start found (never later than it
was: its old place is still there).  An arrival alone moves nothing.
With counted reservations the engine must start every job when the oracle
does; pinned reservations may start some later.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.planner import Planner
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .test_engine_rfc27 import jobspec
from .test_policy_conservative import assert_no_start_after_first_estimate, busy_workloads, workloads
from .test_policy_textbook import textbook


def _earliest(spans, nodes: int, now: float, n: int, d: float) -> float:
    """The earliest ``t >= now`` with ``n`` of ``nodes`` free throughout
    ``[t, t + d)`` around ``spans`` ``(start, end, n)``."""
    for t in sorted({now, *(e for _, e, _ in spans if e > now)}):
        edges = sorted({t, *(x for s, e, _ in spans for x in (s, e) if t < x < t + d)})
        if all(sum(k for s, e, k in spans if s <= x < e) + n <= nodes for x in edges):
            return t
    raise AssertionError("unreachable: every span ends")


def textbook_conservative(jobs, nodes: int) -> dict[int, float]:
    """jobs: (id, submit, res, walltime, runtime) -> {id: start}."""
    jobs = sorted(jobs, key=lambda j: (j[1], j[0]))
    running: list[tuple[float, float, int, int]] = []  # (actual end, expected end, res, id)
    reserved: dict[int, float] = {}  # id -> start, in queue order
    queue: list = []
    start: dict[int, float] = {}
    i = 0
    while i < len(jobs) or queue or running:
        t = min([r[0] for r in running] + ([jobs[i][1]] if i < len(jobs) else []))
        compress = any(r[0] <= t for r in running)  # a job ended: compression
        running = [r for r in running if r[0] > t]
        while i < len(jobs) and jobs[i][1] <= t:
            queue.append(jobs[i])
            i += 1
        for j in list(queue):
            if not compress and j[0] in reserved:
                continue  # only arrivals: nothing can move earlier
            spans = [(t, r[1], r[2]) for r in running]
            spans += [(s, s + q[3], q[2]) for q in queue if q is not j and (s := reserved.get(q[0])) is not None]
            s = _earliest(spans, nodes, t, j[2], j[3])
            if j[0] in reserved:
                assert s <= reserved[j[0]] + 1e-9
            if s <= t:
                queue.remove(j)
                reserved.pop(j[0], None)
                start[j[0]] = t
                running.append((t + j[4], t + j[3], j[2], j[0]))
            else:
                reserved[j[0]] = s
    return start


def _replay(nodes, jobs, reservation_nodes):
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    opts = {"queue-policy": "conservative", "reservation-nodes": reservation_nodes}
    return replay(w, nodes_graph(nodes), opts, check=lambda e: e.check_invariants())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads())
def test_counted_conservative_equals_textbook(wl):
    nodes, jobs = wl
    r = _replay(nodes, jobs, "counted")
    assert r.starts() == textbook_conservative(jobs, nodes)
    assert_no_start_after_first_estimate(r.records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(full_walltime=False))
def test_counted_conservative_equals_textbook_small(wl):
    nodes, jobs = wl
    assert _replay(nodes, jobs, "counted").starts() == textbook_conservative(jobs, nodes)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.sampled_from(["fcfs", "easy"]))
def test_counted_fcfs_and_easy_equal_textbook(wl, policy):
    """fcfs forecasts and EASY's head reservation are counted too: the
    starts are textbook FCFS and EASY's (extra nodes by count)."""
    nodes, jobs = wl
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    opts = {"queue-policy": policy, "reservation-nodes": "counted"}
    r = replay(w, nodes_graph(nodes), opts, check=lambda e: e.check_invariants())
    assert r.starts() == textbook(jobs, nodes, easy=policy == "easy")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.integers(1, 4))
def test_counted_hybrid_runs_every_job_and_keeps_the_invariants(wl, depth):
    nodes, jobs = wl
    w = Workload([WorkloadJob(i, str(i), s, node_request(r, wl), wl, run, r) for i, s, r, wl, run in jobs], nodes)
    opts = {"queue-policy": "hybrid", "reserve-depth": depth, "reservation-nodes": "counted"}
    r = replay(w, nodes_graph(nodes), opts, check=lambda e: e.check_invariants())
    assert all(rec.start is not None for rec in r.records)


def test_pinned_nodes_can_start_a_job_later_than_the_textbook():
    """Found by a random search: pinned reservations leave enough nodes
    free in each segment but not the same ones throughout, so job 2 starts
    at 11 instead of 10; counted ones start it when the textbook does."""
    nodes, jobs = PINNED_EXAMPLE
    book = textbook_conservative(jobs, nodes)
    counted = _replay(nodes, jobs, "counted").starts()
    pinned = _replay(nodes, jobs, "pinned").starts()
    assert counted == book
    assert any(pinned[j] > book[j] for j in book)


# nodes, (id, submit, nodes, walltime, runtime)
PINNED_EXAMPLE: tuple[int, list[tuple[int, float, int, float, float]]] = (
    5,
    [
        (0, 1.0, 1, 12.0, 6.0),
        (1, 7.0, 3, 12.0, 1.0),
        (2, 10.0, 2, 10.0, 10.0),
        (3, 5.0, 3, 6.0, 6.0),
        (4, 9.0, 3, 6.0, 4.0),
    ],
)


def test_a_count_that_fits_starts_where_pins_would_not():
    """Two nodes; a one-node reservation over [1, 11), another over [11,
    21), on different nodes.  A one-node job of 20 s fits at 0 by the counts
    (one node free in each segment) but on no single node as pinned: counted,
    it is found at 0; pinned, at 11.  Counted reservations hold no bits."""
    for counted, want in ((False, 11.0), (True, 0.0)):
        p = Planner(nodes_graph(2), counted=counted)
        req = node_request(1, 10.0)
        a = p.earliest_bits(req, 0.0, 10.0, not_before=1.0)
        p.reserve(1, None, 1.0, 11.0, a.placement.bits)
        other = p.match_bits(req, p.available_bits(11.0, 21.0) & ~a.placement.bits, "first")
        p.reserve(2, None, 11.0, 21.0, other.bits)
        assert p.ncounted == (2 if counted else 0)
        found = p.earliest_bits(node_request(1, 20.0), 0.0, 20.0)
        assert found.start == want
        if counted:
            assert p.available_bits(0.0, 30.0) == p.pool_bits()
            assert p.counts_allow(0.0, 30.0, 1) and not p.counts_allow(0.0, 30.0, 2)
            p.reserve(3, None, 0.0, 20.0, found.placement.bits)
            assert not p.counts_allow(1.0, 2.0, 1) and p.counts_allow(21.0, 22.0, 2)
            assert p.earliest_bits(node_request(1, 5.0), 0.0, 5.0).start == 20.0


def test_a_pinned_reservation_set_aside_leaves_its_nodes_to_the_counts():
    """Found by the mixed-workload test: a job of one core with a pinned
    reservation, searched with it set aside, was refused every earlier start
    because its own core still counted as taken when the counted
    reservations' whole nodes were counted (``counts_hold``); it kept a
    reservation that passed with no job ending then, and never started.
    Contract: a search aside gives what taking the reservation out and
    searching gives."""
    p = Planner(nodes_graph(2, cores=2), counted=True)
    busy = p.match_bits(node_request(1, 5.0), p.available_bits(0.0, 5.0), "first")
    p.add_running(1, None, 0.0, 5.0, busy.bits)  # one node busy up to 5
    counted = p.earliest_bits(node_request(1, 10.0), 0.0, 10.0, not_before=10.0)
    p.reserve(2, None, 10.0, 20.0, counted.placement.bits)  # one whole node over [10, 20)
    core = parse_jobspec(jobspec(cores=1, duration=20.0))
    pinned = p.match_bits(core, busy.bits, "first")
    p.reserve(3, None, 10.0, 30.0, pinned.bits)  # a core of the busy node from 10
    assert p.ncounted == 1
    aside = p.earliest_bits(core, 0.0, 20.0, before=10.0, own=3, aside=True)
    span = p.remove(3)
    searched = p.earliest_bits(core, 0.0, 20.0, before=10.0)
    assert searched is not None and searched.start == 0.0  # on the other node: the busy one is whole at 10
    assert aside is not None and (aside.start, aside.placement.bits) == (searched.start, searched.placement.bits)
    p.reserve(3, None, span.start, span.end, span.bits)
    assert p.counts_hold(searched.placement.bits, 0.0, 20.0, aside=p.span(3))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6),
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 30), st.integers(1, 20), st.integers(1, 6)),
            st.tuples(st.just("remove"), st.integers(0, 30)),
            st.tuples(st.just("now"), st.integers(0, 40)),
        ),
        max_size=25,
    ),
)
def test_counted_reservations_are_counted_over_time(nodes, ops):
    """The timeline's count of what counted reservations promise, through
    reservations added and removed and the present moving on (boundaries
    folded away), against a sum over the reservations at each instant."""
    p = Planner(nodes_graph(nodes), counted=True)
    bits = {k: p.match_bits(node_request(k, 1.0), p.pool_bits(), "first").bits for k in range(1, nodes + 1)}
    spans: dict[int, tuple[float, float, int]] = {}
    now = 0.0
    for i, op in enumerate(ops):
        if op[0] == "add":
            _, s, d, k = op
            k = min(k, nodes)
            s = max(float(s), now)
            spans[i] = (s, s + d, k)
            p.reserve(i, None, s, s + d, bits[k])
        elif op[0] == "remove" and spans:
            jid = sorted(spans)[op[1] % len(spans)]
            del spans[jid]
            p.remove(jid)
        elif op[0] == "now":
            now = max(now, float(op[1]))
            p.set_now(now)
    for t in range(int(now), 60):
        free = nodes - sum(k for s, e, k in spans.values() if s <= t < e)
        assert p.counts_allow(float(t), t + 0.5, free)
        assert not p.counts_allow(float(t), t + 0.5, free + 1)


def test_options_reject_an_unknown_reservation_nodes_value():
    from fluxsched_py.engine.options import EngineOptions
    from fluxsched_py.engine.states import EngineError

    assert EngineOptions.parse({"reservation-nodes": "counted"}).reservation_nodes == "counted"
    assert EngineOptions.parse(None).reservation_nodes == "pinned"
    with pytest.raises(EngineError, match=r"reservation-nodes='floating': choose from pinned, counted"):
        EngineOptions.parse({"reservation-nodes": "floating"})


@st.composite
def mixed_workloads(draw):
    """Whole-node jobs and jobs of a few cores on 4-core nodes."""
    nodes = draw(st.integers(2, 6))
    jobs = []
    for i in range(draw(st.integers(5, 30))):
        wall = draw(st.integers(5, 60))
        whole = draw(st.booleans())
        size = draw(st.integers(1, nodes)) if whole else draw(st.integers(1, 4))
        jobs.append((i, float(draw(st.integers(0, 100))), whole, size, float(wall), float(draw(st.integers(1, wall)))))
    return nodes, jobs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_workloads(), st.sampled_from(["conservative", "easy", "fcfs"]))
def test_counted_with_jobs_of_part_of_a_node_keeps_the_invariants(wl, policy):
    """Jobs of a few cores hold pinned reservations and must leave counted
    ones their counts: nothing is allocated twice (checked after every
    pass) and every job runs."""
    nodes, jobs = wl
    wjobs = []
    for i, submit, whole, size, wall, run in jobs:
        spec = jobspec(nnodes=size, cores=4, duration=wall) if whole else jobspec(cores=size, duration=wall)
        wjobs.append(WorkloadJob(i, str(i), submit, parse_jobspec(spec), wall, run, size if whole else 1))
    w = Workload(wjobs, nodes)
    r = replay(
        w,
        nodes_graph(nodes, cores=4),
        {"queue-policy": policy, "reservation-nodes": "counted"},
        check=lambda e: e.check_invariants(),
    )
    assert all(rec.start is not None for rec in r.records)


def test_a_placement_refused_for_counts_is_not_taken_as_a_failing_set():
    """Found by the test above: job 11 (two whole nodes) tried [8, 13), where
    job 3's counted reservation is, then [13, 18) with the same free set; a
    set refused for the counts at one start was taken as failing at every
    start, and job 11 kept a reservation at 14, when no job ends."""
    jobs = [(0, 1.0, False, 1, 5.0, 5.0), (1, 0.0, False, 1, 5.0, 1.0), (2, 2.0, False, 1, 5.0, 1.0)]
    jobs += [(3, 2.0, True, 2, 5.0, 5.0), (4, 0.0, False, 1, 5.0, 1.0), (5, 0.0, False, 1, 5.0, 1.0)]
    jobs += [(6, 0.0, False, 1, 5.0, 1.0), (7, 0.0, False, 1, 5.0, 2.0), (8, 0.0, True, 2, 7.0, 1.0)]
    jobs += [(9, 0.0, False, 1, 5.0, 1.0), (10, 0.0, False, 1, 5.0, 1.0), (11, 1.0, True, 2, 5.0, 1.0)]
    wjobs = []
    for i, submit, whole, size, wall, run in jobs:
        spec = jobspec(nnodes=size, cores=4, duration=wall) if whole else jobspec(cores=size, duration=wall)
        wjobs.append(WorkloadJob(i, str(i), submit, parse_jobspec(spec), wall, run, size if whole else 1))
    opts = {"queue-policy": "conservative", "reservation-nodes": "counted"}
    r = replay(Workload(wjobs, 2), nodes_graph(2, cores=4), opts, check=lambda e: e.check_invariants())
    assert {rec.job.id: rec.start for rec in r.records}[11] == 13.0
