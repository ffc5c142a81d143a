"""Reservations repaired from the log of gains give the answers of a full search.

A reservation remembers the log position at which nothing fitted its job
before it (``Planner.searched``).  Later, ``Timeline.unchanged_for`` keeps
it when no gain since could open an earlier window, and
``Planner.earliest_bits(since=...)`` searches only the windows that gains
overlap.  Hand-built cases first (an early end, a far cancel), then random
plans where every repaired answer is checked against a search of every
candidate time.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.planner import Planner
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request


def plan(p, g, jobid, req, now, d):
    """Start or reserve ``jobid`` where the planner says, as a policy does."""
    got = p.earliest_bits(req, now, d, "low")
    t, rs, bits = got.start, got.placement.resources, got.placement.bits
    if t == now:
        rs = p.resolve(got.placement)
        g.allocate(jobid, rs)
        p.add_running(jobid, rs, now, now + d, bits)
    else:
        p.reserve(jobid, rs, t, t + d, bits)
        p.searched(jobid)
    return t, bits


def nodes_of(p, bits):
    return sorted(p.codec.decode(bits).ranks)


def test_an_early_end_moves_the_job_that_fits_in_what_it_freed():
    g = nodes_graph(4, 1)
    p = Planner(g)
    a, b = node_request(2, 100.0), node_request(2, 200.0)
    assert plan(p, g, 1, a, 0.0, 100.0)[0] == 0.0  # A: 2 nodes until 100
    assert plan(p, g, 2, b, 0.0, 200.0)[0] == 0.0  # B: the other 2 until 200
    j, k, m = node_request(4, 50.0), node_request(2, 50.0), node_request(1, 500.0)
    assert plan(p, g, 3, j, 0.0, 50.0)[0] == 200.0  # J: the whole machine after B
    tk, kbits = plan(p, g, 4, k, 0.0, 50.0)
    assert tk == 100.0 and nodes_of(p, kbits) == nodes_of(p, p.span(1).bits)  # K: on A's nodes after A
    assert plan(p, g, 5, m, 0.0, 500.0)[0] == 250.0  # L: after J
    # A ends at 50 instead of 100: its nodes are free over [50, 100).
    p.set_now(50.0)
    p.remove(1)
    g.release(1)
    for jobid, req, d, moved in ((3, j, 50.0, None), (4, k, 50.0, 50.0), (5, m, 500.0, None)):
        assert not p.unchanged_for(jobid, d, 50.0)  # every window from now may overlap the gain
        span = p.remove(jobid)
        got = p.earliest_bits(req, 50.0, d, "low", before=span.start, since=span.seq, own=jobid)
        full = p.earliest_bits(req, 50.0, d, "low", before=span.start)
        assert got == full
        assert (None if got is None else got.start) == moved
        if got is None:
            p.reserve(jobid, span.resources, span.start, span.end, span.bits)
            p.searched(jobid)
        else:  # K starts now, on A's nodes
            rs = p.resolve(got.placement)
            g.allocate(jobid, rs)
            p.add_running(jobid, rs, 50.0, 100.0, got.placement.bits)
    # K's start freed [100, 150) after J was looked at: J is looked at again
    # (and still cannot move: B holds its nodes until 200); L, looked at
    # after it, stays as it is.
    assert p.unchanged_for(5, 500.0, 50.0)
    assert not p.unchanged_for(3, 50.0, 50.0)
    span = p.remove(3)
    assert p.earliest_bits(j, 50.0, 50.0, "low", before=200.0, since=span.seq, own=3) is None


def test_a_gain_after_a_reservation_leaves_it_untouched():
    g = nodes_graph(4, 1)
    p = Planner(g)
    plan(p, g, 1, node_request(4, 100.0), 0.0, 100.0)  # the whole machine until 100
    assert plan(p, g, 2, node_request(2, 50.0), 0.0, 50.0)[0] == 100.0
    assert plan(p, g, 3, node_request(4, 1000.0), 0.0, 1000.0)[0] == 150.0
    assert plan(p, g, 4, node_request(1, 10.0), 0.0, 10.0)[0] == 100.0  # beside job 2
    assert plan(p, g, 5, node_request(1, 60.0), 0.0, 60.0)[0] == 1150.0  # 60 s do not fit before 150
    p.remove(3)  # cancelled: [150, 1150) freed
    # Windows of jobs 4 and 2 that start before their reservations end by
    # 150: they keep them untouched, and go last in the plan's order.
    assert p.unchanged_for(4, 10.0, 0.0) and p.unchanged_for(2, 50.0, 0.0)
    assert [s.jobid for s in p.reserved()] == [5, 4, 2]
    assert not p.unchanged_for(5, 60.0, 0.0)
    span = p.remove(5)
    got = p.earliest_bits(node_request(1, 60.0), 0.0, 60.0, "low", before=1150.0, since=span.seq, own=5)
    assert got is not None and got.start == 100.0


def test_a_gain_that_starts_inside_the_reserved_window():
    """J waits for A's nodes because X's reservation, from 120, cuts every
    window on the other nodes; X is cancelled: a gain that starts after J's
    reservation does but before J's window ends lets J move earlier."""
    g = nodes_graph(4, 1)
    p = Planner(g)
    low, high = p.codec.ranks_mask(IdSet.of([0, 1])), p.codec.ranks_mask(IdSet.of([2, 3]))
    p.add_running(1, None, 0.0, 100.0, low)  # A
    p.add_running(2, None, 0.0, 50.0, high)  # B
    p.reserve(3, None, 120.0, 300.0, high)  # X
    j = node_request(2, 100.0)
    t, bits = plan(p, g, 4, j, 0.0, 100.0)
    assert t == 100.0 and bits == low
    p.remove(3)
    assert not p.unchanged_for(4, 100.0, 0.0)
    span = p.remove(4)
    got = p.earliest_bits(j, 0.0, 100.0, "low", before=span.start, since=span.seq, own=4)
    assert got is not None and (got.start, got.placement.bits) == (50.0, high)


