"""The timeline: the step function of future availability.

Spans, one per job, each a set of resources held over ``[start, end)``: a
*running* span belongs to a job that holds its resources in the graph now
(``end`` is its expiration, ``math.inf`` when unlimited); a *reserved* span
is a promise made to a pending job.  Spans of different jobs that overlap in
time must use disjoint resources; the planner trusts its callers on that,
exactly as the graph refuses double allocation.

The step function: sorted boundary times, and at each boundary the union of
the resources of the spans that start there and of those that end there
(difference encoding).  What is in use during a segment follows from the
segment before it: drop what ends, add what starts.  Adding or removing a
span touches its two boundaries only, whatever it covers, so a job started
on a machine with thousands of running jobs costs two set operations, not
one per segment.  The segments' unions are a cache, rebuilt from the first
boundary a change touched up to the furthest one a question reads
(:meth:`Timeline._materialize`): a pass that only starts jobs never rebuilds
it.  :meth:`Timeline.available_bits` intersects over a window.  Every set is
a flat integer (:mod:`.flat`).

The difference encoding needs spans that overlap in time to use disjoint
resources (the planner's contract).  A span that breaks it (``sched.expiration``
can) is caught when it is added, and the timeline then keeps every segment's
union up to date directly, for good, as the union of the spans over it.

The log of gains: everything that became available, in order, as ``(start,
end, bits, jobid)``: a removed span, the pool grown (jobid -3, from the
time it grew on), a merge after spans overlapped (jobid -2).  Spans added
only take resources away, so a question answered at log position ``seq``
("nothing fits before ``t``") can only get another answer where a later
gain lies: :meth:`Planner.earliest_bits <.search.Planner.earliest_bits>`
searches only there (``since=``), and :meth:`Timeline.unchanged_for` says
in one walk of the new entries when there is nowhere to search.  A span
keeps the position at which its place was last shown to be the earliest
(:attr:`Span.seq`).

Counted reservations (``reservation-nodes=counted``, :attr:`Timeline.counted`):
a reservation of whole nodes and nothing else promises a *count* of whole
nodes over its window, as the profile of free nodes of Mu'alem and
Feitelson's conservative backfilling does, and holds no bits.  The counts
are a second step function over the same boundaries (a change per boundary,
summed per segment when asked: :meth:`Timeline._reserved_counts`), and a
whole-node search takes them off each segment's count of whole free nodes;
a placement of anything else must leave them (:meth:`Timeline.counts_hold`).
The nodes are named when the job starts, among those free then.  Why that
is enough when every reservation is counted: running jobs only end, so the
whole nodes free at a reservation's start stay free of them; the counts say
there are at least as many as the reservations over that instant promise;
and each reservation that starts later takes its nodes, in turn, among
those free at its own start (a greedy colouring in order of start, which
interval graphs never make run short).  A reservation of less than whole
nodes still holds its bits, and one that meets a counted window can make a
counted job wait past its promise.  The span's ``bits`` are where it would
run as planned (what the forecast and annotations show).

Busy nodes: on a layout of one-unit nodes (``FlatCodec.unit_shift``), a
third step function over the same boundaries counts the node vertices the
spans hold (:attr:`Span.nodes`, :meth:`Timeline._busy_node_counts`).  While
every span holds a node's unit only with its vertex and every node is up,
the whole nodes free over a segment are the machine's less that count, so a
search that only needs a yes or no for a whole-node request reads a number
where it would read the segment's set (two sets of 186,625 bits on CEA
Curie).  A count that says too much is caught: the placement is still
matched on the set of the segment the search settles on.

What "up" means comes from the graph: a resource is in the pool at time
``t0`` if it is free in the graph now, or held by a running job that is
expected to end after ``t0``.  A running job past its expected end (still
holding its resources, end unknown) keeps them out of the pool until it is
removed.  Down or drained resources are never in the pool.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING, Any

from .. import memo
from ..errors import FluxschedError
from ..ids import IdSet
from ..resource.flatfree import Bits, as_int
from .flat import FlatCodec
from .matchcache import MatchCache, Matcher, default_matcher
from .placement import Placement

if TYPE_CHECKING:
    from ..resource import ResourceSet

__all__ = ["PlannerError", "Span", "Timeline"]

#: Bits of sets the log of gains may hold (32 MiB): a 1,024-node machine of
#: 32 cores keeps 8,192 entries, 200,000 one-core nodes about 670.
GAINS_BITS = 1 << 28


class PlannerError(FluxschedError, ValueError):
    """A span that makes no sense (empty interval, unknown or duplicate job)."""


class Span:
    """A job's hold on ``resources`` over ``[start, end)``.

    ``bits`` is the same set, flat (see :mod:`.flat`); ``resources`` is
    decoded from it on first use when the span was made from bits alone.
    ``seq``: for a reservation, the position in the log of gains at which
    nothing fitted its job from the present up to ``start`` (set by
    :meth:`Timeline.searched`; -1: not known).  ``count``: for a counted
    reservation (``reservation-nodes=counted``), how many whole nodes it
    promises; its ``bits`` are then only where it would run as planned, and
    hold nothing (None: the span holds its bits).  ``nodes``: on a layout of
    one-unit nodes, the node vertices its bits hold when each unit they hold
    comes with its node's vertex, else -1 (None: not counted yet; see
    :attr:`Timeline._busy_nodes`).
    """

    __slots__ = ("jobid", "start", "end", "running", "bits", "seq", "count", "nodes", "_rs", "_codec")

    def __init__(
        self,
        jobid: int,
        rs: Any,
        start: float,
        end: float,
        running: bool,
        bits: int,
        codec: Any,
        count: int | None = None,
    ) -> None:
        self.jobid, self.start, self.end, self.running, self.bits = jobid, start, end, running, bits
        self.seq = -1
        self.count = count
        self.nodes: int | None = None
        self._rs = rs
        self._codec = codec

    @property
    def resources(self) -> Any:
        if self._rs is None:
            self._rs = self._codec.decode(self.bits)
        return self._rs

    @property
    def placement(self) -> Placement:
        """The span's placement as the planner hands placements out: the
        ResourceSet if it was ever decoded (else None, left to
        :meth:`Timeline.resolve`), and the bits."""
        return Placement(self._rs, self.bits)

    def __repr__(self) -> str:
        kind = "running" if self.running else "reserved"
        return f"Span({self.jobid}, {kind}, [{self.start}, {self.end}))"


def _unusable_ranks(g: Any) -> Any:
    """Ranks that are down, drained or shrunk (graph API permitting), else None.

    Shrunk ranks count: what a job frees there never becomes free, and a
    running job's end there frees nothing to plan with."""
    down = getattr(g, "down_ranks", None)
    if down is None:
        return None
    bad = down()
    drained = getattr(g, "drained_ranks", None)
    if drained is not None:
        d = drained()
        if d:
            bad = bad | IdSet(d)
    shrunk = getattr(g, "shrunk_ranks", None)
    if shrunk is not None:
        bad = bad | shrunk()
    return bad


