"""Model edits (grow, shrink, properties) keep the compiled index equal to a fresh compile.

The oracle is independent of the patching code: after a random sequence of
edits, allocations, releases and down/up changes on one graph, a second
graph is compiled from scratch from the same networkx model and given the
same allocations and rank states.  Its index (every attribute of the
:class:`Topology`, the :class:`Availability` counts, the planner's
:class:`FlatCodec` layout) and its match answers must equal the patched
graph's.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.constraints import parse_constraint
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import POLICIES, match
from fluxsched_py.planner.flat import FlatCodec
from fluxsched_py.resource import ResourceError, ResourceGraph, ResourceSet
from fluxsched_py.resource.state import Availability


def rr(t, n, *with_, exclusive=None):
    return ResourceRequest(t, Count.fixed(n), tuple(with_), exclusive=exclusive)


SHAPES = [
    Request((rr("slot", 1, rr("core", 1)),)),
    Request((rr("slot", 2, rr("core", 3), rr("gpu", 1)),)),
    Request((rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True),)),
    Request((rr("node", 2, rr("slot", 1, rr("core", 2))),)),
    Request((rr("slot", 1, rr("core", 2)),), constraints=parse_constraint({"properties": ["fast"]})),
    Request((rr("slot", 1, rr("core", 1)),), constraints=parse_constraint({"properties": ["^slow"]})),
]


def fragment(first: int, cores: list[int], gpus: list[int], props: list[bool]) -> dict:
    """R for ranks ``first..`` with the given cores and GPUs, ``fast`` where ``props`` says."""
    rlite = []
    for i, (c, gp) in enumerate(zip(cores, gpus, strict=True)):
        ch = {"core": f"0-{c - 1}"}
        if gp:
            ch["gpu"] = f"0-{gp - 1}"
        rlite.append({"rank": str(first + i), "children": ch})
    ex: dict = {"R_lite": rlite, "starttime": 0.0, "expiration": 0.0}
    ex["nodelist"] = [f"grown{first + i}" for i in range(len(cores))]
    fast = IdSet(first + i for i, p in enumerate(props) if p)
    if fast:
        ex["properties"] = {"fast": fast.encode()}
    return {"version": 1, "execution": ex}


def base_graph() -> ResourceGraph:
    return ResourceGraph.from_rv1(fragment(0, [4, 4, 2], [0, 1, 0], [False, True, False]))


def _nozero(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in d.items() if v} for d in rows]


def index_state(g: ResourceGraph) -> dict:
    """Everything the matcher and the planner read, comparable across graphs."""
    # the compiled arrays; not the model itself, nor caches filled on first use (``_...``)
    topo = {k: v for k, v in vars(g.topo).items() if k != "model" and not k.startswith("_")}
    av: Availability = g.availability()
    codec = FlatCodec(g)
    return {
        "topo": topo,
        "loc": _nozero(av.loc),
        "cont": av.cont,
        "units": _nozero(av.units),
        "busy": av.busy,
        "whole": _nozero(av.whole),
        "have": _nozero(av.have),
        "codec": (codec.layout, codec.offsets, codec.type_masks, codec.ranked_mask, codec.flat_nodes),
        "ranks": g.ranks,
        "shrunk": g.shrunk_ranks(),
        "R": g.to_rv1(),
        "free": g.free().to_rv1(g),
        "down": g.down().to_rv1(g),
    }


def fresh_copy(g: ResourceGraph) -> ResourceGraph:
    """A graph compiled from scratch from ``g``'s model, with ``g``'s jobs and rank states."""
    f = ResourceGraph(g.nx)
    for jobid, rs in g.jobs.items():
        f.allocate(jobid, ResourceSet(f.topo, rs._cont, {v: dict(tm) for v, tm in rs._pools.items()}), running=True)
    down = g.down_ranks()
    if down:
        f.set_down(down)
    for r, why in g.drained_ranks().items():
        f.drain(r, why)
    return f


def same_answers(g: ResourceGraph, f: ResourceGraph) -> None:
    for req in SHAPES:
        for pol in ("first", "low", "high"):
            a, b = match(g, req, policy=pol), match(f, req, policy=pol)
            assert (a is None) == (b is None), (req, pol)
            if a is not None:
                assert a.to_rv1(g) == b.to_rv1(f)
                assert (a._cont, a._pools) == (b._cont, b._pools)


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("grow"),
            st.lists(st.tuples(st.integers(1, 6), st.integers(0, 2), st.booleans()), min_size=1, max_size=3),
        ),
        st.tuples(st.just("shrink"), st.integers(0, 12)),
        st.tuples(st.just("props"), st.integers(0, 12), st.sampled_from([(), ("fast",), ("slow",), ("fast", "x")])),
        st.tuples(st.just("match"), st.integers(0, len(SHAPES) - 1), st.sampled_from(sorted(POLICIES))),
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("down"), st.integers(0, 12), st.booleans()),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_patched_index_equals_a_fresh_compile(seq):
    g = base_graph()
    nxt = 3
    jobid = 0
    for op in seq:
        kind = op[0]
        if kind == "grow":
            spec = op[1]
            cores, gpus, fast = (list(col) for col in zip(*spec, strict=True))
            added = g.update(grow=fragment(nxt, cores, gpus, fast))
            assert added == IdSet(range(nxt, nxt + len(spec)))
            nxt += len(spec)
        elif kind == "shrink" and op[1] in g.ranks:
            g.update(shrink=op[1])
        elif kind == "props" and op[1] < nxt:
            g.update(properties={op[1]: op[2]})
        elif kind == "match":
            rs = match(g, SHAPES[op[1]], policy=op[2])
            if rs is not None:
                g.allocate(jobid, rs)
                jobid += 1
        elif kind == "release" and op[1] in g.jobs:
            g.release(op[1])
        elif kind == "down" and op[1] in g.ranks:
            (g.set_down if op[2] else g.set_up)(op[1])
        f = fresh_copy(g)
        assert index_state(g) == index_state(f)
        same_answers(g, f)


def test_update_refuses_bad_edits_and_changes_nothing():
    g = base_graph()
    before = index_state(g)
    with pytest.raises(ResourceError, match="already in the resource graph"):
        g.update(grow=fragment(2, [4], [0], [False]))
    with pytest.raises(ResourceError, match="not in the resource graph"):
        g.update(shrink=7)
    with pytest.raises(ResourceError, match="non-empty string"):
        g.update(properties={0: ["ok", ""]})
    with pytest.raises(ResourceError, match="non-empty string"):
        g.update(grow=fragment(3, [4], [0], [False]), properties={0: [""]})
    with pytest.raises(ResourceError, match="not in the resource graph"):
        g.update(properties={9: ["fast"]}, grow=fragment(3, [1], [0], [False]))
    assert index_state(g) == before
    g.update(shrink=2)
    with pytest.raises(ResourceError, match="already in the resource graph"):
        g.update(grow=fragment(2, [4], [0], [False]))  # a shrunk rank does not come back


def test_writers_show_the_edited_model():
    g = base_graph()
    g.update(grow=fragment(3, [2], [1], [True]), properties={0: ["login"], 1: []})
    ex = g.to_rv1()["execution"]
    assert ex["R_lite"] == [
        {"rank": "0", "children": {"core": "0-3"}},
        {"rank": "1", "children": {"core": "0-3", "gpu": "0"}},
        {"rank": "2", "children": {"core": "0-1"}},
        {"rank": "3", "children": {"core": "0-1", "gpu": "0"}},
    ]
    assert ex["nodelist"] == ["grown[0-3]"]
    assert ex["properties"] == {"fast": "3", "login": "0"}
    names = [n["metadata"]["name"] for n in g.to_jgf()["graph"]["nodes"] if n["metadata"]["type"] == "node"]
    assert names == ["grown0", "grown1", "grown2", "grown3"]


def test_sets_made_before_a_grow_still_match():
    """A snapshot taken before a grow keeps working as ``available`` (its cached counts are rebuilt)."""
    g = base_graph()
    snap = g.free()
    assert match(g, SHAPES[0], available=snap) is not None
    g.update(grow=fragment(3, [8], [0], [False]))
    got = match(g, Request((rr("slot", 1, rr("core", 5)),)), available=snap)
    assert got is None  # the snapshot does not hold the new rank
    assert match(g, Request((rr("slot", 1, rr("core", 5)),))).ranks == IdSet([3])


def _job(cores: int, duration: float) -> dict:
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": cores}]}],
        "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


def _starts(e: Engine, now: float) -> dict[int, str]:
    out = {}
    for r in e.schedule(now).responses:
        if r.type.name == "SUCCESS":
            out[r.id] = r.R["execution"]["R_lite"]
    return out


JOBS = [(4, 100), (4, 100), (4, 50), (4, 10), (2, 10), (3, 5)]


def test_engine_after_grow_places_as_an_engine_started_on_the_grown_graph():
    """Jobs queued behind a full machine start on grown ranks exactly as on a
    machine that had those ranks from the start (the planner is rebuilt)."""
    grown = fragment(3, [4, 4], [0, 0], [False, False])
    a = Engine(base_graph(), ["queue-policy=easy"])
    for i, (c, d) in enumerate(JOBS):
        a.alloc(i + 1, 16, 0, float(i), _job(c, d))
    first = _starts(a, 0.0)
    a.resource_update(grow=grown)
    later = _starts(a, 1.0)
    a.check_invariants()

    g = base_graph()
    g.update(grow=grown)
    g.set_down(IdSet([3, 4]))
    b = Engine(g, ["queue-policy=easy"])
    for i, (c, d) in enumerate(JOBS):
        b.alloc(i + 1, 16, 0, float(i), _job(c, d))
    assert _starts(b, 0.0) == first
    b.resource_update(up=IdSet([3, 4]))
    assert _starts(b, 1.0) == later
    assert set(first) == {1, 2, 5} and set(later) == {3, 4}  # the grow let queued jobs start
    assert {j.id for j in a.running} == {j.id for j in b.running}
    assert a.planner.earliest(SHAPES[0], 1.0, 5.0)[0] == b.planner.earliest(SHAPES[0], 1.0, 5.0)[0]
    assert not math.isinf(a.planner.earliest(SHAPES[0], 1.0, 5.0)[0])


def test_engine_property_change_reaches_constrained_matches():
    g = base_graph()
    e = Engine(g, ["queue-policy=fcfs"])
    spec = _job(1, 10)
    spec["attributes"]["system"]["constraints"] = {"properties": ["big"]}
    e.alloc(1, 16, 0, 0.0, spec)
    assert e.job(1) is None or not _starts(e, 0.0)  # denied: no rank has "big"
    e.resource_update(properties={2: ["big"]})
    e.alloc(2, 16, 0, 1.0, spec)
    started = _starts(e, 1.0)
    assert list(started) == [2] and started[2][0]["rank"] == "2"
