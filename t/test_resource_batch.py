"""Property test: a job's allocation and release update the availability in one
batch (``Availability.take`` / ``give``), and the graph's state always equals a
recount from scratch.

The oracle is independent of the graph's bookkeeping: the test keeps its own
record of what each job holds (what it allocated, less what ``release``
returned) and of which ranks are down, drained or shrunk.  From that alone it
recounts, after every step:

* allocated = the union of the jobs' sets, no item in two jobs;
* free = every item of the topology, less the allocated ones, less those on
  a down, drained or shrunk rank (a vertex of rank -1 is on no rank);
* down = the unallocated items of down or drained (not shrunk) ranks;
* free + allocated + down = all, pairwise disjoint;
* the per-subtree aggregates (units, busy, whole, have) of the live
  availability equal those of an availability built bottom-up from the
  recounted free set.

Graph shapes: the replay's flat nodes (containers with their own pools, one
parent with more than 64 children), and racks/nodes/sockets (pools a level
below the node, so a node has changes below it in the same batch).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import POLICIES, match
from fluxsched_py.resource import Availability, ResourceError, ResourceGraph, ResourceSet, flatfree
from fluxsched_py.resource.flatfree import FlatLayout
from fluxsched_py.resource.rv1 import hosts_rv1


def rr(t, n, *with_, exclusive=None):
    return ResourceRequest(t, Count.fixed(n) if isinstance(n, int) else n, tuple(with_), exclusive=exclusive)


SHAPES = [
    Request((rr("slot", 1, rr("core", 1)),)),
    Request((rr("slot", Count(1, 5), rr("core", 2)),)),
    Request((rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True),)),
    Request((rr("node", 3, rr("slot", 1, rr("core", 1)), exclusive=True),)),
    Request((rr("core", Count(2, 9)),)),
]


def racks() -> ResourceGraph:
    return ResourceGraph.from_recipe(
        {"cluster": {"racks": 2, "nodes_per_rack": 4, "sockets": 2, "cores_per_socket": 2, "gpus_per_socket": 1}}
    )


def flat() -> ResourceGraph:
    return ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(70)], 2))


def _nonzero(ds):
    return [{t: x for t, x in d.items() if x} for d in ds]


def items_on(g: ResourceGraph, bad: int) -> ResourceSet:
    """Every item of the topology on a rank of the mask ``bad``, from the topology alone."""
    topo = g.topo
    cont = 0
    pools = {}
    for v in range(topo.n):
        r = topo.rank[v]
        if r >= 0 and bad >> r & 1:
            cont |= 1 << v
            if topo.pools[v]:
                pools[v] = dict(topo.pools[v])
    return ResourceSet(topo, cont, pools)


def recount(g: ResourceGraph, held: dict[int, ResourceSet], down: set, drained: set, shrunk: set) -> None:
    topo = g.topo
    every = ResourceSet(topo, (1 << topo.n) - 1, {v: dict(topo.pools[v]) for v in topo.pool_vertices})
    allocated = ResourceSet(topo)
    for rs in held.values():
        assert not (allocated & rs), "an item is held by two jobs"
        allocated = allocated | rs
    bad = IdSet(down | drained | shrunk).mask
    free = every - allocated - items_on(g, bad)
    dn = items_on(g, IdSet((down | drained) - shrunk).mask) - allocated
    assert g.allocated() == allocated
    assert g.free() == free
    assert g.down() == dn
    assert (g.free() | g.allocated() | g.down()) == g.all()
    assert not (g.free() & g.allocated()) and not (g.free() & g.down()) and not (g.allocated() & g.down())
    assert {j: rs for j, rs in g.jobs.items()} == held
    live = g.availability()
    fresh = Availability.from_resourceset(free)
    assert live.cont == fresh.cont
    assert [{t: m for t, m in d.items() if m} for d in live.loc] == [dict(d) for d in fresh.loc]
    assert _nonzero(live.units) == _nonzero(fresh.units)
    assert live.busy == fresh.busy
    assert _nonzero(live.whole) == _nonzero(fresh.whole)
    assert _nonzero(live.have) == _nonzero(fresh.have)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("match"), st.integers(0, len(SHAPES) - 1), st.sampled_from(sorted(POLICIES))),
        st.tuples(st.just("release"), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("down"), st.integers(0, 69), st.booleans()),
        st.tuples(st.just("drain"), st.integers(0, 69), st.booleans()),
        st.tuples(st.just("hello"), st.integers(0, 69), st.integers(0, 3)),
        st.tuples(st.just("shrink"), st.integers(0, 69), st.just(0)),
    ),
    max_size=50,
)


def tagged(g: ResourceGraph, rs: ResourceSet, tag: bool) -> ResourceSet:
    """``rs`` with its flat bits attached, as the planner's decode attaches
    them (``tag``): the graph then flips its flat free set by them at once
    and leaves ``cont`` and ``loc`` to their next reader."""
    if tag:
        g.free_bits()  # the graph keeps its flat free set from now on
        rs._flat = (g.flat_layout, g.flat_layout.encode(rs))
    return rs


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["racks", "flat"]), ops, st.booleans())
def test_batched_allocate_release_equal_a_recount(shape, sequence, tag):
    g = racks() if shape == "racks" else flat()
    nranks = len(g.ranks)
    held: dict[int, ResourceSet] = {}
    down: set[int] = set()
    drained: set[int] = set()
    shrunk: set[int] = set()
    jobid = 0
    for kind, a, b in sequence:
        if kind == "match":
            rs = match(g, SHAPES[a], policy=b)
            if rs is not None:
                jobid += 1
                g.allocate(jobid, tagged(g, rs, tag))
                held[jobid] = rs
        elif kind == "release":
            if held:
                a = sorted(held)[a % len(held)]  # a job that holds something
                whole = held[a]
                part = whole.restrict(IdSet([whole.ranks.first()])) if b and len(whole.ranks) > 1 else None
                freed = g.release(a, part)
                assert freed <= whole and (part is None or part <= freed)
                rest = whole - freed
                if rest:
                    held[a] = rest
                else:
                    del held[a]
        elif a >= nranks or a in shrunk:
            continue
        elif kind == "down":
            (g.set_down if b else g.set_up)(a)
            (down.add if b else down.discard)(a)
        elif kind == "drain":
            (g.drain if b else g.undrain)(a)
            (drained.add if b else drained.discard)(a)
        elif kind == "hello":  # a job found running at hello: all of rank a's items, maybe on a down rank
            node = g.all().restrict(IdSet([a]))
            jid = 1000 + b
            try:
                g.allocate(jid, node, running=True)
            except ResourceError:
                assert any(node & rs for rs in held.values())  # held by some job, this one included
            else:
                held[jid] = held[jid] | node if jid in held else node
        elif len(g.ranks) > 1:
            g.shrink(a)
            shrunk.add(a)
        recount(g, held, down, drained, shrunk)


def test_release_on_a_down_rank_keeps_its_items_unavailable():
    """A job freed on a down rank: its items leave ``allocated`` and go to
    ``down``, not ``free``; freed again once the rank is up."""
    g = flat()
    node = g.all().restrict(IdSet([3]))
    g.allocate(1, node)
    g.set_down(3)
    g.release(1)
    assert not (g.free() & node) and node <= g.down()
    recount(g, {}, {3}, set(), set())
    g.set_up(3)
    assert node <= g.free()
    recount(g, {}, set(), set(), set())


deferred = st.lists(
    st.one_of(
        st.tuples(st.just("take"), st.integers(0, 7), st.integers(0, 5)),
        st.tuples(st.just("release"), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("down"), st.integers(0, 7), st.booleans()),
        st.tuples(st.just("hello"), st.integers(0, 7), st.integers(0, 3)),
        st.tuples(st.just("check"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def flat_free_from_scratch(g: ResourceGraph, held: dict[int, ResourceSet], down: set) -> int:
    """The free set recounted from the test's own record, in a flat layout
    made here (not the graph's)."""
    topo = g.topo
    free = ResourceSet(topo, (1 << topo.n) - 1, {v: dict(topo.pools[v]) for v in topo.pool_vertices})
    for rs in held.values():
        free = free - rs
    return FlatLayout(topo).encode(free - items_on(g, IdSet(down).mask))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["racks", "flat"]), deferred, st.sampled_from([3, 16]), st.booleans())