class _StepCounts:
    """A count kept as a step function over the timeline's boundaries,
    beside its step function of sets: ``at[t]`` is the change at boundary
    ``t`` (after the floor), ``head`` the count over the first segment.  The
    count over each segment is summed when asked (:meth:`values`), from the
    first segment a change made stale on."""

    __slots__ = ("at", "head", "_values", "_valid")

    def __init__(self) -> None:
        self.at: dict[float, int] = {}
        self.head = 0
        self._values: list[int] = []
        self._valid = 0  # _values[k] is right for k < _valid

    def change(self, t: float, delta: int, k: int, floor: float) -> None:
        """The count changes by ``delta`` at ``t`` (boundary ``k``, 0 when
        at or before ``floor``: folded into the first segment)."""
        if t <= floor:
            self.head += delta
        else:
            c = self.at.get(t, 0) + delta
            if c:
                self.at[t] = c
            else:
                del self.at[t]
        self.stale_from(k)

    def span(self, start: float, end: float, delta: int, lo: int, hi: int, floor: float) -> None:
        """The count changes by ``delta`` over ``[start, end)`` (boundaries
        ``lo`` and ``hi``): a span counted in (``delta`` > 0) or out."""
        self.change(start, delta, lo, floor)
        if end != math.inf:
            self.change(end, -delta, hi, floor)

    def stale_from(self, k: int) -> None:
        """Segments from ``k`` on changed or moved (a boundary came or went)."""
        if k < self._valid:
            self._valid = k

    def values(self, times: list[float], upto: int | None = None) -> list[int]:
        """The count over each segment, right for every segment before
        ``upto`` (every one when None)."""
        values = self._values
        n = len(times)
        if upto is None or upto > n:
            upto = n
        k = self._valid
        if k < upto:
            del values[k:]
            if k == 0:
                values.append(self.head)
                k = 1
            c = values[k - 1]
            at = self.at
            for j in range(k, upto):
                c += at.get(times[j], 0)
                values.append(c)
            self._valid = upto
        return values

    def fold(self, times: list[float], k: int) -> None:
        """Boundaries 1 to ``k`` of ``times`` are folded into the first
        segment (the counts after them stand, one place on)."""
        at = self.at
        if at:
            for j in range(1, k + 1):
                self.head += at.pop(times[j], 0)
        values = self._values
        if self._valid > k:
            values[0] = values[k]
            del values[1 : k + 1]
            self._valid -= k
        else:
            self._valid = 0


