"""First-come, first-served: strict queue order, no backfill.

Jobs start in queue order (priority, then submit time, then id) for as long
as they fit.  The first job that does not fit stops the pass: nothing behind
it may start, even if it would fit, so no job is ever overtaken.  The blocked
job gets an estimate (``t_estimate``) of when it will fit, from the planner,
kept as a reservation (nothing can overtake it, so it is a promise).  It is
re-computed only when something was freed, cancelled or re-prioritized.

Load with ``queue-policy=fcfs``.  This is the baseline every backfilling
paper compares against, e.g. D. Lifka, "The ANL/IBM SP scheduling system",
JSSPP 1995, LNCS 949.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import PassContext, QueuePolicy


class FCFSPolicy(QueuePolicy):
    """Strict order.  Overrides :meth:`run` only."""

    name = "fcfs"
    default_reserve_depth = 0

    persistent_reservations = True

    def run(self, ctx: PassContext) -> Iterator[None]:
        if ctx.compress:
            # Something was freed, cancelled or re-prioritized: re-plan.
            ctx.clear_reservations()
        for job in ctx.jobs():
            rs = ctx.fits_now(job)
            if rs is not None:
                ctx.start(job, rs)
                yield
                continue
            kept = ctx.reservation(job)
            if kept is not None and not ctx.compress and kept[0] > ctx.now:
                return  # nothing was freed since the estimate was made
            ctx.unreserve(job)
            est = ctx.earliest(job)
            if est is not None:
                # Nothing may overtake the head, so its estimate is a promise:
                # record it as a reservation.
                ctx.reserve(job, *est)
            else:
                ctx.hold(job, "down")
            # Jobs behind the head wait for it; the engine explains that in
            # their reason_pending without the policy visiting them (there may
            # be a million).
            return
