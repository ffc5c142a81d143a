"""The searches: the earliest time a request fits, around the plan.

:meth:`Planner.earliest` slides a window over the timeline's boundaries with
a two-stack aggregate, so finding a start time costs one union per boundary
plus one match per distinct candidate set (binary search when only running
jobs are planned, since availability then only grows with time).  A
candidate only needs a yes or no: for whole-node and ``slot[k] > core[c]``
requests :meth:`~.matchcache.MatchCache.fit` answers it exactly from counts
(:mod:`.fastfit`), and the matcher runs once, at the time the search settles
on (about 15 ms a match on 1000 nodes x 8 cores, against microseconds).

Five cuts keep the answer and skip work.  A whole-node request cannot
fit a window that is short of whole free nodes in any one segment of it,
so each candidate's window is first read from its last segment back
against counts remembered per segment content, and a short segment rules
out every candidate whose window covers it (:meth:`Planner._enough_whole`).
A window that passes those counts can still fail, its segments having
enough free nodes each but not the same ones throughout (reservations pin
nodes); then the shortest failing suffix of the window, found on the
sliding window's own aggregates (:meth:`_WindowUnion.drop_failing`),
rules out every later candidate whose window holds it.  On CEA Curie
(93,312 one-core nodes) under conservative backfilling, in the stretch
where jobs of up to 38,016 nodes queue up, the 127,855 searches of jobs
44,001-48,000 tried 5,261,901 windows that passed the counts, and now try
249,926.  That suffix is also remembered, by its times and how many
whole nodes it leaves (:meth:`Planner._remember_short`), until a gain over
it: a later search for more nodes than that skips every window holding
it without reading a segment, so the searches of a pass (one per
reservation, most of them over the same segments) share what each found.
A search that repairs a reservation (``since``: nothing fitted before it at
that position of the log of gains, see :mod:`.timeline`) tries only the
start times whose window overlaps a gain logged since
(:meth:`Planner._gained_starts`).  And that search leaves the reservation
in the plan, reading the segments it covers without it (``aside``), so a
job that does not move costs no change to the plan.

With counted reservations (:mod:`.timeline`), a segment's count of whole
free nodes has what they promise there taken off, so a window that passes
the counts fits, with nodes named among those the running jobs leave free;
only reservations that hold bits can still pin a window.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..resource.flatfree import as_int
from .placement import Placement, Slot, Window
from .timeline import Span, Timeline

if TYPE_CHECKING:
    from ..resource import ResourceSet

__all__ = ["Planner"]


class _WindowUnion:
    """Union over a sliding window of flat sets (two-stack queue aggregation).

    ``push`` adds at the back, ``pop`` drops the front, ``value`` is the union
    of what is inside; every operation is amortized O(1) set unions.
    """

    __slots__ = ("_back", "_back_agg", "_front_aggs", "failing")

    def __init__(self) -> None:
        self._back: list[int] = []
        self._back_agg = 0
        self._front_aggs: list[int] = []  # suffix unions, front of the window last
        #: the union of the shortest failing suffix :meth:`drop_failing` last found
        self.failing = 0

    def push(self, item: int) -> None:
        self._back.append(item)
        self._back_agg = self._back_agg | item

    def pop(self) -> None:
        if not self._front_aggs:
            agg = 0
            for item in reversed(self._back):
                agg = agg | item
                self._front_aggs.append(agg)
            self._back.clear()
            self._back_agg = 0
        self._front_aggs.pop()

    def value(self) -> int:
        if self._front_aggs:
            return self._front_aggs[-1] | self._back_agg
        return self._back_agg

    def drop_failing(self, fails: Callable[[int], bool], known: bool = False) -> int:
        """Drop the longest front of the window whose last item starts a
        suffix that ``fails``, and return how many items were dropped (0
        when no suffix fails).

        ``fails`` must be monotone: a union that contains one that fails
        fails too.  Every later window of a sliding search (its start and
        end no earlier) that still holds the dropped items holds that
        suffix, so it fails: the search goes on from the first item kept.
        The suffixes are the two stacks' own aggregates: in the front, each
        is one union with the back's; in the back, they are computed as a
        pop would, and the items kept become the front.  So it costs a
        binary search of ``fails`` calls, and no more unions than sliding.
        ``known``: the whole window is known to fail (not asked again)."""
        back, front, back_agg = self._back, self._front_aggs, self._back_agg
        if back and fails(back_agg):
            # The shortest failing suffix of the back, galloping from its
            # end: the items before it are dropped without a union.
            suffixes: list[int] = []  # suffixes[i]: the union of the last i + 1 items
            agg, ok, probe, nback = 0, 0, 1, len(back)
            for item in reversed(back):
                agg = agg | item
                suffixes.append(agg)
                if len(suffixes) == probe:
                    if probe == nback or fails(agg):
                        break
                    ok, probe = probe, min(2 * probe, nback)
            lo, hi = ok, len(suffixes) - 1  # suffixes[ok - 1] does not fail, suffixes[hi] does
            while lo < hi:
                mid = (lo + hi) // 2
                if fails(suffixes[mid]):
                    hi = mid
                else:
                    lo = mid + 1
            dropped = len(front) + nback - lo
            self.failing = suffixes[lo]
            del suffixes[lo:]
            self._front_aggs = suffixes
            back.clear()
            self._back_agg = 0
            return dropped
        nfront = len(front)
        if not nfront or not (known or fails(front[-1] | back_agg)):
            return 0
        # The shortest failing suffix that starts in the front, galloping
        # from the front's end: front[q] | back_agg is the suffix of its
        # last q + 1 items, and front[-1] | back_agg (all of them) fails.
        ok, probe = 0, 1
        while probe < nfront and not fails(front[probe - 1] | back_agg):
            ok, probe = probe, 2 * probe
        lo, hi = ok, min(probe, nfront) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(front[mid] | back_agg):
                hi = mid
            else:
                lo = mid + 1
        self.failing = front[lo] | back_agg
        del front[lo:]
        return nfront - lo


class _Aside:
    """The segments' unions read with one reservation set aside, as
    :meth:`Timeline.remove` would leave them, without removing it: its
    resources taken out of each segment it covers (spans never overlap:
    there they are its alone), computed for the segments a search reads.

    ``whole`` is ``(lo, hi, w)`` when the reservation holds ``w`` whole
    nodes and nothing else (a whole-node job): the segments it covers, and
    how many more whole nodes are free there with it aside, for
    :meth:`Planner._enough_whole` to count without this view; else None."""

    __slots__ = ("_used", "_lo", "_hi", "_bits", "whole")

    def __init__(self, used: list[int], times: list[float], span: Span, whole: int | None) -> None:
        self._used = used
        self._lo, self._hi = lo, hi = _span_segments(times, span)
        self._bits = as_int(span.bits)
        self.whole = (lo, hi, whole) if whole is not None else None

    def __len__(self) -> int:
        return len(self._used)

    def __getitem__(self, k: int) -> int:
        x = self._used[k]
        return x ^ (x & self._bits) if self._lo <= k < self._hi else x


def _span_segments(times: list[float], span: Span) -> tuple[int, int]:
    """The segments ``span`` covers, ``(lo, hi)``, as :class:`_Aside` reads them."""
    lo = bisect.bisect_right(times, span.start) - 1
    hi = len(times) if span.end == math.inf else bisect.bisect_right(times, span.end) - 1
    return lo, hi


class _Vertices:
    """The segments' unions cut to their node vertex bits, for a whole-node
    search on a layout where each node's units sit at a fixed shift from its
    vertex (one-core nodes): a node is whole only if its vertex is free, so
    the window slides over half the bits.  Each cut is remembered by the
    segment's int object (the entry holds it, so its id is not reused);
    ``aside``'s reservation is taken out of the segments it covers."""

    __slots__ = ("_used", "_mask", "_cache", "_lo", "_hi", "_own")

    def __init__(self, used: Sequence[int], mask: int, cache: dict[int, tuple[int, int]], aside: _Aside | None) -> None:
        self._used, self._mask, self._cache = used, mask, cache
        self._lo, self._hi, self._own = (aside._lo, aside._hi, aside._bits & mask) if aside else (0, 0, 0)

    def __len__(self) -> int:
        return len(self._used)

    def __getitem__(self, k: int) -> int:
        x = self._used[k]
        e = self._cache.get(id(x))
        if e is None or e[0] is not x:
            if len(self._cache) > 4096:
                self._cache.clear()
            e = self._cache[id(x)] = (x, x & self._mask)
        v = e[1]
        return v ^ (v & self._own) if self._lo <= k < self._hi else v


