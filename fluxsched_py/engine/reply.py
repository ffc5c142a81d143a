"""One reply per alloc request: the ``sched.*`` annotations it sent, and its end.

Modelled on flux-core's ``flux.scheduler.AllocRequest`` (0.88,
``src/bindings/python/flux/scheduler.py``): the reply remembers the
annotation keys (here with their values, so only what changed is sent) the
job-manager holds for the job; SUCCESS nulls every one of them that the
success itself does not set, and SUCCESS, DENY and CANCEL end the request:
an annotation after the end is ignored.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Reply"]

_MISSING = object()


class Reply:
    """The reply the engine owes one ``sched.alloc`` request."""

    __slots__ = ("sent", "done", "request")

    def __init__(self, request: Any = None) -> None:
        #: The ``sched.*`` annotations the job-manager holds for the job.
        self.sent: dict[str, Any] = {}
        #: SUCCESS, DENY or CANCEL was sent (or decided): nothing more goes out.
        self.done = False
        #: What the driver answers the request through (the Flux driver's
        #: ``AllocRequest``), given to :meth:`Engine.alloc`; the engine
        #: never reads it, and hands it back with every response of the
        #: job (``Response.reply``).
        self.request = request

    def annotate(self, want: dict[str, Any]) -> dict[str, Any] | None:
        """The job's annotations are now ``want``: the ``sched`` payload that
        takes the job-manager there (what changed, None for what no longer
        applies), or None when nothing changes or the request has ended."""
        sent = self.sent
        if self.done or sent == want:
            return None
        diff = {k: v for k, v in want.items() if sent.get(k, _MISSING) != v}
        diff.update({k: None for k in sent if k not in want})
        if not diff:
            return None
        self.sent = want
        return diff

    def success(self, annotations: dict[str, Any]) -> dict[str, Any]:
        """End the request with SUCCESS: the ``sched`` annotations to send,
        ``annotations`` over a None for every key sent while it was pending."""
        sched: dict[str, Any] = dict.fromkeys(self.sent)
        sched.update(annotations)
        self.end()
        return sched

    def end(self) -> None:
        """End the request (SUCCESS, DENY or CANCEL): the job-manager drops a
        job's pending annotations itself when it denies or cancels it."""
        self.sent = {}
        self.done = True
