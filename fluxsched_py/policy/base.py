"""The types every queue policy shares: the queue order, the pass context a
policy calls (implemented by the engine) and the :class:`QueuePolicy` base
class.  The registry of policies by name is in :mod:`fluxsched_py.policy`."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any, Protocol

from ..jobspec import Request
from ..planner import Placement, Slot

__all__ = ["POLICY_DEFAULT", "PassContext", "PolicyDefault", "QueuePolicy", "order_key"]


class PolicyDefault(enum.Enum):
    """A ``reserve-depth`` that was not given: each policy uses its own."""

    DEPTH = "default"

    def __str__(self) -> str:
        return self.value


#: See :class:`PolicyDefault`.
POLICY_DEFAULT = PolicyDefault.DEPTH


def order_key(priority: int, t_submit: float, jobid: int) -> tuple[int, float, int]:
    """The queue order every policy uses: higher priority, earlier submit, lower id."""
    return (-priority, t_submit, jobid)


class PendingJob(Protocol):
    """A pending job as a policy sees it (the engine's ``Job``)."""

    @property
    def id(self) -> int: ...

    @property
    def request(self) -> Request:
        """What it asks for (the queue, a reservation it runs in, ...)."""

    @property
    def duration(self) -> float:
        """How long it is planned for: its walltime, or a shorter prediction."""


class PassContext(Protocol):
    """What a policy may do during a pass (implemented by the engine).

    Where a job may run is a :class:`~fluxsched_py.planner.Placement` (the
    flat set, and the ResourceSet once decoded: the planner decodes it when
    the job starts); a start time with one is a
    :class:`~fluxsched_py.planner.Slot`.  Policies pass them back as they
    got them and read only ``Slot.start``."""

    now: float
    #: False when nothing was freed, cancelled or re-prioritized since the
    #: last pass (only new jobs arrived): kept reservations cannot improve.
    compress: bool
    #: The order backfill candidates are tried in (``backfill-order``):
    #: ``queue``, or ``sjbf``, shortest planned duration first.
    backfill_order: str
    #: Something reads the reservations beyond this policy's own starts: the
    #: driver shows ``t_estimate``, best-effort jobs are preempted by the
    #: plan, power saving wakes nodes for it, other queues or advance
    #: reservations plan around it.  When False, a reservation no start of
    #: this policy depends on (fcfs's forecasts) need not be made.
    plan_read: bool

    def jobs(self) -> Iterator[PendingJob]:
        """This queue's pending jobs in order (those among the first
        ``queue-depth`` pending jobs of all queues)."""

    def fits_now(self, job: PendingJob) -> Placement | None:
        """Where ``job`` could start now without touching any reservation (of any queue), or None."""

    def fits_now_ignoring(self, job: PendingJob, reserved: PendingJob) -> Placement | None:
        """Where ``job`` could start now if ``reserved``'s reservation moved, or None."""

    def start(self, job: PendingJob, placement: Placement) -> None:
        """Allocate ``placement`` to ``job`` now."""

    def earliest(self, job: PendingJob, before: float = ..., not_before: float = ...) -> Slot | None:
        """The earliest slot for ``job`` around what is running and reserved
        (only times earlier than ``before`` and from ``not_before`` on, when given)."""

    def reserve(self, job: PendingJob, slot: Slot) -> None:
        """Hold ``slot``'s placement for ``job`` from its start (until the next
        pass, or longer with :attr:`QueuePolicy.persistent_reservations`)."""

    def still_free(self, job: PendingJob, slot: Slot) -> bool:
        """True when ``slot``'s placement is still free for ``job`` from its start."""

    def forecast_stamp(self) -> tuple[Any, ...]:
        """What this queue's forecasts were made around (for :meth:`forecasts_stand`)."""

    def forecasts_stand(self, stamp: tuple[Any, ...] | None, head_start: float) -> bool:
        """True when, since ``stamp``, only resources freed before
        ``head_start`` changed the plan: forecasts in queue order from
        ``head_start`` on would be found again."""

    def fits_just_before(self, job: PendingJob, t: float) -> bool:
        """Whether ``job`` fits anywhere in ``[now, t)`` around the running jobs alone."""

    def count_match(self) -> None:
        """Count a search that a reservation kept as it is stands for."""

    def clear_reservations(self) -> None:
        """Drop every reservation of this queue (a policy that re-plans from
        scratch); other queues' reservations stay."""

    def drop_reservations(self, jobids: list[int]) -> None:
        """Drop the reservations of ``jobids`` (those that have one)."""

    def fits_unplanned(self, job: PendingJob) -> Placement | None:
        """What :meth:`fits_now` answers once this queue's reservations are
        cleared, asked while they are still in the plan (one queue, no
        advance reservation window)."""

    def reservation(self, job: PendingJob) -> Slot | None:
        """``job``'s current reservation, or None."""

    def reserved_start(self, job: PendingJob) -> float | None:
        """When ``job``'s reservation starts, or None (:meth:`reservation` without its slot)."""

    def keeps_reservation(self, job: PendingJob) -> bool:
        """Re-plan ``job``'s reservation when that provably keeps it as it is
        (its place is still free and there is no earlier one); True if so."""

    def unreserve(self, job: PendingJob) -> Slot | None:
        """Take ``job``'s reservation out of the plan; return it."""

    def try_move(self, job: PendingJob, blocker: Placement, blocker_end: float) -> bool:
        """Re-plan ``job``'s reservation at the same time around a new allocation."""

    def hopeless(self, job: PendingJob) -> bool:
        """True when a job of the same shape, or (whole nodes) one at least as
        big and as long, already failed to start now in this pass."""

    def failed(self, job: PendingJob) -> None:
        """Record that ``job`` could not start now, for :meth:`hopeless`."""

    def hold(self, job: PendingJob, why: str) -> None:
        """Record why ``job`` was passed over (for ``reason_pending``)."""

    def nothing_free(self) -> bool:
        """True when no resource is free now (nothing could start)."""

    def nothing_fits(self) -> bool:
        """True when no pending job could start now (each needs more nodes than are free)."""

    def fits_free(self, job: PendingJob) -> bool:
        """False when ``job`` cannot start now on what is free, whatever the
        reservations (told without a match); True when it may."""

    def skip_unfit(self, head: PendingJob) -> None:
        """From the next job on, :meth:`jobs` may leave out jobs that cannot
        backfill around ``head`` (:meth:`fits_free` rejects them, or they
        failed to at the last pass, which settled (:meth:`settle`) around the same
        reservation, and nothing was freed since), where what :meth:`hold`
        would record for them is read by nobody: for a policy that only
        holds such a job for ``backfill`` (EASY behind its head)."""

    def settle(self, head: PendingJob) -> None:
        """The policy is done with this queue: every job behind ``head`` it
        did not start could not backfill around ``head``'s reservation
        (see :meth:`skip_unfit`)."""

    def hold_rest(self, job: PendingJob, rest: Iterator[PendingJob], why: str) -> None:
        """:meth:`hold` ``job`` and every job ``rest`` would yield, without visiting them all."""


class QueuePolicy:
    """Base class: a named policy with a reservation depth."""

    name = "base"
    #: Reservations the policy makes per pass (None = unlimited).
    default_reserve_depth: int | None = None
    #: Keep reservations from one pass to the next (else each pass re-plans).
    persistent_reservations = False
    #: A job may start ahead of a job that waits (so a job with no
    #: reservation may start whenever it fits: power saving wakes nodes for it).
    backfills = True

    def __init__(self, reserve_depth: int | None | PolicyDefault = POLICY_DEFAULT) -> None:
        #: None is unlimited.
        self.reserve_depth = self.default_reserve_depth if reserve_depth is POLICY_DEFAULT else reserve_depth

    def waits_as_it_did(self, head: PendingJob) -> bool:
        """Whether a pass would start nothing and plan nothing when only new
        jobs came since this policy's last pass (nothing was freed,
        cancelled or re-prioritized) and ``head`` is the queue's first
        pending job: the engine then leaves the pass out.  Never, by default."""
        return False

    def run(self, ctx: PassContext) -> Iterator[None]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reserve_depth={self.reserve_depth})"
