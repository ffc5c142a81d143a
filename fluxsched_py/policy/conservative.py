"""Conservative backfilling: every pending job gets a reservation.

Jobs are visited in queue order.  Each one is placed at the earliest time it
fits around everything that is running and every reservation made so far in
this pass; if that time is now it starts, otherwise the placement becomes its
reservation and its ``t_estimate``.  A job can therefore only start early
(backfill) into a hole that no job ahead of it was promised, and no backfill
ever delays a reservation.

Reservations persist from pass to pass.  At each pass after something was
freed, cancelled or re-prioritized, every job, in queue order, takes its own
reservation out of the plan, looks for the earliest place around everything
else (including the reservations of the jobs behind it), and keeps the new
place only if it is earlier; its old place is still free for it, so a
reservation never moves later.  That is the paper's *compression* when jobs
end before their walltime.  Jobs that arrive later, whatever their priority,
are planned around existing reservations.  So no job starts after its first
``t_estimate`` unless a running job overruns its walltime or resources go
down (a property test checks this on random workloads).

The plan is repaired, not recomputed.  A reservation remembers where the
planner's log of gains stood when nothing fitted its job before it
(:class:`~fluxsched_py.planner.timeline.Timeline`): everything that became
available since is a logged gain (a job that ended early, a cancel, a
reservation that moved, resources that came up).  Spans added only take
resources away, so a job can only move into a window ``[t, t + duration)``
that overlaps a gain.  Each pass's cost, per pending job in queue order:

* only new jobs arrived (nothing freed): a kept reservation costs nothing;
* a job with a reservation, after a change: one walk of the gains logged
  since it was last looked at (usually this pass's own: the early end, and
  the old places of the jobs ahead of it that moved), and when none
  overlaps a window it could start earlier in, the reservation is kept
  untouched (:meth:`Timeline.unchanged_for
  <fluxsched_py.planner.timeline.Timeline.unchanged_for>`);
* otherwise a search for an earlier place, with the reservation left in
  the plan and read as if it were not there (:meth:`Planner.can_search_aside
  <fluxsched_py.planner.search.Planner.can_search_aside>`), only at the
  start times whose window overlaps a gain; for whole-node jobs each
  window is read from its last segment back, counting whole free nodes
  (remembered per segment), so a window short of nodes is ruled out for
  one count and the next start time tried is after the short segment;
  a window with enough free nodes in each segment but not the same ones
  throughout (reservations pin nodes) rules out, with its shortest
  failing suffix, every later start time whose window holds that suffix
  (:meth:`Planner.earliest_bits
  <fluxsched_py.planner.search.Planner.earliest_bits>`, ``since``); that
  suffix is remembered until a gain over it, and the later looks for
  more nodes than it leaves skip every window that holds it without
  reading a segment (jobs 44,001-48,000 of CEA Curie: 0.82 of main
  66642e3's CPU, 100.8 s against 123.5 s run at the same time).  A job
  that finds nothing earlier (most of them) costs that search and no
  change to the plan; one that moves costs two boundary updates to take
  out its old place and put in the new one, found by the same search.
  The reservation set aside is never taken out of the segments' unions:
  the count adds its whole nodes back, and the union of a segment under it
  is rebuilt only when a window that passed the count reads it.  On a big
  machine (CEA Curie, 93,312 one-core nodes: a segment's union is an int of
  hundreds of kilobits) the counts are found by the union's int object,
  not by its value, whose hash alone cost more than the search; the first
  8,000 Curie jobs take 0.56 of main 8733fa3's CPU (65.8 s against 117.6
  s, run at the same time), the heavy trace's first 20,000 jobs 1.02
  (noise), with identical schedules.  Where Curie's biggest jobs queue up
  (jobs 44,001-48,000), the failing-suffix rule and windows slid over
  node vertex bits take 0.54 of main 473adb8's CPU (120.5 s against
  221.5 s; ``bench/bench_conservative.py``), with identical schedules;
* a job without a reservation: one full search, as when it arrived.

So a pass costs, per reserved job after a change, a walk of the gains
since it was last looked at plus the windows of the start times those
gains touch, each read back to its first short segment, and no change to
the plan unless the job moves.  On the heavy trace's worst stretch
(``fluxsched-py replay heavy.swf --nodes 1024 --queue-policy conservative
--skip 49000 --jobs 2000``: 328,736 looks at a reservation, with 450
reservations and 485 segments in the plan on average at each) that is
28.0 to 35.0 s of CPU in two runs, 85 to 106 us a look with the whole
pass around it, against 71.4 s (217 us) in one run of main 8b1a215, on 2
cores loaded by other work (load average 5-6).

The answers are those of re-planning every reservation with a full search
(``t/test_policy_conservative.py`` checks the engine against such an oracle
policy; ``t/test_planner_repair.py`` checks each repaired search, and the
search with the reservation set aside), so the schedule is main 8b1a215's:
every job starts at the same time (``bench/bench_conservative.py``).
Figures by it (CPU, user + system; the branch median of 3, main one run):
heavy trace of 20,000 jobs, seed 1, 46.8 s against 58.2 s (0.80), seed 2
53.8 s against 75.2 s (0.72), no start time differs and every job starts
by its first ``t_estimate``.  Not yet what issue 21 asks: the heavy
trace's 100,000 jobs and SDSC Blue Horizon whole (1,152 one-core nodes)
were both still running after 300 s of wall time, on this branch as on
main.  The cost left is the looks themselves (hundreds of reservations
looked at on each early end, most of which cannot move) and the jobs
that do move (about one look in six in the worst stretch).

With ``reservation-nodes=counted`` a reservation of whole nodes promises a
number of nodes over its window, not the nodes chosen when it was made
(:mod:`fluxsched_py.planner.timeline`, "Counted reservations"): the profile
of free nodes of the paper itself.  A job then fits wherever enough whole
nodes are free in every segment of its window, less what the counted
reservations there promise, and its nodes are named when it starts.  So a
job can start earlier than with pinned nodes, where the segments of a
window may each have enough free nodes but not the same ones (never later
than its first ``t_estimate``, as above), and a look at a reservation
reads counts only: segments' unions change only when a job starts or ends.
The start times equal an independent node-count simulation of the paper's
algorithm (``t/test_policy_counted.py``).  On CEA Curie's jobs
44,001-48,000 (93,312 one-core nodes) it takes 0.62 of the CPU of pinned
nodes (57.9 s against 93.2 s, ``bench/bench_conservative.py
--branch-args``), with a mean wait of 1,301 s against 1,688 s; on the
heavy trace's first 20,000 jobs, 1.06 and 0.83 (seeds 1 and 2), with mean
waits of 10,940 s against 11,185 s and 15,424 s against 14,987 s:
starting one job earlier can delay others behind it, as the paper notes
for backfilling in general.  Whole traces: KTH-SP2 20.4 s against 22.7 s,
SDSC Blue Horizon 365 s against about 370 s (mean bounded slowdown 35.6
against 31.4), the heavy trace's 100,000 jobs 256 s (pinned was not run
beside it; in earlier measures it had not finished after 300 s of wall
time).  The default stays ``pinned``: the same decisions as
before.

With ``reserve-depth=N`` only the first N jobs that cannot start get
reservations; jobs behind them may still start at once if they fit without
touching any reservation (this is the ``hybrid`` policy's behaviour, and what
Fluxion calls a reservation depth).

With named queues, each queue plans its own jobs, in its own order, around
the reservations of every queue; ``reserve-depth`` counts each queue's
reservations.  Other queues placed theirs around this queue's, so its old
places stay free and the no-later-than-first-``t_estimate`` property holds
across queues (``t/test_engine_queues.py`` checks it on random workloads).

Load with ``queue-policy=conservative [reserve-depth=N] [reservation-nodes=counted]``.

Reference:
    Ahuva W. Mu'alem and Dror G. Feitelson, "Utilization, Predictability,
    Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
    Backfilling", IEEE TPDS 12(6):529-543, 2001 (conservative backfilling;
    compression on an early end: jobs re-examined in order, each moved
    earlier only if it can).
"""

