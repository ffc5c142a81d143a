"""The searches: the earliest time a request fits, around the plan.

:meth:`Planner.earliest` slides a window over the timeline's boundaries with
a two-stack aggregate, so finding a start time costs one union per boundary
plus one match per distinct candidate set (binary search when only running
jobs are planned, since availability then only grows with time).  A
candidate only needs a yes or no: for whole-node and ``slot[k] > core[c]``
requests :meth:`~.matchcache.MatchCache.fit` answers it exactly from counts
(:mod:`.fastfit`), and the matcher runs once, at the time the search settles
on (about 15 ms a match on 1000 nodes x 8 cores, against microseconds).
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from .noearlier import NoEarlier
from .timeline import PlannerError, Timeline

__all__ = ["Planner"]


class _WindowUnion:
    """Union over a sliding window of flat sets (two-stack queue aggregation).

    ``push`` adds at the back, ``pop`` drops the front, ``value`` is the union
    of what is inside; every operation is amortized O(1) set unions.
    """

    __slots__ = ("_back", "_back_agg", "_front_aggs")

    def __init__(self) -> None:
        self._back: list[int] = []
        self._back_agg = 0
        self._front_aggs: list[int] = []  # suffix unions, front of the window last

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


class Planner(Timeline):
    """Spans of running and reserved jobs over a resource graph (see
    :class:`~.timeline.Timeline`), and the searches for when a request fits.
    """

    def earliest(self, request: Any, now: float, duration: float, policy: str = "first") -> tuple[float, Any] | None:
        """The earliest ``t >= now`` at which ``request`` fits for ``duration``.

        Returns ``(t, resources)``, or ``None`` when it does not fit even after
        every planned span has ended (too big for the resources that are up).
        ``duration`` of 0 or ``math.inf`` means unlimited.
        """
        found = self.earliest_bits(request, now, duration, policy)
        if found is None:
            return None
        t, rs, bits = found
        return t, rs if rs is not None else self.codec.decode(bits)

    def earliest_bits(
        self,
        request: Any,
        now: float,
        duration: float,
        policy: str = "first",
        before: float = math.inf,
        trace: NoEarlier | None = None,
        not_before: float = -math.inf,
    ) -> tuple[float, Any, int] | None:
        """Like :meth:`earliest`, with the flat set: ``(t, rs, bits)``.

        With ``before``, only start times earlier than it are tried (the
        caller already holds a place at ``before``).  With ``not_before``,
        only start times from it on are (a job that cannot start before the
        one ahead of it); ``now`` stays the present, for overdue jobs.  With
        ``trace`` (for a :meth:`whole_node_request` of ``trace.n`` nodes,
        searched from ``now``), the failed candidates are recorded in it: it
        becomes the proof that nothing fits before the answer (or
        ``before``), once ``trace.t`` and ``trace.seq`` are set."""
        if not duration or duration <= 0:
            duration = math.inf
        self.set_now(now)
        if trace is not None and not_before > now:
            raise PlannerError("a proof (trace) is only made for a search from now")
        start = max(now, not_before)
        pool = self.pool_bits()
        if trace is not None:
            trace.pool = pool
        times = self._times
        cands = [start] + times[bisect.bisect_right(times, start) : bisect.bisect_left(times, before)]
        if before <= start:
            return None
        if self._nreserved == 0 and self._max_running_start <= now:
            # Only running jobs: availability grows with t, binary search it.
            if trace is not None:  # not measured: at most n - 1 anywhere
                trace.times.append(now)
                trace.whole.append(trace.n - 1)
            return self._earliest_monotone(request, cands, pool, policy)
        if start > now and self._max_running_start <= start and self._latest_reserved_start() <= start:
            # Every span has started by ``start`` (a queue planned in order):
            # from there on, too, availability only grows.
            return self._earliest_monotone(request, cands, pool, policy)
        if trace is not None:
            return self._earliest_whole(request, now, duration, policy, cands, pool, trace)

        match = self.match_bits
        fit, codec = self.matcher.fit, self.codec
        window = _WindowUnion()
        used = self._materialize(self._reach(cands, duration))
        n = len(times)
        lo = self._index(start)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = -1
        for t in cands:
            while lo < n - 1 and times[lo + 1] <= t:
                if lo < hi:
                    window.pop()
                else:
                    hi += 1
                lo += 1
            end = t + duration
            while hi < n and times[hi] < end:
                window.push(used[hi])
                hi += 1
            avail = pool & ~window.value()
            if not avail or avail == last_failed:
                continue
            if fit(codec, request, policy, avail) is False:  # the matcher would say None
                last_failed = avail
                continue
            found = match(request, avail, policy)
            if found is not None:
                return t, found[0], found[1]
            last_failed = avail
        return None

    def _reach(self, cands: list[float], duration: float) -> int:
        """How many segments a search over ``cands`` for ``duration`` reads."""
        end = cands[-1] + duration
        return len(self._times) if end == math.inf else bisect.bisect_left(self._times, end) + 1

    def _earliest_whole(
        self, request: Any, now: float, duration: float, policy: str, cands: list[float], pool: int, trace: NoEarlier
    ) -> tuple[float, Any, int] | None:
        """:meth:`earliest_bits` for a :meth:`whole_node_request`: the same
        candidates in the same order, and the same answer, but a candidate
        that has fewer than ``n`` whole nodes is rejected without calling
        the matcher (which would reject it), and recorded in ``trace``.
        The window union is :class:`_WindowUnion`, inlined."""
        n = trace.n
        whole_count = self.codec.whole_count
        ttimes, twhole = trace.times, trace.whole
        times, used = self._times, self._materialize(self._reach(cands, duration))
        nseg = len(times)
        back: list[int] = []
        back_agg = 0
        front: list[int] = []  # suffix unions, front of the window last
        lo = self._index(now)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = -1
        w = 0
        for t in cands:
            while lo < nseg - 1 and times[lo + 1] <= t:
                if lo < hi:
                    if not front:
                        agg = 0
                        for item in reversed(back):
                            agg |= item
                            front.append(agg)
                        back.clear()
                        back_agg = 0
                    front.pop()
                else:
                    hi += 1
                lo += 1
            end = t + duration
            while hi < nseg and times[hi] < end:
                x = used[hi]
                back.append(x)
                back_agg |= x
                hi += 1
            avail = pool & ~((front[-1] | back_agg) if front else back_agg)
            ttimes.append(t)
            if not avail:
                twhole.append(0)
                continue
            if avail != last_failed:
                w = whole_count(avail)
                if w >= n:
                    found = self.match_bits(request, avail, policy)
                    if found is not None:
                        ttimes.pop()
                        return t, found[0], found[1]
                last_failed = avail
            twhole.append(w)
        return None

    def _earliest_monotone(
        self, request: Any, cands: list[float], pool: int, policy: str, exact: bool = True
    ) -> tuple[float, Any, int] | None:
        """Binary search of ``cands`` for the first time ``request`` fits.

        Only running jobs, all started by now: a span covering a later
        segment covers every earlier one from now on, so what is busy
        during [t, t + d) is just the segment containing t.

        A probe only needs a yes or no: where :meth:`MatchCache.fit` tells
        it exactly (``exact``), the matcher is called once, at the time the
        search settles on, instead of at every probe that fits.  The probes
        and their outcomes are the same, so is the answer."""
        used, index, match = self._materialize(self._index(cands[-1]) + 1), self._index, self.match_bits
        fit = self.matcher.fit if exact else None
        codec = self.codec

        def attempt(t: float) -> tuple[Any, int] | bool | None:
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
            best = match(request, pool & ~used[index(cands[found])], policy)
            if best is None:  # pragma: no cover - fit() promised a placement
                return self._earliest_monotone(request, cands, pool, policy, exact=False)
        return cands[found], best[0], best[1]
