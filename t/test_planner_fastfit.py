"""The planner's slot fast path and exact fit tests agree with the real matcher.

:mod:`fluxsched_py.planner.fastfit` claims that for ``slot[k] > core[c]`` on
a flat graph the matcher fits exactly when the nodes hold ``k`` slots of
``c`` free cores, and picks the cores :func:`take_slots` picks.  These tests
hold it to that on random availability, for every policy it is used for.
"""

from __future__ import annotations

import random

import pytest

from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import match
from fluxsched_py.planner import MatchCache
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


@pytest.mark.parametrize("policy", ["first", "low", "high", "lonode", "hinode"])
@pytest.mark.parametrize("nodes,cores", [(9, 1), (16, 8), (12, 6), (5, 4), (20, 3)])
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
            assert a[1] == b[1] and codec.decode(a[1]) == b[0]
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


@pytest.mark.parametrize("nodes,cores", [(16, 8), (12, 6), (5, 3), (7, 2)])
def test_strided_whole_nodes_equals_the_node_by_node_test(nodes, cores):
    rng = random.Random(nodes + cores)
    codec = FlatCodec(nodes_graph(nodes, cores))
    assert codec._strided is not None
    for _ in range(200):
        avail = random_avail(rng, codec, nodes)
        if rng.random() < 0.3:  # containers out, pools in
            avail &= ~(1 << rng.randrange(codec.n))
        want = 0
        for v, full in codec.node_bits.items():
            if avail & full == full:
                want |= 1 << v
        assert codec.whole_nodes(avail) == want
