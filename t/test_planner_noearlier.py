"""NoEarlier proofs carried forward: the bounds are the definition's.

``ProofLog.prove_none_before`` sums what each logged gain may add to each
piece of a proof with a difference array, and finds what of a gain is in use
up to ``now + duration`` with suffix unions of the segments.  Here every
call made during busy conservative replays is checked against the
definition computed the plain way (each gain against each piece, each
segment walked): the same answer (a proof or None) and, for a proof, the
same bound for every piece.
"""

from __future__ import annotations

import bisect
import math
import random

from hypothesis import HealthCheck, given, settings

from fluxsched_py.planner.noearlier import ProofLog
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .test_policy_conservative import busy_workloads


def plain_bounds(pl, proof, jobid, duration, now, own=0):
    """The bounds of ``prove_none_before`` by its definition, or None; ``proof`` is not changed."""
    if now < proof.now or proof.seq < pl._gains_base:
        return None
    if not duration or duration <= 0:
        duration = math.inf
    codec = pl.codec
    pool = pl.pool_bits()
    joined = pool & ~proof.pool
    horizon, limit = proof.t + duration, now + duration
    gained, found = joined, []
    ptimes, used = pl._times, pl._materialize()
    for a, b, bits, _, jid in pl._gains[proof.seq - pl._gains_base :]:
        if b <= now or a >= horizon or jid == jobid:
            continue
        gained |= bits
        useful = bits
        if limit > b:
            for k in range(bisect.bisect_right(ptimes, b) - 1, len(ptimes)):
                if ptimes[k] >= limit:
                    break
                useful &= ~used[k] | own
        nodes = codec.nodes_touched(useful)
        if nodes:
            found.append((a, b, nodes))
    k = bisect.bisect_right(proof.times, now) - 1
    times, whole = proof.times[max(k, 0) :], proof.whole[max(k, 0) :]
    if not found and not joined:
        return list(whole)
    bound = []
    for i in range(len(times)):
        add = codec.nodes_touched(joined)
        for a, b, nodes in found:
            # the pieces with a window [t, t + duration) that overlaps [a, b)
            if max(bisect.bisect_right(times, a - duration) - 1, 0) <= i < bisect.bisect_left(times, b):
                add += nodes
        bound.append(whole[i] + add)
    if bound and max(bound) >= proof.n:
        again = pl._whole_again(gained, pool, times, proof.t, duration, now, own)
        if again is None:
            return None
        bound = [w + x for w, x in zip(whole, again, strict=True)]
        if max(bound) >= proof.n:
            return None
    return bound


def _replay_checked(nodes, jobs):
    """Replay under conservative with every carried proof checked; the outcomes (proof or not)."""
    calls = []
    real = ProofLog.prove_none_before

    def checked(self, proof, jobid, duration, now, own=0):
        want = plain_bounds(self, proof, jobid, duration, now, own)
        got = real(self, proof, jobid, duration, now, own)
        calls.append(want is not None)
        assert (got is None) == (want is None)
        if got is not None:
            assert got.whole == want
        return got

    ProofLog.prove_none_before = checked
    try:
        w = Workload(
            [WorkloadJob(i, str(i), s, node_request(r, wall), wall, run, r) for i, s, r, wall, run in jobs], nodes
        )
        replay(w, nodes_graph(nodes), {"queue-policy": "conservative"})
    finally:
        ProofLog.prove_none_before = real
    return calls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads())
def test_carried_proofs_have_the_definitions_bounds(wl):
    _replay_checked(*wl)


def test_a_busy_queue_carries_proofs_and_refutes_some():
    """Not vacuous: on a seeded busy workload (64 nodes, small jobs among
    big ones, so gains are often too small to refute a big job's proof)
    both outcomes occur, many times."""
    rng = random.Random(15)
    nodes = 64
    jobs = []
    for i in range(200):
        wall = rng.randint(5, 120)
        size = rng.randint(1, 4) if rng.random() < 0.6 else rng.randint(24, nodes)
        jobs.append((i, float(rng.randint(0, 800)), size, float(wall), float(rng.randint(1, wall))))
    calls = _replay_checked(nodes, jobs)
    assert calls.count(True) > 500 and calls.count(False) > 500
