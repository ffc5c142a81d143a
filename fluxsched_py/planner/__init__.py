"""Future availability of resources, for reservations, estimates and backfill.

The planner answers one question for the queue policies: *when* could this
request run, and *on what*?  It keeps a timeline of **spans**, one per job,
each a :class:`~fluxsched_py.resource.ResourceSet` held over ``[start, end)``:

* a *running* span belongs to a job that holds its resources in the graph now
  (``end`` is its expiration, ``math.inf`` when unlimited);
* a *reserved* span is a promise made to a pending job.

Spans of different jobs that overlap in time must use disjoint resources; the
planner trusts its callers on that, exactly as the graph refuses double
allocation.

The timeline is a step function: sorted boundary times, and for each segment
between two boundaries the union of the resources used during it.  Adding or
removing a span touches only the segments it covers.  :meth:`Planner.available`
intersects over a window; :meth:`Planner.earliest` slides that window over the
boundaries with a two-stack aggregate, so finding a start time costs one union
per boundary plus one match per distinct candidate set (binary search when
only running jobs are planned, since availability then only grows with time).

What "up" means comes from the graph: a resource is in the planner's pool at
time ``t0`` if it is free in the graph now, or held by a running job that is
expected to end after ``t0``.  A running job past its expected end (still
holding its resources, end unknown) keeps them out of the pool until it is
removed.  Down or drained resources are never in the pool.

Example::

    p = Planner(g)
    p.add_running(1, rs1, start=0.0, end=100.0)
    t, rs = p.earliest(request, now=10.0, duration=50.0)
    p.reserve(2, rs, t, t + 50.0)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Planner", "PlannerError", "Span"]

Matcher = Callable[..., Any]


class PlannerError(ValueError):
    """A span that makes no sense (empty interval, unknown or duplicate job)."""


@dataclass(frozen=True, slots=True)
class Span:
    """A job's hold on ``resources`` over ``[start, end)``."""

    jobid: int
    resources: Any  # ResourceSet
    start: float
    end: float
    running: bool


def _default_matcher() -> Matcher:
    from ..match import match

    return match


def _unusable_ranks(g: Any) -> Any:
    """Ranks that are down or drained (graph API permitting), else None."""
    down = getattr(g, "down_ranks", None)
    if down is None:
        return None
    bad = down()
    drained = getattr(g, "drained_ranks", None)
    if drained is not None:
        d = drained()
        if d:
            from ..ids import IdSet

            bad = bad | IdSet(d)
    return bad


class _WindowUnion:
    """Union over a sliding window of sets (two-stack queue aggregation).

    ``push`` adds at the back, ``pop`` drops the front, ``value`` is the union
    of what is inside; every operation is amortized O(1) set unions.
    """

    __slots__ = ("_empty", "_back", "_back_agg", "_front_aggs")

    def __init__(self, empty: Any) -> None:
        self._empty = empty
        self._back: list[Any] = []
        self._back_agg = empty
        self._front_aggs: list[Any] = []  # suffix unions, front of the window last

    def push(self, item: Any) -> None:
        self._back.append(item)
        self._back_agg = self._back_agg | item

    def pop(self) -> None:
        if not self._front_aggs:
            agg = self._empty
            for item in reversed(self._back):
                agg = agg | item
                self._front_aggs.append(agg)
            self._back.clear()
            self._back_agg = self._empty
        self._front_aggs.pop()

    def value(self) -> Any:
        if self._front_aggs:
            return self._front_aggs[-1] | self._back_agg
        return self._back_agg


