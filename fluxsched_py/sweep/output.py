"""What a sweep writes: ``sweep.csv``, ``sweep.json``, the comparison table, the report."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from ..report import formats
from .grid import workload_names

__all__ = ["write_rows", "comparison_table", "write_sweep_report", "TABLE_COLUMNS"]

#: Metric columns of the comparison table: (row key, heading, format).
TABLE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("started", "started", formats.count),
    ("rejected", "rejected", formats.count),
    ("makespan", "makespan (s)", "{:,.0f}".format),
    ("mean_wait", "mean wait (s)", "{:,.1f}".format),
    ("mean_bsld", "mean bsld", formats.ratio),
    ("utilization", "utilization", formats.percent),
    ("wall_s", "run time (s)", formats.seconds),
)


#: Row keys that are results, not parameters.
_METRIC_KEYS = (
    "jobs",
    "started",
    "killed",
    "rejected",
    "makespan",
    "mean_wait",
    "median_wait",
    "max_wait",
    "mean_bsld",
    "utilization",
    "estimated",
    "estimate_mae",
    "estimate_kept",
    "elapsed",
    "nb_nodes",
    "jobs_csv",
    "status",
    "error",
    "wall_s",
    # how the run was made (replay/provenance.py): not what varies across the grid
    "workload_sha256",
    "cores",
    "placement_policy",
    "walltime_model",
    "walltime_filled",
    "options",
    "version",
)


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    return cols


def write_rows(rows: Sequence[dict[str, Any]], outdir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``sweep.csv`` and ``sweep.json``, one row per run, every key a column."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    cols = _columns(rows)
    tmp_csv, tmp_json = out / ".sweep.csv.part", out / ".sweep.json.part"
    with tmp_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, cols, restval="")
        w.writeheader()
        for r in rows:
            w.writerow({k: _cell(v) for k, v in r.items()})
    tmp_json.write_text(json.dumps(list(rows), indent=1) + "\n")
    tmp_csv.replace(out / "sweep.csv")
    tmp_json.replace(out / "sweep.json")
    return out / "sweep.csv", out / "sweep.json"


def _cell(v: Any) -> Any:
    """A CSV cell: None empty, a mapping (the options) as compact JSON."""
    if v is None:
        return ""
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return v


def comparison_table(rows: Sequence[dict[str, Any]], params: Sequence[str], title: str = "sweep") -> Table:
    """One line per run: the parameters that vary, the main metrics, or the error."""
    names = workload_names([str(r.get("workload")) for r in rows])
    t = Table(title=title)
    for p in params:
        t.add_column(p)
    for _, head, _ in TABLE_COLUMNS:
        t.add_column(head, justify="right")
    for r in rows:
        cells = [names.get(str(r.get(p)), "") if p == "workload" else str(r.get(p, "")) for p in params]
        if r.get("jobs_csv"):  # ok, or failed for rejected jobs: the metrics are real
            cells += [fmt(r[k]) if r.get(k) is not None else formats.MISSING for k, _, fmt in TABLE_COLUMNS]
        else:  # the error itself is printed below the table, with the run's parameters
            cells += ["failed"] + [""] * (len(TABLE_COLUMNS) - 1)
        t.add_row(*cells)
    return t


def short_labels(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each run's label with only the parameters that vary across the sweep (legends stay short)."""
    fixed = {"label", *_METRIC_KEYS}
    params = [k for k in _columns(rows) if k not in fixed]
    # a key a failed run lacks (it never learned its machine size) does not make it vary
    varying = [k for k in params if len({str(r[k]) for r in rows if k in r}) > 1]
    names = workload_names([str(r.get("workload")) for r in rows])
    out = {}
    for r in rows:
        parts = []
        for k in varying:
            v = str(r.get(k, ""))
            if k == "workload":
                parts.append(names[v])
            elif k in ("queue_policy", "policy"):
                parts.append(v)
            else:
                parts.append(f"{k}={v}")
        out[r["label"]] = " ".join(parts) or r["label"]
    return out


def write_sweep_report(
    rows: Sequence[dict[str, Any]],
    outdir: str | os.PathLike[str],
    title: str,
    *,
    progress: bool = True,
    jobs: int = 1,
) -> Path | None:
    """The report over every run that has a ``jobs.csv`` (those that ran, rejected jobs or
    not), one section per workload, from their ``jobs.csv``; None if none ran."""
    from ..report import run_from_jobs_csv, write_report

    ok = [r for r in rows if r.get("jobs_csv")]
    if not ok:
        return None
    names = short_labels(rows)
    wnames = workload_names([str(r.get("workload")) for r in rows])
    runs = [
        run_from_jobs_csv(r["jobs_csv"], names[r["label"]], int(r["nb_nodes"]), wnames[str(r["workload"])]) for r in ok
    ]
    keep = ("label", "status", "jobs", "started", "killed", "rejected", "makespan", "mean_wait", "median_wait")
    keep += ("max_wait", "mean_bsld", "utilization", "wall_s", "error")
    table = [{**{k: r.get(k) for k in keep}, "label": names[r["label"]]} for r in rows]
    return write_report(runs, table, Path(outdir), title, progress=progress, jobs=jobs)
