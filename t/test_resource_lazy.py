"""Decoded placements whose leaves are built only when read.

:meth:`FlatCodec.decode` returns a :meth:`ResourceSet.lazily` set: its
containers and ranks at once, its ``{vertex: {type: ids}}`` leaves when
something reads them.  Each is checked against an eager set built here bit
by bit from the layout (every bit of the flat set placed in its pool by a
linear scan, the oracle), on small hand-built graphs of each layout the
codec tells apart (one-core nodes, several cores per node, racks of sockets
with GPUs): the same containers, ranks, leaves, counts, algebra, R, and
the same int again when encoded.  A graph that allocates and releases the
lazy set ends in the same state as one given the eager set (pool by pool),
and the engine's feasibility answer for whole-node requests, taken from a
count of whole nodes, is the matcher's search's answer.
"""

from __future__ import annotations

import random

import pytest

from fluxsched_py.engine import Engine
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import feasibility
from fluxsched_py.planner.flat import FlatCodec
from fluxsched_py.resource import ResourceGraph, ResourceSet
from fluxsched_py.resource.rv1 import hosts_rv1

GRAPHS = {
    # 150 one-core nodes: the simplest layout, and placements of more than 64 bits
    "unit": lambda: ResourceGraph.from_nodes([f"n{i}" for i in range(150)], 1),
    "unit-rv1": lambda: ResourceGraph.from_rv1(hosts_rv1([f"u{i}" for i in range(20)], 1)),
    "cores": lambda: ResourceGraph.from_nodes([f"c{i}" for i in range(12)], 4),
    "racks": lambda: ResourceGraph.from_recipe(
        {"cluster": {"racks": 2, "nodes_per_rack": 3, "sockets": 2, "cores_per_socket": 2, "gpus_per_socket": 1}}
    ),
}


def eager(g: ResourceGraph, x: int) -> ResourceSet:
    """The oracle: each set bit of ``x`` put where the layout says, one by one."""
    layout = g.flat_layout
    topo = g.topo
    cont = 0
    pools: dict[int, dict[str, int]] = {}
    for p in range(x.bit_length()):
        if not x >> p & 1:
            continue
        if p < topo.n:
            cont |= 1 << p
            continue
        owners = [(off, v, t) for off, width, v, t in layout.layout if off <= p < off + width]
        assert len(owners) == 1
        off, v, t = owners[0]
        d = pools.setdefault(v, {})
        d[t] = d.get(t, 0) | 1 << (p - off)
    return ResourceSet(topo, cont, pools)


def samples(g: ResourceGraph, codec: FlatCodec, rng: random.Random) -> list[int]:
    """Flat sets to decode: whole nodes (few and many, in runs and scattered),
    and random subsets of every item."""
    every = g.flat_layout.encode(g.all())
    out = [0, every]
    nodes = sorted(codec.node_bits) if codec.flat_nodes else []
    for _ in range(30):
        if nodes:
            k = rng.randint(1, len(nodes))
            if rng.random() < 0.5:
                i = rng.randrange(len(nodes) - k + 1)
                chosen = nodes[i : i + k]  # one run of nodes
            else:
                chosen = rng.sample(nodes, k)
            vertices = 0
            for v in chosen:
                vertices |= 1 << v
            out.append(codec.nodes_bits(vertices))
        out.append(every & rng.getrandbits(every.bit_length()))
    return out


def leaves(rs: ResourceSet) -> dict[int, dict[str, int]]:
    return {v: dict(tm) for v, tm in rs.leaf_masks.items()}