from __future__ import annotations

from collections.abc import Iterator

from .base import PassContext, QueuePolicy


class ConservativePolicy(QueuePolicy):
    """Conservative backfilling.  Overrides :meth:`run` only.

    ``reserve_depth`` of ``None`` or 0 means unlimited.  Uses
    :meth:`PassContext.unreserve` to take a job's reservation out of the plan
    and :meth:`PassContext.reserve` to put the old or a better one back.
    """

    name = "conservative"
    default_reserve_depth = None
    persistent_reservations = True

    def run(self, ctx: PassContext) -> Iterator[None]:
        depth = self.reserve_depth or None
        reserved = 0
        for job in ctx.jobs():
            if not ctx.compress and (depth is None or reserved < depth):
                kept = ctx.reservation(job)
                if kept is not None and kept.start > ctx.now:
                    # Only new jobs arrived: nothing can move earlier.
                    reserved += 1
                    yield
                    continue
            if (depth is None or reserved < depth) and ctx.keeps_reservation(job):
                # Nothing freed since its last search can let it start earlier.
                reserved += 1
                yield
                continue
            old = ctx.unreserve(job)
            if depth is not None and reserved >= depth:
                # Beyond the reservation depth: start now or wait, never plan.
                if ctx.nothing_free():
                    return
                if ctx.hopeless(job):
                    ctx.hold(job, "depth")
                    yield
                    continue
                rs = ctx.fits_now(job)
                if rs is not None:
                    ctx.start(job, rs)
                else:
                    ctx.failed(job)
                    ctx.hold(job, "depth")
                yield
                continue
            keep_old = old is not None and old.start > ctx.now and ctx.still_free(job, old)
            # The old place is still free for it: only an earlier one matters.
            est = ctx.earliest(job, old.start) if keep_old else ctx.earliest(job)
            if est is not None and est.start <= ctx.now:
                ctx.start(job, est.placement)
            elif keep_old and (est is None or est.start >= old.start):
                ctx.reserve(job, old)  # no better place: keep the promise
                reserved += 1
            elif est is not None:
                ctx.reserve(job, est)
                reserved += 1
            else:
                ctx.hold(job, "down")
            yield
