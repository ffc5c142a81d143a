"""Batsim 3/4 JSON protocol codec (sans-I/O).

Batsim sends ``{"now": t, "events": [{"timestamp", "type", "data"}, ...]}``
on a ZeroMQ REQ socket and waits for one reply of the same shape.  This
module checks the envelope rules the protocol states — ``now`` is at least
every event's timestamp, events are in non-decreasing time order, the
mandatory fields are present with the right types, and time never goes
backwards between messages — and builds the decision events a scheduler
sends back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..ids import IdSet
from .entry import EntryFields, read_entry
from .envelope import decode_envelope, number
from .errors import ProtocolError
from .intervals import format_intervals

__all__ = [
    "BATSIM_TO_SCHED",
    "BatsimJob",
    "Event",
    "MessageDecoder",
    "call_me_later",
    "encode_message",
    "execute_job",
    "answer",
    "notify",
    "parse_hosts",
    "parse_job",
    "register_job",
    "register_profile",
    "reject_job",
    "set_job_metadata",
]

BATSIM_TO_SCHED = frozenset(
    {
        "SIMULATION_BEGINS",
        "SIMULATION_ENDS",
        "JOB_SUBMITTED",
        "JOB_COMPLETED",
        "JOB_KILLED",
        "RESOURCE_STATE_CHANGED",
        "REQUESTED_CALL",
        "QUERY",
        "ANSWER",
        "NOTIFY",
    }
)


@dataclass(frozen=True, slots=True)
class Event:
    timestamp: float
    type: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BatsimJob:
    """The part of a submitted Batsim job a scheduler needs.

    ``walltime`` is ``None`` when the job has none (absent, or -1 in the
    workload), which the scheduler treats as unlimited.
    """

    id: str
    res: int
    walltime: float | None
    subtime: float
    profile: str | None = None
    #: What the workload entry says beyond size and time (user, queue, ...).
    fields: EntryFields = field(default_factory=EntryFields)
    #: The workload entry as Batsim forwarded it: a copy registered with
    #: ``--dynamic-jobs`` is this entry under a new id.
    entry: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class MessageDecoder:
    """Decodes Batsim's messages in order, remembering the last ``now``."""

    def __init__(self) -> None:
        self.now = 0.0

    def decode(self, raw: bytes | str) -> tuple[float, list[Event]]:
        now, events = decode_envelope(
            raw, self.now, type_key="type", payload_key="data", known=BATSIM_TO_SCHED, payload_required=True
        )
        self.now = now
        return now, [Event(ts, etype, data) for ts, etype, data in events]


def parse_job(event: Event) -> BatsimJob:
    """The job carried by a JOB_SUBMITTED event (without Redis)."""
    data = event.data
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise ProtocolError("JOB_SUBMITTED has no 'job_id' string")
    job = data.get("job")
    if not isinstance(job, dict):
        raise ProtocolError(f"JOB_SUBMITTED {job_id} has no 'job' object (is Redis enabled? it is not supported)")
    res = job.get("res")
    if isinstance(res, bool) or not isinstance(res, int) or res < 1:
        raise ProtocolError(f"job {job_id}: 'res' must be a positive integer, got {json.dumps(res)}")
    walltime = job.get("walltime")
    wt: float | None = None
    if walltime is not None:
        wt = number(walltime, f"job {job_id} 'walltime'")
        if wt <= 0:
            wt = None
    profile = job.get("profile")
    # Batsim 4 forwards the workload's submission time; the event arrives a
    # little later (protocol latency).  The queue orders ties by submit time,
    # so use the workload's, as the replay does.
    subtime = job.get("subtime")
    submit = event.timestamp
    if subtime is not None:
        submit = number(subtime, f"job {job_id} 'subtime'")
    return BatsimJob(
        job_id,
        res,
        wt,
        submit,
        profile if isinstance(profile, str) else None,
        read_entry(job_id, job),
        job,
    )


def parse_hosts(event: Event) -> list[dict[str, Any]]:
    """SIMULATION_BEGINS ``compute_resources``: ``[{id, name, properties}]``, checked."""
    res = event.data.get("compute_resources")
    if not isinstance(res, list) or not res:
        raise ProtocolError("SIMULATION_BEGINS has no 'compute_resources' list")
    out = []
    for i, r in enumerate(res):
        if not isinstance(r, dict):
            raise ProtocolError(f"compute_resources[{i}] is not an object")
        rid = r.get("id")
        if isinstance(rid, str) and rid.isdigit():
            rid = int(rid)
        if isinstance(rid, bool) or not isinstance(rid, int) or rid < 0:
            raise ProtocolError(f"compute_resources[{i}] has no non-negative integer 'id'")
        name = r.get("name")
        props = r.get("properties") or {}
        if not isinstance(props, dict):
            raise ProtocolError(f"compute_resources[{i}] 'properties' is not an object")
        out.append({"id": rid, "name": str(name) if name else f"host{rid}", "properties": props})
    return out


def _event(ts: float, etype: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": ts, "type": etype, "data": data}


def execute_job(ts: float, job_id: str, alloc: IdSet) -> dict[str, Any]:
    return _event(ts, "EXECUTE_JOB", {"job_id": job_id, "alloc": format_intervals(alloc)})


def set_resource_state(ts: float, ranks: IdSet, pstate: int) -> dict[str, Any]:
    return _event(ts, "SET_RESOURCE_STATE", {"resources": format_intervals(ranks), "state": str(pstate)})


def set_job_metadata(ts: float, job_id: str, metadata: str) -> dict[str, Any]:
    return _event(ts, "SET_JOB_METADATA", {"job_id": job_id, "metadata": metadata})


def kill_job(ts: float, job_ids: list[str]) -> dict[str, Any]:
    return _event(ts, "KILL_JOB", {"job_ids": job_ids})


def reject_job(ts: float, job_id: str) -> dict[str, Any]:
    return _event(ts, "REJECT_JOB", {"job_id": job_id})


def register_profile(ts: float, workload: str, name: str, profile: dict[str, Any]) -> dict[str, Any]:
    """REGISTER_PROFILE (``--enable-dynamic-jobs``): ``profile`` named ``name``
    in ``workload``, which Batsim creates if it has no such workload yet
    (``src/protocol.cpp``, ``handle_register_profile``)."""
    return _event(ts, "REGISTER_PROFILE", {"workload_name": workload, "profile_name": name, "profile": profile})


def register_job(ts: float, job_id: str, job: dict[str, Any]) -> dict[str, Any]:
    """REGISTER_JOB (``--enable-dynamic-jobs``): ``job`` (its ``id`` is
    ``job_id``, ``WORKLOAD!NAME``), whose profile must be known to Batsim
    by then, in its workload: registered before, in this reply or earlier."""
    return _event(ts, "REGISTER_JOB", {"job_id": job_id, "job": job})


def call_me_later(ts: float, when: float) -> dict[str, Any]:
    return _event(ts, "CALL_ME_LATER", {"timestamp": when})


def notify(ts: float, kind: str) -> dict[str, Any]:
    return _event(ts, "NOTIFY", {"type": kind})


def query(ts: float, requests: dict[str, Any]) -> dict[str, Any]:
    return _event(ts, "QUERY", {"requests": requests})


def answer(ts: float, data: dict[str, Any]) -> dict[str, Any]:
    return _event(ts, "ANSWER", data)


def encode_message(now: float, events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"now": now, "events": events}, separators=(",", ":")).encode()
