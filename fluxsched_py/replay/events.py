"""Batsim external events: machines that become unavailable and available again, and reservations declared.

Batsim's ``--events FILE`` injects failures and repairs into a simulation;
the replay takes the same file (``fluxsched-py replay --events FILE``), so a
policy's resilience is measured offline on the events Batsim would send.
The format is Batsim's (``docs/input-events.rst``, read by
``src/events.cpp``): one JSON object per non-empty line::

    {"type": "machine_unavailable", "resources": "0-1 3", "timestamp": 20}
    {"type": "machine_available", "resources": "0 1", "timestamp": 250}

``resources`` is a Batsim interval set of resource ids (the replay's ranks),
``timestamp`` a number of seconds, not negative.  The lines need not be in
time order: like Batsim, the reader sorts them by time, and at one time puts
``machine_available`` before ``machine_unavailable``.  A ``generic`` event
(Batsim forwards its ``data`` to the scheduler) is applied when its ``data``
is the machine event Batsim 5 documents for it (``"{\"type\":
\"machine_unavailable\", \"resources\": \"0-4 6 8\"}"``), as the
batprotocol driver applies it; any other is counted, not applied.

An unavailable machine takes no new job, and a job already running there is
not killed (Batsim: "jobs that were already running on these machines are
not killed"): it is what the engine's ``down`` means.

A ``reservations`` event (:mod:`fluxsched_py.batsim.external_events`; as
its own line, which Batsim 4 forwards with ``--forward-unknown-events``, or
in a generic event's ``data``) declares the advance reservations from its
time on, as a config reload does under Flux::

    {"type": "reservations", "timestamp": 300, "reservations": [{"name": "m", "nodes": 4, "start": 600, "end": 900}]}

At one time, like Batsim's generic events, it comes after the machine events.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from typing import Any

from ..batsim.external_events import RESERVATIONS, external_event_in, reservation_entries
from ..batsim.intervals import parse_intervals
from ..errors import FluxschedError
from ..ids import IdSet
from ..inputs import bounded_lines, open_stream
from ..limits import MAX_LINE_CHARS, MAX_SECONDS

__all__ = [
    "EventsError",
    "ExternalEvent",
    "MachineEvent",
    "MachineEvents",
    "ReservationsEvent",
    "load_events",
    "read_events",
]

#: Batsim's order of event types at one timestamp (its ``EventType`` enum:
#: an event of a type it does not know is a generic one, last).
_ORDER = {"machine_available": 0, "machine_unavailable": 1, RESERVATIONS: 2}


class EventsError(FluxschedError, ValueError):
    """A malformed events file: the message names the file, the line and the reason."""


@dataclass(frozen=True, slots=True)
class MachineEvent:
    time: float
    ranks: IdSet
    available: bool


@dataclass(frozen=True, slots=True)
class ReservationsEvent:
    """The reservations declared at ``time`` (``--reservations FILE``
    entries); ``where`` is the line, for errors."""

    time: float
    entries: tuple[dict[str, Any], ...]
    where: str


ExternalEvent = MachineEvent | ReservationsEvent


@dataclass(frozen=True, slots=True)
class MachineEvents:
    events: tuple[ExternalEvent, ...]
    #: ``generic`` events read and left (the replay has nothing to do with their data)
    generic: int = 0


def load_events(path: str | os.PathLike[str], nb_nodes: int) -> MachineEvents:
    """Read a Batsim events file (``-`` is stdin; gzip, bzip2 or xz allowed)
    for a machine of ``nb_nodes`` ranks."""
    source = os.fspath(path)
    try:
        with open_stream(source) as raw:
            text = raw.read().decode("utf-8")
    except OSError as exc:
        raise EventsError(f"{source}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise EventsError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return read_events(text, nb_nodes, source)


def read_events(text: str, nb_nodes: int, source: str = "<events>") -> MachineEvents:
    """Parse the events of ``text``, sorted as Batsim sorts them."""
    events: list[tuple[float, int, int, MachineEvent]] = []
    generic = 0
    try:
        for lineno, line in bounded_lines(io.StringIO(text), MAX_LINE_CHARS):
            if not line.strip():
                continue
            where = f"{source}:{lineno}"
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise EventsError(f"{where}: not a JSON object ({exc})") from None
            if not isinstance(obj, dict):
                raise EventsError(f"{where}: an event is a JSON object, not {type(obj).__name__}")
            kind = obj.get("type")
            if not isinstance(kind, str):
                raise EventsError(f"{where}: an event needs a 'type' string")
            t = obj.get("timestamp")
            if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= MAX_SECONDS:
                raise EventsError(f"{where}: 'timestamp' must be a number of seconds from 0 to {MAX_SECONDS:g}")
            if kind == "generic":
                inner = external_event_in(obj.get("data"))
                if inner is None:
                    generic += 1
                    continue
                kind, obj = inner["type"], inner
            if kind not in _ORDER:
                raise EventsError(
                    f"{where}: unknown event type {kind!r} "
                    "(machine_unavailable, machine_available, reservations or generic)"
                )
            if kind == RESERVATIONS:
                try:
                    entries = reservation_entries(obj)
                except ValueError as exc:
                    raise EventsError(f"{where}: {exc}") from None
                rev = ReservationsEvent(float(t), tuple(entries), where)
                events.append((rev.time, _ORDER[kind], len(events), rev))
                continue
            res = obj.get("resources")
            if not isinstance(res, str):
                raise EventsError(f"{where}: {kind} needs a 'resources' interval set (a string such as \"0-3 7\")")
            try:
                ranks = parse_intervals(res)
            except ValueError as exc:  # the interval set's ProtocolError
                raise EventsError(f"{where}: {exc}") from None
            if not ranks:
                raise EventsError(f"{where}: {kind} names no resource")
            if ranks.last() >= nb_nodes:
                raise EventsError(f"{where}: resource {ranks.last()} does not exist (the machine has 0-{nb_nodes - 1})")
            ev = MachineEvent(float(t), ranks, kind == "machine_available")
            events.append((ev.time, _ORDER[kind], len(events), ev))
    except EventsError:
        raise
    except ValueError as exc:  # a line longer than MAX_LINE_CHARS
        raise EventsError(f"{source}: {exc}") from None
    events.sort(key=lambda e: e[:3])
    return MachineEvents(tuple(e[3] for e in events), generic)
