"""The planner: spans, availability over time, earliest start, on small graphs."""

from __future__ import annotations

import math
import random

import pytest

from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.planner import Planner, PlannerError
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request


def cores(n: int, duration: float = 0.0) -> Request:
    slot = ResourceRequest("slot", Count.fixed(n), (ResourceRequest("core", Count.fixed(1)),), label="task")
    return Request((slot,), duration=duration)


def nodes(n: int) -> Request:
    return node_request(n, 100.0)


def setup(nnodes=4, ncores=2):
    g = nodes_graph(nnodes, ncores)
    return g, Planner(g)


def run(g, p, jobid, req, start, end):
    from fluxsched_py.match import match

    rs = match(g, req, policy="low")
    g.allocate(jobid, rs)
    p.add_running(jobid, rs, start, end)
    return rs


def test_available_excludes_running_until_their_end():
    g, p = setup()
    rs = run(g, p, 1, nodes(2), 0.0, 100.0)
    assert p.available(0, 50) == g.free()
    assert p.available(100, 200) == g.all() - g.all() | g.free() | rs
    assert p.available(50, 150) == g.free()


def test_reservations_are_subtracted_only_where_they_overlap():
    g, p = setup()
    t, rs = p.earliest(nodes(4), 0.0, 100.0)
    assert t == 0.0
    p.reserve(9, rs, 50.0, 150.0)
    assert not p.available(60, 70).ranks
    assert p.available(0, 50) == g.free()
    assert p.available(150, 160) == g.free()


def test_earliest_waits_for_running_jobs_to_end():
    g, p = setup(4, 2)
    run(g, p, 1, nodes(3), 0.0, 100.0)
    run(g, p, 2, nodes(1), 0.0, 200.0)
    assert p.earliest(nodes(2), 10.0, 50.0)[0] == 100.0
    assert p.earliest(nodes(4), 10.0, 50.0)[0] == 200.0
    assert p.earliest(nodes(5), 10.0, 50.0) is None


def test_earliest_fits_a_hole_between_reservations():
    g, p = setup(2, 1)
    t, rs = p.earliest(nodes(2), 0.0, 10.0)
    p.reserve(1, rs, 100.0, 200.0)
    # a 2-node job of 50 s fits before the reservation, one of 150 s after it
    assert p.earliest(nodes(2), 0.0, 50.0)[0] == 0.0
    assert p.earliest(nodes(2), 0.0, 150.0)[0] == 200.0


def test_core_requests_share_nodes():
    g, p = setup(2, 4)
    run(g, p, 1, cores(6), 0.0, 100.0)
    t, rs = p.earliest(cores(2), 0.0, 10.0)
    assert t == 0.0 and rs.count("core") == 2
    assert p.earliest(cores(3), 0.0, 10.0)[0] == 100.0


def test_remove_restores_availability_and_unknown_remove_is_none():
    g, p = setup()
    t, rs = p.earliest(nodes(2), 0.0, 10.0)
    p.reserve(5, rs, 0.0, 10.0)
    assert p.available(0, 10) != g.free()
    assert p.remove(5).jobid == 5
    assert p.available(0, 10) == g.free()
    assert p.remove(5) is None


def test_bad_spans_raise():
    g, p = setup()
    rs = g.free()
    with pytest.raises(PlannerError):
        p.reserve(1, rs, 10.0, 10.0)
    p.reserve(1, rs, 0.0, 10.0)
    with pytest.raises(PlannerError):
        p.reserve(1, rs, 20.0, 30.0)


def test_overdue_running_job_keeps_its_resources():
    g, p = setup(2, 1)
    run(g, p, 1, nodes(2), 0.0, 100.0)
    assert p.earliest(nodes(1), 50.0, 10.0)[0] == 100.0
    # at t=150 the job is still running (it overran): nothing is known to free up
    assert p.earliest(nodes(1), 150.0, 10.0) is None


def test_set_end_moves_a_running_job_end():
    g, p = setup(1, 1)
    run(g, p, 1, nodes(1), 0.0, 100.0)
    p.set_end(1, 40.0)
    assert p.earliest(nodes(1), 10.0, 10.0)[0] == 40.0


def test_unlimited_spans():
    g, p = setup(2, 1)
    run(g, p, 1, nodes(1), 0.0, math.inf)
    assert p.earliest(nodes(2), 0.0, 10.0) is None
    assert p.earliest(nodes(1), 0.0, math.inf)[0] == 0.0


def test_sliding_window_agrees_with_brute_force():
    """earliest() equals the first candidate time whose available() fits."""
    from fluxsched_py.match import match

    rng = random.Random(3)
    for _ in range(30):
        g, p = setup(6, 1)
        jid = 0
        for _ in range(rng.randrange(1, 8)):
            jid += 1
            n = rng.randrange(1, 4)
            d = float(rng.randrange(5, 50))
            found = p.earliest(nodes(n), 0.0, d)
            if found:
                p.reserve(jid, found[1], found[0], found[0] + d)
        n, d = rng.randrange(1, 7), float(rng.randrange(5, 60))
        got = p.earliest(nodes(n), 0.0, d)
        cands = sorted({0.0} | {s.end for s in p.spans()} | {s.start for s in p.spans()})
        want = None
        for t in cands:
            if match(g, nodes(n), policy="first", available=p.available(t, t + d)) is not None:
                want = t
                break
        assert (got[0] if got else None) == want


