"""The slice of a jobspec resource-query needs: the resource tree and duration.

Kept separate from :mod:`fluxsched_py.jobspec` because resource-query's corpus
uses ``version: 9999`` jobspecs and type names (``invalid_res_type``) that a
strict RFC 25 validator rejects before Fluxion would; here only what Fluxion's
own jobspec parser checks is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["RSpec", "RJob", "JobspecError", "read_rjob"]


class JobspecError(Exception):
    """The jobspec file cannot be used; the message says which field."""


@dataclass
class RSpec:
    type: str
    min: int
    max: int
    operator: str = "+"
    operand: int = 1
    exclusive: bool | None = None
    label: str = ""
    with_: list[RSpec] = field(default_factory=list)

    def calc_count(self, qc: int) -> int:
        """Largest allowed count that is <= ``qc``; 0 when even ``min`` does not fit."""
        if qc < self.min:
            return 0
        best = v = self.min
        while True:
            if self.operator == "+":
                nv = v + self.operand
            elif self.operator == "*":
                nv = v * self.operand
            else:
                nv = v**self.operand
            if nv <= v or nv > self.max or nv > qc:
                break
            best = v = nv
        return best

    @property
    def effective_max(self) -> int:
        return self.max


@dataclass
class RJob:
    resources: list[RSpec]
    duration: float


_UNBOUNDED = 1 << 31


def _count(c: Any, where: str) -> tuple[int, int, str, int]:
    if isinstance(c, bool):
        raise JobspecError(f"{where}.count must be an integer or a mapping")
    if isinstance(c, int):
        if c < 1:
            raise JobspecError(f"{where}.count must be >= 1")
        return c, c, "+", 1
    if isinstance(c, dict):
        try:
            lo = int(c["min"])
        except (KeyError, TypeError, ValueError):
            raise JobspecError(f"{where}.count.min is missing or not an integer") from None
        hi = c.get("max", _UNBOUNDED)
        op = str(c.get("operator", "+"))
        operand = int(c.get("operand", 1))
        if lo < 1 or not isinstance(hi, int) or hi < lo or op not in "+*^":
            raise JobspecError(f"{where}.count is not a valid range")
        return lo, hi, op, operand
    raise JobspecError(f"{where}.count must be an integer or a mapping")


def _spec(r: Any, where: str) -> RSpec:
    if not isinstance(r, dict):
        raise JobspecError(f"{where} must be a mapping")
    if "type" not in r or not isinstance(r["type"], str):
        raise JobspecError(f"{where}.type is missing")
    if "count" not in r:
        raise JobspecError(f"{where}.count is missing")
    lo, hi, op, operand = _count(r["count"], where)
    ex = r.get("exclusive")
    if ex is not None and not isinstance(ex, bool):
        raise JobspecError(f"{where}.exclusive must be a boolean")
    if r["type"] == "slot" and "label" not in r:
        raise JobspecError(f"{where}: slot needs a label")
    kids = r.get("with", [])
    if not isinstance(kids, list):
        raise JobspecError(f"{where}.with must be a list")
    return RSpec(r["type"], lo, hi, op, operand, ex, str(r.get("label", "")),
                 [_spec(k, f"{where}.with[{i}]") for i, k in enumerate(kids)])


def read_rjob(path: str) -> RJob:
    """Read a YAML/JSON jobspec file into an :class:`RJob`."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise JobspecError(f"can't open {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise JobspecError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise JobspecError(f"{path}: jobspec must be a mapping")
    if "resources" not in data or not isinstance(data["resources"], list) or not data["resources"]:
        raise JobspecError(f"{path}: resources is missing or empty")
    if "tasks" not in data:
        raise JobspecError(f"{path}: tasks is missing")
    if "version" not in data:
        raise JobspecError(f"{path}: version is missing")
    res = [_spec(r, f"resources[{i}]") for i, r in enumerate(data["resources"])]
    dur = 0.0
    attrs = data.get("attributes") or {}
    if isinstance(attrs, dict):
        sysattr = attrs.get("system") or {}
        if isinstance(sysattr, dict) and "duration" in sysattr:
            try:
                dur = float(sysattr["duration"])
            except (TypeError, ValueError):
                raise JobspecError(f"{path}: attributes.system.duration must be a number") from None
    if dur < 0:
        raise JobspecError(f"{path}: attributes.system.duration must be >= 0")
    return RJob(res, dur)
