"""Pending jobs' annotations, held and merged during a burst (``annotate-interval``).

After every complete pass the engine sends, for the jobs at the head of each
queue, what changed in their annotations (engine/annotations.py).  During a
burst of short jobs that is every pass: each job that starts moves every job
behind it up one place (``jobs_ahead``), and the free counts in
``reason_pending`` change.  Each ANNOTATE is one message to the broker's
job-manager, which updates the job and posts an ``annotations`` event to its
journal (job-list and every other listener).

With ``annotate-interval=S``, once a batch of ANNOTATE responses has been
sent, those of the passes of the next ``S`` seconds are held: one held diff
per job, each new diff merged over it (a later value wins, ``null`` deletes,
as the job-manager applies them in order), and the held diffs are sent
together when the interval ends.  A job that is started, denied or cancelled
meanwhile never gets its held diff: its SUCCESS carries its start
annotations, and the ``null`` of a key the job-manager never got deletes
nothing.  What the job-manager holds after a flush is what it would hold
had every diff been sent.  The first batch after a quiet interval goes out
at once, so a single submission is annotated as quickly as without it.

The decisions are untouched: only when the job-manager learns a pending
job's annotations changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["AnnotationBatcher"]


class AnnotationBatcher:
    """Holds and merges ANNOTATE payloads (see the module docstring).

    ``emit(jobid, annotations)`` sends one; ``arm(delay)`` asks for
    :meth:`flush` to be called after ``delay`` seconds; ``clock`` is
    monotonic seconds.
    """

    def __init__(
        self,
        interval: float,
        clock: Callable[[], float],
        emit: Callable[[int, dict[str, Any]], None],
        arm: Callable[[float], None] | None,
    ) -> None:
        self.interval = interval if arm is not None else 0.0
        self._clock = clock
        self._emit = emit
        self._arm = arm
        self._held: dict[int, dict[str, dict[str, Any]]] = {}
        self._next = 0.0  # no batch goes out before this time
        self._armed = False
        self.merged = 0  # diffs merged into one held for the same job: a message saved
        self.dropped = 0  # held diffs never sent (the job got its final response): a message saved

    def batch(self, items: list[tuple[int, dict[str, Any]]]) -> None:
        """The ANNOTATE payloads (job id, annotations) of one pass."""
        if not items:
            return
        if self.interval <= 0.0:
            for jobid, ann in items:
                self._emit(jobid, ann)
            return
        now = self._clock()
        for jobid, ann in items:
            held = self._held.get(jobid)
            if held is None:
                self._held[jobid] = {ns: dict(d) for ns, d in ann.items()}
            else:
                for ns, d in ann.items():
                    held.setdefault(ns, {}).update(d)
                self.merged += 1
        if now >= self._next:
            self.flush()
        elif not self._armed:
            self._armed = True
            assert self._arm is not None
            self._arm(self._next - now)

    def forget(self, jobid: int) -> None:
        """The job got its final response: what is held for it is moot."""
        if self._held.pop(jobid, None) is not None:
            self.dropped += 1

    def flush(self) -> None:
        """Send every held diff; the next batch is held for ``interval``."""
        self._armed = False
        held, self._held = self._held, {}
        for jobid, ann in held.items():
            self._emit(jobid, ann)
        if held:
            self._next = self._clock() + self.interval

    @property
    def pending(self) -> int:
        """Jobs with a held diff."""
        return len(self._held)
