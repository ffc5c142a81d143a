"""The node index the slot fast path reads equals a count made afresh, and
what the engine decides with it equals what it decides with the matcher.

:class:`~fluxsched_py.planner.nodeindex.NodeIndex` moves node by node as the
set it follows changes; these tests drive it (and the engine's incremental
free set) through random sequences of allocations, releases, and ranks going
down, up, drained and undrained, and compare with oracles that know nothing
of it: each node's popcount read through its rank's mask, ``graph.free()``
encoded afresh, and an engine whose every match is the real matcher's.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine
from fluxsched_py.engine.states import ResponseType
from fluxsched_py.match import match
from fluxsched_py.planner import MatchCache
from fluxsched_py.planner.flat import FlatCodec
from fluxsched_py.replay.platform import nodes_graph

from .test_engine_rfc27 import graph, jobspec
from .test_planner_fastfit import slots

SHAPES = [(9, 1), (16, 8), (12, 6), (5, 4), (20, 3), (3, 260), (40, 32)]
ORDERS = ["low", "high", "first", "worst"]


def recount(codec: FlatCodec, x: int, nodes: int) -> list[int]:
    """Free cores per node in ``x``, through each rank's own mask."""
    cores = codec.type_masks["core"]
    return [(codec.rank_masks[r] & cores & x).bit_count() for r in range(nodes)]


def check_index(idx, want: list[int]) -> None:
    """Every field of ``idx`` against the counts ``want``."""
    width = idx.fields.width
    assert list(idx.cnt) == want
    assert idx.hist == [want.count(v) for v in range(width + 1)]
    assert idx.total == sum(want)
    assert idx.vmax == max(want)
    for c in range(1, width + 2):
        assert idx.ge(c) == sum(1 << i for i, v in enumerate(want) if v >= c)
        assert idx.capacity(c) == sum(v // c for v in want)
    assert idx.eq is not None
    for v in range(1, width + 1):
        assert idx.eq[v] == sum(1 << i for i, n in enumerate(want) if n == v)
    # the orders, against a sort of the recount
    for c in (1, 2, width):
        ok = [i for i, v in enumerate(want) if v >= c]
        assert list(idx.in_order(c, "low")) == ok
        assert list(idx.in_order(c, "high")) == ok[::-1]
        assert list(idx.in_order(c, "first")) == sorted(ok, key=lambda i: (want[i], i), reverse=True)
        assert list(idx.in_order(c, "worst")) == sorted(ok, key=lambda i: (-want[i], i))


def step(rng: random.Random, codec: FlatCodec, x: int, full: int, nodes: int) -> int:
    """One random change to ``x``: cores taken or given back (a few, or a
    few dozen), a rank down or up, or a jump to an unrelated set."""
    kind = rng.random()
    if kind < 0.05:
        return full & rng.getrandbits(codec.width)
    if kind < 0.15:
        r = rng.randrange(nodes)
        m = codec.rank_masks[r]
        return x & ~m if rng.random() < 0.5 else x | m
    cores = [i for i in range(codec.width) if codec.type_masks["core"] >> i & 1]
    for i in rng.sample(cores, min(len(cores), rng.choice([1, 1, 2, 3, 40]))):
        x ^= 1 << i
    return x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from(SHAPES))
def test_index_equals_a_recount_after_random_changes(seed, shape):
    nodes, cores = shape
    rng = random.Random(seed)
    codec = FlatCodec(nodes_graph(nodes, cores))
    fields = codec.unit_fields("core")
    full = (1 << codec.width) - 1
    x = full
    sets = [x]
    for _ in range(60):
        if rng.random() < 0.2:  # back to a set asked about before
            x = rng.choice(sets)
        else:
            x = step(rng, codec, x, full, nodes)
        sets.append(x)
        idx = fields.index(x)
        want = recount(codec, x, nodes)
        if rng.random() < 0.5:  # questions sometimes before, sometimes after moves
            check_index(idx, want)
        assert list(fields.counts(x)) == want
    for f in fields._followers:  # every kept index, at its own set
        check_index(f, recount(codec, f.x, nodes))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from(SHAPES[:-1]), st.sampled_from(sorted(MatchCache.SLOT_ORDER)))
