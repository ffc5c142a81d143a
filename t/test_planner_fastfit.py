"""The planner's slot fast path and exact fit tests agree with the real matcher.

:mod:`fluxsched_py.planner.fastfit` claims that for ``slot[k] > core[c]`` on
a flat graph the matcher fits exactly when the nodes hold ``k`` slots of
``c`` free cores, and picks the cores :func:`take_slots` picks.  These tests
hold it to that on random availability, for every policy it is used for.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import match
from fluxsched_py.planner import MatchCache, Planner
from fluxsched_py.planner.fastfit import slot_shape, unit_fields
from fluxsched_py.planner.flat import FlatCodec
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request
from fluxsched_py.resource import ResourceGraph


def slots(k: int, c: int) -> Request:
    core = ResourceRequest("core", Count.fixed(c))
    return Request((ResourceRequest("slot", Count.fixed(k), (core,), label="task"),))


def random_avail(rng: random.Random, codec: FlatCodec, nodes: int) -> int:
    """Everything, less random whole nodes and random single cores."""
    avail = (1 << codec.width) - 1
    for _ in range(rng.randrange(0, 4 * nodes)):
        r = rng.randrange(nodes)
        if rng.random() < 0.2:
            avail &= ~codec.rank_masks[r]
        else:
            core_bits = codec.rank_masks[r] & codec.type_masks["core"] & avail
            if core_bits:
                i = rng.randrange(core_bits.bit_count())
                for _ in range(i):
                    core_bits &= core_bits - 1
                avail &= ~(core_bits & -core_bits)
    return avail


@pytest.mark.parametrize("policy", ["first", "low", "high", "lonode", "hinode", "worstfit", "variation"])
@pytest.mark.parametrize("nodes,cores", [(9, 1), (16, 8), (12, 6), (5, 4), (20, 3), (3, 260)])
def test_slot_fast_path_equals_the_matcher_on_random_availability(policy, nodes, cores):
    rng = random.Random(nodes * 100 + cores)
    g = nodes_graph(nodes, cores)
    codec = FlatCodec(g)
    assert codec.unit_fields("core") is not None
    fast = MatchCache(match)
    slow = MatchCache(match, fast_paths=False)
    for _ in range(150):
        avail = random_avail(rng, codec, nodes)
        c = rng.randrange(1, cores + 2)
        k = rng.randrange(1, max(2, nodes * cores // c + 2))
        req = slots(k, c)
        a = fast.flat(g, codec, req, policy, avail)
        b = slow.flat(g, codec, req, policy, avail)
        assert (a is None) == (b is None), (k, c)
        assert fast.fit(codec, req, policy, avail) == (b is not None)
        assert slow.fit(codec, req, policy, avail) in (None, False)
        if a is not None:
            assert a.bits == b.bits and a.resources == b.resources and codec.decode(a.bits) == b.resources
    assert fast.fast > 0 and slow.fast == 0


def test_whole_node_fit_equals_the_matcher():
    rng = random.Random(3)
    g = nodes_graph(12, 4)
    codec = FlatCodec(g)
    slow = MatchCache(match, fast_paths=False)
    fast = MatchCache(match)
    for _ in range(200):
        avail = random_avail(rng, codec, 12)
        req = node_request(rng.randrange(1, 13), 10.0)
        assert fast.fit(codec, req, "first", avail) == (slow.flat(g, codec, req, "first", avail) is not None)


def test_slot_shape_recognizes_only_plain_core_slots():
    assert slot_shape(slots(3, 2)) == (3, 2)
    gpu = ResourceRequest("gpu", Count.fixed(1))
    core = ResourceRequest("core", Count.fixed(1))
    assert slot_shape(Request((ResourceRequest("slot", Count.fixed(1), (core, gpu), label="t"),))) is None
    ranged = ResourceRequest("slot", Count(1, 4), (core,), label="t")
    assert slot_shape(Request((ranged,))) is None
    assert slot_shape(node_request(2, 10.0)) is None


@pytest.mark.parametrize(
    "recipe",
    [
        {"cluster": {"nodes": 3, "sockets": 2, "cores_per_socket": 2}},
        {"cluster": {"racks": 2, "nodes_per_rack": 2, "sockets": 1, "cores_per_socket": 2}},
    ],
)
def test_no_slot_fast_path_where_cores_are_not_one_pool_per_node(recipe):
    codec = FlatCodec(ResourceGraph.from_recipe(recipe))
    assert unit_fields(codec, "core") is None
    assert MatchCache(match).fit(codec, slots(1, 1), "first", (1 << codec.width) - 1) is None


@pytest.mark.parametrize("nodes,cores", [(16, 8), (48, 8), (12, 6), (5, 3), (7, 2)])
def test_strided_whole_nodes_equals_the_node_by_node_test(nodes, cores):
    rng = random.Random(nodes + cores)
    codec = FlatCodec(nodes_graph(nodes, cores))
    assert codec._strided is not None
    for _ in range(200):
        avail = random_avail(rng, codec, nodes)
        for _ in range(rng.choice([0, 0, 1, 3, 40])):  # containers out, pools in
            avail &= ~(1 << rng.randrange(codec.n))
        want = 0
        for v, full in codec.node_bits.items():
            if avail & full == full:
                want |= 1 << v
        assert codec.whole_nodes(avail) == want
        assert codec.whole_count(avail) == want.bit_count()


def random_planner(rng: random.Random, nnodes: int, ncores: int):
    """A planner at now=10 with running jobs (started in the past, some
    already overdue) and reservations, placed by the real matcher on what
    the plan leaves free."""
    g = nodes_graph(nnodes, ncores)
    p = Planner(g, matcher=MatchCache(match, fast_paths=False))
    shapes = [lambda: slots(rng.randrange(1, 4), rng.randrange(1, ncores + 1)), lambda: node_request(1, 10.0)]
    jid = 0
    for _ in range(rng.randrange(0, 3 * nnodes)):
        jid += 1
        start = float(rng.randrange(0, 10))
        end = float(rng.choice([start + 1, 12, 15, 20, 30, 40, 60, math.inf]))  # start + 1: overdue at 10
        rs = match(g, rng.choice(shapes)(), policy="low")  # running jobs hold the graph together
        if rs is not None:
            g.allocate(jid, rs)
            p.add_running(jid, rs, start, end)
    p.set_now(10.0)
    for _ in range(rng.randrange(0, 6)):
        jid += 1
        t = float(rng.randrange(10, 50))
        end = t + rng.randrange(1, 30)
        rs = match(g, rng.choice(shapes)(), policy="low", available=p.available(t, end))
        if rs is not None:
            p.reserve(jid, rs, t, end)
    return g, p


def brute_earliest(g, p, req, policy, duration, start):
    """The first candidate (``start``, then every span boundary after it)
    whose available set the real matcher fits, and its placement."""
    cands = sorted({start} | {t for s in p.spans() for t in (s.start, s.end) if start < t < math.inf})
    for t in cands:
        rs = match(g, req, policy=policy, available=p.available(t, t + duration))
        if rs is not None:
            return t, p.codec.encode(rs)
    return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_fast_earliest_equals_brute_force_on_random_small_planners(seed):
    """earliest_bits (exact fit probes, one match where it settles; binary
    search or sliding window) gives the time and the cores a brute-force
    walk over every candidate with the real matcher gives."""
    rng = random.Random(seed)
    nnodes, ncores = rng.choice([(4, 1), (4, 2), (5, 4), (3, 8), (6, 3)])
    g, p = random_planner(rng, nnodes, ncores)
    fast = Planner(g)  # the same plan, through the default (fast-path) MatchCache
    for s in p.spans():
        (fast.add_running if s.running else fast.reserve)(s.jobid, s.resources, s.start, s.end)
    fast.set_now(10.0)
    policy = rng.choice(["first", "low", "high", "worstfit"])
    kind = rng.randrange(3)
    if kind == 0:
        req = slots(rng.randrange(1, nnodes * ncores + 2), rng.randrange(1, ncores + 1))
    elif kind == 1:
        req = node_request(rng.randrange(1, nnodes + 1), 10.0)
    else:  # no fast path: the matcher decides every probe
        core = ResourceRequest("core", Count.fixed(rng.randrange(1, ncores + 1)))
        slot = ResourceRequest("slot", Count.fixed(1), (core,), label="task")
        req = Request((ResourceRequest("node", Count.fixed(rng.randrange(1, 3)), (slot,)),))
    duration = float(rng.choice([1, 5, 20, 45]))
    not_before = rng.choice([-math.inf, -math.inf, 12.0, 25.0, 40.0])
    got = fast.earliest_bits(req, 10.0, duration, policy, not_before=not_before)
    want = brute_earliest(g, p, req, policy, duration, max(10.0, not_before))
    assert (None if got is None else (got.start, got.placement.bits)) == want


@pytest.mark.parametrize("nodes,cores", [(9, 1), (16, 8), (12, 6), (40, 3), (3, 260), (300, 2)])
def test_remembered_counts_equal_counts_made_afresh(nodes, cores):
    """UnitFields.counts derives a set's counts from a remembered nearby set
    (a few cores taken or given back); on a random walk of sets, with jumps,
    they must equal each node's popcount, read field by field."""
    rng = random.Random(nodes * 7 + cores)
    codec = FlatCodec(nodes_graph(nodes, cores))
    fields = codec.unit_fields("core")
    cores_mask = codec.type_masks["core"]
    x = (1 << codec.width) - 1
    adjusted = 0
    for step in range(400):
        if step % 97 == 0:
            x = random_avail(rng, codec, nodes)
        else:
            core_bits = [i for i in range(codec.width) if cores_mask >> i & 1]
            # take or give back a few cores (or a few dozen: both ways of adjusting)
            for i in rng.sample(core_bits, min(len(core_bits), rng.choice([1, 2, 3, 40]))):
                x ^= 1 << i
        if rng.random() < 0.3:  # sometimes ask about an earlier set again
            x = random_avail(rng, codec, nodes) if rng.random() < 0.2 else x
        got = fields.counts(x)
        want = [(codec.rank_masks[r] & cores_mask & x).bit_count() for r in range(nodes)]
        assert list(got) == want
        adjusted += step % 97 != 0
    assert adjusted > 300
