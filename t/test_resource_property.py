"""Property test: no resource is ever allocated twice; free | allocated | down == all."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import POLICIES, match
from fluxsched_py.resource import Availability, ResourceError, ResourceGraph


def rr(t, n, *with_, exclusive=None):
    return ResourceRequest(t, Count.fixed(n) if isinstance(n, int) else n, tuple(with_), exclusive=exclusive)


SHAPES = [
    Request((rr("slot", 1, rr("core", 1)),)),
    Request((rr("slot", 2, rr("core", 3), rr("gpu", 1)),)),
    Request((rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True),)),
    Request((rr("node", 2, rr("socket", 1, rr("slot", 1, rr("core", 2)))),)),
    Request((rr("slot", Count(1, 6), rr("socket", 1, rr("core", 2))),)),
    Request((rr("core", Count(2, 9)),)),
]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("match"), st.integers(0, len(SHAPES) - 1), st.sampled_from(sorted(POLICIES))),
        st.tuples(st.just("release"), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("down"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("drain"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("steal"), st.integers(0, 5), st.integers(0, 30)),
    ),
    max_size=40,
)


def check(g: ResourceGraph) -> None:
    free, alloc, down, everything = g.free(), g.allocated(), g.down(), g.all()
    assert free | alloc | down == everything
    assert not (free & alloc) and not (free & down) and not (alloc & down)
    seen = None
    for rs in g.jobs.values():
        if seen is not None:
            assert not (seen & rs), "a resource is held by two jobs"
            seen = seen | rs
        else:
            seen = rs
    if seen is not None:
        assert seen == alloc
    check_aggregates(g)


def _nonzero(ds):
    return [{t: x for t, x in d.items() if x} for d in ds]


def check_aggregates(g: ResourceGraph) -> None:
    """The live availability, updated incrementally, equals one built from scratch
    (per-subtree units, busy counts, whole containers, children that have units)."""
    av = g.availability()
    fresh = Availability(g.topo, av.cont, [dict(d) for d in av.loc])
    assert _nonzero(av.units) == _nonzero(fresh.units)
    assert av.busy == fresh.busy
    assert _nonzero(av.whole) == _nonzero(fresh.whole)
    assert _nonzero(av.have) == _nonzero(fresh.have)


@settings(max_examples=120, deadline=None)
@given(ops)
def test_no_resource_is_ever_allocated_twice_and_partition_holds(sequence):
    g = ResourceGraph.from_recipe(
        {"cluster": {"racks": 2, "nodes_per_rack": 3, "sockets": 2, "cores_per_socket": 4, "gpus_per_socket": 1}}
    )
    jobid = 0
    for op in sequence:
        kind = op[0]
        if kind == "match":
            rs = match(g, SHAPES[op[1]], policy=op[2])
            if rs is not None:
                assert rs <= g.free()
                jobid += 1
                g.allocate(jobid, rs)
        elif kind == "release":
            if op[1] in g.jobs:
                held = g.jobs[op[1]]
                if op[2] and len(held.ranks) > 1:
                    part = held.restrict(IdSet([held.ranks.first()]))
                    freed = g.release(op[1], part)
                    assert part <= freed
                else:
                    assert g.release(op[1]) == held
        elif kind in ("down", "drain"):
            ranks = IdSet([op[1]])
            if kind == "down":
                g.set_down(ranks) if op[2] else g.set_up(ranks)
            else:
                g.drain(ranks) if op[2] else g.undrain(ranks)
        else:  # try to take a whole node that may be busy: must fail unless all of it is free
            node = g.all().restrict(IdSet([op[1]]))
            try:
                g.allocate(1000 + op[2], node)
            except ResourceError:
                assert not node <= g.free()
            else:
                assert node & g.allocation(1000 + op[2]) == node
        check(g)


WIDE = {"cluster": {"racks": 2, "nodes_per_rack": 9, "sockets": 8, "cores_per_socket": 2, "gpus_per_socket": 1}}

wide_ops = st.lists(
    st.one_of(
        st.tuples(st.just("match"), st.integers(0, len(SHAPES) - 1), st.sampled_from(sorted(POLICIES))),
        st.tuples(st.just("release"), st.integers(0, 40), st.booleans()),
        st.tuples(st.just("down"), st.integers(0, 17), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(wide_ops)
def test_the_children_index_only_prunes(sequence):
    """The matcher walks wide vertices through ``Availability.have``; walking
    every child instead (the index off) gives the same match every time."""
    from fluxsched_py.match import traverse

    first = ResourceGraph.from_recipe(WIDE)
    graphs = [first, ResourceGraph(first.topo)]
    fanout = traverse.INDEX_FANOUT
    jobid = 0
    try:
        for op in sequence:
            kind = op[0]
            if kind == "match":
                found = []
                for g, threshold in zip(graphs, (fanout, 1 << 30), strict=True):
                    traverse.INDEX_FANOUT = threshold
                    found.append(match(g, SHAPES[op[1]], policy=op[2]))
                traverse.INDEX_FANOUT = fanout
                assert found[0] == found[1]
                if found[0] is not None:
                    jobid += 1
                    for g, rs in zip(graphs, found, strict=True):
                        g.allocate(jobid, rs)
            elif kind == "release":
                for g in graphs:
                    if op[1] in g.jobs:
                        held = g.jobs[op[1]]
                        if op[2] and len(held.ranks) > 1:
                            g.release(op[1], held.restrict(IdSet([held.ranks.first()])))
                        else:
                            g.release(op[1])
            else:
                for g in graphs:
                    g.set_down(IdSet([op[1]])) if op[2] else g.set_up(IdSet([op[1]]))
        check_aggregates(graphs[0])
    finally:
        traverse.INDEX_FANOUT = fanout
