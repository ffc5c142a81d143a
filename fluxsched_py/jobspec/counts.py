"""Parse the four forms a resource ``count`` may take (RFC 14, RFC 45).

* an integer ``N``;
* a range object ``{min, max?, operator?, operand?}``;
* a range string ``"min-max:operand:operator"`` or ``"min+"`` (RFC 45),
  optionally in brackets;
* an idset string ``"1,4-5"``: the count must be one of these values.
"""

from __future__ import annotations

import re
from typing import Any

from ..ids import IdSet, IdSetError
from ..limits import MAX_COUNT
from .errors import JobspecError
from .request import Count

__all__ = ["parse_count"]

#: The largest count a jobspec may ask for; larger values are surely errors
#: and would make range arithmetic expensive.

_RANGE = re.compile(r"^(?P<min>\d+)(?:(?P<plus>\+)|-(?P<max>\d+))?(?::(?P<operand>\d+)(?::(?P<operator>[+*^]))?)?$")


def _check_range(path: str, lo: int, hi: int | None, operator: str, operand: int) -> Count:
    for name, v in (("min", lo), ("max", hi), ("operand", operand)):
        if v is not None and v > MAX_COUNT:
            raise JobspecError(path, f"count {name} {v} exceeds the maximum {MAX_COUNT}")
        if v is not None and v < 1:
            raise JobspecError(path, f"count {name} must be >= 1, not {v}")
    if hi is not None and hi < lo:
        raise JobspecError(path, f"count max {hi} is less than min {lo}")
    if operator not in ("+", "*", "^"):
        raise JobspecError(path, f"count operator must be one of '+', '*', '^', not {operator!r}")
    if operator in ("*", "^") and operand < 2:
        raise JobspecError(path, f"count operand must be >= 2 with operator {operator!r}")
    if operator == "^" and lo < 2:
        raise JobspecError(path, "count min must be >= 2 with operator '^'")
    return Count(lo, hi, operator, operand)


def parse_count(value: Any, path: str, rtype: str = "") -> Count:
    """Return the :class:`Count` for a jobspec ``count`` value at JSON ``path``."""
    strictly_positive = rtype in ("node", "slot", "core")
    if isinstance(value, bool):
        raise JobspecError(path, "count must be an integer, a range or an idset string, not a boolean")
    if isinstance(value, int):
        if value > MAX_COUNT:
            raise JobspecError(path, f"count {value} exceeds the maximum {MAX_COUNT}")
        if value < 0 or (strictly_positive and value < 1):
            bound = 1 if strictly_positive else 0
            what = f"{rtype} count" if rtype else "count"
            raise JobspecError(path, f"{what} must be >= {bound}, not {value}")
        return Count.fixed(value)
    if isinstance(value, dict):
        unknown = set(value) - {"min", "max", "operator", "operand"}
        if unknown:
            raise JobspecError(path, f"unknown count key {sorted(unknown)[0]!r}")
        if "min" not in value:
            raise JobspecError(path, "count range needs 'min'")
        if ("operator" in value) != ("operand" in value):
            raise JobspecError(path, "count 'operator' and 'operand' must be given together")
        for k in ("min", "max", "operand"):
            if k in value and (not isinstance(value[k], int) or isinstance(value[k], bool)):
                raise JobspecError(f"{path}/{k}", f"count {k} must be an integer")
        op = value.get("operator", "+")
        if not isinstance(op, str):
            raise JobspecError(f"{path}/operator", "count operator must be a string")
        return _check_range(path, value["min"], value.get("max"), op, value.get("operand", 1))
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        m = _RANGE.match(text)
        if m:
            lo = int(m["min"])
            hi = None if m["plus"] else int(m["max"]) if m["max"] else lo
            operand = int(m["operand"]) if m["operand"] else 1
            return _check_range(path, lo, hi, m["operator"] or "+", operand)
        try:
            ids = IdSet.parse(text)
        except IdSetError as e:
            raise JobspecError(path, f"count string {value!r} is neither a range nor an idset: {e}") from None
        if not ids or 0 in ids:
            raise JobspecError(path, f"count idset {value!r} must hold only values >= 1")
        if ids.last() > MAX_COUNT:
            raise JobspecError(path, f"count {ids.last()} exceeds the maximum {MAX_COUNT}")
        values = tuple(ids)
        if len(values) == 1:
            return Count.fixed(values[0])
        return Count(values[0], values[-1], "+", 1, values)
    raise JobspecError(path, f"count must be an integer, a range object or a string, not {type(value).__name__}")
