"""Proofs that a whole-node search would fail, so it is not made.

Conservative backfilling re-plans every reservation on every pass after a
job ends early, and most of those searches find nothing.  A failed
whole-node search leaves a :class:`NoEarlier` proof; the planner logs what
becomes available (:class:`ProofLog`), and :meth:`ProofLog.prove_none_before`
shows from that log alone when the same search would fail again, so it is
not made (counting the nodes the log touches, and when that is not enough,
looking at each of the few nodes touched in the plan as it is now).  A proof
never changes a decision: it answers None exactly where the search would.

The switch is :data:`PROOFS` (or ``Planner(graph, proofs=False)``): off,
no proof is made or used and nothing is logged, and every search is made.
Decisions are the same either way (``t/test_policy_conservative.py``
``test_proofs_change_no_decision``).  Why it stays on, measured on 2 shared,
loaded cores, alternating runs, identical decision digests in every run:

``bench/bench_forecast.py`` (1000 x 8, 8000 running, backlog 64; median ms
per pass of 15), conservative: with proofs 559, 580, 558, 673; without 739,
717, 689, 764, 748 -- proofs make the pass about 1.25x faster.  fcfs and
easy: within noise (fcfs 6.8 to 12.7 ms either way, easy 10 to 16 ms).

The 100k-style synthetic SWF replay (30,000 jobs, 256 nodes; CPU seconds,
process time), conservative: with proofs 15.2, 15.5; without 12.3 -- proofs
cost about 20 % there (the log and the bookkeeping cost more than the few
searches they save when jobs are short and frees make room).  easy 7.5,
8.1 against 7.2; fcfs 9.6, 10.1 against 8.9.

Carrying a proof forward costs one pass over its pieces and one over the
segments up to ``now + duration``, however many spans were removed since
(a difference array and suffix unions; ``t/test_planner_noearlier.py``
checks every bound against the plain definition).

On, because a full machine with a deep backlog (the forecast case) is where
a pass's latency matters to a live broker; a replay that wants the 20 % back
sets ``PROOFS = False`` before it builds its engine.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .timeline import Span

__all__ = ["NoEarlier", "PROOFS", "ProofLog"]

#: The one switch: make and use NoEarlier proofs (the default for a Planner).
PROOFS = True
#: Bits of sets the log of gains may hold (32 MiB): a 1,024-node machine of
#: 32 cores keeps 8,192 entries, 200,000 one-core nodes about 670.
GAINS_BITS = 1 << 28


class NoEarlier:
    """Proof that a whole-node request cannot start anywhere in ``[now, t)``.

    A search for ``n`` whole nodes over ``duration`` that failed at every
    candidate time before ``t`` leaves its trace here: for each candidate
    ``times[i]``, ``whole[i]`` is at most the number of whole nodes that were
    available for ``duration`` from any time in ``[times[i], times[i+1])``
    (the last piece ends at ``t``); every ``whole[i] < n``.  ``pool`` is the
    pool then, and ``seq`` the planner's log position (:meth:`Planner.certify`).
    :meth:`Planner.prove_none_before` carries the proof forward to a later
    state of the plan without searching again.
    """

    __slots__ = ("n", "now", "t", "times", "whole", "pool", "seq")

    def __init__(self, n: int, now: float) -> None:
        self.n = n
        self.now = now
        self.t = math.inf
        self.times: list[float] = []
        self.whole: list[int] = []
        self.pool = 0
        self.seq = -1


class ProofLog:
    """The planner's side of the proofs (a base of
    :class:`~fluxsched_py.planner.timeline.Timeline`): the log of what became
    available, and carrying a proof forward over it."""

    _gains: list[tuple[float, float, int, int, int]]
    _gains_keep: int
    _gains_base: int
    codec: Any
    _gains_mark: int
    proofs: int
    use_proofs: bool
    _times: list[float]

    def _init_log(self, use_proofs: bool) -> None:
        #: See :data:`PROOFS`.
        self.use_proofs = use_proofs
        # Everything that became available, in order: (start, end, bits,
        # nodes touched or -1 until a proof asks, jobid) for a removed span
        # (or a timeline merge, jobid -2); _gains[0] is entry number _gains_base.  A span removed
        # and added again for the same job (re-planned) leaves only the net
        # difference.  See prove_none_before().
        self._gains = []
        #: entries kept (the older half dropped past it): 8,192, fewer on a
        #: machine so big that they would hold more than GAINS_BITS bits of
        #: sets (a proof older than the log searches again)
        self._gains_keep = max(64, min(8192, GAINS_BITS // max(1, self.codec.width)))
        self._gains_base = 0
        self._gains_mark = 0  # entries before it were seen by a proof: never rewritten
        #: Searches :meth:`prove_none_before` made unnecessary (statistics).
        self.proofs = 0

    def certify(self) -> int:
        """The current position in the log of removed spans (what a
        :class:`NoEarlier` proof was made against); entries before it stay
        logged."""
        seq = self._gains_base + len(self._gains)
        self._gains_mark = seq
        return seq

    def whole_node_request(self, request: Any, policy: str) -> int:
        """N when ``request`` fits a set exactly when N whole nodes of it are
        available (the matcher's whole-node fast path), else 0.  Such a fit
        is monotone: a set that fits keeps fitting when it grows.  0 (so
        no proof is made) when proofs are switched off."""
        m = self.matcher
        if not (self.use_proofs and m.fast_paths and self.codec.flat_nodes and policy in m.FAST_ORDER):
            return 0
        return m.whole_nodes(request)

    def keep_if_none_before(self, jobid: int, proof: NoEarlier, duration: float, now: float) -> bool | None:
        """Re-plan ``jobid``'s reservation without touching the plan, when that
        is provably what re-planning would do.

        Re-planning takes the span out, checks that its place is still free,
        searches for an earlier place, and puts the span back when there is
        none.  While no two spans ever overlapped on a resource the step
        function is exactly the union of the spans, so: the place is still
        free exactly when the pool holds it; taking a span out and putting
        the same one back leaves everything as it was but its position in
        :meth:`spans`' order (it goes last); and ``proof`` carried forward
        (:meth:`prove_none_before`, with the job's own span discounted)
        shows the search would find nothing.  Returns True when all of that
        held and the span was moved last, else False (then re-plan for real),
        or None when the proof no longer holds.
        """
        span = self._spans.get(jobid)
        if self._overlapped or span is None or span.running or span.start != proof.t or not span.start > now:
            return False
        bits = span.bits
        if self.pool_bits() & bits != bits:
            return False
        if self.prove_none_before(proof, jobid, duration, now, own=bits) is None:
            return None
        self._spans[jobid] = self._spans.pop(jobid)
        self._reserved[jobid] = self._reserved.pop(jobid)
        proof.seq = self.certify()
        return True

    def prove_none_before(
        self, proof: NoEarlier, jobid: int, duration: float, now: float, own: int = 0
    ) -> NoEarlier | None:
        """Carry ``proof`` (made for ``jobid``) forward to the plan as it is
        now: return it updated if the request still cannot start anywhere in
        ``[now, proof.t)``, else None (then search).

        Why it holds: whatever is available over ``[t, t + duration)`` now
        was available then, or joined the pool since, or belonged to a span
        removed since that overlapped ``[t, t + duration)`` (spans that were
        added only take resources away; the job's own span never counts).  A
        node wholly available now was wholly available then or has something
        of it in one of those sets; so at most ``whole[i]`` plus the nodes
        those sets touch are available from any ``t`` in piece ``i``.  If that
        stays below ``n`` everywhere, every candidate the search would try
        fails, and a whole-node fit is exactly "n whole nodes available".

        ``own``: the job's own span is still in the plan, on these resources
        (they never count as in use).
        """
        if now < proof.now or proof.seq < self._gains_base:
            return None
        if not duration or duration <= 0:
            duration = math.inf
        pool = self.pool_bits()
        joined = pool & ~proof.pool
        end = proof.t
        horizon = end + duration
        limit = now + duration
        gains = self._gains
        found: list[tuple[float, float, int]] = []  # (a, b, nodes) that may help
        gained = joined  # everything that may have made a node whole since
        # Unions of the segments in use from segment k up to ``limit`` (the
        # last before it first), built once for every gain that needs one.
        ptimes = self._times
        kl = -1  # segments before it end before limit (-1: not looked up yet)
        used: list[int] = []
        suffix: list[int] = []  # suffix[i]: union of used[kl - 1 - i : kl]
        for g in range(proof.seq - self._gains_base, len(gains)):
            a, b, bits, nodes, jid = gains[g]
            if b <= now or a >= horizon or jid == jobid:
                continue
            gained |= bits
            if nodes < 0:
                nodes = self.codec.nodes_touched(bits)
                gains[g] = (a, b, bits, nodes, jid)
            if not nodes:
                continue
            if limit > b:
                # Every window [t, t + duration) that overlaps [a, b) from
                # t >= now also covers [b, now + duration): what is in use
                # there now is no gain to any of them.
                if kl < 0:
                    kl = bisect.bisect_left(ptimes, limit)
                    used = self._materialize(kl + 1)
                need = kl - (bisect.bisect_right(ptimes, b) - 1)  # segments from b's to limit
                if need > 0:
                    while len(suffix) < need:
                        u = used[kl - 1 - len(suffix)]
                        suffix.append(suffix[-1] | u if suffix else u)
                    busy = suffix[need - 1]
                    # bits & (~busy | own), without negative ints
                    useful = (bits ^ (bits & busy)) | (bits & own)
                    if useful != bits:
                        nodes = self.codec.nodes_touched(useful) if useful else 0
                        if not nodes:
                            continue
            found.append((a, b, nodes))
        times, whole = proof.times, proof.whole
        k = bisect.bisect_right(times, now) - 1
        if k > 0:
            times, whole = times[k:], whole[k:]
        if found or joined:
            # What each piece may have gained: a difference array over the
            # pieces, one entry in and one out per gain, then summed up.
            npieces = len(times)
            diff = [0] * (npieces + 1)
            diff[0] = self.codec.nodes_touched(joined) if joined else 0
            for a, b, nodes in found:
                # The windows that overlap [a, b): a - duration < t < b.
                first = bisect.bisect_right(times, a - duration) - 1
                if first < 0:
                    first = 0
                stop = bisect.bisect_left(times, b)
                if first < stop:
                    diff[first] += nodes
                    diff[stop] -= nodes
            diff.pop()
            add = list(itertools.accumulate(diff))
            bound = list(map(operator.add, whole, add))
            if bound and max(bound) >= proof.n:
                add = self._whole_again(gained, pool, times, proof.t, duration, now, own)
                if add is None:
                    return None
                bound = list(map(operator.add, whole, add))
                if max(bound) >= proof.n:
                    return None
            whole = bound
        proof.now, proof.times, proof.whole, proof.pool = now, times, whole, pool
        return proof

    #: :meth:`_whole_again` gives up beyond this many nodes (its cost is
    #: one pass over the timeline per node).
    WHOLE_AGAIN_NODES = 16

    def _whole_again(
        self, gained: int, pool: int, times: list[float], t: float, duration: float, now: float, own: int
    ) -> list[int] | None:
        """For each piece ``[times[i], times[i+1])`` of a proof (the last
        ends at ``t``), how many of the nodes that ``gained`` touches are
        wholly available, in the plan as it is now, over ``[s, s +
        duration)`` for some start ``s`` in that piece (from ``now`` on); or
        None when too many nodes are touched to look at each.

        Why it bounds what :meth:`prove_none_before` needs: a node wholly
        available now but not when the proof was made has something of it
        in ``gained``, and it counts only where it is wholly available now.
        A node is, over ``[s, s + duration)``, exactly when it is in the pool
        and no segment of the step function that the window overlaps uses
        any of it (``own``, the job's own span still in the plan, aside)."""
        codec = self.codec
        shift = codec.unit_shift
        if shift is not None:
            # one unit per node: the touched nodes and the whole ones are
            # two masks, not a walk of every node
            cand = (gained | gained >> shift) & codec.whole_nodes(pool)
            if cand.bit_count() > self.WHOLE_AGAIN_NODES:
                return None
            node_bits = codec.node_bits
            nodes = []
            while cand:
                low = cand & -cand
                cand ^= low
                nodes.append(node_bits[low.bit_length() - 1])
        else:
            nodes = [full for full in codec.node_bits.values() if gained & full and pool & full == full]
            if len(nodes) > self.WHOLE_AGAIN_NODES:
                return None
        add = [0] * len(times)
        if not nodes:
            return add
        ptimes = self._times
        k0 = bisect.bisect_right(ptimes, now) - 1
        # a window starting before t ends by t + duration: later segments never matter
        kend = max(bisect.bisect_left(ptimes, t + duration), k0 + 1)
        starts = ptimes[k0:kend]
        starts[0] = now
        keep = ~own
        fulls = [full & keep for full in nodes]
        mask = 0
        for full in fulls:
            mask |= full
        busy = [u & mask for u in self._materialize(kend)[k0:kend]]
        last = len(times) - 1
        for full in fulls:
            # 1 where the node is unused, per segment; runs of 1s are the
            # maximal [u, v) it is unused (to the horizon at least at the end)
            free = bytes([not (x & full) for x in busy])
            done = -1  # pieces already counted for this node
            j = free.find(1)
            while j >= 0:
                e = free.find(0, j)
                u = starts[j]
                v = math.inf if e < 0 else starts[e]
                if v - u >= duration:
                    first = max(bisect.bisect_right(times, u) - 1, 0, done + 1)
                    stop = last if v == math.inf else min(bisect.bisect_right(times, v - duration) - 1, last)
                    for i in range(first, stop + 1):
                        add[i] += 1
                    done = max(done, stop)
                if e < 0:
                    break
                j = free.find(1, e)
        return add

    def _log_gain(self, start: float, end: float, bits: int, jobid: int) -> None:
        if start < end and bits and self.use_proofs:
            gains = self._gains
            gains.append((start, end, bits, -1, jobid))
            if len(gains) > self._gains_keep:
                half = self._gains_keep // 2
                del gains[:half]
                self._gains_base += half

    def _net_gain(self, span: Span) -> None:
        """``span``'s job gave back a span just before (re-planned): keep only
        what the old span held that the new one does not."""
        gains = self._gains
        if not gains or self._gains_base + len(gains) <= self._gains_mark:
            return
        a, b, old, _, jobid = gains[-1]
        if jobid != span.jobid:
            return
        gains.pop()
        c, d, new = span.start, span.end, span.bits
        if c >= b or d <= a:  # no overlap in time
            self._log_gain(a, b, old, jobid)
            return
        self._log_gain(a, c, old, jobid)
        self._log_gain(max(a, c), min(b, d), old & ~new, jobid)
        self._log_gain(d, b, old, jobid)
