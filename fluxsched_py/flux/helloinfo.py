"""What a running job's jobspec and eventlog say at hello (a scheduler restart).

At ``job-manager.sched-hello`` the job-manager sends only ``{id, priority,
userid, t_submit, free?}``.  The scheduler also needs each running job's
jobspec, to know it again as it knew it before the restart: its queue (the
queue's limits count it), whether it checkpoints, its campaign, and whether
it is best-effort (``attributes.system.preemptible-after``); and whether a
``preempt`` exception was already raised on it (so it is never preempted
twice, and the regular job it was preempted for waits for its free rather
than preempting others).

The module reads both with one ``job-manager.getattr`` RPC per job
(``attrs: ["jobspec", "eventlog"]``): the job-manager's own copies, the
same jobspec flux-core writes to ``job.<id>.jobspec`` and the eventlog
including events not yet committed to the KVS (an exception raised just
before the reload).  This module only reads the answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..jobspec.fsd import parse_fsd

__all__ = ["HelloInfo", "hello_info", "PREEMPT"]

#: The exception type sched-py raises on a job it preempts.
PREEMPT = "preempt"


def _events(eventlog: Any) -> list[Any]:
    """RFC 18 eventlog: a list of entries, or its text (one JSON object a line)."""
    if isinstance(eventlog, bytes | bytearray):
        eventlog = eventlog.decode()
    if isinstance(eventlog, str):
        return [json.loads(line) for line in eventlog.splitlines() if line.strip()]
    if isinstance(eventlog, list):
        return eventlog
    raise ValueError(f"eventlog is not a list: {eventlog!r:.80}")


class HelloInfo(NamedTuple):
    """What a running job's getattr answer says."""

    #: The job's RFC 14 jobspec (for the engine to parse as at its alloc).
    jobspec: Mapping[str, Any]
    #: Seconds after its start from which it may be preempted; None: regular.
    preemptible_after: float | None
    #: A ``preempt`` exception was already raised on it.
    preempted: bool


def hello_info(answer: Any) -> HelloInfo:
    """Read a ``job-manager.getattr`` answer ``{jobspec, eventlog}``.

    Raises ValueError when the jobspec's ``preemptible-after`` or the
    eventlog cannot be read (the caller decides what that means)."""
    if not isinstance(answer, Mapping):
        raise ValueError(f"answer is not an object: {answer!r:.80}")
    jobspec = answer.get("jobspec")
    if isinstance(jobspec, str | bytes | bytearray):
        jobspec = json.loads(jobspec)
    if not isinstance(jobspec, Mapping):
        raise ValueError("no jobspec")
    system = (jobspec.get("attributes") or {}).get("system") or {}
    pa = None
    if isinstance(system, Mapping) and "preemptible-after" in system:
        pa = parse_fsd(system["preemptible-after"])
    preempted = False
    for e in _events(answer.get("eventlog")):
        if isinstance(e, Mapping) and e.get("name") == "exception":
            ctx = e.get("context")
            if isinstance(ctx, Mapping) and ctx.get("type") == PREEMPT:
                preempted = True
    return HelloInfo(jobspec, pa, preempted)
