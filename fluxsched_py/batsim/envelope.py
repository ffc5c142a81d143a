"""The message envelope both Batsim JSON protocols share.

Batsim 3/4 and batprotocol's JSON mode wrap events the same way,
``{"now": t, "events": [...]}``, and state the same rules: ``now`` is at
least every event's timestamp, event timestamps never decrease, and time
never goes backwards between messages.  They differ only in what the
event's type and payload keys are called (``type``/``data`` versus
``event_type``/``event``), which :func:`decode_envelope` takes as arguments.
"""

from __future__ import annotations

import json
import math
from collections.abc import Container
from typing import Any

from .errors import ProtocolError

__all__ = ["decode_envelope", "number"]


def number(value: Any, what: str) -> float:
    """A finite JSON number, or :class:`ProtocolError` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError(f"{what} must be a finite number, got {json.dumps(value)[:40]}")
    return float(value)


def decode_envelope(
    raw: bytes | str,
    last_now: float,
    *,
    type_key: str,
    payload_key: str,
    known: Container[str],
    payload_required: bool,
) -> tuple[float, list[tuple[float, str, dict[str, Any]]]]:
    """Check one message and return ``(now, [(timestamp, type, payload)])``.

    A trailing NUL (batprotocol terminates its JSON with one) is ignored.
    """
    if isinstance(raw, bytes):
        raw = raw[:-1] if raw.endswith(b"\0") else raw
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"message is not UTF-8 (byte offset {e.start})") from None
    try:
        msg = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ProtocolError(f"message is not valid JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("message must be a JSON object")
    if "now" not in msg:
        raise ProtocolError("message has no 'now' field")
    now = number(msg["now"], "'now'")
    events = msg.get("events")
    if not isinstance(events, list):
        raise ProtocolError("message 'events' must be an array")
    if now < last_now:
        raise ProtocolError(f"time went backwards: now={now} after now={last_now}")
    out: list[tuple[float, str, dict[str, Any]]] = []
    last = -math.inf
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ProtocolError(f"event {i} is not an object")
        ts = number(ev.get("timestamp"), f"event {i} 'timestamp'")
        etype = ev.get(type_key)
        if not isinstance(etype, str):
            raise ProtocolError(f"event {i} has no string '{type_key}'")
        if etype not in known:
            raise ProtocolError(f"event {i} has unknown {type_key} {etype!r}")
        if payload_required and payload_key not in ev:
            raise ProtocolError(f"event {i} ({etype}) has no '{payload_key}' object")
        payload = ev.get(payload_key, {})
        if not isinstance(payload, dict):
            raise ProtocolError(f"event {i} ({etype}) has no '{payload_key}' object")
        if ts > now:
            raise ProtocolError(f"event {i} ({etype}) timestamp {ts} is after now={now}")
        if ts < last:
            raise ProtocolError(f"event {i} ({etype}) timestamp {ts} is before the previous event's {last}")
        last = ts
        out.append((ts, etype, payload))
    return now, out