def test_aggregates_deferred_over_many_allocations_equal_a_recount(shape, sequence, shift, tag):
    """Allocations and releases with no match between them leave the
    aggregates to the next reader (``Availability.sync``), and what jobs
    hold to the next reader of it (``ResourceGraph._fold``: ``allocated()``,
    a rank going down or up, a job at hello); whenever one reads, both
    equal a recount, however many changes they catch up on (a vertex taken
    and given back between two reads among them).  ``take`` allocates what
    is free on a few ranks without matching (so nothing syncs), all of it
    or only its leaves (the containers stay available); ``release`` frees a
    whole job or its first rank; ``hello`` adds a whole rank to one of four
    running jobs.  Ranks are drawn among the first eight, so jobs meet.

    The graph's flat free set, unlike the aggregates, is never deferred:
    the planner reads it directly, so it equals a recount after every step
    (in chunks of 8 bits too, so a job's flips span chunks).  With ``tag``,
    the jobs' sets carry their flat bits (:func:`tagged`): ``cont`` and
    ``loc`` are then deferred too, to their next reader."""
    flatfree.CHUNK_SHIFT, saved = shift, flatfree.CHUNK_SHIFT
    try:
        _deferred(racks() if shape == "racks" else flat(), sequence, tag)
    finally:
        flatfree.CHUNK_SHIFT = saved


