"""The scheduler side of RFC 27, with no I/O.

Everything that decides what the scheduler answers lives here: which jobs it
knows, in which state, what it holds, and the responses it owes.  Drivers
(the Flux broker module, the Batsim drivers, the offline replay) turn their
wire messages into calls on :class:`Engine` and send back what it returns.

One module per job:

:mod:`.states`       the RFC 27 state machine (:data:`TRANSITIONS`: state, event
                     -> state, effects), responses
:mod:`.jobtable`     :class:`JobTable`: every job, its state, the queues and
                     their counts; ``apply`` is the one door for transitions
:mod:`.reply`        :class:`Reply`: one per alloc request, what it annotated
:mod:`.options`      the option table (:data:`OPTIONS`) and :class:`EngineOptions`
:mod:`.jobs`         :class:`Job` and the pending queues
:mod:`.core`         :class:`Engine`: the inputs (alloc, free, ...) and passes
:mod:`.passctx`      the pass context queue policies call
:mod:`.annotations`  annotations and ``reason_pending`` texts

What the engine owns
    the job table (:class:`JobTable`); the pending queue in order (priority, t_submit, id); the
    resource graph's allocations for its jobs; the planner's spans (running
    jobs, and the reservations the queue policy keeps); the annotations it
    last sent for each job, so it only sends what changed.  It also knows
    *why* a pass may be needed: ``_dirty`` (anything happened), ``_restart``
    (a pass in progress is stale) and ``_compress`` (something may have made
    room, so reservations may move earlier).

What the engine never knows
    Flux, ZMQ, Batsim, the KVS, files, or the wall clock.  Time is always an
    argument (``now``).  The only clock it touches is an injectable stopwatch
    that bounds how much work one :meth:`Engine.schedule` call does; it never
    influences a decision, so a replay is deterministic whatever the budget.
    Committing R to the KVS before sending SUCCESS is the driver's job, and
    so is logging: the engine logs to ``fluxsched_py.engine`` and never sets
    a level.
"""

from .core import Engine
from .jobs import Job, JobQueue
from .options import OPTIONS, EngineOptions, Option
from .states import TRANSITIONS, EngineError, JobState, PassResult, Response, ResponseType

__all__ = [
    "Engine",
    "EngineError",
    "EngineOptions",
    "Job",
    "JobQueue",
    "JobState",
    "OPTIONS",
    "Option",
    "PassResult",
    "Response",
    "ResponseType",
    "TRANSITIONS",
]
