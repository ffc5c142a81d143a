"""One ``sched.alloc`` request the job-manager waits on, and every reply to it.

Modelled on flux-core's ``flux.scheduler.AllocRequest`` (0.88,
``src/bindings/python/flux/scheduler.py``): the request owns its message,
and SUCCESS, DENY and CANCEL go out through it and finalize it; an
annotation after that is dropped.  The driver keeps no map of requests: the
engine holds each one with its job (``Job.reply.request``) and hands it
back on every response it makes for the job (``Response.reply``).  A
request the engine never admitted (a malformed or infeasible alloc) is
answered by the driver through the request it made for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import ResponseType

__all__ = ["AllocRequest"]


class AllocRequest:
    """The pending ``sched.alloc`` of job ``jobid``: ``msg`` answered through ``respond(msg, payload)``."""

    __slots__ = ("jobid", "_msg", "_respond", "finalized")

    def __init__(self, jobid: int, msg: Any, respond: Callable[[Any, Any], None]) -> None:
        self.jobid = jobid
        self._msg = msg
        self._respond = respond
        #: SUCCESS, DENY or CANCEL went out: nothing more does.
        self.finalized = False

    def answer(self, payload: dict[str, Any]) -> bool:
        """Send ``payload`` (an RFC 27 alloc response); a final one
        (SUCCESS, DENY, CANCEL) finalizes the request.  False, and nothing
        sent, when it was finalized already."""
        if self.finalized:
            return False
        msg = self._msg
        if payload["type"] != ResponseType.ANNOTATE:
            # the job keeps its request while it runs: not the message
            self.finalized, self._msg = True, None
        self._respond(msg, payload)
        return True
