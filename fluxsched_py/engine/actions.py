"""Engine output actions other than RFC 27 alloc responses.

:class:`Preempt` asks the driver to end a running best-effort job so that a
regular job can have its resources: the Flux driver raises a ``preempt``
exception on it (``job-manager.raise``, severity 0), the Batsim drivers kill
it, the replay ends it at once.  The driver then frees the job as usual
(``sched.free``); the regular job gets its SUCCESS once every job preempted
for it has been freed (:mod:`.besteffort`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Preempt"]


@dataclass(frozen=True, slots=True)
class Preempt:
    """Preempt running job :attr:`id` to make room for pending job :attr:`for_id`."""

    id: int
    for_id: int
    note: str
