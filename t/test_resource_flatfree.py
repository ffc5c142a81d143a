"""The graph's flat free set (``resource/flatfree.py``).

* :class:`Bits` against plain ints: every in-place operation, field read and
  overlap test gives what the same arithmetic on one int gives, with chunks
  small enough that sets span many of them.
* The graph's live :class:`FreeBits` equals a free set computed from scratch
  after random allocate / release / down / up / drain / undrain / shrink /
  grow: every item of the graph, less what the test's own record says the
  jobs hold, less what is on a down, drained or shrunk rank, encoded with
  the layout (never read from the graph's availability).
* Its log tells a follower exactly which bits changed.
* The engine decides the same with sets of one chunk and of many chunks.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.engine.states import ResponseType
from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import match
from fluxsched_py.resource import ResourceGraph, ResourceSet, flatfree
from fluxsched_py.resource.flatfree import Bits, FlatLayout
from fluxsched_py.resource.rv1 import hosts_rv1

# -- Bits against ints ---------------------------------------------------------

SETS = st.integers(min_value=0, max_value=(1 << 300) - 1)


@settings(max_examples=300, deadline=None)
@given(SETS, SETS, st.integers(min_value=2, max_value=7))
def test_bits_are_their_int(a, b, shift):
    x, y = Bits.of(a, shift), Bits.of(b, shift)
    assert x.value() == a and int(x) == a and x == a and hash(x) == hash(a)
    assert x.bit_count() == a.bit_count() and x.bit_length() == a.bit_length() and bool(x) == bool(a)
    assert all(c and c.bit_length() <= 1 << shift for c in x.chunks.values())  # no empty chunk kept
    assert x.intersects(y) == bool(a & b) == x.intersects(b)
    assert (x & b, x | b, x ^ b, b & x, b | x, b ^ x) == (a & b, a | b, a ^ b, a & b, a | b, a ^ b)
    assert (x >> 5, x << 3, ~x) == (a >> 5, a << 3, ~a)
    for op, want in (("or_", a | b), ("andnot_", a & ~b), ("xor_", a ^ b)):
        z = x.copy()
        getattr(z, op)(y)
        assert z.value() == want and Bits.of(want, shift).chunks == z.chunks
        z = x.copy()
        getattr(z, op)(b)  # an int operand
        assert z.value() == want
    assert x.value() == a  # copies were changed, never x


@settings(max_examples=200, deadline=None)
@given(SETS, st.integers(min_value=0, max_value=400), st.integers(min_value=1, max_value=70), st.integers(2, 6))
def test_bits_field_and_flip(a, off, width, shift):
    x = Bits.of(a, shift)
    assert x.field(off, width) == (a >> off) & ((1 << width) - 1)
    mask = (a >> 7) & ((1 << width) - 1)
    x.flip(off, mask)
    assert x.value() == a ^ (mask << off)
    assert all(x.bit(p) == bool(x.value() >> p & 1) for p in range(off, off + width))


def test_free_bits_log_names_what_changed(monkeypatch):
    monkeypatch.setattr(flatfree, "CHUNK_SHIFT", 4)
    g = ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(6)], 4))
    free = g.free_bits()
    before, seq = free.value(), free.seq
    assert free.since(seq) == []
    g.allocate(
        1,
        ResourceSet.from_rv1(g, {"version": 1, "execution": {"R_lite": [{"rank": "4", "children": {"core": "1-2"}}]}}),
    )
    g.set_down(IdSet.of(2))
    flipped = set()
    for off, mask in free.since(seq):
        flipped ^= {off + i for i in range(mask.bit_length()) if mask >> i & 1}
    assert {p for p in range(free.layout.width) if (before ^ free.value()) >> p & 1} == flipped
    with pytest.raises(TypeError):
        free.or_(1)  # only the graph changes it


# -- the graph's free set against a recount -------------------------------------


def fragment(first: int, n: int, cores: int) -> dict:
    rlite = [{"rank": str(IdSet.range(first, first + n - 1)), "children": {"core": f"0-{cores - 1}"}}]
    ex = {"R_lite": rlite, "starttime": 0.0, "expiration": 0.0, "nodelist": [f"g{first + i}" for i in range(n)]}
    return {"version": 1, "execution": ex}


def rr(t, n, *with_, exclusive=None):
    return ResourceRequest(t, Count.fixed(n) if isinstance(n, int) else n, tuple(with_), exclusive=exclusive)


SHAPES = [
    Request((rr("slot", 1, rr("core", 1)),)),
    Request((rr("slot", 2, rr("core", 3)),)),
    Request((rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True),)),
    Request((rr("core", Count(2, 9)),)),
]

GRAPHS = {
    "flat": lambda: ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(9)], 5)),
    "racks": lambda: ResourceGraph.from_recipe(
        {"cluster": {"racks": 2, "nodes_per_rack": 3, "sockets": 2, "cores_per_socket": 2, "gpus_per_socket": 1}}
    ),
}

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["alloc", "alloc", "alloc", "release", "part", "down", "up", "drain", "undrain", "shrink", "grow"]
        ),
        st.integers(min_value=0, max_value=10**6),
    ),
    max_size=40,
)


def from_scratch(g: ResourceGraph, held: dict[int, ResourceSet], bad: set[int]) -> int:
    """Every item, less what the jobs hold, less everything on a bad rank."""
    topo = g.topo
    every = ResourceSet(topo, (1 << topo.n) - 1, {v: dict(topo.pools[v]) for v in topo.pool_vertices})
    out = every
    for rs in held.values():
        out = out - rs
    ranks = IdSet(r for r in bad if r in topo.rank_root)
    if ranks:
        out = out - out.restrict(ranks)
    return FlatLayout(topo).encode(out)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(GRAPHS)), OPS, st.sampled_from([3, 5, 16]))
def test_graph_free_set_equals_recount(kind, ops, shift):
    flatfree.CHUNK_SHIFT, saved = shift, flatfree.CHUNK_SHIFT
    try:
        g = GRAPHS[kind]()
        rng = random.Random(0)
        held: dict[int, ResourceSet] = {}
        down: set[int] = set()
        drained: set[int] = set()
        shrunk: set[int] = set()
        jobid = 0
        g.free_bits()  # from now on the graph keeps it
        for op, seed in ops:
            rng.seed(seed)
            ranks = sorted(set(g.topo.rank_root) - shrunk)
            r = rng.choice(ranks) if ranks else 0
            if op == "alloc":
                rs = match(g, rng.choice(SHAPES), policy=rng.choice(["low", "high", "first"]))
                if rs is not None:
                    jobid += 1
                    g.allocate(jobid, rs)
                    held[jobid] = rs
            elif op in ("release", "part") and held:
                j = rng.choice(sorted(held))
                if op == "release":
                    g.release(j)
                    del held[j]
                else:
                    freed = g.release(j, held[j].restrict(IdSet.of(rng.choice(sorted(held[j].ranks or [0])))))
                    held[j] = held[j] - freed
                    if not held[j] or j not in g.jobs:
                        held.pop(j)
            elif op in ("down", "up") and ranks:
                (g.set_down if op == "down" else g.set_up)(r)
                (down.add if op == "down" else down.discard)(r)
            elif op in ("drain", "undrain") and ranks:
                if op == "drain":
                    g.drain(r, "test")
                    drained.add(r)
                else:
                    g.undrain(r)
                    drained.discard(r)
            elif op == "shrink" and len(ranks) > 1:
                g.shrink(r)
                shrunk.add(r)
            elif op == "grow" and kind == "flat":
                g.update(grow=fragment(max(g.topo.rank_root) + 1, 1 + seed % 3, 5))
            free = g.free_bits()
            assert free.value() == from_scratch(g, held, down | drained | shrunk)
            assert free.value() == g.flat_layout.encode(g.free())
            assert free.chunks == Bits.of(free.value(), shift).chunks
    finally:
        flatfree.CHUNK_SHIFT = saved


# -- the engine decides the same whatever the chunk size ---------------------------


def _spec(cores: int, nodes: int, duration: float) -> dict:
    if nodes:
        res = [
            {
                "type": "node",
                "count": nodes,
                "exclusive": True,
                "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
            }
        ]
    else:
        res = [{"type": "slot", "count": cores, "label": "task", "with": [{"type": "core", "count": 1}]}]
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


def _run(policy: str, shift: int, seed: int) -> list:
    flatfree.CHUNK_SHIFT, saved = shift, flatfree.CHUNK_SHIFT
    try:
        g = ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(24)], 8))
        e = Engine(g, [f"queue-policy={policy}"])
        rng = random.Random(seed)
        ends: dict[int, float] = {}
        durations: dict[int, float] = {}
        out = []
        now = 0.0
        jobid = 0
        while jobid < 160 or ends:
            now = min([now + rng.choice([0.0, 1.0, 5.0])] + ([min(ends.values())] if jobid >= 160 else []))
            for j in sorted(j for j, t in ends.items() if t <= now):
                e.free(j)
                del ends[j]
            if jobid < 160:
                jobid += 1
                nodes = rng.choice([0, 0, 0, 1, 3, 8])
                durations[jobid] = rng.choice([10.0, 30.0, 200.0])
                e.alloc(jobid, 16, 1000, now, _spec(rng.choice([1, 1, 2, 5, 13]), nodes, durations[jobid]))
            for resp in e.schedule(now).responses:
                if resp.type is ResponseType.SUCCESS:
                    ends[resp.id] = now + durations[resp.id] * rng.choice([0.5, 1.0])
                    out.append((resp.id, now, str(resp.resources.to_rv1(g)["execution"]["R_lite"])))
                elif resp.type is not ResponseType.ANNOTATE:
                    out.append((resp.id, now, resp.type.name))
        assert e.graph.free_bits().value() == e.planner.codec.encode(e.graph.free())
        return out
    finally:
        flatfree.CHUNK_SHIFT = saved


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_decisions_do_not_depend_on_chunks(policy):
    for seed in (1, 2):
        one = _run(policy, 16, seed)  # 216 bits: one chunk
        assert one == _run(policy, 3, seed) == _run(policy, 6, seed)
        assert sum(1 for _, _, what in one if what.startswith("[")) == 160
