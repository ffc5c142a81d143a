"""The Batsim external events the scheduler acts on, as both Batsim versions carry them.

**Machine events.**  Batsim 4 has ``machine_unavailable`` and
``machine_available`` events of its own (its events file, and NOTIFY under
the v4 protocol).  Batsim 5 has only ``generic`` events, whose ``data``
string it forwards untouched, and its docs give the machine events as that
string: ``{"type": "machine_unavailable", "resources": "0-4 6 8"}``.

**Reservation events.**  ``{"type": "reservations", "reservations": [...]}``
declares the advance reservations from the event's time on, as a ``flux
config reload`` of ``[[sched-py.reservation]]`` does under Flux: the list
holds entries of the ``--reservations`` file's form, and replaces what the
file (or the last such event) declared (:meth:`.Reservations.declare`: an
entry whose ``requires`` alone changed picks its nodes again).  Batsim 4
forwards an event of a type it does not know, whole, as a NOTIFY whose
``data`` is the event (``batsim --forward-unknown-events``); Batsim 5 as a
generic event's ``data`` string.

A file-format module: the Batsim drivers and the replay's ``--events``
reader all read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MACHINE_EVENTS", "RESERVATIONS", "external_event_in", "reservation_entries"]

#: The machine event types, Batsim 4's and those Batsim 5's docs give.
MACHINE_EVENTS = ("machine_available", "machine_unavailable")
#: The type of an event that declares the advance reservations.
RESERVATIONS = "reservations"


def external_event_in(data: object) -> dict[str, Any] | None:
    """The event a generic event's ``data`` holds (the decoded object, its
    ``type`` one of :data:`MACHINE_EVENTS` or :data:`RESERVATIONS`), or
    None: the user's data."""
    try:
        doc = json.loads(data) if isinstance(data, str) else None
    except ValueError:
        return None
    if isinstance(doc, dict) and (doc.get("type") in MACHINE_EVENTS or doc.get("type") == RESERVATIONS):
        return doc
    return None


def reservation_entries(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries a reservations event declares; ValueError saying what is
    wrong when ``reservations`` is not a list of objects (each entry's
    fields are checked when it is declared: :func:`.parse_spec`)."""
    entries = event.get("reservations")
    if not isinstance(entries, list):
        raise ValueError("a reservations event needs a 'reservations' list (entries as in --reservations FILE)")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"reservations[{i}] is {type(entry).__name__}, not an object")
    return entries