class Planner:
    """Spans of running and reserved jobs over a resource graph.

    Parameters
    ----------
    graph:
        a :class:`~fluxsched_py.resource.ResourceGraph`; the planner reads its
        ``free()`` and ``down()`` sets and never modifies it.
    matcher:
        ``match(graph, request, *, policy, available)``; defaults to
        :func:`fluxsched_py.match.match`.
    """

    def __init__(self, graph: Any, *, matcher: Matcher | None = None) -> None:
        self.graph = graph
        self._match = matcher if matcher is not None else _default_matcher()
        self._empty = graph.all() - graph.all()
        self._spans: dict[int, Span] = {}
        # The step function: _used[k] is busy during [_times[k], _times[k+1]).
        self._times: list[float] = [-math.inf]
        self._used: list[Any] = [self._empty]
        self._refs: list[int] = [1]  # spans starting or ending at _times[k]
        self._running_ends: list[tuple[float, int]] = []  # sorted (end, jobid)
        self._nreserved = 0
        #: The latest time the planner was told about (``earliest(now=...)``
        #: or :meth:`set_now`): running jobs expected to end before it are
        #: overdue and keep their resources until removed.
        self.now = -math.inf

    # -- spans -------------------------------------------------------------

    def add_running(self, jobid: int, rs: Any, start: float, end: float = math.inf) -> None:
        """Record that ``jobid`` holds ``rs`` from ``start`` until ``end``."""
        self._add(Span(jobid, rs, float(start), float(end), True))
        bisect.insort(self._running_ends, (float(end), jobid))

    def reserve(self, jobid: int, rs: Any, start: float, end: float = math.inf) -> None:
        """Promise ``rs`` to the pending job ``jobid`` over ``[start, end)``."""
        self._add(Span(jobid, rs, float(start), float(end), False))
        self._nreserved += 1

    def remove(self, jobid: int) -> Span | None:
        """Forget ``jobid``'s span (it ended, was cancelled or is re-planned)."""
        span = self._spans.pop(jobid, None)
        if span is None:
            return None
        if span.running:
            i = bisect.bisect_left(self._running_ends, (span.end, jobid))
            del self._running_ends[i]
        else:
            self._nreserved -= 1
        lo = self._index(span.start)
        hi = self._index(span.end) if span.end != math.inf else len(self._times)
        rs = span.resources
        for k in range(lo, hi):
            self._used[k] = self._used[k] - rs
        self._unref(hi)
        self._unref(lo)
        return span

    def span(self, jobid: int) -> Span | None:
        return self._spans.get(jobid)

    def __contains__(self, jobid: object) -> bool:
        return jobid in self._spans

    def __len__(self) -> int:
        return len(self._spans)

    def spans(self) -> list[Span]:
        return list(self._spans.values())

    def reserved(self) -> list[Span]:
        return [s for s in self._spans.values() if not s.running]

    def clear_reservations(self) -> None:
        """Drop every reserved span (a pass re-plans them from scratch)."""
        if self._nreserved:
            for s in [s for s in self._spans.values() if not s.running]:
                self.remove(s.jobid)

    def set_end(self, jobid: int, end: float) -> None:
        """Move a span's end (``sched.expiration``)."""
        span = self._spans.get(jobid)
        if span is None:
            raise PlannerError(f"job {jobid} has no span")
        self.remove(jobid)
        self._add(Span(jobid, span.resources, span.start, float(end), span.running))
        if span.running:
            bisect.insort(self._running_ends, (float(end), jobid))
        else:
            self._nreserved += 1

    # -- queries -----------------------------------------------------------

    def set_now(self, now: float) -> None:
        """Tell the planner the current time (see :attr:`now`)."""
        self.now = max(self.now, float(now))

    def pool(self) -> Any:
        """Resources that are up, free now or held by a running job that is not overdue."""
        g = self.graph
        free = g.free()
        held = self._empty
        i = bisect.bisect_right(self._running_ends, (self.now, math.inf))
        for _, jobid in self._running_ends[i:]:
            held = held | self._spans[jobid].resources
        if held:
            bad = _unusable_ranks(g)
            if bad:
                restrict = getattr(held, "restrict", None)
                held = held - restrict(bad) if restrict is not None else held - g.down()
            free = free | held
        return free

    def available(self, t0: float, t1: float) -> Any:
        """Up resources free throughout ``[t0, t1)``."""
        if t1 <= t0:
            t1 = t0 + 1e-9
        lo = self._index(t0)
        hi = bisect.bisect_left(self._times, t1)
        busy = self._empty
        for k in range(lo, hi):
            busy = busy | self._used[k]
        return self.pool() - busy

    def earliest(self, request: Any, now: float, duration: float, policy: str = "first") -> tuple[float, Any] | None:
        """The earliest ``t >= now`` at which ``request`` fits for ``duration``.

        Returns ``(t, resources)``, or ``None`` when it does not fit even after
        every planned span has ended (too big for the resources that are up).
        ``duration`` of 0 or ``math.inf`` means unlimited.
        """
        if not duration or duration <= 0:
            duration = math.inf
        self.set_now(now)
        pool = self.pool()
        match = self._match
        g = self.graph
        cands = [now] + [t for t in self._times[bisect.bisect_right(self._times, now) :]]

        if self._nreserved == 0 and all(s.start <= now for s in self._spans.values()):
            # Only running jobs: availability grows with t, binary search it.
            return self._earliest_monotone(request, cands, pool, duration, policy)

        window = _WindowUnion(self._empty)
        times, used = self._times, self._used
        n = len(times)
        lo = self._index(now)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = None
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
            avail = pool - window.value()
            if not avail or (last_failed is not None and avail == last_failed):
                continue
            rs = match(g, request, policy=policy, available=avail)
            if rs is not None:
                return t, rs
            last_failed = avail
        return None

    def _earliest_monotone(
        self, request: Any, cands: list[float], pool: Any, duration: float, policy: str
    ) -> tuple[float, Any] | None:
        # busy(t) = union of spans still running after t: a suffix union over
        # the running spans sorted by end.
        ends = [e for e, _ in self._running_ends]
        jobs = [j for _, j in self._running_ends]
        suffix = [self._empty] * (len(jobs) + 1)
        for i in range(len(jobs) - 1, -1, -1):
            suffix[i] = suffix[i + 1] | self._spans[jobs[i]].resources
        match, g = self._match, self.graph

        def attempt(t: float) -> Any:
            avail = pool - suffix[bisect.bisect_right(ends, t)]
            if not avail:
                return None
            return match(g, request, policy=policy, available=avail)

        lo, hi = 0, len(cands) - 1
        best = attempt(cands[hi])
        if best is None:
            return None
        found = hi
        while lo < hi:
            mid = (lo + hi) // 2
            rs = attempt(cands[mid])
            if rs is not None:
                best, found, hi = rs, mid, mid
            else:
                lo = mid + 1
        return cands[found], best

    # -- the step function ---------------------------------------------------

    def _index(self, t: float) -> int:
        """Index of the segment containing ``t``."""
        return bisect.bisect_right(self._times, t) - 1

    def _split(self, t: float) -> int:
        """Make ``t`` a boundary; return its index and take a reference on it."""
        k = self._index(t)
        if self._times[k] != t:
            k += 1
            self._times.insert(k, t)
            self._used.insert(k, self._used[k - 1])
            self._refs.insert(k, 0)
        self._refs[k] += 1
        return k

    def _unref(self, k: int) -> None:
        if k >= len(self._times):
            return
        self._refs[k] -= 1
        if self._refs[k] == 0 and k > 0:
            del self._times[k], self._used[k], self._refs[k]

    def _add(self, span: Span) -> None:
        if span.jobid in self._spans:
            raise PlannerError(f"job {span.jobid} already has a span")
        if not span.end > span.start:
            raise PlannerError(f"job {span.jobid}: empty span [{span.start}, {span.end})")
        lo = self._split(span.start)
        hi = self._split(span.end) if span.end != math.inf else len(self._times)
        rs = span.resources
        for k in range(lo, hi):
            self._used[k] = self._used[k] | rs
        self._spans[span.jobid] = span