def test_own_gain_and_resources_down():
    g = nodes_graph(4, 1)
    p = Planner(g)
    plan(p, g, 1, node_request(4, 100.0), 0.0, 100.0)
    assert plan(p, g, 2, node_request(2, 50.0), 0.0, 50.0)[0] == 100.0
    span = p.remove(2)  # re-planned at the same place: its own gain does not count
    p.reserve(2, span.resources, span.start, span.end, span.bits)
    p.searched(2)
    assert p.unchanged_for(2, 50.0, 0.0)
    assert not p.unchanged_for(2, 60.0, 0.0)  # not the span its job plans with
    g.set_down(IdSet.of(nodes_of(p, span.bits)[:1]))
    assert not p.unchanged_for(2, 50.0, 0.0)  # its place is no longer up: search


def test_a_search_with_the_reservation_set_aside():
    """The search that leaves a reservation in the plan, reading the plan
    without it, answers as removing it and searching does: J (2 nodes)
    moves into what A's early end freed, on A's nodes, over its own old place; L (4 nodes) finds
    nothing earlier and keeps its place, last in the plan's order."""
    g = nodes_graph(4, 1)
    p = Planner(g)
    a, b = node_request(2, 100.0), node_request(2, 200.0)
    plan(p, g, 1, a, 0.0, 100.0)  # A: 2 nodes until 100
    plan(p, g, 2, b, 0.0, 200.0)  # B: the other 2 until 200
    j, m = node_request(2, 70.0), node_request(4, 30.0)
    assert plan(p, g, 3, j, 0.0, 70.0)[0] == 100.0  # J: on A's nodes after A, until 170
    assert plan(p, g, 4, m, 0.0, 30.0)[0] == 200.0  # L: the whole machine after B
    p.set_now(40.0)
    p.remove(1)  # A ends at 40: [40, 100) freed on its nodes
    g.release(1)
    assert p.can_search_aside(3, 70.0, 40.0) and p.can_search_aside(4, 30.0, 40.0)
    # [40, 110) meets its own place: only set aside is it free
    got = p.earliest_bits(j, 40.0, 70.0, "low", before=100.0, since=p.span(3).seq, own=3, aside=True)
    assert got is not None and got.start == 40.0 and got.placement.bits == p.span(3).bits
    assert p.earliest_bits(m, 40.0, 30.0, "low", before=200.0, since=p.span(4).seq, own=4, aside=True) is None
    assert p.earliest_bits(m, 40.0, 30.0, "low", before=200.0, own=4, aside=True) is None  # the full search too
    p.keep(4)
    assert [s.jobid for s in p.reserved()] == [3, 4]
    span = p.remove(3)  # what the aside search stood for
    assert p.earliest_bits(j, 40.0, 70.0, "low", before=100.0) == got
    p.reserve(3, span.resources, span.start, span.end, span.bits)
    # When the answer could differ from a search after removing it, the
    # planner says so: not the span its job plans with, a place gone down,
    # a blocked window.
    assert not p.can_search_aside(3, 60.0, 40.0)
    assert not p.can_search_aside(2, 200.0, 40.0)  # running
    p.block("w", p.codec.ranks_mask(IdSet.of([3])), 500.0, 600.0)
    assert not p.can_search_aside(3, 70.0, 40.0)
    p.unblock("w")
    assert p.can_search_aside(3, 70.0, 40.0)
    g.set_down(IdSet.of(nodes_of(p, span.bits)[:1]))
    assert not p.can_search_aside(3, 70.0, 40.0)


