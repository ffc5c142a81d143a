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

from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["PassContext", "QueuePolicy", "POLICIES", "make_policy", "order_key"]


def order_key(priority: int, t_submit: float, jobid: int) -> tuple[int, float, int]:
    """The queue order every policy uses: higher priority, earlier submit, lower id."""
    return (-priority, t_submit, jobid)


class PassContext(Protocol):
    """What a policy may do during a pass (implemented by the engine)."""

    now: float
    #: False when nothing was freed, cancelled or re-prioritized since the
    #: last pass (only new jobs arrived): kept reservations cannot improve.
    compress: bool

    def jobs(self) -> Iterator[Any]:
        """This queue's pending jobs in order (those among the first
        ``queue-depth`` pending jobs of all queues)."""

    def fits_now(self, job: Any) -> Any:
        """Resources ``job`` could start on now without touching any reservation (of any queue), or None."""

    def fits_now_ignoring(self, job: Any, reserved: Any) -> Any:
        """Resources ``job`` could start on now if ``reserved``'s reservation moved, or None."""

    def start(self, job: Any, rs: Any) -> None:
        """Allocate ``rs`` to ``job`` now."""

    def earliest(self, job: Any, before: float = ..., not_before: float = ...) -> tuple[float, Any] | None:
        """Earliest ``(t, rs)`` for ``job`` around what is running and reserved
        (only times earlier than ``before`` and from ``not_before`` on, when given)."""

    def reserve(self, job: Any, t: float, rs: Any) -> None:
        """Hold ``rs`` for ``job`` from ``t`` (until the next pass, or longer
        with :attr:`QueuePolicy.persistent_reservations`)."""

    def still_free(self, job: Any, t: float, placement: Any) -> bool:
        """True when ``placement`` is still free for ``job`` from ``t``."""

    def clear_reservations(self) -> None:
        """Drop every reservation of this queue (a policy that re-plans from
        scratch); other queues' reservations stay."""

    def reservation(self, job: Any) -> tuple[float, Any] | None:
        """``job``'s current reservation as ``(t, rs)``, or None."""

    def keeps_reservation(self, job: Any) -> bool:
        """Re-plan ``job``'s reservation when that provably keeps it as it is
        (its place is still free and there is no earlier one); True if so."""

    def unreserve(self, job: Any) -> tuple[float, Any] | None:
        """Take ``job``'s reservation out of the plan; return it as ``(t, rs)``."""

    def try_move(self, job: Any, blocker_rs: Any, blocker_end: float) -> bool:
        """Re-plan ``job``'s reservation at the same time around a new allocation."""

    def hopeless(self, job: Any) -> bool:
        """True when a job of the same shape, or (whole nodes) one at least as
        big and as long, already failed to start now in this pass."""

    def failed(self, job: Any) -> None:
        """Record that ``job`` could not start now, for :meth:`hopeless`."""

    def hold(self, job: Any, why: str) -> None:
        """Record why ``job`` was passed over (for ``reason_pending``)."""

    def nothing_free(self) -> bool:
        """True when no resource is free now (nothing could start)."""


class QueuePolicy:
    """Base class: a named policy with a reservation depth."""

    name = "base"
    #: Reservations the policy makes per pass (None = unlimited).
    default_reserve_depth: int | None = 0
    #: Keep reservations from one pass to the next (else each pass re-plans).
    persistent_reservations = False

    def __init__(self, reserve_depth: int | None = None) -> None:
        self.reserve_depth = self.default_reserve_depth if reserve_depth is None else reserve_depth

    def run(self, ctx: PassContext) -> Iterator[None]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reserve_depth={self.reserve_depth})"


def _registry() -> dict[str, type[QueuePolicy]]:
    from .conservative import ConservativePolicy
    from .easy import EasyPolicy
    from .fcfs import FCFSPolicy
    from .hybrid import HybridPolicy

    return {p.name: p for p in (FCFSPolicy, EasyPolicy, ConservativePolicy, HybridPolicy)}


POLICIES = ("fcfs", "easy", "conservative", "hybrid")


def make_policy(name: str, reserve_depth: int | None = None) -> QueuePolicy:
    """Instantiate a queue policy by name; ``KeyError`` names the known ones."""
    reg = _registry()
    try:
        cls = reg[name]
    except KeyError:
        raise KeyError(f"unknown queue policy {name!r} (choose from {', '.join(POLICIES)})") from None
    return cls(reserve_depth)
