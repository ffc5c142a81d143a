"""Engine output actions other than RFC 27 alloc responses.

:class:`Preempt` asks the driver to end a running best-effort job so that a
regular job can have its resources: the Flux driver raises a ``preempt``
exception on it (``job-manager.raise``, severity 0), the Batsim drivers kill
it, the replay ends it at once.  The driver then frees the job as usual
(``sched.free``); the regular job gets its SUCCESS once every job preempted
for it has been freed (:mod:`.besteffort`).

:class:`Notice` comes first when the victim has a grace time
(``preempt-grace``): the driver sends it ``signal`` (the Flux driver through
``job-manager.kill``; the replay checkpoints a job that checkpoints on it;
the Batsim drivers, whose protocols have no signal, send nothing, and
with ``--dynamic-jobs`` count the work a checkpointing job keeps), and the
:class:`Preempt` follows at the end of the grace time unless the job ended
first.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Notice", "Preempt"]


@dataclass(frozen=True, slots=True)
class Preempt:
    """Preempt running job :attr:`id` to make room for pending job :attr:`for_id`."""

    id: int
    for_id: int
    note: str
    #: The job checkpoints on its notice (``attributes.user.checkpoint =
    #: "signal"`` or ``checkpoint-campaigns``): the driver requeues it with
    #: its remaining work.
    requeue: bool = False


@dataclass(frozen=True, slots=True)
class Notice:
    """Send ``signal`` to running best-effort job :attr:`id`: it is preempted
    at :attr:`at` (or when the regular job it makes room for starts) unless
    it ends first."""

    id: int
    signal: int
    at: float
    note: str