def cores(n):
    slot = ResourceRequest("slot", Count.fixed(n), (ResourceRequest("core", Count.fixed(1)),), label="task")
    return Request((slot,))


requests = st.sampled_from([("cores", 1), ("cores", 3), ("nodes", 1), ("nodes", 2), ("nodes", 4)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            requests,
            st.sampled_from([1.0, 5.0, 20.0, math.inf]),  # duration
            st.sampled_from([0.0, 0.0, 2.0, 6.0]),  # time step
            st.sampled_from(["none", "end", "end", "cancel"]),
            st.integers(min_value=0, max_value=10**6),
        ),
        max_size=40,
    )
)
def test_repaired_searches_equal_full_ones(seq):
    """Random plans on 4 nodes of 2 cores: jobs start or are reserved where
    the planner says, running jobs end early, reservations are cancelled;
    after each step every reservation is re-planned as the conservative
    policy does, and the repaired search (and the decision to keep a
    reservation without searching, and the search with the reservation set
    aside but left in the plan) agrees with a search of every candidate
    time."""
    g = nodes_graph(4, 2)
    p = Planner(g)
    now = 0.0
    jobs: dict[int, tuple[object, float]] = {}
    for jobid, ((kind, n), duration, step, event, pick) in enumerate(seq, 1):
        now += step
        p.set_now(now)
        spans = sorted(p.spans(), key=lambda s: s.jobid)
        if event != "none" and spans:
            victim = spans[pick % len(spans)]
            if event == "end" and victim.running:
                p.remove(victim.jobid)
                g.release(victim.jobid)
            elif event == "cancel" and not victim.running:
                p.remove(victim.jobid)
        req = cores(n) if kind == "cores" else node_request(n, duration)
        if p.earliest_bits(req, now, duration, "low") is not None:
            jobs[jobid] = (req, duration)
            plan(p, g, jobid, req, now, duration)
        for span in list(p.reserved()):
            req, d = jobs[span.jobid]
            if span.start <= now:  # its time came: out of the plan (a policy starts it)
                p.remove(span.jobid)
                continue
            kept = p.unchanged_for(span.jobid, d, now)
            aside = "not asked"
            if p.can_search_aside(span.jobid, d, now):  # searched with its span left in the plan
                since, own = span.seq, span.jobid
                aside = p.earliest_bits(req, now, d, "low", before=span.start, since=since, own=own, aside=True)
            old = p.remove(span.jobid)
            full = p.earliest_bits(req, now, d, "low", before=old.start)
            if kept:
                assert full is None
            got = p.earliest_bits(req, now, d, "low", before=old.start, since=old.seq, own=span.jobid)
            assert got == full
            if aside != "not asked":
                assert aside == full
            if got is None:
                p.reserve(span.jobid, old.resources, old.start, old.end, old.bits)
            else:
                t, rs, bits = got.start, got.placement.resources, got.placement.bits
                if t == now:
                    rs = p.resolve(got.placement)
                    g.allocate(span.jobid, rs)
                    p.add_running(span.jobid, rs, now, now + d, bits)
                    continue
                p.reserve(span.jobid, rs, t, t + d, bits)
            p.searched(span.jobid)