class Planner(Timeline):
    """Spans of running and reserved jobs over a resource graph (see
    :class:`~.timeline.Timeline`), and the searches for when a request fits.
    """

    def earliest(
        self, request: Any, now: float, duration: float, policy: str = "first"
    ) -> tuple[float, ResourceSet] | None:
        """The earliest ``t >= now`` at which ``request`` fits for ``duration``.

        Returns ``(t, resources)``, or ``None`` when it does not fit even after
        every planned span has ended (too big for the resources that are up).
        ``duration`` of 0 or ``math.inf`` means unlimited.
        """
        found = self.earliest_bits(request, now, duration, policy)
        if found is None:
            return None
        return found.start, self.resolve(found.placement)

    def earliest_bits(
        self,
        request: Any,
        now: float,
        duration: float,
        policy: str = "first",
        before: float = math.inf,
        not_before: float = -math.inf,
        since: int = -1,
        own: int | None = None,
        aside: bool = False,
        allow: str | None = None,
    ) -> Slot | None:
        """Like :meth:`earliest`, with the placement left as found (see
        :meth:`resolve`): the start time and the placement.

        ``allow`` names a blocked window the request may use (a job of a
        ``FLEX`` advance reservation: its own window does not keep it off).

        With ``before``, only start times earlier than it are tried (the
        caller already holds a place at ``before``).  With ``not_before``,
        only start times from it on are (a job that cannot start before the
        one ahead of it); ``now`` stays the present, for overdue jobs.

        With ``since`` (a position in the log of gains, see
        :mod:`.timeline`) the caller knows that nothing fitted anywhere in
        ``[now, before)`` in the plan as it was at that position (the job's
        own span, ``own``, aside): only the start times whose window
        overlaps a gain logged since are tried (:meth:`_gained_starts`).
        The answer is the same as without it.

        With ``aside``, ``own``'s reservation stays in the plan and the
        search reads the plan without it, for a place before it
        (:meth:`can_search_aside` says when that is allowed): the answer
        is the one :meth:`remove` then a search would give, and a job that
        does not move costs no removal and no putting back."""
        if not duration or duration <= 0:
            duration = math.inf
        self._counted = None
        self.set_now(now)
        start = max(now, not_before)
        pool = self.pool_bits()
        times = self._times
        self.held_by = None
        if before <= start:
            return None
        blocks = self._blocks
        if since >= 0 and not_before <= now and not self._overlapped and not blocks:
            cands = self._gained_starts(since, own, start, before, duration)
            if cands is None:
                cands = [start] + times[bisect.bisect_right(times, start) : bisect.bisect_left(times, before)]
            elif not cands:
                return None
        else:
            cands = [start] + times[bisect.bisect_right(times, start) : bisect.bisect_left(times, before)]
        if blocks:
            # A window's end is where what it held comes back: a candidate too.
            if ends := self._block_ends(start, before):
                cands = sorted({*cands, *ends})
        elif self._nreserved == 0 and self._max_running_start <= now:
            # Only running jobs: availability grows with t, binary search it.
            return self._earliest_monotone(request, cands, pool, policy)
        if (
            not blocks
            and not self._ncounted
            and start > now
            and self._max_running_start <= start
            and self._latest_reserved_start() <= start
        ):
            # Every span has started by ``start`` (a queue planned in order):
            # from there on, too, availability only grows.
            return self._earliest_monotone(request, cands, pool, policy)

        reach = self._reach(cands, duration)
        used: Sequence[int] = self._materialize(reach)
        promised = self._reserved_counts(reach) if self._ncounted else None
        segments = used
        counted = used
        aside_whole = None
        view = None
        aside_span = self._spans[own] if aside else None  # type: ignore[index]
        if aside_span is not None and aside_span.count is not None:
            # A counted reservation holds no bits: only its count reads as free.
            aside_whole = _span_segments(times, aside_span) + (aside_span.count,)
        elif aside_span is not None:
            # The reservation's own resources read as free, segment by segment as read.
            view = _Aside(used, times, aside_span, self._whole_held(aside_span))
            used, aside_whole = view, view.whole
            if aside_whole is None:
                counted = view
        n = request.whole_nodes
        tries: Iterable[float] = cands
        enough = None
        skip = [-math.inf]  # no start time before it fits (the window's failing suffixes)
        if n and self._whole_fit(policy):
            if not blocks and not self._overlapped:
                floor = self._nothing_fits_before(n, duration, aside_span)
                if floor > cands[0]:
                    cands = cands[bisect.bisect_left(cands, floor) :]
                self._counted = (own, n, duration) if aside else None
                if not cands:
                    return None
            enough = self._enough_whole(cands, n, duration, pool, counted, before, aside_whole, skip, promised)
            first = next(enough, None)
            if first is None:
                return None
            tries = itertools.chain((first,), enough)
        else:
            first = cands[0]
        match = self.match_bits
        fit, codec = self.matcher.fit, self.codec
        fails = None
        slid: Sequence[int] = used  # what the window slides over
        if enough is not None:
            need = request.whole_nodes
            if codec.unit_shift is not None:
                # Each node's vertex bit, then its units: a node is whole
                # only if its vertex is free, so fewer free vertices than
                # ``need`` is enough to fail (and the same count, for
                # jobs that hold whole nodes).  The window slides over the
                # vertex bits alone, and a window with enough free
                # vertices is then read whole.
                vertices = pool & codec.node_vertex_mask
                slid = _Vertices(segments, codec.node_vertex_mask, self._vertex_cache, view)

                def free(busy: int) -> int:
                    return (vertices ^ (vertices & busy)).bit_count()

            else:
                whole_count = codec.whole_count

                def free(busy: int) -> int:
                    return whole_count(pool ^ (pool & busy))

            def fails(busy: int) -> bool:
                return free(busy) < need

        # Ranges other searches found short of whole nodes (self._short):
        # (p, q), p descending, for the windows that hold them.
        shorts = self._shorts_for(need, aside_span) if fails is not None else None
        window = _WindowUnion()
        n = len(times)
        lo = self._index(first)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = -1
        try:
            for t in tries:
                if t < skip[0]:
                    continue
                if shorts:
                    end = t + duration
                    for p, q in shorts:
                        if p <= t:
                            break
                        if q < end:  # the window holds a short range: so do the next ones up to p
                            skip[0] = p
                            break
                    if t < skip[0]:
                        continue
                k = bisect.bisect_right(times, t, lo) - 1  # the segment t is in
                if k >= hi:  # past the window (candidates with a gap between): start afresh
                    window = _WindowUnion()
                    lo = hi = k
                else:
                    while lo < k:
                        window.pop()
                        lo += 1
                end = t + duration
                while hi < n and times[hi] < end:
                    window.push(slid[hi])
                    hi += 1
                busy = window.value()
                if slid is not used:
                    if fails(busy):
                        dropped = window.drop_failing(fails, True)
                        if dropped:  # window.failing is the suffix just found
                            self._remember_short(lo + dropped - 1, hi - 1, free(window.failing))
                        lo += dropped
                        if lo >= n:
                            return None
                        skip[0] = times[lo]
                        continue
                    busy = 0
                    for j in range(lo, hi):
                        busy |= used[j]
                avail = pool ^ (pool & busy)  # and-not without a negative int
                held = 0
                if blocks and (held := self.blocked_during(t, end, allow)):
                    if self.held_by is None and avail & held and self._fits(request, policy, avail):
                        self.held_by = self.held_names(t, end, allow)  # a window, not the plan, holds it here
                    avail &= ~held
                known = not held
                if avail and avail != last_failed:
                    found = None
                    if fit(codec, request, policy, avail) is not False:  # False: the matcher would say None
                        known = False
                        found = match(request, avail, policy)
                        if found is not None and (
                            enough is not None or promised is None or self.counts_hold(found.bits, t, end, aside_span)
                        ):
                            return Slot(t, found)
                    if found is None:
                        # The same set fails again; one that matched but took
                        # counted reservations' nodes here may not elsewhere.
                        last_failed = avail
                if fails is not None and slid is used and (dropped := window.drop_failing(fails, known)):
                    # Short of whole nodes from segment lo - 1 on: so is
                    # every window that starts in it or before.
                    self._remember_short(lo + dropped - 1, hi - 1, free(window.failing))
                    lo += dropped
                    if lo >= n:
                        return None
                    skip[0] = times[lo]
            return None
        finally:
            if enough is not None:
                # Closed here, not when collected: an interruption (SIGINT)
                # that lands in a generator's finalization is only printed.
                enough.close()

    def _whole_held(self, span: Span) -> int | None:
        """How many whole nodes ``span`` holds when it holds whole nodes and
        nothing else, else None; remembered per span (a reservation is
        looked at again at every pass that repairs it)."""
        if span.count is not None:
            return span.count
        e = self._whole_spans.get(span.jobid)
        if e is not None and e[0] is span:
            return e[1]
        whole = self.whole_of(span.bits)
        if len(self._whole_spans) > 4096:
            self._whole_spans.clear()
        self._whole_spans[span.jobid] = (span, whole)
        return whole

    def _remember_short(self, first: int, last: int, free: int) -> None:
        """Segments ``first`` to ``last`` leave ``free`` whole nodes at most
        (a failing suffix just found): any window that holds them is short
        of more than that, until a gain over them (:meth:`_log_gain`
        drops the entry; spans added only take away).  Kept as times, so
        boundaries added or removed since do not move it: ``(p, q, free,
        t0, t1)``, held by a window ``[t, t + d)`` when ``t < p`` and
        ``t + d > q``, over ``[t0, t1)``.  An entry found with a
        reservation set aside counts that reservation's nodes as free: a
        bound on the plan with it too."""
        if self._overlapped:
            return  # spans overlapped: a removal can free what another holds, unlogged
        times = self._times
        n = len(times)
        shorts = self._short
        if len(shorts) >= 256:
            del shorts[:128]
        shorts.append(
            (
                times[first + 1] if first + 1 < n else math.inf,
                times[last],
                free,
                times[first],
                times[last + 1] if last + 1 < n else math.inf,
            )
        )

    def _shorts_for(self, need: int, aside: Span | None) -> list[tuple[float, float]]:
        """The ranges known short of ``need`` whole nodes, as ``(p, q)`` by
        ``p`` descending (see :meth:`_remember_short`); with a reservation
        ``aside``, only those that do not overlap it (its nodes read free)."""
        if not self._short or self._overlapped:
            return []
        a, b = (aside.start, aside.end) if aside is not None else (math.inf, -math.inf)
        out = [(p, q) for p, q, c, t0, t1 in self._short if c < need and (t1 <= a or t0 >= b)]
        out.sort(reverse=True)
        return out

    def can_search_aside(self, jobid: int, duration: float, now: float) -> bool:
        """True when ``earliest_bits(..., before=span.start, own=jobid,
        aside=True)`` gives what removing ``jobid``'s reservation and
        searching would: it is a reservation still ``duration`` long that
        starts after ``now``, its place is still up (so it would be kept
        if nothing earlier fits), no window is blocked and spans never
        overlapped (so its resources, over its time, are its alone)."""
        span = self._spans.get(jobid)
        if span is None or span.running or self._overlapped or self._blocks or not span.start > now:
            return False
        if span.end != span.start + duration:
            return False
        self.set_now(now)
        bits = as_int(span.bits)
        return self.pool_bits() & bits == bits

    def keep(self, jobid: int) -> None:
        """``jobid``'s reservation stays where it is after a search that
        found nothing earlier (:meth:`can_search_aside`): as taking it out
        and putting it back would leave it.

        When that search counted whole nodes (:meth:`_nothing_fits_before`),
        its answer is remembered for the jobs of the same shape or bigger."""
        counted = self._counted
        if counted is not None and counted[0] == jobid:
            start = self._spans[jobid].start
            key = counted[1:]
            if self._nothing_before.get(key, -math.inf) < start:
                self._nothing_before[key] = start
        self._keep(jobid)

    def _nothing_fits_before(self, n: int, duration: float, aside: Span | None) -> float:
        """The earliest time a job of ``n`` whole nodes (and nothing else)
        for ``duration`` can start, by what the searches that kept a
        reservation found since the last gain: none before it.

        Why: a job of ``m <= n`` nodes for ``d <= duration`` whose
        reservation starts at ``s`` found no place in ``[now, s)``, with its
        own reservation aside, and nothing became free since.  Were there
        ``n`` whole nodes free over ``[t, t + duration)`` for some ``t <
        s``, then its ``m`` would have been over ``[t, t + d)``: the plan
        then differed only by its own reservation (which frees more) and
        by ``aside``'s (held then, free now), so only where ``[t, t + d)``
        meets ``aside`` could it differ, that is for ``t >= aside.start -
        d``.  A count is exact for such requests (:meth:`_whole_fit`), so
        the answer is the same as searching.  In a pass of conservative
        backfilling, where many reservations are of jobs of the same size
        and walltime (a campaign), the first one of a shape searches and
        the others search only from there."""
        facts = self._nothing_before
        floor = -math.inf
        if facts:
            for (m, d), s in facts.items():
                if m <= n and d <= duration:
                    f = s if aside is None else min(s, aside.start - d)
                    if f > floor:
                        floor = f
        return floor

    def fits_just_before(self, request: Any, t: float, policy: str = "first") -> bool:
        """Whether ``request`` fits in the last segment that starts before
        ``t`` (from now on), when nothing but running jobs is planned
        there: availability then only grows up to ``t``, so this tells
        whether it fits anywhere in ``[now, t)``, as :meth:`earliest`'s
        binary search would find."""
        k = max(0, bisect.bisect_left(self._times, t) - 1)
        used = self._materialize(k + 1)
        pool = self.pool_bits()
        avail = pool ^ (pool & used[k])
        if self._ncounted and (promised := self._reserved_counts(k + 1)[k]):
            # Counted reservations there: whole nodes by the count; else
            # say it may fit (the caller then searches).
            n = request.whole_nodes
            return not (n and self._whole_fit(policy)) or self.codec.whole_count(avail) - promised >= n
        return self._fits(request, policy, avail)

    def _fits(self, request: Any, policy: str, avail: int) -> bool:
        ok = self.matcher.fit(self.codec, request, policy, avail)
        return ok if ok is not None else self.match_bits(request, avail, policy) is not None

    def earliest_in(
        self,
        request: Any,
        now: float,
        duration: float,
        policy: str,
        window: Window,
        before: float = math.inf,
        not_before: float = -math.inf,
    ) -> Slot | None:
        """The earliest start of ``request`` inside ``window`` ``(start, end,
        bits, avoid)``, an advance reservation's, for one of its own jobs: on
        its bits only, from its start on, ending by its end (``duration``
        ``math.inf``: until its end), off the ``(start, end, bits)`` of
        ``avoid`` (the other windows that overlap it, a ``MAINT`` one's).
        Availability is the plan's (the running jobs and the reservations of
        pending jobs); the window's own block does not count.  None when it
        fits nowhere before ``before``."""
        if not duration or duration <= 0:
            duration = math.inf
        self._counted = None
        self.set_now(now)
        w0, w1, bits, avoid = window
        start = max(now, not_before, w0)
        stop = min(before, w1)
        if start >= stop:
            return None
        times = self._times
        cands = [start] + times[bisect.bisect_right(times, start) : bisect.bisect_left(times, stop)]
        if avoid:  # where another window ends, what it held comes back
            cands = sorted({*cands, *(b for _, b, _ in avoid if start < b < stop)})
        for t in cands:
            end = w1 if duration == math.inf else t + duration
            if end > w1:
                return None
            avail = self.available_bits(t, end) & bits
            for a, b, held in avoid:
                if a < end and b > t:
                    avail &= ~held
            if (
                avail
                and (found := self.match_bits(request, avail, policy)) is not None
                and self.counts_hold(found.bits, t, end)
            ):
                return Slot(t, found)
        return None

    def _gained_starts(
        self, since: int, own: int | None, start: float, before: float, duration: float
    ) -> list[float] | None:
        """The candidate start times in ``[start, before)`` (``start`` and the
        boundaries after it) whose window ``[t, t + duration)`` overlaps a
        gain logged since position ``since`` (not ``own``'s); None when the
        log no longer reaches back that far.

        Why the others can be skipped: a start time ``t`` that fits now lies
        in some segment; the window of that segment's first candidate ``c``
        (``start``, or the boundary where the segment begins) is within
        ``t``'s window over the segments, so ``c`` fits too.  If ``c``'s
        window overlaps no gain, everything available over it now was
        available then, when nothing fitted: a fit is monotone in what is
        available.  So the first candidate that fits overlaps a gain, and
        the search that skips the others finds the same one."""
        gains = self.gains_since(since)
        if gains is None:
            return None
        # t overlaps [a, b) when a - duration < t < b
        spans = [(a - duration, b) for a, b, _, jid in gains if b > start and a - duration < before and jid != own]
        if not spans:
            return []
        spans.sort()
        times = self._times
        out = [start] if any(a < start < b for a, b in spans) else []
        lo, hi = spans[0]
        for a, b in spans[1:]:
            if a < hi:  # overlapping open intervals: merge
                if b > hi:
                    hi = b
                continue
            out += times[bisect.bisect_right(times, max(lo, start)) : bisect.bisect_left(times, min(hi, before))]
            lo, hi = a, b
        out += times[bisect.bisect_right(times, max(lo, start)) : bisect.bisect_left(times, min(hi, before))]
        return out

    def _whole_fit(self, policy: str) -> bool:
        """A whole-node request fits exactly when that many whole nodes are
        available (the matcher's whole-node fast path)."""
        m = self.matcher
        return m.fast_paths and self.codec.flat_nodes and policy in m.FAST_ORDER

    def _enough_whole(
        self,
        cands: list[float],
        n: int,
        duration: float,
        pool: int,
        used: Sequence[int],
        before: float,
        aside: tuple[int, int, int] | None = None,
        skip: list[float] | None = None,
        promised: list[int] | None = None,
    ) -> Iterator[float]:
        """The candidates whose window has at least ``n`` whole nodes free in
        every segment it overlaps, in order, as they are asked for (the
        search stops at the first that fits).

        The segment that ends at ``before`` (the job's reservation) is looked
        at first: it is where the job was short when its place was chosen,
        and while it still is, only windows that end before it can fit.

        Each segment's count of whole free nodes is remembered by what the
        segment holds (:meth:`_whole_free`).  A candidate's window is read
        from its last segment back: a segment with fewer than ``n`` rules
        out every candidate whose window overlaps it, so the next candidate
        tried is the first after it, and when the last segment of the
        window is short that skips a whole window at the cost of one count
        (the segments read and found enough are remembered, and not read
        again).  A window's whole nodes are whole in each of its segments,
        so a candidate ruled out would fail the matcher too: the search
        that skips them finds the same start.

        ``aside``: ``(lo, hi, w)``, a reservation set aside (:class:`_Aside`)
        over segments ``lo`` to ``hi - 1``, where it holds ``w`` whole nodes
        of the pool alone: there a segment has ``w`` more whole nodes free
        than ``used`` says, counted without building the set-aside union.

        ``promised``: what counted reservations promise over each segment,
        taken off its count (they hold no bits)."""
        times = self._times
        nseg = len(times)
        by_id, count = self._whole_free(pool)
        lo_a, hi_a, w = aside if aside is not None else (0, 0, 0)
        if before != math.inf:
            k = bisect.bisect_left(times, before) - 1
            # (Past the segments read, no candidate's window reaches k: the cut is moot.)
            p = promised[k] if promised and k < len(promised) else 0
            if k >= 0 and count(used[k]) + (w if lo_a <= k < hi_a else 0) - p < n:
                cands = cands[: bisect.bisect_right(cands, times[k] - duration)]
        good_lo, good_hi = 0, -1  # segments read and found with n or more
        i, ncand = 0, len(cands)
        skip = skip or [-math.inf]
        while i < ncand:
            t = cands[i]
            if t < skip[0]:  # ruled out by the caller since
                i = bisect.bisect_left(cands, skip[0], i)
                continue
            k = bisect.bisect_right(times, t) - 1  # the window's first segment
            m = bisect.bisect_left(times, t + duration) - 1  # and its last
            j = m
            while j >= k:
                if good_lo <= j <= good_hi:
                    j = good_lo - 1
                    continue
                x = used[j]
                e = by_id.get(id(x))  # count(x), inlined: the search's innermost step
                c = e[1] if e is not None and e[0] is x else count(x)
                if lo_a <= j < hi_a:
                    c += w
                if promised is not None:
                    c -= promised[j]
                if c < n:
                    break
                j -= 1
            good_lo, good_hi = (j + 1 if j >= k else k), m
            if j < k:
                yield t
                i += 1
                continue
            if j + 1 >= nseg:  # j is short: so is every window over it
                return
            i = bisect.bisect_left(cands, times[j + 1], i)

    def _whole_free(self, pool: int) -> tuple[dict[int, tuple[int, int]], Callable[[int], int]]:
        """How many whole nodes of ``pool`` are free in a segment, from
        what the segment holds, remembered until the pool changes (or a
        few thousand entries).

        Remembered by the segment's int object first, then by its value: a
        Python int does not keep its hash, and hashing the union of a
        segment of a 93,312-node machine costs as much as a few thousand
        dict lookups (CEA Curie under conservative spent a third of its time
        there).  An entry holds its int, so the object's id is not reused
        while the entry lives; a segment rebuilt with the same value is a
        new object, found by value.  Returns the entries by id (``id(x)``:
        ``(x, count)``) and the count of a segment's union.

        On a layout of one-core nodes (each node's units at a fixed shift
        from its vertex) the count is of free node vertices: never fewer
        than the whole free nodes (the same when jobs hold whole nodes), so
        a segment short of them is short of whole nodes, and counted on
        half the bits for less than hashing the union would cost, so
        without the by-value entries (CEA Curie under conservative, jobs
        44,001-48,000: 125 s of CPU against 152 s, in runs a few minutes
        apart)."""
        cache = self._whole_free_cache
        if cache is None or (cache[0] is not pool and cache[0] != pool) or len(cache[2]) > 4096:
            cache = self._whole_free_cache = (pool, {}, {})
        _, by_value, by_id = cache
        if self.codec.unit_shift is not None and not self.counted:
            vertices = pool & self.codec.node_vertex_mask

            def count_vertices(x: int) -> int:
                e = by_id.get(id(x))
                if e is not None and e[0] is x:
                    return e[1]
                c = (vertices ^ (vertices & x)).bit_count()
                by_id[id(x)] = (x, c)
                return c

            return by_id, count_vertices
        whole = self.codec.whole_count

        def count(x: int) -> int:
            e = by_id.get(id(x))
            if e is not None and e[0] is x:
                return e[1]
            c = by_value.get(x)
            if c is None:
                c = by_value[x] = whole(pool ^ (pool & x))
            by_id[id(x)] = (x, c)
            return c

        return by_id, count

    def _reach(self, cands: list[float], duration: float) -> int:
        """How many segments a search over ``cands`` for ``duration`` reads."""
        end = cands[-1] + duration
        return len(self._times) if end == math.inf else bisect.bisect_left(self._times, end) + 1

    def _earliest_monotone(
        self, request: Any, cands: list[float], pool: int, policy: str, exact: bool = True
    ) -> Slot | None:
        """Binary search of ``cands`` for the first time ``request`` fits.

        Only running jobs, all started by now: a span covering a later
        segment covers every earlier one from now on, so what is busy
        during [t, t + d) is just the segment containing t.

        A probe only needs a yes or no: where :meth:`MatchCache.fit` tells
        it exactly (``exact``), the matcher is called once, at the time the
        search settles on, instead of at every probe that fits.  The probes
        and their outcomes are the same, so is the answer.  For a request
        placed by the whole-node fast path on one-unit nodes, a probe is a
        count when the timeline keeps it (:meth:`Timeline._busy_node_counts`):
        the whole nodes free over the segment are the nodes less those its
        spans hold, with no set read, and only the segment settled on is
        built (on CEA Curie's 93,312 nodes a probe of the set costs several
        passes over 186,625 bits)."""
        index, match = self._index, self.match_bits
        upto = index(cands[-1]) + 1
        n = self.matcher.whole_fast(self.codec, request, policy) if exact else 0
        counts = self._busy_node_counts(pool, upto) if n else None
        attempt: Callable[[float], Placement | bool | None]
        if counts is not None:
            busy, nodes = counts
            enough = nodes - n  # at most this many held

            def attempt(t: float) -> bool:
                return busy[index(t)] <= enough

        else:
            used = self._materialize(upto)
            fit = self.matcher.fit if exact else None
            codec = self.codec

            def attempt(t: float) -> Placement | bool | None:
                avail = pool & ~used[index(t)]
                if fit is not None:
                    ok = fit(codec, request, policy, avail)
                    if ok is not None:
                        return ok
                return match(request, avail, policy)

        lo, hi = 0, len(cands) - 1
        best = attempt(cands[hi])
        if best is None or best is False:
            return None
        found = hi
        while lo < hi:
            mid = (lo + hi) // 2
            got = attempt(cands[mid])
            if got is not None and got is not False:
                best, found, hi = got, mid, mid
            else:
                lo = mid + 1
        if best is True:
            k = index(cands[found])
            best = match(request, pool & ~self._materialize(k + 1)[k], policy)
            if best is None:  # pragma: no cover - fit() or the counts promised a placement
                return self._earliest_monotone(request, cands, pool, policy, exact=False)
        return Slot(cands[found], best)
