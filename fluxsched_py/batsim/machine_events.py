"""Batsim's machine events as Batsim 5 carries them: in a generic event's ``data``.

Batsim 4 has ``machine_unavailable`` and ``machine_available`` events of its
own (its events file, and NOTIFY under the v4 protocol).  Batsim 5 has only
``generic`` events, whose ``data`` string it forwards untouched, and its docs
give the machine events as that string: ``{"type": "machine_unavailable",
"resources": "0-4 6 8"}``.  A file-format module: the batprotocol driver and
the replay's ``--events`` reader both read it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MACHINE_EVENTS", "machine_event_in"]

#: The machine event types, Batsim 4's and those Batsim 5's docs give.
MACHINE_EVENTS = ("machine_available", "machine_unavailable")


def machine_event_in(data: object) -> dict[str, Any] | None:
    """The machine event a generic event's ``data`` holds (the decoded object,
    its ``type`` one of :data:`MACHINE_EVENTS`), or None: the user's data."""
    try:
        doc = json.loads(data) if isinstance(data, str) else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("type") in MACHINE_EVENTS else None
