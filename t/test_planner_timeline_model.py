"""The timeline's difference-encoded step function against two references.

:class:`SegmentUnions` is the step function the planner kept before the
difference encoding (every segment's union updated by every span that covers
it), kept here as the reference: after any sequence of adds, removes,
``set_now`` and ``set_end``, overlapping or not, the timeline answers every
``available_bits`` exactly as it does.  With disjoint spans (the planner's
contract), the answers are also checked against the spans themselves, from
scratch, and ``earliest`` against a linear search over every candidate time
with the matcher.
"""

from __future__ import annotations

import bisect
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import match
from fluxsched_py.planner import Planner
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import node_request


class SegmentUnions:
    """The reference: sorted boundaries, the union of the spans over each
    segment, each add or remove walking every segment it covers; boundaries
    up to now are folded into the first segment (with overlapping spans a
    remove clears what another span holds, so folding shows)."""

    def __init__(self) -> None:
        self.times: list[float] = [-math.inf]
        self.used: list[int] = [0]
        self.refs: list[int] = [1]
        self.floor = -math.inf
        self.spans: dict[int, tuple[float, float, int]] = {}

    def set_now(self, now: float) -> None:
        if len(self.times) > 1 and self.times[1] <= now:
            k = self._index(now)
            self.used[0] = self.used[k]
            del self.times[1 : k + 1], self.used[1 : k + 1], self.refs[1 : k + 1]
            self.floor = now

    def _index(self, t: float) -> int:
        return bisect.bisect_right(self.times, t) - 1

    def _split(self, t: float) -> int:
        if t <= self.floor:
            return 0
        k = self._index(t)
        if self.times[k] != t:
            k += 1
            self.times.insert(k, t)
            self.used.insert(k, self.used[k - 1])
            self.refs.insert(k, 0)
        self.refs[k] += 1
        return k

    def _unref(self, k: int) -> None:
        if k >= len(self.times):
            return
        self.refs[k] -= 1
        if self.refs[k] == 0 and k > 0:
            del self.times[k], self.used[k], self.refs[k]

    def add(self, jobid: int, start: float, end: float, bits: int) -> None:
        lo = self._split(start)
        hi = self._split(end) if end != math.inf else len(self.times)
        for k in range(lo, hi):
            self.used[k] |= bits
        self.spans[jobid] = (start, end, bits)

    def remove(self, jobid: int) -> None:
        start, end, bits = self.spans.pop(jobid)
        lo = self._index(start)
        hi = self._index(end) if end != math.inf else len(self.times)
        for k in range(lo, hi):
            self.used[k] &= ~bits
        if end > self.floor:
            self._unref(hi)
        if start > self.floor:
            self._unref(lo)

    def busy(self, t0: float, t1: float) -> int:
        out = 0
        for k in range(self._index(t0), bisect.bisect_left(self.times, t1)):
            out |= self.used[k]
        return out


def from_spans(spans: dict[int, tuple[float, float, int]], t0: float, t1: float) -> int:
    """What the spans that overlap ``[t0, t1)`` use, from scratch."""
    out = 0
    for start, end, bits in spans.values():
        if start < t1 and end > t0:
            out |= bits
    return out


WIDTH = 12  # 4 nodes x 2 cores: 4 node bits and 8 core bits, and a cluster bit

ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "remove", "now", "ask", "end"]),
        st.sampled_from([-5.0, -1.0, 0.0, 0.0, 1.0, 2.0, 7.5]),  # start, from now
        st.sampled_from([0.5, 1.0, 3.0, 10.0, math.inf]),  # length
        st.integers(min_value=1, max_value=(1 << WIDTH) - 1),  # bits
        st.booleans(),  # running
        st.integers(min_value=0, max_value=10**6),  # which span
    ),
    max_size=80,
)


