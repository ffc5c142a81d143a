"""What a report needs from one run, from a replay result or from a ``jobs.csv``.

The figures read only this: per job its submit, start and finish times (NaN
when it never ran), its reject time (NaN unless it was rejected), the node
ranks it ran on, its size in nodes, its user, its final state, and a
category for the Gantt's colours.  A replay knows when it rejected a job; a
``jobs.csv`` does not (Batsim leaves every time of a ``REJECTED`` row
empty), so a rejected row is taken to leave the queue at its submission, as
both Batsim and the replay reject a job that can never fit.  The category
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

__all__ = ["RunData", "JobsCsvError", "run_from_result", "run_from_jobs_csv", "CATEGORY_FIELDS", "REJECTED", "KILLED"]

#: Job attributes (or jobs.csv columns) that colour the Gantt, first found wins.
CATEGORY_FIELDS = ("user", "campaign", "best_effort", "queue")

_FALSE = ("", "0", "false", "no", "none")


def _flag(v: str | None) -> str | None:
    """``best_effort`` values: a true flag is ``best-effort``, anything else ``regular``."""
    if v is None:
        return None
    return "regular" if v.strip().lower() in _FALSE else "best-effort"


REJECTED = "REJECTED"
KILLED = "COMPLETED_WALLTIME_REACHED"


@dataclass(slots=True)
class RunData:
    """One run's jobs, as flat lists (``start``/``finish`` are NaN for a job that never ran).

    ``reject``, ``size``, ``user`` and ``state`` may be left empty: they then
    default to never rejected, the nodes the job ran on (else 1), no user,
    and no state.
    """

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
    reject: list[float] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    user: list[str | None] = field(default_factory=list)
    state: list[str] = field(default_factory=list)
    #: the workload's name, when known: a sweep draws each workload on its own axes
    workload: str = ""
    #: With a power model: the machine's watts over time, a step function
    #: (the times it changed, the watts from each on); and the nodes per
    #: power state over time, rows of (time, sleeping, switching on,
    #: switching off, idle, computing) as Batsim's ``out_machine_states.csv``.
    power: tuple[list[float], list[float]] | None = None
    node_states: list[tuple[float, int, int, int, int, int]] | None = None

    def __post_init__(self) -> None:
        n = len(self.submit)
        if not self.reject:
            self.reject = [math.nan] * n
        if not self.size:
            self.size = [max(1, sum(hi - lo + 1 for lo, hi in r)) for r in self.ranks]
        if not self.user:
            self.user = [None] * n
        if not self.state:
            self.state = [""] * n

    def __len__(self) -> int:
        return len(self.submit)


def _known(v: Any) -> str | None:
    """A job attribute as text, or None when absent (SWF writes -1 for an unknown user or queue)."""
    text = "" if v is None else str(v)
    if not text or (text.startswith("-") and text[1:].isdigit()):
        return None
    return text


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
    """From a :class:`~fluxsched_py.replay.sim.ReplayResult` (its regular and best-effort jobs alike)."""
    nan = math.nan
    submit, start, finish, ranks, sizes, reject, states = [], [], [], [], [], [], []
    attrs: dict[str, list[str | None]] = {k: [] for k in CATEGORY_FIELDS}
    for r in result.records:
        j = r.job
        submit.append(float(j.submit))
        ran = r.start is not None and r.finish is not None
        start.append(float(r.start) if ran else nan)
        finish.append(float(r.finish) if ran else nan)
        rejected = r.state == REJECTED
        reject.append(float(r.rejected_at if r.rejected_at is not None else j.submit) if rejected else nan)
        states.append(r.state)
        runs = r.rank_runs() if ran else []
        ranks.append(runs)
        sizes.append(sum(hi - lo + 1 for lo, hi in runs) or j.nodes or 1)
        for k in CATEGORY_FIELDS:
            attrs[k].append(_known(getattr(j, k, None)))
    cats, kind = _pick(attrs, sizes)
    return RunData(
        label or result.policy,
        result.nb_nodes,
        submit,
        start,
        finish,
        ranks,
        cats,
        kind,
        reject=reject,
        size=sizes,
        user=attrs["user"],
        state=states,
        workload=result.workload.name,
        power=result.power_series() if hasattr(result, "power_series") else None,
        node_states=result.node_states() if hasattr(result, "node_states") else None,
    )


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


class JobsCsvError(ValueError):
    """A ``jobs.csv`` that cannot be read; the message names the file and the row."""


#: Columns a jobs.csv must have (Batsim's out_jobs.csv has them all).
REQUIRED_COLUMNS = ("submission_time", "starting_time", "finish_time", "allocated_resources")


def run_from_jobs_csv(
    path: str | os.PathLike[str], label: str, nb_nodes: int | None = None, workload: str = ""
) -> RunData:
    """From a Batsim-style ``jobs.csv``: what ``replay --output-dir`` and ``sweep`` write, or
    Batsim's own ``out_jobs.csv`` (``final_state`` ``REJECTED`` marks a rejected job).

    ``nb_nodes`` defaults to one past the highest rank used.  Raises
    :class:`JobsCsvError` for a file without the columns or with a bad row.
    """
    submit, start, finish, ranks, sizes, reject, states = [], [], [], [], [], [], []
    attrs: dict[str, list[str | None]] = {k: [] for k in CATEGORY_FIELDS}
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise JobsCsvError(f"{path}: not a jobs.csv: no column {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            try:
                runs = _intervals(row.get("allocated_resources") or "")
                req = int(float(row.get("requested_number_of_resources") or "1"))
            except ValueError as exc:
                raise JobsCsvError(f"{path}:{line}: {exc}") from None
            sub = _f(row["submission_time"] or "")
            if math.isnan(sub):
                raise JobsCsvError(f"{path}:{line}: submission_time {row['submission_time']!r} is not a time")
            submit.append(sub)
            s, e = _f(row.get("starting_time") or ""), _f(row.get("finish_time") or "")
            state = (row.get("final_state") or "").strip()
            if not runs or math.isnan(s) or math.isnan(e):
                s = e = math.nan
            start.append(s)
            finish.append(e)
            reject.append(sub if state == REJECTED else math.nan)
            states.append(state)
            ranks.append(runs)
            sizes.append(sum(hi - lo + 1 for lo, hi in runs) or req)
            for k in CATEGORY_FIELDS:
                attrs[k].append(_known(row.get(k)))
    if nb_nodes is None:
        nb_nodes = 1 + max((hi for runs in ranks for _, hi in runs), default=0)
    cats, kind = _pick(attrs, sizes)
    power, node_rows = _power_files(Path(path))
    return RunData(
        label,
        nb_nodes,
        submit,
        start,
        finish,
        ranks,
        cats,
        kind,
        reject=reject,
        size=sizes,
        user=attrs["user"],
        state=states,
        workload=workload,
        power=power,
        node_states=node_rows,
    )


def _sibling(jobs_csv: Path, name: str) -> Path:
    """``consumed_energy.csv`` beside ``jobs.csv`` (the replay's), or
    ``PREFIX_consumed_energy.csv`` beside ``PREFIX_jobs.csv`` (Batsim's)."""
    stem = jobs_csv.name
    if stem.endswith("_jobs.csv"):
        return jobs_csv.with_name(stem[: -len("jobs.csv")] + name)
    return jobs_csv.with_name(name)


def _power_files(jobs_csv: Path) -> tuple[tuple[list[float], list[float]] | None, list | None]:
    """The power over time (from ``consumed_energy.csv``: the mean watts
    between two rows) and the nodes per state (``machine_states.csv``) of
    the run whose ``jobs.csv`` this is, when those files are beside it;
    None for a file that is missing or unreadable."""
    power = None
    path = _sibling(jobs_csv, "consumed_energy.csv")
    try:
        with path.open(newline="") as f:
            rows = [(float(r["time"]), float(r["energy"])) for r in csv.DictReader(f)]
        times, watts = [], []
        for (t0, e0), (t1, e1) in zip(rows, rows[1:], strict=False):
            if t1 > t0:
                times.append(t0)
                watts.append((e1 - e0) / (t1 - t0))
        power = (times, watts) if times else None
    except (OSError, KeyError, ValueError):
        power = None
    states = None
    path = _sibling(jobs_csv, "machine_states.csv")
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            next(reader)
            states = [(float(r[0]), *(int(float(x)) for x in r[1:6])) for r in reader if r]
    except (OSError, ValueError, IndexError, StopIteration):
        states = None
    return power, states
