"""Draw every figure as PNG and SVG, then write ``index.html`` around them.

Runs are drawn in groups, one per workload (a sweep may replay several; a
replay or ``fluxsched-py report`` draws one group): each group has its own
time axis, its overlays, and per-run figures that share their scales
(:func:`~fluxsched_py.report.figures.shared_limits`).  Every file is written
under a temporary name and renamed when complete, so an interrupted report
leaves no half-written file.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import figures
from .data import RunData
from .deps import require_matplotlib
from .html import Section, write_index
from .metrics import BREAKDOWNS, breakdown
from .progress import ProgressBar

__all__ = ["write_report", "PER_RUN", "OVERLAYS", "slug", "groups"]

Limits = dict[str, float]

#: Figures drawn for each run: (file stem, heading, drawing function).
PER_RUN: tuple[tuple[str, str, Callable[[RunData, Limits], Any]], ...] = (
    ("gantt", "Jobs over nodes and time", figures.gantt),
    ("utilization", "Utilization over time", figures.utilization),
    ("queue", "Queue length over time", figures.queue),
    ("free", "Free nodes over time (red: free while jobs wait)", figures.free),
    ("wait", "Wait time", lambda r, lim: figures.distribution(r, "wait", lim)),
    ("bsld", "Bounded slowdown", lambda r, lim: figures.distribution(r, "bsld", lim)),
    # drawn only for a run with a power model (an energy platform), else skipped
    ("power", "Power over time", figures.power),
    ("power-states", "Nodes by power state over time", figures.power_states),
)

#: Figures that overlay all runs of a group (drawn when it has two or more).
OVERLAYS: tuple[tuple[str, str, Callable[[Sequence[RunData]], Any]], ...] = (
    ("all-utilization", "Utilization, all runs", lambda rs: figures.overlay_steps(rs, "utilization")),
    ("all-queue", "Queue length, all runs", lambda rs: figures.overlay_steps(rs, "queue")),
    ("all-wait", "Wait time, all runs (CDF)", lambda rs: figures.overlay_cdf(rs, "wait")),
    ("all-bsld", "Bounded slowdown, all runs (CDF)", lambda rs: figures.overlay_cdf(rs, "bsld")),
)


def slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "run"


def groups(runs: Sequence[RunData]) -> list[tuple[str, list[RunData]]]:
    """``[(workload, runs)]`` in first-seen order; one group when the runs name one workload or none."""
    out: dict[str, list[RunData]] = {}
    for r in runs:
        out.setdefault(r.workload, []).append(r)
    return list(out.items())


def _save(fig: Any, outdir: Path, stem: str) -> tuple[str, str]:
    """Write ``stem.png`` and ``stem.svg``, each complete or not at all."""
    plt = require_matplotlib()
    names = []
    for ext, kw in (("png", {"dpi": 110}), ("svg", {})):
        name = f"{stem}.{ext}"
        tmp = outdir / f".{name}.part"
        fig.savefig(tmp, format=ext, **kw)
        os.replace(tmp, outdir / name)
        names.append(name)
    plt.close(fig)
    return names[0], names[1]


def _draw_run(run: RunData, outdir: str, stem: str, lim: Limits) -> list[tuple[str, str, str]]:
    """Every per-run figure of one run: [(kind, png, svg)] (runs in a worker
    process too); a figure whose data the run lacks (power) is left out."""
    out = Path(outdir)
    drawn = []
    for kind, _, draw in PER_RUN:
        fig = draw(run, lim)
        if fig is not None:
            drawn.append((kind, *_save(fig, out, f"{kind}-{stem}")))
    return drawn


def _worker_signals() -> None:
    """A worker dies on SIGTERM (the pool's terminate) and leaves SIGINT to the
    command, instead of the command's own handlers, inherited by fork."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _draw_runs(
    todo: Sequence[tuple[RunData, str, Limits]], out: Path, jobs: int
) -> Iterator[tuple[RunData, list[tuple[str, str, str]]]]:
    if jobs <= 1 or len(todo) <= 1:
        for r, stem, lim in todo:
            yield r, _draw_run(r, str(out), stem, lim)
        return
    # multiprocessing's Pool, not concurrent.futures': leaving its block terminates
    # the workers, so SIGINT or SIGTERM stops them at once instead of waiting for the queue
    with multiprocessing.Pool(min(jobs, len(todo)), initializer=_worker_signals) as pool:
        futures = [pool.apply_async(_draw_run, (r, str(out), stem, lim)) for r, stem, lim in todo]
        for (r, _, _), fut in zip(todo, futures, strict=True):
            yield r, fut.get()


