"""Conservative backfilling: every pending job gets a reservation.

Jobs are visited in queue order.  Each one is placed at the earliest time it
fits around everything that is running and every reservation made so far in
this pass; if that time is now it starts, otherwise the placement becomes its
reservation and its ``t_estimate``.  A job can therefore only start early
(backfill) into a hole that no job ahead of it was promised, and no backfill
ever delays a reservation.

Reservations are re-planned from scratch at every pass, in queue order, with
the same deterministic matcher, so when jobs run for their full walltime a
job's plan never moves later: no job starts after its first ``t_estimate``
(a property test checks this on random workloads).  When jobs end early the
plan only improves.

With ``reserve-depth=N`` only the first N jobs that cannot start get
reservations; jobs behind them may still start at once if they fit without
touching any reservation (this is the ``hybrid`` policy's behaviour, and what
Fluxion calls a reservation depth).

Load with ``queue-policy=conservative [reserve-depth=N]``.

Reference:
    Ahuva W. Mu'alem and Dror G. Feitelson, "Utilization, Predictability,
    Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
    Backfilling", IEEE TPDS 12(6):529-543, 2001.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import PassContext, QueuePolicy


class ConservativePolicy(QueuePolicy):
    """Conservative backfilling.  Overrides :meth:`run` only.

    ``reserve_depth`` of ``None`` or 0 means unlimited.
    """

    name = "conservative"
    default_reserve_depth = None

    def run(self, ctx: PassContext) -> Iterator[None]:
        depth = self.reserve_depth or None
        reserved = 0
        failed: set = set()
        for job in ctx.jobs():
            if depth is not None and reserved >= depth:
                # Beyond the reservation depth: start now or wait, never plan.
                if ctx.nothing_free():
                    return
                shape = job.shape
                if shape in failed:
                    ctx.hold(job, "depth")
                    yield
                    continue
                rs = ctx.fits_now(job)
                if rs is not None:
                    ctx.start(job, rs)
                else:
                    failed.add(shape)
                    ctx.hold(job, "depth")
                yield
                continue
            est = ctx.earliest(job)
            if est is None:
                ctx.hold(job, "down")
            elif est[0] <= ctx.now:
                ctx.start(job, est[1])
            else:
                ctx.reserve(job, *est)
                reserved += 1
            yield
