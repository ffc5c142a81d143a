"""The sliding window's failing-suffix drop, against brute force.

``Planner.earliest_bits`` slides a window over the plan's segments; when a
whole-node request does not fit a window, ``_WindowUnion.drop_failing``
finds the longest front of the window whose last item starts a suffix that
is already short of nodes, and the search skips every start time in that
front.  First the window alone, on random bit sets, against unions computed
item by item; then whole-node searches on random plans against a scan of
every start time with ``Timeline.available_bits`` (no search code).
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.planner import Planner
from fluxsched_py.planner.search import _WindowUnion
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request


def union(items: list[int]) -> int:
    out = 0
    for x in items:
        out |= x
    return out


@pytest.mark.parametrize("seed", range(40))
def test_drop_failing_drops_exactly_the_fronts_of_failing_suffixes(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.choice([6, 10, 16])
    need = rng.randint(1, width // 2)

    def fails(busy: int) -> bool:
        return width - bin(busy).count("1") < need

    window, items = _WindowUnion(), []
    for _ in range(60):
        op = rng.random()
        if op < 0.55 or not items:
            x = rng.getrandbits(width) & rng.getrandbits(width)
            window.push(x)
            items.append(x)
        elif op < 0.8:
            window.pop()
            items.pop(0)
        else:
            failing = [p for p in range(len(items)) if fails(union(items[p:]))]
            expect = max(failing) + 1 if failing else 0
            assert window.drop_failing(fails) == expect
            del items[:expect]
        assert window.value() == union(items)


def test_a_window_that_does_not_fail_is_left_whole() -> None:
    window = _WindowUnion()
    for x in (0b0001, 0b0010, 0b0100):
        window.push(x)
    assert window.drop_failing(lambda busy: bin(busy).count("1") > 3) == 0
    assert window.value() == 0b0111
    window.pop()  # the front is now suffix aggregates
    assert window.drop_failing(lambda busy: busy & 0b0010 != 0) == 1  # only suffixes from 0b0010 fail
    assert window.value() == 0b0100
    assert window.drop_failing(lambda busy: busy != 0) == 1  # the last item alone fails
    assert window.value() == 0


def pinned(p: Planner, rng: random.Random, t0: float, t1: float, k: int) -> int:
    """The flat bits of ``k`` random whole nodes free over ``[t0, t1)``, or 0."""
    free = p.codec.whole_nodes(p.available_bits(t0, t1))
    nodes = [i for i in range(free.bit_length()) if free >> i & 1]
    if len(nodes) < k:
        return 0
    return p.codec.nodes_bits(sum(1 << i for i in rng.sample(nodes, k)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["low", "high", "first"]), st.sampled_from([1, 2]))
def test_whole_node_searches_equal_a_scan_of_every_start(seed: int, policy: str, cores: int) -> None:
    """Random plans on 8 nodes of one core (whose flat layout puts the
    units at a fixed shift from their node, read by a cheaper count) or
    two, built without the search: jobs
    running or reserved on random free nodes (so a window often has enough
    free nodes in each segment but not the same ones throughout), early
    ends.  Each search's start is the first start time (now, or a span's
    start or end) at which the plan leaves enough whole nodes free for the
    whole duration, found by a scan of ``available_bits``; and its
    placement is free over its window.  The same for a reservation's search
    for an earlier place with it set aside (``aside``)."""
    rng = random.Random(seed)
    g = nodes_graph(8, cores)
    p = Planner(g)
    assert (p.codec.unit_shift is not None) == (cores == 1)
    now = 0.0
    for jobid in range(1, 40):
        now += rng.choice([0.0, 0.0, 1.0, 3.0])
        p.set_now(now)
        for s in [s for s in p.reserved() if s.start <= now]:
            p.remove(s.jobid)  # its time came: out of the plan
        running = [s for s in p.spans() if s.running]
        if running and rng.random() < 0.3:
            victim = rng.choice(running)
            p.remove(victim.jobid)
            g.release(victim.jobid)
        k, d = rng.randint(1, 4), rng.choice([1.0, 2.0, 5.0, 9.0])
        t0 = now if rng.random() < 0.4 else now + rng.choice([1.0, 2.0, 4.0, 7.0])
        if bits := pinned(p, rng, t0, t0 + d, k):
            rs = p.codec.decode(bits)
            if t0 == now:
                g.allocate(jobid, rs)
                p.add_running(jobid, rs, now, now + d, bits)
            else:
                p.reserve(jobid, rs, t0, t0 + d, bits)
        n, d = rng.randint(1, 6), rng.choice([2.0, 4.0, 8.0, math.inf])
        found = p.earliest_bits(node_request(n, d), now, d, policy)
        times = sorted({now, *(x for s in p.spans() for x in (s.start, s.end) if now < x < math.inf)})
        scan = next((t for t in times if p.codec.whole_count(p.available_bits(t, t + d)) >= n), None)
        assert (found and found.start) == scan
        if found is not None:
            bits = found.placement.bits
            assert bits & p.available_bits(found.start, found.start + d) == bits
        reserved = [s for s in p.reserved() if p.can_search_aside(s.jobid, s.end - s.start, now)]
        if reserved:
            # A reservation's search for an earlier place, with it set aside
            # but left in the plan, against a scan with it taken out.
            span = rng.choice(reserved)
            d = span.end - span.start
            req = node_request(p.codec.whole_nodes(span.bits).bit_count(), d)
            aside = p.earliest_bits(req, now, d, policy, before=span.start, own=span.jobid, aside=True)
            p.remove(span.jobid)
            times = sorted({now, *(x for s in p.spans() for x in (s.start, s.end) if now < x < span.start)})
            fits = (t for t in times if p.codec.whole_count(p.available_bits(t, t + d)) >= req.whole_nodes)
            assert (aside and aside.start) == next(fits, None)
            p.reserve(span.jobid, span.resources, span.start, span.end, span.bits)
