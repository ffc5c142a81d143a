"""Start-time forecasts: when every pending job, or a job not yet submitted, would start.

The engine's own plan gives a start time (``t_estimate``) only to the jobs
its policy reserves for: the head of the queue under easy, none under fcfs.
:func:`forecast` answers for every pending job, like ``squeue --start``: it
plans the whole queue conservatively on a *copy* of the plan (a new
:class:`~fluxsched_py.planner.Planner` holding the running jobs' spans and
the engine's reservations), in queue order, each job at the earliest time it
fits around the running jobs, the reservations and the jobs planned before
it; in a queue whose policy is fcfs, also no earlier than the job ahead of
it (fcfs never lets a job pass the one ahead).  The engine's planner and jobs are only read: a forecast never changes
what the scheduler does, and it runs off the scheduling path (when asked).

A job the engine holds a reservation for keeps that reservation's start and
resources (``kind`` ``"reservation"``); every other job gets the forecast
start (``kind`` ``"forecast"``).  A job that does not fit the resources that
are up (``"never"``), or only once a running job that is past its expected
end ends (``"unknown"``), gets no start.  A job that a run limit
(:mod:`.runlimits`) holds at the forecast's time gets no start either
(``"held"``, its reason the limit, as :meth:`Engine.over_limit` gives it):
the pass holds it until a job of its user or queue ends, which no walltime
foretells exactly; it is not planned, so it delays no job after it, as in
the pass.

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
    from ..jobspec import Request
    from ..resource import ResourceGraph, ResourceSet
    from .core import Engine

__all__ = [
    "DEFAULT_URGENCY",
    "FORECAST_BUDGET",
    "FORECAST_LIMIT",
    "FORECAST_SLICE",
    "Forecast",
    "SlicedForecast",
    "forecast",
    "job_facts",
    "when",
]

#: Jobs planned per :func:`forecast` or :func:`when` call, at most.
FORECAST_LIMIT = 1000

#: Seconds of planning per call in the Flux module (a call never stops in
#: the middle of one job's search).
FORECAST_BUDGET = 0.2

#: Seconds of planning per slice of a :class:`SlicedForecast` in the Flux
#: module (one reactor callback; the pass budget is 0.05 s).
FORECAST_SLICE = 0.01

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
    #: ``"held"`` (a run limit holds it now: :attr:`reason` names it),
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

    def hosts(self, graph: ResourceGraph) -> list[str]:
        """The hostnames of :attr:`resources` in ``graph``, rank order."""
        if self.resources is None:
            return []
        return [graph.hostname(r) or str(r) for r in self.resources.ranks]


def _copy_plan(e: Engine, now: float) -> tuple[Planner, dict[int, Any]]:
    """A planner with the engine's running spans and reservations; and the reservations by job id."""
    src = e.planner
    plan = Planner(src.graph, matcher=MatchCache(src.matcher.matcher), counted=src.counted)
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
    request: Request,
    duration: float,
    now: float,
    not_before: float = -math.inf,
    window: tuple[float, float, int] | None = None,
    walltime: float = math.inf,
) -> tuple[float, ResourceSet] | None:
    if window is not None:  # a job of an advance reservation: inside its window only, for its walltime
        found = plan.earliest_in(request, now, walltime, "first", window, not_before=not_before)
    else:
        found = plan.earliest_bits(request, now, duration, not_before=not_before)
    if found is None:
        return None
    t, rs = found.start, plan.resolve(found.placement)
    plan.reserve(jobid, rs, t, t + duration)
    return t, rs


