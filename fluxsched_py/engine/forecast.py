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
end ends (``"unknown"``), gets no start.

Under run limits (:mod:`.runlimits`) each regular job is planned where its
resources are free *and* every limit it is under holds for its whole run,
counting the running jobs until their planned ends and the jobs planned
before it (:class:`~.runlimits.PlannedUsage`): a job a limit holds now
(``"held"``, its reason the limit, as :meth:`Engine.over_limit` gives it)
starts, in the forecast, once enough of its user's (or its queue's) jobs
have ended, and what it then holds counts against the limits of the jobs
after it.  A job that needs more than a limit allows gets no start.

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
from ..planner import MatchCache, Planner, Window
from ..policy import order_key
from .jobs import Job
from .runlimits import PlannedUsage, held_by

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..resource import ResourceGraph, ResourceSet
    from .core import Engine
    from .jobtable import JobTable
    from .runlimits import RunLimits

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


def _copy_plan(table: JobTable, now: float) -> tuple[Planner, dict[int, Any]]:
    """A planner with the table's running spans and reservations; and the reservations by job id."""
    src = table.planner
    plan = Planner(src.graph, matcher=MatchCache(src.matcher.matcher), counted=src.counted)
    reserved = {}
    for span in src.spans():
        if span.running:
            plan.add_running(span.jobid, span.resources, span.start, span.end)
    for span in src.reserved():
        if span.jobid not in table.jobs:
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
    window: Window | None = None,
    walltime: float = math.inf,
    keeps_limits: Callable[[float, ResourceSet], bool] | None = None,
    later: Callable[[float], float] | None = None,
    allow: str | None = None,
) -> tuple[float, ResourceSet] | None:
    """The earliest place for the job in ``plan``, reserved there; None when
    none.  With ``keeps_limits(start, resources)``, a place where it says
    no is passed over for a search from ``later(start)`` on (the next time
    what counts against the limits falls; inf: never).  ``allow``: the
    ``FLEX`` reservation whose window the job may use as well."""
    while True:
        if window is not None:  # a job of an advance reservation: inside its window only, for its walltime
            found = plan.earliest_in(request, now, walltime, "first", window, not_before=not_before)
        else:
            found = plan.earliest_bits(request, now, duration, not_before=not_before, allow=allow)
        if found is None:
            return None
        t, rs = found.start, plan.resolve(found.placement)
        if keeps_limits is None or keeps_limits(t, rs):
            break
        assert later is not None
        not_before = later(t)
        if not_before == math.inf:
            return None
    plan.reserve(jobid, rs, t, t + duration)
    return t, rs


class _LimitPlan:
    """What the forecast's regular jobs hold over time, for the run limits:
    each running job until its planned end, each of the engine's
    reservations (``reserved``: job id -> start and resources, all in the
    plan from the start, whatever their place in the queue) and each job
    the forecast places, over its planned run."""

    def __init__(
        self, limits: RunLimits, table: JobTable, now: float, reserved: Mapping[int, tuple[float, ResourceSet]]
    ) -> None:
        self.limits = limits
        self.spans: list[tuple[float, float, str | None, int, tuple[int, int, int, int]]] = []
        for span in table.planner.spans():
            job = table.jobs.get(span.jobid)
            if span.running and job is not None and job.preemptible_after is None and job.resources is not None:
                self.add(job, now, span.end, job.resources)
        for jobid, (start, rs) in reserved.items():
            job = table.jobs.get(jobid)
            if job is not None and job.preemptible_after is None:
                self.add(job, start, start + job.duration, rs)

    def add(self, job: Job, start: float, end: float, rs: ResourceSet) -> None:
        queue = (job.request.queue or None) if job.request is not None else None
        self.spans.append((start, end, queue, job.userid, held_by(rs)))

    def keeps(self, job: Job, start: float, rs: ResourceSet) -> bool:
        """Whether ``job`` on ``rs`` from ``start`` keeps every limit for its run."""
        assert self.limits is not None
        usage = PlannedUsage(self.spans, start, start + job.duration)
        return self.limits.check(usage, job, held_by(rs)) is None  # type: ignore[arg-type]

    def after(self, t: float) -> float:
        """The first end after ``t``: when what counts against a limit next falls."""
        return min((s[1] for s in self.spans if s[1] > t), default=math.inf)


