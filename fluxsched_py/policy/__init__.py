"""Queue policies: which pending jobs start now, and which get reservations.

Each policy lives in its own module with the paper it implements:

``fcfs``          strict priority order; the first job that does not fit blocks the rest
``easy``          EASY backfilling: one reservation, for the head job
``conservative``  conservative backfilling: every job gets a reservation
``hybrid``        conservative up to ``reserve-depth`` reservations (default 64)

A policy is a small object with one method, :meth:`QueuePolicy.run`, a
generator over a *pass*: the engine hands it a :class:`PassContext` and the
policy walks the pending jobs in order (priority, then submit time, then id),
starting jobs and making reservations through the context.  The policy yields
after each job so the engine can stop a long pass when its work budget is
spent and resume it later.  Policies never touch the graph or the planner
directly, and never see Flux, messages or a clock: ``ctx.now`` is the time.

Named queues (a job's ``attributes.system.queue``; none is the anonymous
queue) are scheduled separately over shared resources.  In one pass the
engine runs each queue's policy in turn (``queue-policy-per-queue`` may give
a queue its own), visiting queues in the order of their head jobs.  A policy
only ever sees its own queue: :meth:`PassContext.jobs` yields that queue's
jobs, :meth:`PassContext.clear_reservations` drops that queue's
reservations, and the job it waits behind or backfills around is of that
queue.  Every search (:meth:`PassContext.fits_now`,
:meth:`PassContext.earliest`, ...) plans around the reservations of *every*
queue, so nothing one queue starts can delay another queue's reservation.
A policy needs no code of its own for this.
"""

from __future__ import annotations

from .base import POLICY_DEFAULT, PassContext, PolicyDefault, QueuePolicy, order_key
from .conservative import ConservativePolicy
from .easy import EasyPolicy
from .fcfs import FCFSPolicy
from .hybrid import HybridPolicy

__all__ = [
    "POLICIES",
    "POLICY_DEFAULT",
    "PassContext",
    "PolicyDefault",
    "QueuePolicy",
    "REGISTRY",
    "make_policy",
    "order_key",
]

#: Every queue policy by name, in the order help texts list them.  A new
#: policy is a module with a :class:`QueuePolicy` subclass, added here.
REGISTRY: dict[str, type[QueuePolicy]] = {
    cls.name: cls for cls in (FCFSPolicy, EasyPolicy, ConservativePolicy, HybridPolicy)
}

#: The names ``queue-policy=`` accepts.
POLICIES: tuple[str, ...] = tuple(REGISTRY)


def make_policy(name: str, reserve_depth: int | None | PolicyDefault = POLICY_DEFAULT) -> QueuePolicy:
    """Instantiate a queue policy by name (``reserve_depth`` None: unlimited);
    ``KeyError`` names the known ones."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown queue policy {name!r} (choose from {', '.join(POLICIES)})") from None
    return cls(reserve_depth)