def test_not_before_agrees_with_brute_force():
    """earliest(not_before=f) is the first candidate time from f on whose
    available() fits, whether the planner binary-searches (every span has
    started by f: a queue planned in order) or slides its window."""
    from fluxsched_py.match import match

    rng = random.Random(7)
    paths = set()
    for _ in range(60):
        g, p = setup(4, 2)
        jid = 0
        for _ in range(rng.randrange(0, 5)):  # running jobs of 1-2 cores
            jid += 1
            rs = match(g, cores(rng.randrange(1, 3)), policy="low", available=p.available(0.0, 1.0))
            if rs is not None:
                g.allocate(jid, rs)
                p.add_running(jid, rs, 0.0, float(rng.randrange(5, 60)))
        for _ in range(rng.randrange(0, 5)):  # reservations, in order or not
            jid += 1
            d = float(rng.randrange(5, 50))
            found = p.earliest(cores(rng.randrange(1, 6)), 0.0, d)
            if found:
                p.reserve(jid, found[1], found[0], found[0] + d)
        floor = float(rng.choice([1, 10, 30, 45, 80]))
        req, d = (cores(rng.randrange(1, 9)), float(rng.randrange(5, 60)))
        paths.add(p._latest_reserved_start() <= floor)
        got = p.earliest_bits(req, 0.0, d, "low", not_before=floor)
        cands = sorted({floor} | {t for s in p.spans() for t in (s.start, s.end) if t > floor})
        want = None
        for t in cands:
            if match(g, req, policy="low", available=p.available(t, t + d)) is not None:
                want = t
                break
        assert (got.start if got else None) == want
        assert p.now == 0.0  # the present did not move to the floor
    assert paths == {True, False}  # both the binary search and the sliding window were checked


@pytest.mark.parametrize(
    "recipe",
    [
        {"cluster": {"racks": 2, "nodes_per_rack": 3, "sockets": 2, "cores_per_socket": 2, "gpus_per_socket": 1}},
        {"cluster": {"nodes": 3, "sockets": 2, "cores_per_socket": 4}},
    ],
)
def test_flat_codec_round_trips_and_planner_works_on_richer_graphs(recipe):
    """Regression: decode crashed on graphs whose nodes are not children of the root."""
    from fluxsched_py.match import match
    from fluxsched_py.planner.flat import FlatCodec
    from fluxsched_py.resource import ResourceGraph

    g = ResourceGraph.from_recipe(recipe)
    codec = FlatCodec(g)
    rs = match(g, cores(3), policy="low")
    for s in (g.all(), g.free(), rs, g.all() - rs):
        assert codec.decode(codec.encode(s)) == s
    p = Planner(g)
    g.allocate(1, rs)
    p.add_running(1, rs, 0.0, 100.0)
    assert p.available(0, 10) == g.free()
    t, got = p.earliest(cores(g.all().count("core")), 0.0, 10.0)
    assert t == 100.0 and got.count("core") == g.all().count("core")


def test_forgetting_the_past_changes_no_answer_from_now_on():
    """The planner folds boundaries at or before now into its first segment;
    every window from now on, and every earliest start, is what a planner
    that keeps the whole past says (random spans, running and reserved,
    starting before, at and after now)."""
    rnd = random.Random(7)
    g = nodes_graph(6, 4)
    folding, keeping = Planner(g), Planner(g)
    keeping._forget_past = lambda: None  # the reference: never folds
    width = folding.codec.width
    now = 0.0
    live: list[int] = []
    for step in range(1500):
        op = rnd.random()
        if op < 0.35:
            jobid = step
            start = now + rnd.choice([-5.0, -1.0, 0.0, 0.0, 2.0, 7.5])
            end = rnd.choice([math.inf, start + rnd.choice([1.0, 3.0, 10.0])])
            if end <= start:
                continue
            bits = rnd.getrandbits(width)
            running = rnd.random() < 0.6
            for p in (folding, keeping):
                (p.add_running if running else p.reserve)(jobid, None, start, end, bits)
            live.append(jobid)
        elif op < 0.6 and live:
            jobid = live.pop(rnd.randrange(len(live)))
            assert folding.remove(jobid).bits == keeping.remove(jobid).bits
        elif op < 0.75:
            now += rnd.choice([0.0, 0.5, 1.0, 2.5])
            for p in (folding, keeping):
                p.set_now(now)
        else:
            t0 = now + rnd.choice([0.0, 0.25, 1.0, 4.0])
            t1 = t0 + rnd.choice([0.5, 2.0, 20.0])
            assert folding.available_bits(t0, t1) == keeping.available_bits(t0, t1)
    assert len(folding._times) <= len(keeping._times)
    assert folding._floor > 0


def test_flat_sets_of_a_filling_machine_spread_over_dict_slots():
    """``hash(int)`` is the value modulo 2**61 - 1: the free sets of a machine
    taken core by core have 61 hashes between them.  FlatCodec.spread, which
    the match memo keys on, tells them apart."""
    from fluxsched_py.planner.flat import FlatCodec

    codec = FlatCodec(nodes_graph(64, 8))
    full = (1 << codec.width) - 1
    sets = [full & ~(((1 << k) - 1) << codec.n) for k in range(64 * 8)]
    assert len({hash(x) for x in sets}) <= 61
    assert len({codec.spread(x) for x in sets}) == len(sets)