class SlicedForecast:
    """The whole-queue plan of :func:`forecast`, made a slice at a time.

    It snapshots the pending jobs (``jobs``, default every pending job in
    queue order) at ``now`` and plans them in that order; :meth:`step` plans
    jobs until its ``budget`` (seconds) is spent and can be called again to
    go on, so a driver spreads the plan over several reactor callbacks.
    The plan is a copy made at the first step, over the engine's graph: it
    stays right only while nothing starts or ends, so a driver starts a new
    one when the queue or the resources change (:meth:`valid` tells whether
    the graph changed since).  It keeps only what it reads of the engine:
    the job table (jobs, and the planner it copies), the advance
    reservations, and the engine's answers to which queue a job waits in,
    with what policy, whether a limit holds it and whether it can ever run.
    """

    def __init__(self, e: Engine, now: float, jobs: list[Job] | None = None, limit: int = FORECAST_LIMIT) -> None:
        self.table = e.table
        self.reservations = e.reservations
        self.limits = e.limits
        self.over_limit = e.over_limit
        self.feasibility = e.feasibility
        self.scheduled_as = e.scheduled_as
        self.policy_for = e.policy_for
        self.now = now
        self.jobs = e.pending() if jobs is None else jobs
        self.limit = limit
        self.version = self.table.graph.version
        self.plan: Planner | None = None
        self.out: list[Forecast] = []
        #: :meth:`step` calls so far (slices)
        self.steps = 0
        self._reserved: dict[int, Any] = {}
        # fcfs queues: no job starts before the one ahead of it (by queue, the planned start ahead)
        self._floors: dict[str | None, float] = {}
        #: What counts against the run limits over time (None: no limits).
        self._limits: _LimitPlan | None = None

    @property
    def done(self) -> bool:
        """Every job has its forecast."""
        return self.plan is not None and len(self.out) == len(self.jobs)

    def valid(self) -> bool:
        """Nothing started or ended on the engine's graph since the plan was copied."""
        return self.table.graph.version == self.version

    def step(self, budget: float | None = None, stopwatch: Callable[[], float] = time.perf_counter) -> bool:
        """Plan the next jobs, until ``budget`` seconds are spent (read before
        each job; a job's search is never cut) or every job is planned.
        Returns :attr:`done`."""
        t0 = stopwatch()
        self.steps += 1
        now = self.now
        if self.plan is None:
            self.plan, self._reserved = _copy_plan(self.table, now)
            if self.limits:
                self._limits = _LimitPlan(self.limits, self.table, now, self._reserved)
        floors = self._floors
        while len(self.out) < len(self.jobs):
            if budget is not None and stopwatch() - t0 >= budget:
                return False
            i = len(self.out)
            job = self.jobs[i]
            queue = self.scheduled_as(getattr(job.request, "queue", None))
            strict = self.policy_for(queue).name == "fcfs"
            held = self.held(job)
            facts = job_facts(job) if held is None else {**job_facts(job), "reason": held}
            if job.id in self._reserved:
                t, rs = self._reserved[job.id]
                self.out.append(Forecast(job.id, t, "reservation", rs, **job_facts(job)))
            elif i >= self.limit or (strict and floors.get(queue) == math.inf):
                self.out.append(Forecast(job.id, None, "held" if held else "not planned", **facts))
                continue
            elif (placed := self._place(job, floors.get(queue, now))) is None:
                if held is not None:  # it needs more than a limit allows
                    self.out.append(Forecast(job.id, None, "held", **facts))
                    continue  # the policy never sees it: no floor either
                kind = "never" if self.feasibility(job.request) is not None else "unknown"
                self.out.append(Forecast(job.id, None, kind, **facts))
            else:
                self.out.append(Forecast(job.id, placed[0], "forecast" if held is None else "held", placed[1], **facts))
            if strict:
                start = self.out[-1].start
                floors[queue] = math.inf if start is None else max(floors.get(queue, now), start)
        return True

    def _place(self, job: Job, not_before: float) -> tuple[float, ResourceSet] | None:
        assert self.plan is not None
        reservations = self.reservations
        window, allow = reservations.window(job), reservations.flex(job)
        limits = self._limits if job.preemptible_after is None else None
        placed = _place(
            self.plan,
            job.id,
            job.request,
            job.duration,
            self.now,
            not_before,
            window,
            job.walltime,
            None if limits is None else (lambda t, rs: limits.keeps(job, t, rs)),
            None if limits is None else limits.after,
            allow,
        )
        if placed is not None and limits is not None:
            limits.add(job, placed[0], placed[0] + job.duration, placed[1])
        return placed

    def held(self, job: Job) -> str | None:
        """The run limit that holds pending regular ``job`` now, or None."""
        return None if job.preemptible_after is not None else self.over_limit(job)

    def place(self, job: Job) -> tuple[float, ResourceSet] | None:
        """Place ``job`` after every job planned so far (for :func:`when`)."""
        return self._place(job, -math.inf)

    def finish(self) -> None:
        """Give every job not planned yet its engine reservation, or ``"not planned"``."""
        if self.plan is None:
            self.plan, self._reserved = _copy_plan(self.table, self.now)
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
    facts: dict[str, Any] = {"userid": userid, "queue": queue, "duration": probe.duration}
    key = order_key(priority, now, math.inf)
    ahead = [j for j in e.pending() if j.sortkey < key]
    s = SlicedForecast(e, now, ahead, limit)
    why = s.held(probe)
    s.step(budget, stopwatch)
    s.finish()
    placed = s.place(probe)
    if placed is None:
        if why is not None:  # it needs more than a limit allows
            return Forecast(probe.id, None, "held", reason=why, **facts)
        return Forecast(probe.id, None, "never", **facts)  # pragma: no cover - feasibility said it fits
    if why is not None:
        return Forecast(probe.id, placed[0], "held", placed[1], reason=why, **facts)
    kind = "partial forecast" if any(f.kind == "not planned" for f in s.out) else "forecast"
    return Forecast(probe.id, placed[0], kind, placed[1], **facts)
