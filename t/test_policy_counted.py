"""Counted reservations (``reservation-nodes=counted``) against textbook
conservative backfilling.

The oracle below is an independent node-count simulation of Mu'alem and
Feitelson's conservative backfilling (no planner, no matcher, no node
names): a profile of free nodes over time, every pending job given the
earliest start where enough nodes are free throughout its walltime, in queue
order, and, when a job ended (compression), each reservation in queue order
taken out and put back at the earliest start found (never later than it
was: its old place is still there).  An arrival alone moves nothing.  With counted reservations the engine must start every job when
the oracle does; pinned reservations may start some later, never earlier.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluxsched_py.planner import Planner
from fluxsched_py.planner.repack import Held, repack
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .test_policy_conservative import assert_no_start_after_first_estimate, busy_workloads, workloads


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
    [(0, 1.0, 1, 12.0, 6.0), (1, 7.0, 3, 12.0, 1.0), (2, 10.0, 2, 10.0, 10.0), (3, 5.0, 3, 6.0, 6.0), (4, 9.0, 3, 6.0, 4.0)],
)


def test_a_count_that_fits_renames_the_reservations_nodes():
    """Two nodes; reservation 1 on one node over [1, 11), reservation 2 on
    the other over [11, 21).  A one-node job of 20 s fits at 0 by the counts
    (one node free in each segment) but on no single node as pinned: counted,
    it starts at 0 and reservation 1 moves to the other node; pinned, it waits."""
    for counted, want in ((False, 11.0), (True, 0.0)):
        p = Planner(nodes_graph(2), counted=counted)
        req = node_request(1, 10.0)
        a = p.earliest_bits(req, 0.0, 10.0, not_before=1.0)
        p.reserve(1, None, 1.0, 11.0, a.placement.bits)
        other = p.match_bits(req, p.available_bits(11.0, 21.0) & ~a.placement.bits, "first")
        p.reserve(2, None, 11.0, 21.0, other.bits)
        found = p.earliest_bits(node_request(1, 20.0), 0.0, 20.0)
        assert found.start == want
        if counted:
            assert p.repacks == 1
            assert p.span(1).bits == other.bits  # moved onto reservation 2's node, before it
            assert p.span(2).bits == other.bits
            assert found.placement.bits == a.placement.bits
            assert not p.span(1).bits & found.placement.bits


def _counts_allow(nodes, items):
    """At no instant do ``items`` ``(start, end, n)`` need more than ``nodes``."""
    return all(sum(k for s, e, k in items if s <= t < e) <= nodes for t in {s for s, _, _ in items})


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(st.tuples(st.integers(0, 20), st.integers(1, 15), st.integers(1, 8)), max_size=9),
    st.tuples(st.integers(0, 20), st.integers(1, 15), st.integers(1, 8)),
    st.randoms(use_true_random=False),
)
def test_repack_finds_room_exactly_when_the_counts_allow(nodes, items, new, rnd):
    """:func:`repack` on node masks (one bit per node, no running jobs),
    the reservations first given nodes at random (a valid plan): it succeeds
    exactly when no instant holds more than ``nodes``, and then gives items
    that overlap in time disjoint nodes, each its own count."""
    pool = (1 << nodes) - 1
    items = sorted(((float(s), float(s + d), k) for s, d, k in items if k <= nodes), key=lambda x: x[0])
    assume(_counts_allow(nodes, items) and new[2] <= nodes)
    given_bits: list[int] = []
    for s, _, k in items:  # a random valid plan, in order of start
        busy = 0
        for (s2, e2, _), b in zip(items, given_bits):
            if s2 <= s < e2:
                busy |= b
        free = [x for x in range(nodes) if not busy >> x & 1]
        given_bits.append(sum(1 << x for x in rnd.sample(free, k)))
    held = [Held(i, s, e, k, b) for i, ((s, e, k), b) in enumerate(zip(items, given_bits))]

    def busy_at(x):
        out = 0
        for h in held:
            if h.start <= x < h.end:
                out |= h.bits
        return out

    def pick(free, n):
        if free.bit_count() < n:
            return None
        out = 0
        for _ in range(n):
            b = free & -free
            free ^= b
            out |= b
        return out

    window = (float(new[0]), float(new[0] + new[1]))
    out = repack(pool, busy_at, held, window, lambda free: pick(free, new[2]), pick)
    assert (out is not None) == _counts_allow(nodes, [*items, (*window, new[2])])
    if out is None:
        return
    moved, mine = out
    got = [(h.start, h.end, moved.get(h.jobid, h.bits), h.nodes) for h in held] + [(*window, mine, new[2])]
    for s, e, b, k in got:
        assert b.bit_count() == k and b & pool == b
    for x in range(len(got)):
        for y in range(x + 1, len(got)):
            (s1, e1, b1, _), (s2, e2, b2, _) = got[x], got[y]
            if s1 < e2 and s2 < e1:
                assert not b1 & b2, (got[x], got[y])


def test_options_reject_an_unknown_reservation_nodes_value():
    from fluxsched_py.engine.states import EngineError
    from fluxsched_py.engine.options import EngineOptions

    assert EngineOptions.parse({"reservation-nodes": "counted"}).reservation_nodes == "counted"
    assert EngineOptions.parse(None).reservation_nodes == "pinned"
    with pytest.raises(EngineError, match=r"reservation-nodes='floating': choose from pinned, counted"):
        EngineOptions.parse({"reservation-nodes": "floating"})