def _breakdowns(runs: Sequence[RunData]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """One table per breakdown: (heading, columns, rows); a group per row, the runs side by side."""
    out = []
    for key, heading in BREAKDOWNS:
        per_run = {r.label: {g: (n, w, b) for g, n, w, b in breakdown(r, key)} for r in runs}
        names: list[str] = []
        for r in runs:
            names += [g for g in per_run[r.label] if g not in names]
        if not names:
            continue  # no job carries a user
        if key == "user" and "other" in names:
            names.remove("other")
            names.append("other")
        cols = [heading] + [f"{r.label}: {c}" for r in runs for c in ("jobs", "mean wait (s)", "mean bsld")]
        rows = [[g, *(x for r in runs for x in per_run[r.label].get(g, (None, None, None)))] for g in names]
        out.append((f"By {heading}", cols, rows))
    return out


def write_report(
    runs: Sequence[RunData],
    rows: Sequence[Mapping[str, Any]],
    outdir: str | os.PathLike[str],
    title: str = "fluxsched-py report",
    *,
    progress: bool = True,
    jobs: int = 1,
) -> Path:
    """Write ``outdir/index.html`` and its figures; returns the page's path.

    ``rows`` is the summary table, one mapping per run (keys as in
    :data:`~fluxsched_py.report.html.COLUMNS`).  Labels must be unique.  With
    ``jobs > 1`` the runs' figures are drawn in that many processes
    (matplotlib is single-threaded).  Raises
    :class:`~fluxsched_py.report.deps.ReportError` when matplotlib is missing.
    """
    require_matplotlib()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    stems: dict[str, str] = {}
    for r in runs:  # unique file names even if two labels slug alike
        s, n = slug(r.label), 2
        while s in stems.values():
            s, n = f"{slug(r.label)}-{n}", n + 1
        stems[r.label] = s
    grouped = groups(runs)
    several = len(grouped) > 1
    total = sum(len(rs) * len(PER_RUN) + (len(OVERLAYS) if len(rs) > 1 else 0) for _, rs in grouped)
    todo: list[tuple[RunData, str, Limits]] = []
    sections: list[Section] = []
    t0 = time.perf_counter()
    with ProgressBar("report", total, enabled=progress) as bar:
        for workload, rs in grouped:
            shared: list[tuple[str, str, str]] = []
            for stem, heading, draw in OVERLAYS if len(rs) > 1 else ():
                name = f"{stem}-{slug(workload)}" if several else stem
                shared.append((heading, *_save(draw(rs), out, name)))
                bar.advance(note=name)
            lim = figures.shared_limits(rs)
            todo += [(r, stems[r.label], lim) for r in rs]
            sections.append(Section(f"Workload {workload}" if several else "", shared, [], _breakdowns(rs)))
        section_of = {r.label: k for k, (_, rs) in enumerate(grouped) for r in rs}
        per_run: list[dict[str, list[tuple[str, str, str]]]] = [{k: [] for k, _, _ in PER_RUN} for _ in grouped]
        for r, drawn in _draw_runs(todo, out, jobs):
            for kind, png, svg in drawn:
                per_run[section_of[r.label]][kind].append((r.label, png, svg))
            bar.advance(len(drawn), note=r.label)
    headings = {kind: heading for kind, heading, _ in PER_RUN}
    for sec, figs in zip(sections, per_run, strict=True):
        sec.per_run.extend((headings[k], v) for k, v in figs.items() if v)
    return write_index(
        out / "index.html",
        title,
        rows,
        sections,
        drawn_in=time.perf_counter() - t0,
    )
