"""How numbers are shown, in the terminal's tables and on the report page alike.

A duration is ``8,227.76`` (seconds, two decimals), a share ``46.6 %``, a
ratio ``4.69``, a count ``1,234``; a missing value is ``—``.
"""

from __future__ import annotations

import math

__all__ = ["MISSING", "seconds", "percent", "ratio", "count"]

MISSING = "—"


def _missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def seconds(v: float | None) -> str:
    return MISSING if _missing(v) else f"{v:,.2f}"


def percent(v: float | None) -> str:
    """A fraction (0.466) as ``46.6 %``."""
    return MISSING if _missing(v) else f"{100 * v:.1f} %"


def ratio(v: float | None) -> str:
    return MISSING if _missing(v) else f"{v:.2f}"


def count(v: float | None) -> str:
    return MISSING if _missing(v) else f"{int(v):,}"