def replay_ops(seq, *, disjoint: bool) -> None:
    g = nodes_graph(4, 2)
    p = Planner(g)
    ref = SegmentUnions()
    pool = p.pool_bits()
    now = 0.0
    jobid = 0
    for op, dt, length, bits, running, pick in seq:
        if op == "add":
            start = now + dt
            end = start + length
            if disjoint and from_spans(ref.spans, start, end) & bits:
                continue
            jobid += 1
            (p.add_running if running else p.reserve)(jobid, None, start, end, bits)
            ref.add(jobid, start, end, bits)
        elif op == "remove" and ref.spans:
            victim = sorted(ref.spans)[pick % len(ref.spans)]
            assert p.remove(victim).bits == ref.spans[victim][2]
            ref.remove(victim)
        elif op == "end" and ref.spans:
            victim = sorted(ref.spans)[pick % len(ref.spans)]
            start, end, b = ref.spans[victim]
            new_end = max(start, now) + length
            span = p.span(victim)
            if span.running and new_end > end:
                continue  # set_end would drop reservations: not this model's business
            others = {j: s for j, s in ref.spans.items() if j != victim}
            if disjoint and from_spans(others, start, new_end) & b:
                continue
            p.set_end(victim, new_end)
            ref.remove(victim)
            ref.add(victim, start, new_end, b)
        elif op == "now":
            now += abs(dt)
            p.set_now(now)
            ref.set_now(now)
        t0 = now + abs(dt)
        t1 = t0 + length
        want = ref.busy(t0, t1)
        got = p.available_bits(t0, t1)
        assert got == pool & ~want, (op, t0, t1)
        if disjoint:
            assert want == from_spans(ref.spans, t0, t1)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_the_timeline_answers_as_segment_unions(seq):
    """Any spans, overlapping ones included (the timeline then keeps every
    segment whole, as the reference does)."""
    replay_ops(seq, disjoint=False)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_disjoint_spans_answer_as_the_spans_themselves(seq):
    replay_ops(seq, disjoint=True)


def cores(n: int) -> Request:
    slot = ResourceRequest("slot", Count.fixed(n), (ResourceRequest("core", Count.fixed(1)),), label="task")
    return Request((slot,))


requests = st.sampled_from([("cores", 1), ("cores", 3), ("cores", 8), ("nodes", 1), ("nodes", 2), ("nodes", 4)])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            requests,
            st.sampled_from([1.0, 5.0, 20.0, math.inf]),  # duration
            st.sampled_from([0.0, 0.0, 2.0, 6.0]),  # time step
            st.booleans(),  # a job ends
            st.integers(min_value=0, max_value=10**6),
        ),
        max_size=40,
    )
)
def test_earliest_is_the_first_candidate_that_matches(seq):
    """Jobs started or reserved where ``earliest`` says, some ending; each
    answer is the first boundary time (from now) at which the matcher places
    the request on what the spans leave free over the whole duration."""
    g = nodes_graph(4, 2)
    p = Planner(g)
    pool_of = p.pool_bits
    now = 0.0
    jobid = 0
    for (kind, n), duration, step, ends, pick in seq:
        now += step
        if ends and p.spans():
            victim = sorted(s.jobid for s in p.spans())[pick % len(p.spans())]
            span = p.remove(victim)
            if span.running:
                g.release(victim)
        req = cores(n) if kind == "cores" else node_request(n, duration)
        got = p.earliest_bits(req, now, duration, "low")
        spans = {s.jobid: (s.start, s.end, s.bits) for s in p.spans()}
        pool = pool_of()
        d = math.inf if not duration else duration
        cands = sorted({now} | {t for s in spans.values() for t in s[:2] if now < t < math.inf})
        want = None
        for t in cands:
            avail = pool & ~from_spans(spans, t, t + d)
            rs = match(g, req, policy="low", available=p.codec.decode(avail))
            if rs is not None:
                want = t
                break
        assert (None if got is None else got.start) == want
        if got is None:
            continue
        jobid += 1
        t, bits = got.start, got.placement.bits
        rs = p.resolve(got.placement)
        if t == now:
            g.allocate(jobid, rs)
            p.add_running(jobid, rs, now, now + d)
        else:
            p.reserve(jobid, rs, t, t + d, bits)
