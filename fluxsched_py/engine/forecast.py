"""Start-time forecasts: when every pending job, or a job not yet submitted, would start.

The engine's own plan gives a start time (``t_estimate``) only to the jobs
its policy reserves for: the head of the queue under easy, none under fcfs.
:func:`forecast` answers for every pending job, like ``squeue --start``: it
plans the whole queue conservatively on a *copy* of the plan (a new
:class:`~fluxsched_py.planner.Planner` holding the running jobs' spans and
the engine's reservations), in queue order, each job at the earliest time it
fits around the running jobs, the reservations and the jobs planned before
it.  The engine's planner and jobs are only read: a forecast never changes
what the scheduler does, and it runs off the scheduling path (when asked).

A job the engine holds a reservation for keeps that reservation's start and
resources (``kind`` ``"reservation"``); every other job gets the forecast
start (``kind`` ``"forecast"``).  A job that does not fit the resources that
are up (``"never"``), or only once a running job that is past its expected
end ends (``"unknown"``), gets no start.

Cost: one planner search per planned job over a plan that grows by one span
per job; a search tries every time a running or planned job ends, so on a
full machine of short-lived jobs one search can take tens of milliseconds
(``bench/bench_start_forecast.py``).  So a call plans at most ``limit`` jobs
(:data:`FORECAST_LIMIT` by default) and, with a ``budget``, stops planning
once it has worked that many seconds (the module passes
:data:`FORECAST_BUDGET`); the jobs after that are listed without a start
(``kind`` ``"not planned"``).

:func:`when` answers for a job that is not submitted: it is placed after
every pending job that would be ahead of it in queue order (priority, then
submit time: it is submitted last) in the same conservative plan.  With
more jobs ahead than ``limit`` (or ``budget``) lets it plan, only the first
are planned and the answer is marked ``"partial forecast"``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..jobspec import parse_jobspec
from ..planner import MatchCache, Planner
from ..policy import order_key
from .jobs import Job

if TYPE_CHECKING:
    from ..resource import ResourceSet
    from .core import Engine

__all__ = ["DEFAULT_URGENCY", "FORECAST_BUDGET", "FORECAST_LIMIT", "Forecast", "forecast", "when"]

#: Jobs planned per :func:`forecast` or :func:`when` call, at most.
FORECAST_LIMIT = 1000

#: Seconds of planning per call in the Flux module (a call never stops in
#: the middle of one job's search).
FORECAST_BUDGET = 0.2

#: The priority a job not yet submitted is taken to have: flux-core's
#: default urgency (16) is also the priority of the default priority plugin.
DEFAULT_URGENCY = 16


@dataclasses.dataclass(frozen=True)
class Forecast:
    """When one job would start, and on what."""

    jobid: int
    #: Epoch seconds; None when the job does not fit, or was not planned.
    start: float | None
    #: ``"reservation"`` (the engine's own plan), ``"forecast"`` (the
    #: conservative plan of the queue), ``"not planned"`` (beyond the limit or budget),
    #: ``"partial forecast"`` (:func:`when` with more jobs ahead than the
    #: limit or the budget let it plan: only the first of them were planned), ``"never"``
    #: (does not fit the resources that are up) or ``"unknown"`` (fits only
    #: once a running job past its expected end, which is unknown, ends).
    kind: str
    #: The resources (a ResourceSet), when planned.
    resources: Any = None
    #: The job's ``reason_pending`` as last sent to the job-manager, if any.
    reason: str | None = None
    userid: int = 0
    queue: str | None = None
    duration: float = math.inf

    def ranks(self) -> str:
        """The ranks of :attr:`resources` as an idset string ("" when none)."""
        return "" if self.resources is None else str(self.resources.ranks)

    def hosts(self, graph: Any) -> list[str]:
        """The hostnames of :attr:`resources` in ``graph``, rank order."""
        if self.resources is None:
            return []
        return [graph.hostname(r) or str(r) for r in self.resources.ranks]


def _copy_plan(e: Engine, now: float) -> tuple[Planner, dict[int, Any]]:
    """A planner with the engine's running spans and reservations; and the reservations by job id."""
    src = e.planner
    plan = Planner(src.graph, matcher=MatchCache(src.matcher.matcher))
    reserved = {}
    for span in src.spans():
        if span.running:
            plan.add_running(span.jobid, span.resources, span.start, span.end)
    for span in src.reserved():
        job = e.job(span.jobid)
        if job is None:
            continue
        start = max(span.start, now)
        plan.reserve(span.jobid, span.resources, start, start + (span.end - span.start))
        reserved[span.jobid] = (start, span.resources)
    for name, (start, end, bits) in src.blocks().items():  # advance reservations
        plan.block(name, bits, start, end)
    plan.set_now(now)
    return plan, reserved


