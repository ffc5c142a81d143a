"""Replay outputs: ``jobs.csv`` in Batsim's out_jobs.csv columns, and the summary table."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..batsim.metadata import job_metadata
from ..cliutil import AtomicOutput
from ..ids import IdSet
from ..report import formats
from .energy import PowerLog, energy_rows, node_states, pstate_rows
from .metrics import Summary
from .sim import ReplayResult

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "stdout_console",
    "JOBS_COLUMNS",
    "write_jobs_csv",
    "summary_table",
    "batsim_intervals",
    "rejected_line",
    "never_started_line",
]

#: Batsim's out_jobs.csv columns that apply to a replay (energy and metadata do not).
JOBS_COLUMNS = (
    "job_id",
    "workload_name",
    "profile",
    "submission_time",
    "requested_number_of_resources",
    "requested_time",
    "success",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
    "stretch",
    "allocated_resources",
)


def batsim_intervals(ids: IdSet | None) -> str:
    """Batsim's interval-set text: ``0-3 7`` (space separated)."""
    if ids is None:
        return ""
    return " ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in ids.runs())


def _num(x: float | None) -> str:
    if x is None:
        return ""
    if x == float("inf"):
        return "-1"
    return f"{x:.6f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def write_energy_files(result: ReplayResult, outdir: Path) -> list[Path]:
    """``machine_states.csv`` (with or without a power model),
    ``pstate_changes.csv`` and ``consumed_energy.csv`` beside ``jobs.csv``,
    in the columns of Batsim's ``out_*`` files of the same names, each
    complete or absent; their paths."""
    log = result.power_log or PowerLog()
    runs = result.job_runs()
    tables: list[tuple[str, list[str], list[list[object]]]] = [
        (
            "machine_states.csv",
            ["time", "nb_sleeping", "nb_switching_on", "nb_switching_off", "nb_idle", "nb_computing"],
            [[repr(t), *counts] for t, *counts in node_states(result.nb_nodes, runs, log)],
        )
    ]
    if result.models is not None:
        pstates = pstate_rows(result.nb_nodes, result.models, log)
        tables.append(
            (
                "pstate_changes.csv",
                ["time", "machine_id", "new_pstate"],
                [[repr(t), batsim_intervals(IdSet(ranks)), ps] for t, ranks, ps in pstates],
            )
        )
        tables.append(
            (
                "consumed_energy.csv",
                ["time", "energy", "event_type", "wattmin", "epower"],
                [
                    [f"{t:f}", f"{e:f}", kind, f"{wmin:f}", "NA" if ep is None else f"{ep:f}"]
                    for t, e, kind, wmin, ep in energy_rows(result.models, runs, log)
                ],
            )
        )
    out = []
    for name, head, rows in tables:
        path = outdir / name
        with AtomicOutput(path, newline="") as f:
            w = csv.writer(f.file)
            w.writerow(head)
            w.writerows(rows)
        out.append(path)
    return out


