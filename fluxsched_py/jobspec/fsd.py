"""RFC 23 Flux Standard Duration, and the ``preemptible-after`` attribute.

A duration is a non-negative number of seconds, or a string: a number with
an optional unit, ``ms``, ``s``, ``m``, ``h`` or ``d`` (``"5m"``, ``"1.5h"``,
``"30"``).  ``infinity`` / ``inf`` are refused here: a job that is never
preemptible is a regular job and should not carry the attribute.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["parse_fsd"]

_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "h": 3600.0, "d": 86400.0}
_FSD = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+)\s*(ms|s|m|h|d)?\s*$")


def parse_fsd(value: Any) -> float:
    """Seconds for an RFC 23 duration (a number or an FSD string); raises
    ValueError with the reason when ``value`` is not one, or is negative,
    infinite or not a number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        m = _FSD.match(value)
        if m is None:
            raise ValueError(f'{value!r} is not a Flux Standard Duration (e.g. 30, "90s", "5m", "2h")')
        seconds = float(m.group(1)) * _UNITS[m.group(2) or ""]
    else:
        raise ValueError(f"{value!r} is not a duration")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a finite, non-negative duration")
    return seconds
