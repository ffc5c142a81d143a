"""Batsim interval sets: ``"0-3 7 9-10"`` (space separated, inclusive).

Batsim 5 at commit 3bb38700 separates intervals with commas instead
(``"0-3,7"``); :func:`parse_intervals` accepts both.
"""

from __future__ import annotations

import re

from ..ids import IdSet, IdSetError
from .errors import ProtocolError

__all__ = ["format_intervals", "parse_intervals"]

_SEP = re.compile(r"[\s,]+")


def parse_intervals(text: str) -> IdSet:
    """Parse a Batsim interval set into an :class:`IdSet`."""
    if not isinstance(text, str):
        raise ProtocolError(f"interval set must be a string, not {type(text).__name__}")
    parts = [p for p in _SEP.split(text.strip()) if p]
    try:
        return IdSet.parse(",".join(parts))
    except IdSetError as e:
        raise ProtocolError(f"invalid interval set {text!r}: {e}") from None


def format_intervals(ids: IdSet, sep: str = " ") -> str:
    """Format an :class:`IdSet` the way Batsim writes interval sets."""
    return sep.join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ids.runs())
