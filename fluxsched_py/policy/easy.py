"""EASY backfilling: one reservation, for the job at the head of the queue.

Jobs start in queue order while they fit.  The first job that does not fit
(the *head*) gets a reservation at the earliest time enough running jobs will
have ended (the *shadow time*), on the resources the planner picks for it.
Every later job may then start at once (*backfill*) when it fits in what is
free now and does not delay the head:

1. it ends (by its walltime) before the shadow time, **or**
2. it uses only resources the head will not need at the shadow time (the
   "extra nodes"); its reservation is re-planned at the same shadow time
   around the new job, and the backfill is refused if that is impossible.

Rule 2 is what flux-core's ``sched-backfill`` lacks.  With node-exclusive jobs
the two rules are exactly the textbook ones (shadow time and extra nodes
counted once per pass, decremented as extra nodes are taken); the replay test
compares start times against a textbook implementation job by job.  A job
with no walltime can only backfill by rule 2 (it never ends before anything).

Request shapes (jobspec and duration) that failed to backfill are remembered
for the rest of the pass (and, for whole-node jobs, every shape at least as
big and as long): nothing a pass does frees resources, so a million
identical pending jobs cost one failed match, not a million.  When nothing
was freed since the last pass (only new jobs arrived), the head keeps its
reservation: its shadow time cannot have changed.

**The cost of a pass** (issue 21), with ``P`` jobs pending in the queue:

* the head: one match (does it fit now?); after something was freed,
  cancelled or re-prioritized, also one search for its earliest start
  (:mod:`fluxsched_py.planner.search`) and its reservation; after new
  jobs only, it keeps its reservation (no search);
* behind the head, each candidate in queue order.  Beyond
  ``annotate-depth`` (where what a job is told is not sent), the pass
  leaves out without a visit, at a step of :meth:`Pass.jobs
  <fluxsched_py.engine.passctx.Pass.jobs>` each, the whole-node jobs for
  more nodes than are wholly free, and, after new jobs only, the whole-node
  jobs that failed around the same head and reservation at the last pass
  (``Pass.settle``: with node counts both rules only get harder until
  something is freed), all at once when no pending job of the queue is
  other than whole nodes: such a pass costs the head and the new jobs.  A
  candidate visited costs a look at the failed sizes (see above), then at
  most two matches (rule 1; rule 2 on what the head may give up) and the
  head's re-plan around it; for a whole-node head, a count of what its
  window holds (once per free set) says when the head cannot move, without
  taking its reservation out and putting it back;
* the pass ends in O(1) when nothing is free or no pending job can fit
  (the fewest nodes one needs are more than are free).

So a pass after arrivals costs O(new jobs) visits, and a pass after an end
one search, at most ``P`` steps and a visit per candidate that fits in the
free nodes by count and is no bigger and longer than one that failed.
Figures (``bench/bench_easy.py``, session 12, this 2-core machine under
load average 4-7, both trees at the same time, against main 8733fa3; CPU
user + system, medians of 3 for 20,000 jobs, one run otherwise; every
``jobs.csv`` identical to main's)::

    trace               easy CPU  main    ratio   fcfs CPU  main    ratio
    heavy 20,000 seed 1   11.5 s   13.6 s  0.85     14.0 s   13.8 s  1.02
    heavy 20,000 seed 2    9.4 s   11.2 s  0.84     14.6 s   14.3 s  1.02
    heavy 100,000 seed 1  52.2 s   64.8 s  0.81     70.9 s   69.3 s  1.02
    heavy 100,000 seed 2  51.0 s   66.6 s  0.77     72.4 s   70.8 s  1.02
    KTH-SP2 whole         10.0 s   10.6 s  0.95     15.1 s   14.3 s  1.06
    SDSC-BLUE whole      102.4 s  116.5 s  0.88    158.4 s  155.2 s  1.02

On the first 20,000 jobs of the 100,000-job heavy trace (seed 1), the
jobs handed to the policy over all passes fell from 558,000 to 115,000
(counted at commit 3a6f47d).  Issue 21's must-hold (that trace under easy
in under 20 s of wall time) is not met: about 150 s of wall time here under
load, 51 s of CPU; in a py-spy sample what is left is mostly starting jobs
(``Pass.start``: decoding and allocating, about 16 %), the head's searches
(8 %), the walk's steps (7 %), and the replay's own loop.

With ``backfill-order=sjbf`` the candidates behind the head are tried
shortest planned duration first (the EASY++ prediction under
``predict-runtimes``, else the walltime; queue order among equal ones), as
Tsafrir, Etsion and Feitelson's EASY++ and Gaussier et al.'s predictsim do;
by default, in queue order.

With named queues, each queue has its own head and reservation.  A job
backfills only around every queue's reservations; rule 2 may re-plan only
its own queue's head.

Load with ``queue-policy=easy`` (or ``queue-policy-per-queue=NAME:easy``).

References:
    David Lifka, "The ANL/IBM SP scheduling system", Job Scheduling
    Strategies for Parallel Processing (JSSPP), LNCS 949, 1995.
    Ahuva W. Mu'alem and Dror G. Feitelson, "Utilization, Predictability,
    Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
    Backfilling", IEEE TPDS 12(6):529-543, 2001.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from .base import PassContext, PendingJob, QueuePolicy


class EasyPolicy(QueuePolicy):
    """EASY backfilling.

    Overrides :meth:`run`.  The two backfill rules map to context calls:
    rule 1 is :meth:`PassContext.fits_now` (the head's reservation is in the
    planner, so a job that ends before the shadow time never meets it, and a
    longer one must avoid it); rule 2 is :meth:`PassContext.fits_now_ignoring`
    followed by :meth:`PassContext.try_move` of the head's reservation.
    """

    name = "easy"
    default_reserve_depth = 1

    persistent_reservations = True

    def run(self, ctx: PassContext) -> Iterator[None]:
        head = yield from self._walk(ctx)
        ctx.settle(head)

    def _walk(self, ctx: PassContext) -> Generator[None, None, Any]:
        """The pass over this queue; returns the head (None: every job started or is held down)."""
        if ctx.compress:
            # Something was freed, cancelled or re-prioritized: re-plan.
            ctx.clear_reservations()
        head = None
        jobs = ctx.jobs()
        bound = True  # nothing_fits() may have turned true: asked before the first backfill, and after each start
        for job in jobs:
            if head is None:
                if ctx.hopeless(job):
                    # A job no bigger and no longer found no start time at all
                    # (below): neither can this one.  Without this, jobs that
                    # wait behind running jobs with no time limit each cost a
                    # full search, every pass.
                    ctx.hold(job, "down")
                    yield
                    continue
                rs = ctx.fits_now(job)
                if rs is not None:
                    ctx.start(job, rs)
                    yield
                    continue
                kept = ctx.reservation(job)
                if kept is not None and not ctx.compress and kept.start > ctx.now:
                    head = job  # nothing was freed: the shadow time stands
                    ctx.skip_unfit(head)
                    yield
                    continue
                ctx.unreserve(job)
                est = ctx.earliest(job)
                if est is None:
                    # Cannot run on what is up now: do not let it block the queue.
                    ctx.failed(job)
                    ctx.hold(job, "down")
                    yield
                    continue
                ctx.reserve(job, est)
                head = job
                ctx.skip_unfit(head)  # every later job is a backfill candidate: held when fits_free() says no
                yield
                continue

            if ctx.nothing_free():
                return head  # nothing can start; the engine explains why the rest wait
            if bound:
                bound = False
                if ctx.nothing_fits():
                    # Each would fail as a backfill (held so): the pass ends
                    # in O(1), not in a visit of every pending job.
                    ctx.hold_rest(job, jobs, "backfill")
                    return head
            if ctx.backfill_order == "sjbf":
                # sorted() is stable: queue order among equal durations
                for other in sorted([job, *jobs], key=_planned):
                    if ctx.nothing_free():
                        return head
                    self._backfill(ctx, head, other)
                    yield
                return head
            bound = self._backfill(ctx, head, job)
            yield
        return head

    @staticmethod
    def _backfill(ctx: PassContext, head: PendingJob, job: PendingJob) -> bool:
        """Start ``job`` now by rule 1 or 2 if it can, else hold it; True if it started."""
        if ctx.hopeless(job) or not ctx.fits_free(job):
            ctx.hold(job, "backfill")
            return False
        rs = ctx.fits_now(job)  # rule 1, or rule 2 on resources the head does not hold
        if rs is None:
            rs = ctx.fits_now_ignoring(job, head)
            if rs is not None and not ctx.try_move(head, rs, ctx.now + job.duration):
                rs = None
        if rs is not None:
            ctx.start(job, rs)
            return True
        ctx.failed(job)
        ctx.hold(job, "backfill")
        return False


def _planned(job: PendingJob) -> float:
    return job.duration