class Timeline:
    """Spans of running and reserved jobs over a resource graph, and what is
    available when.  The searches are :class:`~fluxsched_py.planner.search.Planner`'s.

    Parameters
    ----------
    graph:
        a :class:`~fluxsched_py.resource.ResourceGraph`; the planner reads its
        ``free()`` and down/drained ranks and never modifies it.
    matcher:
        ``match(graph, request, *, policy, available)`` or a
        :class:`MatchCache`; defaults to :func:`fluxsched_py.match.match`.
    counted:
        whole-node reservations promise a count of nodes over their window
        rather than the nodes first chosen (see the module docstring).
    """

    def __init__(self, graph: Any, *, matcher: Matcher | None = None, counted: bool = False) -> None:
        self.graph = graph
        #: Whole-node reservations promise counts (see the module docstring).
        self.counted = counted
        # Counted reservations: how many whole nodes they promise, over each
        # segment (see _reserved_counts).
        self._promised = _StepCounts()
        self._ncounted = 0
        m = matcher if matcher is not None else default_matcher()
        self.matcher = m if isinstance(m, MatchCache) else MatchCache(m)
        self.codec = FlatCodec(graph)
        # On a layout of one-unit nodes, the node vertices the spans hold over
        # each segment (Span.nodes), when each span holds a unit only with its
        # node's vertex; _partial_spans counts those that do not.  With none
        # of those and every node in the pool, the whole nodes free over a
        # segment are the nodes less this count: a search that only needs a
        # yes or no reads it instead of the segment's set (search.py).
        self._busy_nodes = _StepCounts() if self.codec.unit_shift is not None else None
        self._partial_spans = 0
        self._pool_nodes: tuple[Any, int | None] | None = None  # (pool, its node count if every node is whole in it)
        self._spans: dict[int, Span] = {}
        self._reserved: dict[int, Span] = {}  # the reserved spans, in _spans' order
        # The step function: _used[k] is busy during [_times[k], _times[k+1]),
        # an int cache that is right for k < _valid (see _materialize).  The
        # first segment's truth is _head, kept in place (a job's span changes
        # only its chunks: see resource/flatfree.py); _used[0] is its value.
        # _starts[k] and _ends[k] (k >= 1) are the unions of the spans that
        # start and end at _times[k] (ints, or Bits changed in place).  Once
        # spans overlapped (_eager), _used is kept whole as ints and _head,
        # _starts and _ends are unused.
        self._times: list[float] = [-math.inf]
        self._head = Bits()
        self._used: list[int] = [0]
        self._starts: list[Any] = [0]
        self._ends: list[Any] = [0]
        self._valid = 0
        self._eager = False
        self._start_times: list[float] = []  # starts after the floor, sorted, one per span
        self._refs: list[int] = [1]  # spans starting or ending at _times[k]
        # Boundaries at or before _floor are folded into the first segment
        # (see _forget_past): it stands for [_floor, _times[1]).
        self._floor = -math.inf
        self._running_ends: list[tuple[float, int]] = []  # sorted (end, jobid)
        self._nreserved = 0
        self._running_union = Bits()  # every running span's bits, kept in place
        self._max_running_start = -math.inf  # an upper bound (never lowered)
        # The log of gains (see the module docstring): _gains[0] is entry
        # number _gains_base; entries before _gains_mark were read by a
        # caller of log_position() and are never rewritten.  Kept: 8,192
        # entries, fewer on a machine so big that they would hold more than
        # GAINS_BITS bits of sets (a position older than the log searches
        # everywhere).
        self._gains: list[tuple[float, float, Any, int]] = []
        self._gains_base = 0
        self._gains_mark = 0
        self._gains_keep = max(64, min(8192, GAINS_BITS // max(1, self.codec.width)))
        self._pool_seen: int | None = None  # the pool last handed out (what joins it is a gain)
        # Planner._whole_free: (pool, {segment's union: whole nodes free in it},
        # {id of a segment's union: (that union, whole nodes free in it)})
        self._whole_free_cache: tuple[int, dict[int, int], dict[int, tuple[int, int]]] | None = None
        #: A segment's vertex bits, by its int's id (search.py).
        self._vertex_cache: dict[int, tuple[int, int]] = memo.store("vertices")
        # Planner's short ranges (search.py): (p, q, c, t0, t1), the segments
        # over [t0, t1) leave at most c whole nodes free; dropped by any gain
        # over [t0, t1) (_log_gain), the only way a range gets freer.
        self._short: list[tuple[float, float, int, float, float]] = []
        # Planner's (whole nodes, duration) -> the latest reservation start
        # before which nothing fitted a job of that shape (search.py); any
        # gain drops them all (_log_gain).
        self._nothing_before: dict[tuple[int, float], float] = {}
        self._whole_spans: dict[int, tuple[Span, int | None]] = {}  # Planner._whole_held, by job id
        #: spans of running jobs added so far (a plan with the same count and
        #: no gain since has lost nothing to a start)
        self.running_added = 0
        self._counted: tuple[int | None, int, float] | None = None  # the last search's (own, n, duration), if counted
        # Set for good once two spans overlapped on a resource (sched.expiration
        # can do that): the step function no longer mirrors the spans exactly.
        self._overlapped = False
        # Caches, dropped by whatever changes what they hold (see _dirty_*):
        # reserved_during() answers and the latest reservation start, until
        # a reservation comes or goes; the pool, per (graph version, now),
        # until a running span comes or goes.
        self._reserved_cache: dict[tuple[float, float, int | None], int] = {}
        self._last_reserved_start: float | None = None
        self._pool_cache: tuple[tuple, int] | None = None
        self._remember_reserved = memo.on("reserved")
        self._remember_pool = memo.on("pool")
        #: The latest time the planner was told about (``earliest(now=...)``
        #: or :meth:`set_now`): running jobs expected to end before it are
        #: overdue and keep their resources until removed.
        self.now = -math.inf
        #: Blocked windows (advance reservations, :mod:`fluxsched_py.engine.reservations`):
        #: name -> (start, end, bits).  Not spans: a mask over the step
        #: function that every search and ``blocked_during`` subtract, so a
        #: running job still on those resources when a window opens breaks
        #: no span contract; only the window's own jobs may use it.
        self._blocks: dict[str, tuple[float, float, int]] = {}
        #: The windows the last ``earliest_bits`` found in its way: it would
        #: have fitted at some earlier start but for them (None: none did).
        self.held_by: list[str] | None = None

    def add_running(self, jobid: int, rs: Any, start: float, end: float = math.inf, bits: int | None = None) -> None:
        """Record that ``jobid`` holds ``rs`` from ``start`` until ``end``."""
        b = self.codec.encode(rs) if bits is None else bits
        self._add(Span(jobid, rs, float(start), float(end), True, b, self.codec))
        self.running_added += 1
        self._pool_cache = None
        bisect.insort(self._running_ends, (float(end), jobid))
        self._running_union.or_(b)
        self._max_running_start = max(self._max_running_start, float(start))

    def reserve(self, jobid: int, rs: Any, start: float, end: float = math.inf, bits: int | None = None) -> None:
        """Promise ``rs`` to the pending job ``jobid`` over ``[start, end)``."""
        b = self.codec.encode(rs) if bits is None else bits
        count = self.whole_of(b) if self.counted else None
        self._add(Span(jobid, rs, float(start), float(end), False, b, self.codec, count))
        self._nreserved += 1
        self._dirty_reserved()

    def whole_of(self, bits: Any) -> int | None:
        """How many whole nodes ``bits`` is when it is whole nodes and
        nothing else, else None."""
        codec = self.codec
        if not codec.flat_nodes:
            return None
        b = as_int(bits)
        nodes = codec.whole_nodes(b)
        return nodes.bit_count() if nodes and not b ^ (b & codec.nodes_bits(nodes)) else None

    def remove(self, jobid: int) -> Span | None:
        """Forget ``jobid``'s span (it ended, was cancelled or is re-planned)."""
        span = self._spans.pop(jobid, None)
        if span is None:
            return None
        if span.running:
            self._pool_cache = None
            i = bisect.bisect_left(self._running_ends, (span.end, jobid))
            del self._running_ends[i]
            # spans of running jobs are disjoint
            self._running_union.andnot_(span.bits)
        else:
            self._nreserved -= 1
            self._dirty_reserved()
            del self._reserved[jobid]
        self._log_gain(span.start, span.end, span.bits, jobid)
        lo = self._index(span.start)
        hi = self._index(span.end) if span.end != math.inf else len(self._times)
        floor = self._floor
        if span.count is not None:
            self._ncounted -= 1
            self._promised.span(span.start, span.end, -span.count, lo, hi, floor)
        else:
            if self._busy_nodes is not None:
                self._count_nodes(span, lo, hi, -1)
            self._remove_bits(span, lo, hi)
        if span.end > floor:  # else its boundary was folded away
            self._unref(hi)
        if span.start > floor:
            self._unref(lo)
        return span

    def _remove_bits(self, span: Span, lo: int, hi: int) -> None:
        """Take ``span``'s bits out of the step function over segments ``lo`` to ``hi - 1``."""
        if self._eager:
            bits = span.bits
            used = self._used
            for k in range(lo, hi):
                used[k] ^= used[k] & bits  # & ~ without a negative int
        elif hi > lo:
            b = span.bits
            if lo == 0:
                self._head.andnot_(b)
                self._valid = 0
            else:
                _clear(self._starts, lo, b)
                st = self._start_times
                del st[bisect.bisect_left(st, span.start)]
                if lo < self._valid:
                    self._valid = lo
            if hi < len(self._times):
                _clear(self._ends, hi, b)
                if hi < self._valid:
                    self._valid = hi

    def _reserved_counts(self, upto: int | None = None) -> list[int]:
        """How many whole nodes counted reservations promise over each
        segment, right for every segment before ``upto`` (every one when
        None)."""
        return self._promised.values(self._times, upto)

    def _count_nodes(self, span: Span, lo: int, hi: int, sign: int) -> None:
        """Keep :attr:`_busy_nodes` with ``span`` (over segments ``lo`` to
        ``hi - 1``) added (``sign`` 1) or taken out (-1)."""
        nodes = span.nodes
        if nodes is None:
            nodes = span.nodes = self._node_vertices(span.bits)
        if nodes < 0:
            self._partial_spans += sign
            return
        assert self._busy_nodes is not None
        self._busy_nodes.span(span.start, span.end, sign * nodes, lo, hi, self._floor)

    def _node_vertices(self, bits: Any) -> int:
        """The node vertices in ``bits`` when each unit in it comes with its
        node's vertex, else -1 (a layout of one-unit nodes)."""
        codec = self.codec
        b = as_int(bits)
        vertices = codec.node_vertex_mask
        held = b & vertices
        units = (b >> codec.unit_shift) & vertices
        return held.bit_count() if not units ^ (units & held) else -1

    def _busy_node_counts(self, pool: int, upto: int) -> tuple[list[int], int] | None:
        """The node vertices held over each segment before ``upto``, and the
        nodes of the machine, when the whole nodes free over a segment are
        the difference: one-unit nodes, every one of them whole in
        ``pool``, and spans that hold a unit only with its vertex and never
        overlap.  Else None."""
        steps = self._busy_nodes
        if steps is None or self._partial_spans or self._overlapped or self._eager:
            return None
        known = self._pool_nodes
        if known is None or known[0] is not pool:
            codec = self.codec
            every = codec.nodes_bits(codec.node_vertex_mask)
            known = self._pool_nodes = (pool, codec.node_vertex_mask.bit_count() if pool & every == every else None)
        if known[1] is None:
            return None
        return steps.values(self._times, upto), known[1]

    @property
    def ncounted(self) -> int:
        """How many counted reservations the plan holds."""
        return self._ncounted

    def _window_counts(self, t0: float, t1: float) -> tuple[range, list[int], list[int], int]:
        """The segments over ``[t0, t1)``, their unions, what counted
        reservations promise over each, and the pool."""
        if t1 <= t0:
            t1 = t0 + 1e-9
        hi = bisect.bisect_left(self._times, t1)
        return range(self._index(t0), hi), self._materialize(hi), self._reserved_counts(hi), self.pool_bits()

    def counts_allow(self, t0: float, t1: float, n: int) -> bool:
        """True when ``n`` more whole nodes are free over ``[t0, t1)`` with
        every counted reservation's count kept (what is held by bits
        counted as the segments' unions say)."""
        segments, used, counts, pool = self._window_counts(t0, t1)
        whole = self.codec.whole_count
        return all(whole(pool ^ (pool & used[k])) - counts[k] >= n for k in segments)

    def counts_hold(self, bits: Any, t0: float, t1: float, aside: Span | None = None) -> bool:
        """True when taking ``bits`` over ``[t0, t1)`` leaves every counted
        reservation its count (always, with none): for a placement that is
        not whole nodes, which takes nodes from the counts' pool too.  A
        reservation ``aside`` (in the plan, searched as if not) does not
        count: a counted one promises nothing, a pinned one holds nothing."""
        if not self._ncounted or (aside is not None and aside.count is not None and self._ncounted == 1):
            return True
        segments, used, counts, pool = self._window_counts(t0, t1)
        b = as_int(bits)
        whole = self.codec.whole_count
        a0, a1 = (aside.start, aside.end) if aside is not None else (0.0, 0.0)
        own = aside.count or 0 if aside is not None else 0
        pinned = as_int(aside.bits) if aside is not None and aside.count is None else 0
        times = self._times
        for k in segments:
            at = times[k] if k else self._floor  # the first segment stands from the floor on
            within = a0 <= at < a1
            c = counts[k] - (own if within else 0)
            if not c:
                continue
            u = used[k]
            if pinned and within:
                u ^= u & pinned  # its bits are its own there (spans never overlap)
            if whole(pool ^ (pool & (u | b))) < c:
                return False
        return True

    def span(self, jobid: int) -> Span | None:
        return self._spans.get(jobid)

    def __contains__(self, jobid: object) -> bool:
        return jobid in self._spans

    def __len__(self) -> int:
        return len(self._spans)

    def spans(self) -> list[Span]:
        return list(self._spans.values())

    def reserved(self) -> list[Span]:
        return list(self._reserved.values())

    @property
    def nreserved(self) -> int:
        return self._nreserved

    def reserved_during(self, t0: float, t1: float, exclude: int | None = None) -> int:
        """Flat union of the reservations that overlap ``[t0, t1)`` (but
        ``exclude``'s; counted ones hold no bits, see :meth:`counts_allow`).

        Remembered until a reservation changes: a pass asks it for every job
        beyond the reservation depth, with a few distinct walltimes."""
        key = (t0, t1, exclude)
        c = self._reserved_cache
        hit = c.get(key)
        if hit is not None:
            return hit
        out = 0
        if self._nreserved:
            for s in self._reserved.values():
                if s.start < t1 and s.end > t0 and s.jobid != exclude and s.count is None:
                    out |= s.bits
        if len(c) < 64 and self._remember_reserved:
            c[key] = out
        return out

    def block(self, name: str, bits: int, start: float, end: float) -> None:
        """Hold ``bits`` over ``[start, end)`` for the window ``name``'s own jobs."""
        if not end > start:
            raise PlannerError(f"window {name}: empty interval [{start}, {end})")
        self._blocks[name] = (float(start), float(end), as_int(bits))
        self._reserved_cache = {}

    def unblock(self, name: str) -> None:
        """Forget the window ``name`` (removed, shortened or ended)."""
        if self._blocks.pop(name, None) is not None:
            self._reserved_cache = {}

    def blocks(self) -> dict[str, tuple[float, float, int]]:
        """The blocked windows: name -> (start, end, bits)."""
        return dict(self._blocks)

    @property
    def nblocked(self) -> int:
        return len(self._blocks)

    def blocked_during(self, t0: float, t1: float, allow: str | None = None) -> int:
        """Flat union of the windows that overlap ``[t0, t1)`` (but ``allow``'s)."""
        out = 0
        for name, (a, b, bits) in self._blocks.items():
            if a < t1 and b > t0 and name != allow:
                out |= bits
        return out

    def held_names(self, t0: float, t1: float, allow: str | None = None) -> list[str]:
        """The names of the windows that overlap ``[t0, t1)`` (but ``allow``)."""
        return [name for name, (a, b, _) in self._blocks.items() if a < t1 and b > t0 and name != allow]

    def _block_ends(self, t0: float, t1: float) -> list[float]:
        """The ends of windows in ``(t0, t1)``: where availability may grow."""
        return [b for a, b, _ in self._blocks.values() if t0 < b < t1]

    def _latest_reserved_start(self) -> float:
        """The latest start of a reservation (remembered until one changes)."""
        latest = self._last_reserved_start
        if latest is None:
            latest = -math.inf
            for s in self._reserved.values():
                if s.start > latest:
                    latest = s.start
            self._last_reserved_start = latest
        return latest

    def _dirty_reserved(self) -> None:
        """A reservation came or went: drop what was computed from them."""
        self._reserved_cache = {}
        self._last_reserved_start = None

    def clear_reservations(self) -> None:
        """Drop every reserved span (a pass re-plans them from scratch)."""
        if self._nreserved:
            for s in list(self._reserved.values()):
                self.remove(s.jobid)

    def set_end(self, jobid: int, end: float) -> list[int]:
        """Move a span's end (``sched.expiration``); return the jobs whose
        reservations it dropped.

        A running job that now ends later may run into reservations made for
        its old end.  Those are dropped (their jobs are re-planned by the
        next pass): spans must never overlap on a resource, or removing one
        would clear the other's hold from the plan."""
        span = self._spans.get(jobid)
        if span is None:
            raise PlannerError(f"job {jobid} has no span")
        dropped: list[int] = []
        if span.running and end > span.end:
            for r in list(self._reserved.values()):
                if (r.count is not None or r.bits & span.bits) and r.start < end and r.end > span.end:
                    self.remove(r.jobid)
                    dropped.append(r.jobid)
        self.remove(jobid)
        if span.running:
            self.add_running(jobid, span._rs, span.start, end, span.bits)
        else:
            self.reserve(jobid, span._rs, span.start, end, span.bits)
        return dropped

    def set_now(self, now: float) -> None:
        """Tell the planner the current time (see :attr:`now`)."""
        self.now = max(self.now, float(now))
        times = self._times
        if len(times) > 1 and times[1] <= self.now:
            self._forget_past()

    def _forget_past(self) -> None:
        """Fold every boundary at or before :attr:`now` into the first segment.

        Nothing asks about the plan before now (every question is about a
        window from now on), and a running job's start boundary is in the
        past for as long as it runs: without this, thousands of running jobs
        started at distinct times make thousands of segments that every
        span change walks.  The first segment takes the value of the one
        that holds now, so every window from now on sees what it saw.  A
        span that starts (or ends) at or before the floor takes no boundary
        there, and gives none back when it is removed.
        """
        times, refs, used = self._times, self._refs, self._used
        k = bisect.bisect_right(times, self.now) - 1  # the segment holding now
        if self._eager:
            self._materialize(k + 1)
            used[0] = used[k]
        else:
            # Fold in place what starts and ends there into the first
            # segment (a job's chunks each), rather than rebuild its union.
            head, starts, ends = self._head, self._starts, self._ends
            for j in range(1, k + 1):
                if ends[j]:
                    head.xor_(ends[j])
                if starts[j]:
                    head.xor_(starts[j])
            if self._valid > k:
                used[0] = used[k]
                self._valid -= k
            else:
                self._valid = 0
            del starts[1 : k + 1], ends[1 : k + 1]
            st = self._start_times
            del st[: bisect.bisect_right(st, self.now)]
        self._promised.fold(times, k)
        if self._busy_nodes is not None:
            self._busy_nodes.fold(times, k)
        del times[1 : k + 1], used[1 : k + 1], refs[1 : k + 1]
        self._floor = self.now

    def free_bits(self) -> Any:
        """What is free now, flat: the graph's own flat free set
        (:meth:`ResourceGraph.free_bits <fluxsched_py.resource.ResourceGraph.free_bits>`,
        a :class:`~fluxsched_py.resource.flatfree.Bits` the graph changes in
        place), or an int for a graph that has none."""
        g = self.graph
        fb = getattr(g, "free_bits", None)
        return fb() if fb is not None else self.codec.encode(g.free())

    def pool_bits(self) -> int:
        """Up resources, free now or held by a running job that is not overdue."""
        version = getattr(self.graph, "version", None)
        key = (version, self.now)
        c = self._pool_cache
        if version is not None and c is not None and c[0] == key:
            return c[1]
        pool = self._pool_bits()
        if self._remember_pool:
            self._pool_cache = (key, pool)
        seen = self._pool_seen
        if seen is not None and pool != seen:
            joined = pool ^ (pool & seen)  # & ~ without a negative int
            if joined:
                self._log_gain(self.now, math.inf, joined, -3)
        self._pool_seen = pool
        return pool

    def _pool_bits(self) -> int:
        free = as_int(self.free_bits())
        held = self._running_union.value()
        i = bisect.bisect_right(self._running_ends, (self.now, math.inf))
        if i:  # overdue jobs (few): their end is unknown, keep them out
            spans = self._spans
            for _, jobid in self._running_ends[:i]:
                held &= ~spans[jobid].bits
        if held:
            bad = _unusable_ranks(self.graph)
            if bad:
                held &= ~self.codec.ranks_mask(bad)
            free |= held
        return free

    def pool(self) -> Any:
        return self.codec.decode(self.pool_bits())

    # -- the log of gains ----------------------------------------------------

    @property
    def log_end(self) -> int:
        """The position after the last entry of the log of gains."""
        return self._gains_base + len(self._gains)

    def searched(self, jobid: int) -> None:
        """Record that nothing fits ``jobid`` from the present up to the start
        of its reservation, in the plan as it is now (the caller just
        searched); later gains are where that may change."""
        seq = self._gains_mark = self._gains_base + len(self._gains)
        self._spans[jobid].seq = seq

    def gains_since(self, seq: int) -> list[tuple[float, float, Any, int]] | None:
        """The log's entries from position ``seq`` on, as ``(start, end, bits,
        jobid)``; None when they are no longer kept."""
        if seq < self._gains_base:
            return None
        return self._gains[seq - self._gains_base :]

    def unchanged_for(self, jobid: int, duration: float, now: float) -> bool:
        """True when re-planning ``jobid``'s reservation provably leaves it as
        it is: its place is still free, and no gain logged since its last
        search (:attr:`Span.seq`) overlaps a window ``[t, t + duration)`` it
        could start earlier in, ``now <= t < start``.  The span then goes
        last in :meth:`reserved`, as taking it out and putting it back
        would leave it, and its position moves to the end of the log.

        Why: everything available over a window now was available at that
        search, or came from a gain overlapping it (spans added only take
        away), and that search found nothing before ``start``.  False (then
        search) also when spans ever overlapped or the span is not the
        job's ``duration`` long."""
        span = self._spans.get(jobid)
        if span is None or span.running or self._overlapped or not span.start > now:
            return False
        gains = self.gains_since(span.seq)
        if gains is None or span.end != span.start + duration:
            return False
        bits = as_int(span.bits)
        if self.pool_bits() & bits != bits:
            return False  # resources went down under it: search
        gains = self._gains[span.seq - self._gains_base :]  # the pool may have logged a gain
        horizon = span.start + duration
        for a, b, _, jid in gains:
            if b > now and a < horizon and jid != jobid:
                return False
        self._keep(jobid)
        return True

    def _keep(self, jobid: int) -> None:
        """What taking a reservation out and putting it back in the same
        place leaves: the span last in :meth:`reserved`, searched as of now."""
        self._spans[jobid] = self._spans.pop(jobid)
        self._reserved[jobid] = self._reserved.pop(jobid)
        self.searched(jobid)

    def _log_gain(self, start: float, end: float, bits: Any, jobid: int) -> None:
        if start < end and bits:
            if self._short:
                self._short = [r for r in self._short if r[4] <= start or r[3] >= end]
            if self._nothing_before:
                self._nothing_before = {}
            gains = self._gains
            gains.append((start, end, bits, jobid))
            if len(gains) > self._gains_keep:
                half = self._gains_keep // 2
                del gains[:half]
                self._gains_base += half

    def _net_gain(self, span: Span) -> None:
        """``span``'s job gave back a span just before (re-planned, or
        started on its reservation): keep only what the old span held that
        the new one does not."""
        gains = self._gains
        if not gains or self._gains_base + len(gains) <= self._gains_mark:
            return
        a, b, old, jobid = gains[-1]
        if jobid != span.jobid:
            return
        gains.pop()
        c, d = span.start, span.end
        if c >= b or d <= a:  # no overlap in time
            self._log_gain(a, b, old, jobid)
            return
        old = as_int(old)
        self._log_gain(a, c, old, jobid)
        self._log_gain(max(a, c), min(b, d), old ^ (old & as_int(span.bits)), jobid)
        self._log_gain(d, b, old, jobid)

    def available_bits(self, t0: float, t1: float) -> int:
        if t1 <= t0:
            t1 = t0 + 1e-9
        lo = self._index(t0)
        hi = bisect.bisect_left(self._times, t1)
        busy = 0
        used = self._materialize(hi)
        for k in range(lo, hi):
            busy |= used[k]
        return self.pool_bits() & ~busy

    def available(self, t0: float, t1: float) -> Any:
        """Up resources free throughout ``[t0, t1)``."""
        return self.codec.decode(self.available_bits(t0, t1))

    def match_bits(self, request: Any, avail: int, policy: str = "first") -> Placement | None:
        """Match ``request`` on a flat available set: a placement or None.

        Its ``resources`` may be None (not decoded yet): see :meth:`resolve`.  When
        ``avail`` is :meth:`free_bits` itself, the matcher reads the graph's
        live availability, and the slot fast path follows the live set."""
        live = avail is self.free_bits()
        return self.matcher.flat(self.graph, self.codec, request, policy, avail, live)

    def resolve(self, placement: Placement) -> ResourceSet:
        """The ResourceSet of ``placement``, decoded from its bits when it
        was not yet."""
        rs = placement.resources
        return rs if rs is not None else self.codec.decode(placement.bits)

    def _materialize(self, upto: int | None = None) -> list[int]:
        """The segments' unions, right for every segment before ``upto``
        (every segment when None): rebuilt from the first stale one, each
        from the one before it (what ends there goes, what starts comes)."""
        used = self._used
        if self._eager:
            return used
        n = len(used)
        if upto is None or upto > n:
            upto = n
        k = self._valid
        if k < upto:
            if k == 0:
                used[0] = self._head.value()
                k = 1
            starts, ends = self._starts, self._ends
            u = used[k - 1]
            for j in range(k, upto):
                # spans over a segment are disjoint: xor is and-not, then or
                e = ends[j]
                if e:
                    u ^= e
                s = starts[j]
                if s:
                    u ^= s
                used[j] = u
            self._valid = upto
        return used

    def _overlaps(self, lo: int, hi: int, b: int) -> bool:
        """True when ``b`` meets a span over segments ``[lo, hi)``: what is
        in use during segment ``lo``, or what starts at a later boundary
        before ``hi``."""
        if not self._eager and isinstance(b, Bits):
            # Segment lo, on b's chunks only: the first segment, then what
            # ends and starts at each boundary up to lo (a job's chunks each).
            starts, ends = self._starts, self._ends
            for i, c in b.chunks.items():
                u = self._head.chunks.get(i, 0)
                for j in range(1, lo + 1):
                    u ^= _chunk(ends[j], i, b.shift) ^ _chunk(starts[j], i, b.shift)
                if u & c:
                    return True
        elif lo == 0 and not self._eager:
            if self._head.intersects(b):
                return True
        elif _meets(self._materialize(lo + 1)[lo], b):
            return True
        st = self._start_times
        times = self._times
        i = bisect.bisect_right(st, times[lo])
        j = bisect.bisect_left(st, times[hi]) if hi < len(times) else len(st)
        if i < j:
            starts, index = self._starts, self._index
            last = None
            for t in st[i:j]:
                if t != last and _meets(starts[index(t)], b):
                    return True
                last = t
        return False

    def _go_eager(self) -> None:
        """Spans overlapped: from now on keep every segment's union whole."""
        self._materialize()  # _used[0] is the head's value from here on
        self._eager = True
        self._head = Bits()
        self._starts, self._ends, self._start_times = [], [], []

    def _index(self, t: float) -> int:
        """Index of the segment containing ``t``."""
        return bisect.bisect_right(self._times, t) - 1

    def _split(self, t: float) -> int:
        """Make ``t`` a boundary; return its index and take a reference on it
        (none at or before the floor: the first segment stands for it)."""
        if t <= self._floor:
            return 0
        k = self._index(t)
        if self._times[k] != t:
            k += 1
            self._times.insert(k, t)
            self._refs.insert(k, 0)
            self._steps_stale_from(k)
            if self._eager:
                self._used.insert(k, self._used[k - 1])
            else:
                self._starts.insert(k, 0)
                self._ends.insert(k, 0)
                if k < self._valid:  # nothing starts or ends there yet
                    self._used.insert(k, self._used[k - 1])
                    self._valid += 1
                else:
                    self._used.insert(k, 0)
        self._refs[k] += 1
        return k

    def _unref(self, k: int) -> None:
        if k >= len(self._times):
            return
        self._refs[k] -= 1
        if self._refs[k] == 0 and k > 0:
            used = self._used
            if self._eager:
                freed = used[k] & ~used[k - 1]
                if freed:  # only when spans overlapped: the merge frees something
                    end = self._times[k + 1] if k + 1 < len(self._times) else math.inf
                    self._log_gain(self._times[k], end, freed, -2)
            else:  # nothing starts or ends there any more: same union as before it
                del self._starts[k], self._ends[k]
                if k < self._valid:
                    self._valid -= 1
            del self._times[k], used[k], self._refs[k]
            self._steps_stale_from(k)

    def _steps_stale_from(self, k: int) -> None:
        """A boundary came or went at ``k``: the counts per segment move."""
        self._promised.stale_from(k)
        if self._busy_nodes is not None:
            self._busy_nodes.stale_from(k)

    def _add(self, span: Span) -> None:
        if span.jobid in self._spans:
            raise PlannerError(f"job {span.jobid} already has a span")
        if not span.end > span.start:
            raise PlannerError(f"job {span.jobid}: empty span [{span.start}, {span.end})")
        lo = self._split(span.start)
        hi = self._split(span.end) if span.end != math.inf else len(self._times)
        if span.count is not None:
            # A count over the boundaries, no bits: see _reserved_counts.
            self._ncounted += 1
            self._promised.span(span.start, span.end, span.count, lo, hi, self._floor)
        else:
            self._add_bits(span, lo, hi)
            if self._busy_nodes is not None:
                self._count_nodes(span, lo, hi, 1)
        self._spans[span.jobid] = span
        if not span.running:
            self._reserved[span.jobid] = span
        self._net_gain(span)

    def _add_bits(self, span: Span, lo: int, hi: int) -> None:
        """Put ``span``'s bits in the step function over segments ``lo`` to ``hi - 1``."""
        b = span.bits
        if not self._eager and hi > lo and self._overlaps(lo, hi, b):
            self._go_eager()
        if self._eager:
            used = self._used
            for k in range(lo, hi):
                if used[k] & b:
                    self._overlapped = True
                used[k] |= b
        elif hi > lo:
            if lo == 0:
                self._head.or_(b)
                self._valid = 0
            else:
                _put(self._starts, lo, b)
                bisect.insort(self._start_times, span.start)
                if lo < self._valid:
                    self._valid = lo
            if hi < len(self._times):
                _put(self._ends, hi, b)


def _put(sets: list[Any], k: int, b: Any) -> None:
    """``sets[k] |= b``, in place when ``sets[k]`` is a :class:`Bits` (an
    empty entry takes a copy of a :class:`Bits`: its chunks are changed in
    place later)."""
    x = sets[k]
    if isinstance(x, Bits):
        x.or_(b)
    elif not x:
        sets[k] = b.copy() if isinstance(b, Bits) else b
    else:
        sets[k] = x | as_int(b)


def _clear(sets: list[Any], k: int, b: Any) -> None:
    """``sets[k] &= ~b``, in place when ``sets[k]`` is a :class:`Bits`."""
    x = sets[k]
    if isinstance(x, Bits):
        x.andnot_(b)
    elif x:
        sets[k] = x ^ (x & as_int(b))  # & ~ without a negative int


def _meets(x: Any, b: Any) -> bool:
    """``x & b`` is not empty (x an int or :class:`Bits`, b too)."""
    if isinstance(x, Bits):
        return x.intersects(b)
    if isinstance(b, Bits):
        return b.intersects(x)
    return bool(x & b)


def _chunk(x: Any, i: int, shift: int) -> int:
    """Chunk ``i`` of the flat set ``x`` (an int or :class:`Bits`)."""
    if isinstance(x, Bits):
        return x.chunks.get(i, 0) if x.shift == shift else (x.value() >> (i << shift)) & ((1 << (1 << shift)) - 1)
    return (x >> (i << shift)) & ((1 << (1 << shift)) - 1) if x else 0