def test_fast_answers_on_a_moving_set_equal_the_matcher(seed, shape, policy):
    """The fast path on sets reached by small moves (its index moved in
    place, not counted afresh) picks what the matcher picks."""
    nodes, cores = shape
    rng = random.Random(seed)
    g = nodes_graph(nodes, cores)
    codec = FlatCodec(g)
    fast, slow = MatchCache(match), MatchCache(match, fast_paths=False)
    full = codec.encode(g.all())
    x = full
    for _ in range(40):
        x = step(rng, codec, x, full, nodes)
        c = rng.randrange(1, cores + 2)
        req = slots(rng.randrange(1, max(2, nodes * cores // c // 2 + 2)), c)
        a = fast.flat(g, codec, req, policy, x)
        b = slow.flat(g, codec, req, policy, x)
        assert (a is None) == (b is None)
        assert fast.fit(codec, req, policy, x) == (b is not None)
        if a is not None:
            assert a.bits == b.bits and a.resources == b.resources
    assert fast.fast > 0


def _engines(nodes: int, cores: int, options: list[str]) -> tuple[Engine, Engine]:
    fast = Engine(graph(nodes, cores), options)
    slow = Engine(graph(nodes, cores), options)
    slow.planner.matcher.fast_paths = False
    return fast, slow


def _decisions(result) -> list[tuple]:
    return [
        (r.id, r.type, r.R and r.R["execution"]["R_lite"])
        for r in result.responses
        if r.type in (ResponseType.SUCCESS, ResponseType.DENY)
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["fcfs", "easy", "conservative"]),
    st.sampled_from(["first", "low", "high", "worstfit"]),
)
def test_engine_decisions_with_the_index_equal_the_matchers(seed, queue_policy, placement):
    """Two engines, one on the fast path and one on the matcher alone, get
    the same random stream of allocs, frees, and ranks going down, up,
    drained and undrained: they start the same jobs on the same cores, and
    the fast one's incremental free set equals ``graph.free()`` encoded
    afresh, and its node index a recount of that set."""
    rng = random.Random(seed)
    nodes, cores = rng.choice([(6, 4), (10, 2), (4, 8)])
    fast, slow = _engines(nodes, cores, [f"queue-policy={queue_policy}", f"policy={placement}"])
    running: list[int] = []
    now = 0.0
    jid = 0
    for _ in range(50):
        now += 1.0
        kind = rng.random()
        if kind < 0.5:
            jid += 1
            spec = jobspec(
                cores=rng.randrange(1, cores + 1), nslots=rng.randrange(1, 4), duration=rng.choice([0, 5, 50])
            )
            for e in (fast, slow):
                e.alloc(jid, 16, 1000, now, spec)
        elif kind < 0.8 and running:
            j = running.pop(rng.randrange(len(running)))
            for e in (fast, slow):
                e.free(j)
        else:
            r = rng.randrange(nodes)
            op = rng.choice(["down", "up", "drain", "undrain"])
            for e in (fast, slow):
                if op in ("down", "up"):
                    e.resource_update(**{op: str(r)})
                else:
                    getattr(e.graph, op)(r, *(["test"] if op == "drain" else []))
        got, want = _decisions(fast.schedule(now)), _decisions(slow.schedule(now))
        assert got == want
        running += [i for i, t, _ in got if t is ResponseType.SUCCESS]
        free = fast.planner.free_bits()
        codec = fast.planner.codec
        assert free == codec.encode(fast.graph.free())
        idx = codec.unit_fields("core").index(free)
        check_index(idx, recount(codec, free, nodes))
    assert fast.planner.matcher.fast > 0 and slow.planner.matcher.fast == 0
