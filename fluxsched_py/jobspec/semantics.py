"""Checks a JSON schema cannot express, and conversion to a :class:`Request`.

Run after the schema has accepted the document's structure.  Each check
raises :class:`JobspecError` with the JSON pointer of the offending element.
"""

from __future__ import annotations

from typing import Any

from ..limits import check_seconds
from .constraints import ConstraintError, parse_constraint
from .counts import parse_count
from .errors import JobspecError
from .fsd import parse_fsd
from .request import Request, ResourceRequest, TaskRequest

__all__ = ["check_task_labels", "to_request"]


def _vertex(obj: dict, path: str, in_slot: bool, labels: dict[str, str]) -> ResourceRequest:
    rtype = obj["type"]
    count = parse_count(obj["count"], f"{path}/count", rtype)
    label = obj.get("label")
    if rtype == "slot":
        if not obj.get("with"):
            raise JobspecError(path, "a slot must contain at least one resource ('with')")
        if label in labels:
            raise JobspecError(f"{path}/label", f"slot label {label!r} is already used at {labels[label]}")
        labels[label] = path
    children = tuple(
        _vertex(child, f"{path}/with/{i}", in_slot or rtype == "slot", labels)
        for i, child in enumerate(obj.get("with", ()))
    )
    return ResourceRequest(
        type=rtype,
        count=count,
        with_=children,
        label=label,
        exclusive=obj.get("exclusive"),
        unit=obj.get("unit"),
        id=obj.get("id"),
    )


def _task(obj: dict, path: str, types: set[str]) -> TaskRequest:
    count = obj["count"]
    if "per_resource" in count and count["per_resource"]["type"] not in types:
        rtype = count["per_resource"]["type"]
        raise JobspecError(f"{path}/count/per_resource/type", f"per_resource type {rtype!r} is not in resources")
    items = tuple((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in count.items())
    return TaskRequest(command=tuple(obj["command"]), slot=obj["slot"], count=items)


def to_request(doc: dict[str, Any]) -> Request:
    """Check the semantic rules of a schema-valid jobspec and normalize it.

    A task whose ``slot`` names no slot label is *not* an error here:
    flux-core accepts such canonical jobspecs (its corpus has
    ``valid/basic_v1.yaml``) and the scheduler never needs the task-to-slot
    binding.  RFC 25 forbids it; see :func:`check_task_labels`.
    """
    labels: dict[str, str] = {}
    resources = tuple(_vertex(v, f"/resources/{i}", False, labels) for i, v in enumerate(doc["resources"]))
    types = {r.type for top in resources for r in top.walk()}
    tasks = tuple(_task(t, f"/tasks/{i}", types) for i, t in enumerate(doc["tasks"]))

    attributes = doc.get("attributes") or {}
    system = attributes.get("system") or {}
    duration = float(system.get("duration", 0) or 0)
    try:  # the schema makes it a number >= 0; 1e308 would overflow sums of times
        check_seconds(duration, "duration")
    except ValueError as e:
        raise JobspecError("/attributes/system/duration", str(e)) from None
    constraints = None
    if "constraints" in system:
        try:
            constraints = parse_constraint(system["constraints"])
        except ConstraintError as e:
            raise JobspecError(e.path, e.reason) from None
    preemptible_after = None
    if "preemptible-after" in system:
        try:
            preemptible_after = parse_fsd(system["preemptible-after"])
        except ValueError as e:
            raise JobspecError("/attributes/system/preemptible-after", str(e)) from None
    reservation = system.get("reservation")
    if reservation is not None and (not isinstance(reservation, str) or not reservation):
        raise JobspecError("/attributes/system/reservation", "expected a reservation name (a non-empty string)")
    preempt_grace = None
    if "preempt-grace" in system:
        try:
            preempt_grace = parse_fsd(system["preempt-grace"])
        except ValueError as e:
            raise JobspecError("/attributes/system/preempt-grace", str(e)) from None
    return Request(
        resources=resources,
        tasks=tasks,
        duration=duration,
        queue=system.get("queue"),
        constraints=constraints,
        version=doc["version"],
        attributes=attributes,
        preemptible_after=preemptible_after,
        reservation=reservation,
        preempt_grace=preempt_grace,
    )


def check_task_labels(doc: dict[str, Any]) -> None:
    """Every task's ``slot`` must name a slot label (required by RFC 25)."""
    labels: dict[str, str] = {}
    for i, v in enumerate(doc["resources"]):
        _vertex(v, f"/resources/{i}", False, labels)
    for i, task in enumerate(doc["tasks"]):
        if task["slot"] not in labels:
            known = ", ".join(repr(k) for k in labels) or "none"
            raise JobspecError(f"/tasks/{i}/slot", f"task slot {task['slot']!r} names no slot label (labels: {known})")