class SlicedForecast:
    """The whole-queue plan of :func:`forecast`, made a slice at a time.

    It snapshots the pending jobs (``jobs``, default every pending job in
    queue order) at ``now`` and plans them in that order; :meth:`step` plans
    jobs until its ``budget`` (seconds) is spent and can be called again to
    go on, so a driver spreads the plan over several reactor callbacks.
    The plan is a copy made at the first step, over the engine's graph: it
    stays right only while nothing starts or ends, so a driver starts a new
    one when the queue or the resources change (:meth:`valid` tells whether
    the graph changed since).  The engine is only read.
    """

    def __init__(self, e: Engine, now: float, jobs: list[Job] | None = None, limit: int = FORECAST_LIMIT) -> None:
        self.engine = e
        self.now = now
        self.jobs = e.pending() if jobs is None else jobs
        self.limit = limit
        self.version = e.planner.graph.version
        self.plan: Planner | None = None
        self.out: list[Forecast] = []
        #: :meth:`step` calls so far (slices)
        self.steps = 0
        self._reserved: dict[int, Any] = {}
        # fcfs queues: no job starts before the one ahead of it (by queue, the planned start ahead)
        self._floors: dict[str | None, float] = {}

    @property
    def done(self) -> bool:
        """Every job has its forecast."""
        return self.plan is not None and len(self.out) == len(self.jobs)

    def valid(self) -> bool:
        """Nothing started or ended on the engine's graph since the plan was copied."""
        return self.engine.planner.graph.version == self.version

    def step(self, budget: float | None = None, stopwatch: Callable[[], float] = time.perf_counter) -> bool:
        """Plan the next jobs, until ``budget`` seconds are spent (read before
        each job; a job's search is never cut) or every job is planned.
        Returns :attr:`done`."""
        t0 = stopwatch()
        self.steps += 1
        e, now = self.engine, self.now
        if self.plan is None:
            self.plan, self._reserved = _copy_plan(e, now)
        floors = self._floors
        while len(self.out) < len(self.jobs):
            if budget is not None and stopwatch() - t0 >= budget:
                return False
            i = len(self.out)
            job = self.jobs[i]
            queue = e.scheduled_as(getattr(job.request, "queue", None))
            strict = e.policy_for(queue).name == "fcfs"
            if job.id in self._reserved:
                t, rs = self._reserved[job.id]
                self.out.append(Forecast(job.id, t, "reservation", rs, **job_facts(job)))
            elif (why := _held(e, job)) is not None:  # the policy never sees it: no floor either
                self.out.append(Forecast(job.id, None, "held", **{**job_facts(job), "reason": why}))
                continue
            elif i >= self.limit or (strict and floors.get(queue) == math.inf):
                self.out.append(Forecast(job.id, None, "not planned", **job_facts(job)))
                continue
            elif (placed := self._place(job, floors.get(queue, now))) is None:
                kind = "never" if e.feasibility(job.request) is not None else "unknown"
                self.out.append(Forecast(job.id, None, kind, **job_facts(job)))
            else:
                self.out.append(Forecast(job.id, placed[0], "forecast", placed[1], **job_facts(job)))
            if strict:
                start = self.out[-1].start
                floors[queue] = math.inf if start is None else max(floors.get(queue, now), start)
        return True

    def _place(self, job: Job, not_before: float) -> tuple[float, ResourceSet] | None:
        assert self.plan is not None
        window = self.engine.reservations.window(job)
        return _place(self.plan, job.id, job.request, job.duration, self.now, not_before, window, job.walltime)

    def finish(self) -> None:
        """Give every job not planned yet its engine reservation, or ``"not planned"``."""
        if self.plan is None:
            self.plan, self._reserved = _copy_plan(self.engine, self.now)
        for job in self.jobs[len(self.out) :]:
            if job.id in self._reserved:
                t, rs = self._reserved[job.id]
                self.out.append(Forecast(job.id, t, "reservation", rs, **job_facts(job)))
            else:
                self.out.append(Forecast(job.id, None, "not planned", **job_facts(job)))

    def result(self) -> list[Forecast]:
        """The jobs in the order they would start (jobs without a start last, in queue order)."""
        order = {f.jobid: i for i, f in enumerate(self.out)}
        return sorted(self.out, key=lambda f: (f.start if f.start is not None else math.inf, order[f.jobid]))


def _held(e: Engine, job: Job) -> str | None:
    """The run limit that holds pending regular ``job`` now, or None."""
    return None if job.preemptible_after is not None else e.over_limit(job)


def job_facts(job: Job) -> dict[str, Any]:
    """What a forecast row tells of ``job`` besides its start: its reason, user, queue and duration."""
    return {
        "reason": job.reply.sent.get("reason_pending"),
        "userid": job.userid,
        "queue": getattr(job.request, "queue", None),
        "duration": job.duration,
    }


def forecast(
    e: Engine,
    now: float,
    limit: int = FORECAST_LIMIT,
    budget: float | None = None,
    stopwatch: Callable[[], float] = time.perf_counter,
) -> list[Forecast]:
    """Every pending job with its start, in the order they would start
    (jobs without a start last, in queue order).  See the module docstring."""
    s = SlicedForecast(e, now, limit=limit)
    s.step(budget, stopwatch)
    s.finish()
    return s.result()


def when(
    e: Engine,
    jobspec: Mapping[str, Any],
    now: float,
    *,
    priority: int = DEFAULT_URGENCY,
    userid: int = 0,
    limit: int = FORECAST_LIMIT,
    budget: float | None = None,
    stopwatch: Callable[[], float] = time.perf_counter,
) -> Forecast:
    """When a job of ``jobspec`` submitted at ``now`` by ``userid`` with
    ``priority`` would start, and on what (``"held"`` and no start when a
    run limit of that user or its queue would hold it now).  Raises ValueError when the jobspec is invalid or can
    never run on these resources (the reason, as ``feasibility.check`` gives it)."""
    reason = e.feasibility(jobspec)
    if reason is not None:
        raise ValueError(reason)
    request = parse_jobspec(jobspec)
    probe = Job(-1, priority, userid, now, request)
    queue = getattr(request, "queue", None)
    if (why := _held(e, probe)) is not None:
        return Forecast(probe.id, None, "held", reason=why, userid=userid, queue=queue, duration=probe.duration)
    key = order_key(priority, now, math.inf)
    ahead = [j for j in e.pending() if j.sortkey < key]
    s = SlicedForecast(e, now, ahead, limit)
    s.step(budget, stopwatch)
    s.finish()
    assert s.plan is not None
    placed = _place(
        s.plan, probe.id, request, probe.duration, now, -math.inf, e.reservations.window(probe), probe.walltime
    )
    if placed is None:  # pragma: no cover - feasibility said it fits
        return Forecast(probe.id, None, "never", userid=userid, queue=queue, duration=probe.duration)
    kind = "partial forecast" if any(f.kind == "not planned" for f in s.out) else "forecast"
    return Forecast(probe.id, placed[0], kind, placed[1], userid=userid, queue=queue, duration=probe.duration)
