"""First-come, first-served: strict queue order, no backfill.

Jobs start in queue order (priority, then submit time, then id) for as long
as they fit.  The first job that does not fit (the *head*) stops the pass:
nothing behind it may start, even if it would fit, so no job is ever
overtaken.

Because nothing overtakes, every pending job's start is fixed by the
walltimes of the jobs running and ahead of it, so the policy forecasts it:
the head gets the earliest time it fits around the running jobs, and each
job behind it the earliest time, no sooner than the job ahead of it, that it
fits around the running jobs and the forecasts ahead of it.  Each forecast is
kept as a reservation and posted as the job's ``t_estimate``.  Forecasting
stops after ``reserve-depth`` jobs (default 8, as many as flux-core's
sched-fifo forecasts with its default queue-depth; 1 forecasts the head
only), or at a job that cannot be placed on what is up (no job behind it can
start before it).  Each forecast behind the head costs about one match: every
planned span has started by the time the job ahead starts, so availability
only grows from there and the planner binary-searches it.  Forecasts are
re-computed only when something was freed, cancelled or re-prioritized, or
the head's forecast time has passed; when only new jobs arrived, the
forecast is extended to them.  And when only jobs that ended before the
head's forecast start freed anything, the head does not fit before that
start, and the jobs are in the same order, each forecast is the one a
search would find again, and is left reserved where it is: the pass asks
only whether the head fits now or just before its forecast
(:meth:`FCFSPolicy._stands`; ``t/test_policy_fcfs_forecasts.py`` checks
every span and estimate against searching them all).

The forecasts decide no start of this policy's own: they are made where
something reads them (:attr:`~.base.PassContext.plan_read`: a driver that
shows ``t_estimate``, as the Flux module does; best-effort jobs, which the
plan preempts; power saving, which wakes nodes for it; other queues and
advance reservations, which plan around it), or when ``reserve-depth`` is
given.  Elsewhere (the replay, by default) the pass ends at the head, with
the same starts.

A job of an advance reservation (``system.reservation``) is scheduled in
its window apart from the order: it starts when it fits there, else keeps
its place in the window, and neither holds back the jobs behind it nor
waits for those ahead, as in Slurm (the window's ranks are closed to the
others anyway: docs/rfcs/reservations.md).

With named queues, order is kept within each queue: a queue's blocked head
holds back only that queue's jobs, and the forecasts are per queue (up to
``reserve-depth`` each).  The forecasts are reservations, so jobs of other
queues start only where they do not touch them.

Load with ``queue-policy=fcfs [reserve-depth=N]`` (or, for one named queue,
``queue-policy-per-queue=NAME:fcfs``).  This is the baseline every
backfilling paper compares against, e.g. D. Lifka, "The ANL/IBM SP
scheduling system", JSSPP 1995, LNCS 949.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import POLICY_DEFAULT, PassContext, PendingJob, PolicyDefault, QueuePolicy

#: forecasts in queue order: (job id, the job's duration then, its start)
_Forecasts = list[tuple[int, float, float]]


class FCFSPolicy(QueuePolicy):
    """Strict order.  Overrides :meth:`run` only; the forecast uses
    :meth:`PassContext.earliest` with ``not_before``."""

    name = "fcfs"
    #: Jobs (the head included) that get a forecast; None or 0 = every pending job.
    default_reserve_depth = 8

    persistent_reservations = True
    backfills = False

    def __init__(self, reserve_depth: int | None | PolicyDefault = POLICY_DEFAULT) -> None:
        super().__init__(reserve_depth)
        #: ``reserve-depth`` was given: forecast even where nothing reads the plan.
        self._forecast_asked = reserve_depth is not POLICY_DEFAULT
        # The forecasts of the last pass that ran to its end, in queue order
        # (job id, its duration then, its slot), and what the plan was then
        # (PassContext.forecast_stamp); void while a pass runs.
        self._chain: _Forecasts = []
        self._stamp: tuple[Any, ...] | None = None
        #: The head the last pass left waiting with no forecast made
        #: (nothing read one), or None (see :meth:`waits_as_it_did`).
        self._unfit: int | None = None

    def waits_as_it_did(self, head: PendingJob) -> bool:
        """The head did not fit at the last pass, and nothing read a
        forecast: until something is freed it does not fit, and in strict
        order nothing behind it starts."""
        return head.id == self._unfit

    def run(self, ctx: PassContext) -> Iterator[None]:
        self._unfit = None
        chain, stamp = self._chain, self._stamp
        self._chain, self._stamp = [], None
        made: _Forecasts = []
        yield from self._plan(ctx, chain if self._stands(ctx, chain, stamp) else [], made)
        self._chain = made
        self._stamp = ctx.forecast_stamp() if ctx.compress else stamp

    @staticmethod
    def _stands(ctx: PassContext, chain: _Forecasts, stamp: tuple[Any, ...] | None) -> bool:
        """Whether the last pass's forecasts ``chain``, still reserved, are
        the ones a search would find again as far as the queue still reads
        the same (:meth:`_plan` checks that job by job): something was freed,
        cancelled or re-prioritized, but only jobs that ended before the
        head's forecast start freed anything (``forecasts_stand``).

        Why they would: from the head's start on, the plan reads as it did
        then, so each forecast behind the head (searched from the one ahead
        of it on) is the same.  Before the head's start, only running jobs
        are planned and what is free only grows up to it: the head starts no
        earlier unless it fits now or just before its forecast, which
        :meth:`_plan` asks.  ``t/test_policy_fcfs_forecasts.py`` checks every
        span and estimate against searching them all."""
        return ctx.compress and bool(chain) and ctx.forecasts_stand(stamp, chain[0][2])

    def _plan(self, ctx: PassContext, standing: _Forecasts, made: _Forecasts) -> Iterator[None]:
        """One pass: start what fits in order, forecast the rest.
        ``standing``: the last pass's forecasts, still reserved, when
        :meth:`_stands`; they are left in the plan for as long as the queue
        reads as it did (the same jobs in the same order, the head not able
        to start earlier), and the rest is searched.  ``made`` gets this
        pass's forecasts."""
        forecast = ctx.plan_read or self._forecast_asked
        if (ctx.compress or not forecast) and not standing:
            # Something was freed, cancelled or re-prioritized: re-plan.
            ctx.clear_reservations()
        depth = self.reserve_depth or None
        head = None
        replan = ctx.compress
        floor = ctx.now  # no job starts before the one ahead of it
        n = 0
        for job in ctx.jobs():
            if standing and not self._still(ctx, standing, n, job):
                # The queue reads differently from here on: search the rest.
                ctx.drop_reservations([jobid for jobid, _, _ in standing[n:]])
                standing = []
            if getattr(job.request, "reservation", None) is not None:
                self._in_window(ctx, job)
                yield
                continue
            if head is None:
                # With the standing forecasts still reserved, asked as if
                # they were cleared (the queue's reservations are all there is).
                rs = ctx.fits_unplanned(job) if standing else ctx.fits_now(job)
                if rs is not None:
                    if standing:
                        ctx.clear_reservations()
                        standing = []
                    ctx.start(job, rs)
                    yield
                    continue
                head = job
                if not forecast:
                    # Its start and those behind it are the same with or
                    # without a forecast: nothing else reads one.
                    self._unfit = job.id
                    return
                if standing:
                    if ctx.fits_just_before(job, standing[0][2]):
                        ctx.clear_reservations()  # it starts earlier: re-plan
                        standing = []
                    else:
                        replan = False  # the forecasts stand
                        ctx.count_match()  # the search its forecast stands for
                kept = standing[0][2] if standing else ctx.reserved_start(job)
                if kept is None or replan or not kept > ctx.now:
                    # Forecasts behind the head were made around its old one.
                    ctx.clear_reservations()
                    replan = True
                    slot = ctx.earliest(job)
                    if slot is None:
                        # Cannot start on what is up: nothing behind it can either.
                        ctx.hold(job, "down")
                        return
                    ctx.reserve(job, slot)
                    kept = slot.start
                floor = kept
                made.append((job.id, job.duration, kept))
                n = 1
                yield
                continue
            # Behind the head: it waits for the jobs ahead (reason_pending says so).
            if depth is not None and n >= depth:
                return
            ctx.hold(job, "order")
            if standing:
                ctx.count_match()  # the search its standing forecast stands for
                kept = standing[n][2]
            elif (kept := ctx.reserved_start(job)) is None or replan:
                slot = ctx.earliest(job, not_before=floor)
                if slot is None:
                    return  # no forecast for it, so none for the jobs behind it
                ctx.reserve(job, slot)
                kept = slot.start
            floor = kept
            made.append((job.id, job.duration, kept))
            n += 1
            yield

    @staticmethod
    def _still(ctx: PassContext, standing: _Forecasts, n: int, job: PendingJob) -> bool:
        """Whether ``job``, ``n``-th in the queue, is the ``n``-th of the
        standing forecasts, as long as it was then and still reserved there
        (nothing took it out, such as a shorter plan for a running job)."""
        if n >= len(standing):
            return False
        jobid, duration, start = standing[n]
        if jobid != job.id or duration != job.duration or not start > ctx.now:
            return False
        return ctx.reserved_start(job) == start

    @staticmethod
    def _in_window(ctx: PassContext, job: PendingJob) -> None:
        """A job of an advance reservation: it starts in its window when it
        fits there, else keeps its place in it; it neither holds back nor
        waits for the jobs outside it, as in Slurm."""
        rs = ctx.fits_now(job)
        if rs is not None:
            ctx.start(job, rs)
            return
        ctx.unreserve(job)
        if (est := ctx.earliest(job)) is not None:
            ctx.reserve(job, est)
        ctx.hold(job, "backfill")
