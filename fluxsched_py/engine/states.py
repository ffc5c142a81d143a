"""The RFC 27 state machine: job states, the transitions table, responses.

Rules: which state a message takes a job to, and what that does to the job
table, is decided here and nowhere else (:data:`TRANSITIONS`, applied by
:class:`~fluxsched_py.engine.jobtable.JobTable`); this module does
not know which driver sent the message, nor anything about resources.

A job the engine knows is PENDING (``sched.alloc`` received, not answered) or
RUNNING (SUCCESS sent, or learned at ``hello``: it holds resources).
:data:`TRANSITIONS` is the whole machine::

    (new) --alloc--> PENDING --schedule: start--> RUNNING --free(final)--> (gone)
                     PENDING --alloc denied / infeasible--> (gone)    DENY
                     PENDING --cancel--> (gone)                       CANCEL
                     PENDING --preempt--> STARTING --start--> RUNNING
                                          STARTING --cancel--> (gone) CANCEL
                     RUNNING --revoke--> (gone)                       DENY
    (new) --hello--> RUNNING --free(partial)--> RUNNING
                     RUNNING --expiration--> RUNNING

Messages that do not fit the table are special cases with named handlers in
:class:`~fluxsched_py.engine.core.Engine`: a second alloc for a pending job
is ignored (RFC 27 allows one in flight); an alloc for a job that holds
resources is denied; cancel, prioritize and free for unknown jobs are
ignored; expiration for an unknown job raises :class:`EngineError` (the
driver answers it with an error).  An alloc after a CANCEL is a new request
(the job-manager re-sends allocs it cancelled).  ``revoke`` undoes a start
the driver could not complete (its R could not be committed): the job
leaves as denied, and was never a start.  Alloc and free never raise:
RFC 27 forbids error responses to them.

:class:`EngineError` is the only exception the engine raises on purpose.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ..errors import FluxschedError
from .actions import Notice, Preempt
from .power import PowerOff, PowerOn
from .reply import Reply
from .sink import Drain

__all__ = [
    "EngineError",
    "JobState",
    "PassResult",
    "Response",
    "ResponseType",
    "TRANSITIONS",
    "next_state",
]


class EngineError(FluxschedError):
    """A request the engine refuses: bad options, expiration of an unknown job."""


class JobState(enum.Enum):
    PENDING = "pending"  # sched.alloc received, not answered yet
    RUNNING = "running"  # SUCCESS sent (or learned at hello): holds resources
    #: Chosen to start, waiting for the jobs preempted for it to be freed
    #: (RFC 27: still pending, no answer sent yet); see :mod:`.besteffort`.
    STARTING = "starting"


class ResponseType(enum.IntEnum):
    """RFC 27 sched.alloc response types."""

    SUCCESS = 0
    ANNOTATE = 1
    DENY = 2
    CANCEL = 3


#: (state or None for an unknown job, event) -> (new state, None meaning
#: the table forgets the job; the effects on the job table).  Applied by
#: :meth:`JobTable.apply <fluxsched_py.engine.jobtable.JobTable.apply>`, the
#: only code that changes a job's state; everything else is a special case
#: (module docstring).  The effects, in the order they are applied:
#:
#: ``admit``    the table knows the job from now on
#: ``enqueue``  it gets its shape id and joins its queue (pending: +1)
#: ``unqueue``  it leaves its queue and drops its shape (pending: -1)
#: ``run``      it holds resources from ``now`` (``resources``, ``t_start``,
#:              ``expiration`` given to ``apply``)
#: ``shrink``   it holds less: ``released`` (given to ``apply``) is taken off
#:              its resources (a partial free)
#: ``extend``   its kill time is now ``expiration`` (given to ``apply``)
#: ``end``      its reply has ended (SUCCESS, DENY or CANCEL): no annotation
#:              of it is kept or sent any more
#: ``forget``   the table drops it
TRANSITIONS: dict[tuple[JobState | None, str], tuple[JobState | None, tuple[str, ...]]] = {
    (None, "alloc"): (JobState.PENDING, ("admit", "enqueue")),
    (None, "hello"): (JobState.RUNNING, ("admit", "run")),
    (JobState.PENDING, "start"): (JobState.RUNNING, ("unqueue", "run", "end")),
    (JobState.PENDING, "deny"): (None, ("unqueue", "end", "forget")),
    (JobState.PENDING, "cancel"): (None, ("unqueue", "end", "forget")),
    (JobState.PENDING, "prioritize"): (JobState.PENDING, ()),
    (JobState.PENDING, "preempt"): (JobState.STARTING, ("unqueue", "run")),
    (JobState.STARTING, "start"): (JobState.RUNNING, ("run", "end")),
    (JobState.STARTING, "cancel"): (None, ("end", "forget")),
    (JobState.RUNNING, "free"): (JobState.RUNNING, ("shrink",)),
    (JobState.RUNNING, "free-final"): (None, ("forget",)),
    (JobState.RUNNING, "revoke"): (None, ("forget",)),
    (JobState.RUNNING, "expiration"): (JobState.RUNNING, ("extend",)),
}


@dataclass(slots=True)
class Response:
    """One sched.alloc response the driver must send.

    :meth:`payload` is the RFC 27 message body.  ``resources`` is the
    allocated :class:`~fluxsched_py.resource.ResourceSet` (for drivers that
    need more than R, like the replay); it is not part of the payload.
    """

    id: int
    type: ResponseType
    annotations: dict | None = None
    note: str | None = None
    R: dict | None = None
    resources: Any = None
    start: float | None = None
    expiration: float | None = None
    #: The job's reply (and through it the driver's request), for every
    #: response of a job the engine admitted; None for an alloc it never did.
    reply: Reply | None = None

    def payload(self) -> dict:
        p: dict[str, Any] = {"id": self.id, "type": int(self.type)}
        if self.type is ResponseType.SUCCESS and self.R is not None:
            p["R"] = self.R
        if self.annotations is not None and self.type in (ResponseType.SUCCESS, ResponseType.ANNOTATE):
            p["annotations"] = self.annotations
        if self.type is ResponseType.DENY and self.note is not None:
            p["note"] = self.note
        return p


@dataclass(slots=True)
class PassResult:
    """What :meth:`Engine.schedule` did: responses to send, and whether the
    pass stopped early because its budget ran out (call again soon), and
    the best-effort jobs to preempt (:class:`~.actions.Preempt`) or to give
    notice to first (:class:`~.actions.Notice`), and the nodes to drain."""

    responses: list[Response]
    more: bool = False
    preempt: list[Preempt] = field(default_factory=list)
    #: Notices to best-effort jobs that will be preempted (``preempt-grace``).
    notice: list[Notice] = field(default_factory=list)
    #: Ranks to drain, with a reason (the sink effect, ``sink-jobs``).
    drains: list[Drain] = field(default_factory=list)
    #: Nodes to switch off or on (``power-save``: :mod:`.power`), after a complete pass.
    power: list[PowerOff | PowerOn] = field(default_factory=list)


def next_state(state: JobState | None, event: str, jobid: int) -> tuple[JobState | None, tuple[str, ...]]:
    """What ``event`` does to a job in ``state`` (None: unknown), per
    :data:`TRANSITIONS`: its new state (None: forgotten) and the effects.
    Raises EngineError for an event the table does not allow."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise EngineError(f"job {jobid}: {event} is not valid in state {state}") from None