def write_jobs_csv(result: ReplayResult, path: str | os.PathLike[str]) -> Path:
    """Write one row per job, in submission order; returns the path.

    With the reasons recorded (``--job-metadata``), a last ``metadata``
    column holds what the Batsim driver's ``SET_JOB_METADATA`` makes Batsim
    write there: ``preemptions=N;reason_pending=TEXT`` for a job that was
    preempted or given a reason, empty for the others."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with AtomicOutput(p, newline="") as f:  # complete or absent, even if interrupted
        w = csv.writer(f.file)
        w.writerow((*JOBS_COLUMNS, "metadata") if result.reasons else JOBS_COLUMNS)
        for r in result.records:
            j = r.job
            started = r.start is not None and r.finish is not None
            execution = r.finish - r.start if started else None
            turnaround = r.finish - j.submit if started else None
            meta = []
            if result.reasons:
                told = r.reason is not None or r.preemptions
                meta = [job_metadata(r.preemptions, r.reason) if told else ""]
            w.writerow(
                [
                    j.name,
                    result.workload.name,
                    j.profile,
                    _num(j.submit),
                    j.nodes or j.request.nnodes,
                    _num(j.walltime),
                    1 if r.state == "COMPLETED_SUCCESSFULLY" else 0,
                    r.state,
                    _num(r.start),
                    _num(execution),
                    _num(r.finish),
                    _num(r.start - j.submit if started else None),
                    _num(turnaround),
                    _num(turnaround / execution if started and execution else None),
                    batsim_intervals(r.ranks),
                    *meta,
                ]
            )
    return p


def _fmt(v: float | None, unit: str = "s") -> str:
    if v is None:
        return formats.MISSING
    if unit == "%":
        return formats.percent(v)
    if unit == "x":
        return formats.ratio(v)
    return f"{formats.seconds(v)} s"


def summary_table(summaries: Sequence[Summary], title: str = "replay") -> Table:
    """One column per policy, one row per metric."""
    from rich.table import Table  # rich when a table is shown (not for --json: start-up time)
    from rich.text import Text

    t = Table(title=Text(title))  # Text: a workload name is shown as it is, never read as markup
    t.add_column("metric")
    for s in summaries:
        t.add_column(s.policy, justify="right")
    rows = [
        ("jobs: started / killed / rejected", lambda s: f"{s.started} / {s.killed} / {s.rejected}"),
        ("makespan", lambda s: _fmt(s.makespan)),
        ("mean wait", lambda s: _fmt(s.mean_wait)),
        ("median wait", lambda s: _fmt(s.median_wait)),
        ("max wait", lambda s: _fmt(s.max_wait)),
        ("mean bounded slowdown (τ=10 s)", lambda s: _fmt(s.mean_bsld, "x")),
        ("utilization", lambda s: _fmt(s.utilization, "%")),
        ("jobs given a t_estimate", lambda s: str(s.estimated)),
        ("t_estimate mean abs. error", lambda s: _fmt(s.estimate_mae)),
        ("started by first t_estimate", lambda s: _fmt(s.estimate_kept, "%")),
        ("replay time", lambda s: f"{s.elapsed:.2f} s"),
    ]
    if any(s.energy_joules is not None for s in summaries):
        rows[-1:-1] = [
            ("energy (first submit to last end)", lambda s: _joules(s.energy_joules)),
            (
                "  of it idle / switching",
                lambda s: f"{_joules(s.energy_idle_joules)} / {_joules(s.energy_switching_joules)}",
            ),
            (
                "nodes switched off / on",
                lambda s: formats.MISSING if s.power_off is None else f"{s.power_off} / {s.power_on}",
            ),
        ]
    if any(s.forecasted is not None for s in summaries):
        rows[-1:-1] = [
            ("jobs given a forecast", lambda s: formats.MISSING if s.forecasted is None else str(s.forecasted)),
            ("forecast mean abs. error", lambda s: _fmt(s.forecast_mae)),
        ]
    if any(s.besteffort for s in summaries):
        rows[-1:-1] = [
            (
                "best-effort work: completed / lost",
                lambda s: f"{s.besteffort_completed_nh:,.1f} / {s.besteffort_lost_nh:,.1f} node-h",
            ),
            ("preemptions", lambda s: str(s.preemptions)),
            ("utilization with best-effort work", lambda s: _fmt(s.utilization_with_besteffort, "%")),
        ]
        if any(s.duplicates for s in summaries):
            rows.insert(
                -1,
                (
                    "copies: started / cancelled / won",
                    lambda s: f"{s.duplicates} / {s.duplicates_cancelled} / {s.duplicates_won}",
                ),
            )
            rows.insert(-1, ("runs no job kept (copies, originals)", lambda s: f"{s.duplicates_wasted_nh:,.1f} node-h"))
        if any(s.notices or s.besteffort_recovered_nh for s in summaries):
            rows[-1:-1] = [
                ("preemption notices", lambda s: str(s.notices)),
                ("best-effort work recovered by checkpoints", lambda s: f"{s.besteffort_recovered_nh:,.1f} node-h"),
            ]
        names = sorted({n for s in summaries for n, _ in s.campaigns})
        for n in names:
            rows.insert(-1, (f"campaign {n}: makespan", lambda s, n=n: _fmt(dict(s.campaigns).get(n))))
    for name, fn in rows:
        t.add_row(name, *(fn(s) for s in summaries))
    return t


def _joules(j: float | None) -> str:
    return formats.MISSING if j is None else f"{j / 1e6:,.2f} MJ"


def stdout_console(width: int | None = None) -> Console:
    """A rich console on stdout whose closed pipe raises BrokenPipeError, for the
    command's boundary to end quietly with status 0 (rich's own way exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(width=width)


def print_summary(summaries: Sequence[Summary], title: str, console: Console | None = None) -> None:
    console = console or stdout_console()
    console.print(summary_table(summaries, title))


#: How many rejected job ids :func:`rejected_line` names.
REJECTED_IDS_SHOWN = 5


def rejected_line(result: ReplayResult) -> str | None:
    """One line when the replay rejected jobs: how many, the first ids, the first reason; else None."""
    return _jobs_line(result, "REJECTED", "rejected")


def never_started_line(result: ReplayResult) -> str | None:
    """One line when jobs were still pending at the end (held by a limit they
    ask more than, or needing resources that are down): how many, the first
    ids, the first one's last ``reason_pending``; else None."""
    return _jobs_line(result, "NOT_STARTED", "never started")


def _jobs_line(result: ReplayResult, state: str, what: str) -> str | None:
    jobs = [r for r in result.records if r.state == state]
    if not jobs:
        return None
    ids = ", ".join(str(r.job.name) for r in jobs[:REJECTED_IDS_SHOWN])
    more = ", ..." if len(jobs) > REJECTED_IDS_SHOWN else ""
    why = f": {jobs[0].note}" if jobs[0].note else ""
    return f"{len(jobs)} of {len(result.records)} jobs {what} (ids {ids}{more}){why}"