def _place(
    plan: Planner,
    jobid: int,
    request: Any,
    duration: float,
    now: float,
    window: tuple[float, float, int] | None = None,
    walltime: float = math.inf,
) -> tuple[float, ResourceSet] | None:
    if window is not None:  # a job of an advance reservation: inside its window only, for its walltime
        slot = plan.earliest_in(request, now, walltime, "first", window)
        found = None if slot is None else (slot.start, plan.resolve(slot.placement))
    else:
        found = plan.earliest(request, now, duration)
    if found is None:
        return None
    t, rs = found
    plan.reserve(jobid, rs, t, t + duration)
    return t, rs


def _plan(
    e: Engine, jobs: list[Job], now: float, limit: int, budget: float | None, stopwatch: Callable[[], float]
) -> tuple[Planner, list[Forecast]]:
    t0 = stopwatch()
    plan, reserved = _copy_plan(e, now)
    out: list[Forecast] = []
    for i, job in enumerate(jobs):
        if budget is not None and i < limit and stopwatch() - t0 >= budget:
            limit = i
        common = {
            "reason": job.reply.sent.get("reason_pending"),
            "userid": job.userid,
            "queue": getattr(job.request, "queue", None),
            "duration": job.duration,
        }
        if job.id in reserved:
            t, rs = reserved[job.id]
            out.append(Forecast(job.id, t, "reservation", rs, **common))
        elif i >= limit:
            out.append(Forecast(job.id, None, "not planned", **common))
        elif (
            placed := _place(plan, job.id, job.request, job.duration, now, e.reservations.window(job), job.walltime)
        ) is None:
            kind = "never" if e.feasibility(job.request) is not None else "unknown"
            out.append(Forecast(job.id, None, kind, **common))
        else:
            out.append(Forecast(job.id, placed[0], "forecast", placed[1], **common))
    return plan, out


def forecast(
    e: Engine,
    now: float,
    limit: int = FORECAST_LIMIT,
    budget: float | None = None,
    stopwatch: Callable[[], float] = time.perf_counter,
) -> list[Forecast]:
    """Every pending job with its start, in the order they would start
    (jobs without a start last, in queue order).  See the module docstring."""
    _, out = _plan(e, e.pending(), now, limit, budget, stopwatch)
    never = math.inf
    order = {f.jobid: i for i, f in enumerate(out)}
    return sorted(out, key=lambda f: (f.start if f.start is not None else never, order[f.jobid]))


def when(
    e: Engine,
    jobspec: Mapping[str, Any],
    now: float,
    *,
    priority: int = DEFAULT_URGENCY,
    limit: int = FORECAST_LIMIT,
    budget: float | None = None,
    stopwatch: Callable[[], float] = time.perf_counter,
) -> Forecast:
    """When a job of ``jobspec`` submitted at ``now`` with ``priority`` would
    start, and on what.  Raises ValueError when the jobspec is invalid or can
    never run on these resources (the reason, as ``feasibility.check`` gives it)."""
    reason = e.feasibility(jobspec)
    if reason is not None:
        raise ValueError(reason)
    request = parse_jobspec(jobspec)
    probe = Job(-1, priority, 0, now, request)
    key = order_key(priority, now, math.inf)
    ahead = [j for j in e.pending() if j.sortkey < key]
    plan, planned = _plan(e, ahead, now, limit, budget, stopwatch)
    placed = _place(plan, probe.id, request, probe.duration, now, e.reservations.window(probe), probe.walltime)
    queue = getattr(request, "queue", None)
    if placed is None:  # pragma: no cover - feasibility said it fits
        return Forecast(probe.id, None, "never", queue=queue, duration=probe.duration)
    kind = "partial forecast" if any(f.kind == "not planned" for f in planned) else "forecast"
    return Forecast(probe.id, placed[0], kind, placed[1], queue=queue, duration=probe.duration)