def _deferred(g: ResourceGraph, sequence: list, tag: bool = False) -> None:
    g.free_bits()  # from now on the graph keeps it in step
    nranks = len(g.ranks)
    held: dict[int, ResourceSet] = {}
    down: set[int] = set()
    jobid = 0
    for kind, a, b in sequence:
        if kind == "take":
            rs = g.free().restrict(IdSet(range(a % nranks, min(a % nranks + 1 + b // 2, nranks))))
            if b % 2:
                rs = ResourceSet(g.topo, 0, {v: dict(tm) for v, tm in rs._pools.items()})
            if rs:
                jobid += 1
                g.allocate(jobid, tagged(g, rs, tag))
                held[jobid] = rs
        elif kind == "release":
            if held:
                a = sorted(held)[a % len(held)]
                whole = held[a]
                part = whole.restrict(IdSet([whole.ranks.first()])) if b and len(whole.ranks) > 1 else None
                rest = whole - g.release(a, part)
                if rest:
                    held[a] = rest
                else:
                    del held[a]
        elif kind == "down":
            if a < nranks:
                (g.set_down if b else g.set_up)(a)
                (down.add if b else down.discard)(a)
        elif kind == "hello":
            if a < nranks:
                node = g.all().restrict(IdSet([a]))
                jid = 1000 + b
                try:
                    g.allocate(jid, node, running=True)
                except ResourceError:
                    assert any(node & rs for rs in held.values())
                else:
                    held[jid] = held[jid] | node if jid in held else node
        else:
            recount(g, held, down, set(), set())
        assert g.free_bits().value() == flat_free_from_scratch(g, held, down)
    recount(g, held, down, set(), set())


def test_a_job_allocated_before_and_after_a_fold_releases_all_it_holds():
    """A job given rank 0, then (after something read what jobs hold) rank 1
    too: its release takes both out, the part folded before and the part
    allocated since."""
    g = flat()
    first, second = g.all().restrict(IdSet([0])), g.all().restrict(IdSet([1]))
    g.allocate(7, first, running=True)
    assert g.allocated() == first  # a reader: what job 7 holds so far is folded
    g.allocate(7, second, running=True)
    g.release(7)
    assert not g.allocated()
    recount(g, {}, set(), set(), set())