def items(rs: ResourceSet) -> tuple[int, dict[int, dict[str, int]]]:
    """A set's items, to compare sets of two graphs built alike."""
    return rs.container_mask, leaves(rs)


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_a_lazy_set_is_the_eager_set(kind):
    g = GRAPHS[kind]()
    codec = FlatCodec(g)
    rng = random.Random(kind)
    xs = samples(g, codec, rng)
    for x in xs:
        rs, want = codec.decode(x), eager(g, x)
        # what a lazy set knows at once, read before its leaves
        assert rs.container_mask == want.container_mask
        assert rs.ranks == want.ranks
        assert bool(rs) == bool(want)
        assert codec.encode(rs) == x == g.flat_layout.encode(want)
        # then everything else
        assert leaves(rs) == leaves(want)
        assert rs == want and hash(rs) == hash(want)
        assert {t: rs.count(t) for t in g.topo.types} == {t: want.count(t) for t in g.topo.types}
        assert rs.to_rv1(g, 0.0, 10.0) == want.to_rv1(g, 0.0, 10.0)
        assert list(rs.pools()) == list(want.pools())
    for a, b in zip(xs, reversed(xs), strict=True):
        la, lb, ea, eb = codec.decode(a), codec.decode(b), eager(g, a), eager(g, b)
        assert la | lb == ea | eb
        assert la & lb == ea & eb
        assert la - lb == ea - eb
        assert (la <= lb) == (ea <= eb)


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_allocating_a_lazy_set_leaves_the_graph_as_the_eager_set_does(kind):
    lazy_g, eager_g = GRAPHS[kind](), GRAPHS[kind]()
    codec = FlatCodec(lazy_g)
    rng = random.Random(f"alloc-{kind}")
    for g in (lazy_g, eager_g):
        g.free_bits()  # the live flat free set exists: the lazy set is flipped by its bits
    held: list[int] = []
    for jobid, x in enumerate(samples(lazy_g, codec, rng)):
        free = lazy_g.flat_layout.encode(lazy_g.free())
        x &= free
        if not x:
            continue
        lazy_g.allocate(jobid, codec.decode(x))
        eager_g.allocate(jobid, eager(eager_g, x))
        held.append(jobid)
        if rng.random() < 0.4:  # end one of the jobs that run
            gone = held.pop(rng.randrange(len(held)))
            assert items(lazy_g.release(gone)) == items(eager_g.release(gone))
        assert lazy_g.free_bits().value() == eager_g.free_bits().value()
        assert items(lazy_g.free()) == items(eager_g.free())
        assert items(lazy_g.allocated()) == items(eager_g.allocated())
        assert lazy_g.to_rv1() == eager_g.to_rv1()
        assert {j: items(rs) for j, rs in lazy_g.jobs.items()} == {j: items(rs) for j, rs in eager_g.jobs.items()}
    for jobid in held:
        lazy_g.release(jobid)
        eager_g.release(jobid)
    assert items(lazy_g.free()) == items(eager_g.free()) == items(lazy_g.all())


def whole_nodes(n: int) -> Request:
    core = ResourceRequest("core", Count.fixed(1))
    slot = ResourceRequest("slot", Count.fixed(1), (core,))
    return Request((ResourceRequest("node", Count.fixed(n), (slot,), exclusive=True),))


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_whole_node_feasibility_is_the_searchs(kind):
    g = GRAPHS[kind]()
    nnodes = len(g.ranks)
    sizes = [1, 2, nnodes - 1, nnodes, nnodes + 1, 3, nnodes + 5]
    # asked in several orders, on fresh engines and on one
    for order in (sizes, sorted(sizes), sorted(sizes, reverse=True)):
        e = Engine(GRAPHS[kind]())
        for n in order:
            assert whole_nodes(n).whole_nodes == n
            assert e.feasibility(whole_nodes(n)) == feasibility(g, whole_nodes(n)), n
    # ranks down count (feasibility is with everything up); shrunk ranks do not
    e = Engine(GRAPHS[kind]())
    e.resource_update(down="0-1")
    assert e.feasibility(whole_nodes(nnodes)) is None
    e.resource_update(shrink="0-1")
    for n in (nnodes, nnodes - 1, nnodes - 2):
        assert e.feasibility(whole_nodes(n)) == feasibility(e.graph, whole_nodes(n)), n
    assert e.feasibility(whole_nodes(nnodes)) is not None
