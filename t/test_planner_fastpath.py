"""The planner's whole-node fast path picks exactly what the real matcher picks."""

from __future__ import annotations

import random

import pytest

from fluxsched_py.match import match
from fluxsched_py.planner import MatchCache
from fluxsched_py.planner.flat import FlatCodec
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request
from fluxsched_py.resource import ResourceGraph


@pytest.mark.parametrize("policy", ["first", "low", "high"])
@pytest.mark.parametrize("cores", [1, 4])
def test_fast_path_equals_the_matcher_on_random_availability(policy, cores):
    rng = random.Random(7)
    g = nodes_graph(24, cores)
    codec = FlatCodec(g)
    assert codec.flat_nodes
    fast = MatchCache(match)
    slow = MatchCache(match, fast_paths=False)
    full = codec.encode(g.all())
    for _ in range(200):
        avail = full
        for _ in range(rng.randrange(0, 40)):  # knock out random nodes and random single cores
            r = rng.randrange(24)
            if rng.random() < 0.5:
                avail &= ~codec.rank_masks[r]
            else:
                core_bits = codec.rank_masks[r] & codec.type_masks["core"]
                if core_bits:
                    avail &= ~(1 << (core_bits.bit_length() - 1 - rng.randrange(core_bits.bit_count())))
        n = rng.randrange(1, 10)
        req = node_request(n, 100.0)
        a = fast.flat(g, codec, req, policy, avail)
        b = slow.flat(g, codec, req, policy, avail)
        assert (a is None) == (b is None)
        if a is not None:
            assert codec.decode(a.bits) == b.resources and a.bits == b.bits
    assert fast.fast > 0 and slow.fast == 0


def test_fast_path_is_off_for_racks_and_constraints():
    g = ResourceGraph.from_recipe({"cluster": {"racks": 2, "nodes_per_rack": 2, "sockets": 1, "cores_per_socket": 2}})
    assert not FlatCodec(g).flat_nodes
    g = nodes_graph(4, 2)
    assert MatchCache(match).whole_nodes(node_request(3, 10.0)) == 3
