"""What a report needs from one run, from a replay result or from a ``jobs.csv``.

The figures read only this: per job its submit, start and finish times, the
node ranks it ran on, and a category for the Gantt's colours.  The category
is the first of ``user``, ``campaign``, ``best_effort``, ``queue`` that the
jobs carry (a workload reader may set these on its jobs; a ``jobs.csv`` may
have such a column after Batsim's); ``best_effort`` is a flag, shown as
``best-effort`` or ``regular``.  When none is carried, jobs are coloured by
size class (1 node, 2-3, 4-7, ...), so the chart still tells jobs apart.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunData", "run_from_result", "run_from_jobs_csv", "CATEGORY_FIELDS"]

#: Job attributes (or jobs.csv columns) that colour the Gantt, first found wins.
CATEGORY_FIELDS = ("user", "campaign", "best_effort", "queue")

_FALSE = ("", "0", "false", "no", "none")


def _flag(v: str | None) -> str | None:
    """``best_effort`` values: a true flag is ``best-effort``, anything else ``regular``."""
    if v is None:
        return None
    return "regular" if v.strip().lower() in _FALSE else "best-effort"


@dataclass(slots=True)
class RunData:
    """One run's jobs, as flat lists (``start``/``finish`` are NaN for a job that never ran)."""

    label: str
    nb_nodes: int
    submit: list[float]
    start: list[float]
    finish: list[float]
    ranks: list[list[tuple[int, int]]]
    category: list[str]
    category_kind: str = "size"
    title: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.submit)


def size_class(n: int) -> str:
    """``1 node``, ``2-3 nodes``, ``4-7 nodes``...: powers of two."""
    if n <= 1:
        return "1 node"
    lo = 1 << (n.bit_length() - 1)
    return f"{lo}-{2 * lo - 1} nodes"


def _pick(jobs_attrs: dict[str, list[str | None]], sizes: list[int]) -> tuple[list[str], str]:
    for name in CATEGORY_FIELDS:
        vals = jobs_attrs.get(name)
        if name == "best_effort" and vals:
            vals = [_flag(v) for v in vals]
            if "best-effort" not in vals:
                continue
            return [v or "regular" for v in vals], "best-effort"
        if vals and any(vals):
            return [str(v) if v not in (None, "") else "?" for v in vals], name
    return [size_class(n) for n in sizes], "size"


def run_from_result(result: Any, label: str | None = None) -> RunData:
    """From a :class:`~fluxsched_py.replay.sim.ReplayResult`."""
    nan = math.nan
    submit, start, finish, ranks, sizes = [], [], [], [], []
    attrs: dict[str, list[str | None]] = {k: [] for k in CATEGORY_FIELDS}
    for r in result.records:
        j = r.job
        submit.append(float(j.submit))
        ran = r.start is not None and r.finish is not None
        start.append(float(r.start) if ran else nan)
        finish.append(float(r.finish) if ran else nan)
        runs = list(r.ranks.runs()) if ran and r.ranks is not None else []
        ranks.append(runs)
        sizes.append(sum(hi - lo + 1 for lo, hi in runs) or j.nodes or 1)
        for k in CATEGORY_FIELDS:
            v = getattr(j, k, None)
            attrs[k].append(str(v) if v not in (None, "") else None)
    cats, kind = _pick(attrs, sizes)
    return RunData(label or result.policy, result.nb_nodes, submit, start, finish, ranks, cats, kind)


def _intervals(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split():
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def _f(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        return math.nan
    return x if x >= 0 else math.nan


def run_from_jobs_csv(path: str | os.PathLike[str], label: str, nb_nodes: int | None = None) -> RunData:
    """From a Batsim-style ``jobs.csv`` (what ``replay --output-dir`` and ``sweep`` write).

    ``nb_nodes`` defaults to one past the highest rank used.
    """
    submit, start, finish, ranks, sizes = [], [], [], [], []
    attrs: dict[str, list[str | None]] = {k: [] for k in CATEGORY_FIELDS}
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            submit.append(_f(row["submission_time"]))
            runs = _intervals(row.get("allocated_resources") or "")
            s, e = _f(row.get("starting_time", "")), _f(row.get("finish_time", ""))
            if not runs or math.isnan(s) or math.isnan(e):
                s = e = math.nan
            start.append(s)
            finish.append(e)
            ranks.append(runs)
            req = row.get("requested_number_of_resources") or "1"
            sizes.append(sum(hi - lo + 1 for lo, hi in runs) or int(float(req)))
            for k in CATEGORY_FIELDS:
                attrs[k].append(row.get(k) or None)
    if nb_nodes is None:
        nb_nodes = 1 + max((hi for runs in ranks for _, hi in runs), default=0)
    cats, kind = _pick(attrs, sizes)
    return RunData(label, nb_nodes, submit, start, finish, ranks, cats, kind)
