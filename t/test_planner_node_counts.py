"""Searches that read busy-node counts instead of sets.

On one-unit nodes, a search for whole nodes where every planned span has
started by the start it looks from (a queue planned in order, or running
jobs only) reads, per segment, how many node vertices its spans hold
(``Timeline._busy_nodes``) rather than the segment's set.  The oracle is a
brute-force count over the spans this test placed: the earliest start from
``not_before`` on (at ``not_before`` or at a boundary) where ``n`` nodes are
whole over the whole window.  Spans holding a node's unit without its vertex
(``partial``) make the counts wrong, so the search must then read the sets;
they are mixed in.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.planner import Planner
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request


def _oracle(held, nodes, n, d, not_before, horizon):
    """The earliest start t >= not_before where, at every instant of [t, t + d),
    at least n nodes are neither held by a span nor have their unit held."""
    points = sorted({not_before, *(x for s, e, _ in held for x in (s, e) if x > not_before)})
    for t in points:
        checks = sorted({t, *(x for s, e, _ in held for x in (s, e) if t < x < t + d)})
        if all(nodes - len(set().union(*([v for s, e, v in held if s <= c < e] or [set()]))) >= n for c in checks):
            return t
        if t > horizon:
            break
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 6),
    st.lists(
        st.tuples(
            st.sampled_from(["running", "reserved", "partial"]),
            st.integers(0, 20),  # start (after the present, for reservations)
            st.integers(1, 30),  # duration
            st.integers(1, 6),  # nodes
        ),
        max_size=12,
    ),
    st.integers(0, 15),
    st.integers(1, 6),
    st.integers(1, 40),
)
def test_whole_node_searches_from_the_last_start_agree_with_counting(nodes, adds, now, n, d):
    p = Planner(nodes_graph(nodes))
    codec = p.codec
    vertices = [v for v in range(codec.node_vertex_mask.bit_length()) if codec.node_vertex_mask >> v & 1]
    held: list[tuple[float, float, set[int]]] = []  # (start, end, vertices busy there)
    for jobid, (kind, s, dur, k) in enumerate(adds):
        start = float(s) if kind == "reserved" else float(min(s, now))
        end = max(start + dur, now + 1.0)
        busy = set().union(*([v for a, b, v in held if a < end and start < b] or [set()]))
        free = [v for v in vertices if v not in busy][: min(k, nodes)]
        if not free:
            continue
        if kind == "partial":  # a node's unit without its vertex
            v = free[0]
            p.add_running(jobid, None, start, end, 1 << (v + codec.unit_shift))
            held.append((start, end, {v}))
            continue
        mask = 0
        for v in free:
            mask |= 1 << v
        bits = codec.nodes_bits(mask)
        if kind == "running":
            p.add_running(jobid, None, start, end, bits)
        else:
            p.reserve(jobid, None, start, end, bits)
        held.append((start, end, set(free)))
    p.set_now(float(now))
    n = min(n, nodes)
    not_before = max([float(now)] + [s for s, _, _ in held])  # every span has started by then
    found = p.earliest_bits(node_request(n, float(d)), float(now), float(d), not_before=not_before)
    want = _oracle(held, nodes, n, d, not_before, max([not_before] + [e for _, e, _ in held]))
    assert (found.start if found is not None else None) == want
    if found is not None:
        taken = {v for v in vertices if found.placement.bits >> v & 1}
        assert len(taken) == n
        assert not any(taken & v for s, e, v in held if s < found.start + d and found.start < e)
