"""Draw every figure as PNG and SVG, then write ``index.html`` around them."""

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
from .html import write_index
from .progress import ProgressBar

__all__ = ["write_report", "PER_RUN", "OVERLAYS"]

#: Figures drawn for each run: (file stem, heading, drawing function).
PER_RUN: tuple[tuple[str, str, Callable[[RunData], Any]], ...] = (
    ("gantt", "Jobs over nodes and time", figures.gantt),
    ("utilization", "Utilization over time", figures.utilization),
    ("queue", "Queue length over time", figures.queue),
    ("wait", "Wait time", lambda r: figures.distribution(r, "wait")),
    ("bsld", "Bounded slowdown", lambda r: figures.distribution(r, "bsld")),
)

#: Figures that overlay all runs (drawn when there are two or more).
OVERLAYS: tuple[tuple[str, str, Callable[[Sequence[RunData]], Any]], ...] = (
    ("all-utilization", "Utilization, all runs", lambda rs: figures.overlay_steps(rs, "utilization")),
    ("all-queue", "Queue length, all runs", lambda rs: figures.overlay_steps(rs, "queue")),
    ("all-wait", "Wait time, all runs (CDF)", lambda rs: figures.overlay_cdf(rs, "wait")),
    ("all-bsld", "Bounded slowdown, all runs (CDF)", lambda rs: figures.overlay_cdf(rs, "bsld")),
)


def slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "run"


def _save(fig: Any, outdir: Path, stem: str) -> tuple[str, str]:
    plt = require_matplotlib()
    png, svg = f"{stem}.png", f"{stem}.svg"
    fig.savefig(outdir / png, dpi=110)
    fig.savefig(outdir / svg)
    plt.close(fig)
    return png, svg


def _draw_run(run: RunData, outdir: str, stem: str) -> list[tuple[str, str, str]]:
    """Every per-run figure of one run: [(kind, png, svg)] (runs in a worker process too)."""
    out = Path(outdir)
    return [(kind, *_save(draw(run), out, f"{kind}-{stem}")) for kind, _, draw in PER_RUN]


def _worker_signals() -> None:
    """A worker dies on SIGTERM (the pool's terminate) and leaves SIGINT to the
    command, instead of the command's own handlers, inherited by fork."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _draw_runs(
    runs: Sequence[RunData], out: Path, stems: Mapping[str, str], jobs: int
) -> Iterator[tuple[RunData, list[tuple[str, str, str]]]]:
    if jobs <= 1 or len(runs) <= 1:
        for r in runs:
            yield r, _draw_run(r, str(out), stems[r.label])
        return
    # multiprocessing's Pool, not concurrent.futures': leaving its block terminates
    # the workers, so SIGINT or SIGTERM stops them at once instead of waiting for the queue
    with multiprocessing.Pool(min(jobs, len(runs)), initializer=_worker_signals) as pool:
        futures = [pool.apply_async(_draw_run, (r, str(out), stems[r.label])) for r in runs]
        for r, fut in zip(runs, futures, strict=True):
            yield r, fut.get()


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

    ``rows`` is the summary table, one mapping per run (its keys are the
    columns).  With ``jobs > 1`` the runs' figures are drawn in that many
    processes (matplotlib is single-threaded).  Raises :class:`~fluxsched_py.report.deps.ReportError` when
    matplotlib is missing.
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
    overlays = OVERLAYS if len(runs) > 1 else ()
    total = len(runs) * len(PER_RUN) + len(overlays)
    per_run: dict[str, list[tuple[str, str, str]]] = {kind: [] for kind, _, _ in PER_RUN}
    shared: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    with ProgressBar("report", total, enabled=progress) as bar:
        for stem, heading, draw in overlays:
            png, svg = _save(draw(runs), out, stem)
            shared.append((heading, png, svg))
            bar.advance(note=stem)
        for r, drawn in _draw_runs(runs, out, stems, jobs):
            for kind, png, svg in drawn:
                per_run[kind].append((r.label, png, svg))
            bar.advance(len(drawn), note=r.label)
    headings = {kind: heading for kind, heading, _ in PER_RUN}
    return write_index(
        out / "index.html",
        title,
        rows,
        shared,
        [(headings[k], v) for k, v in per_run.items()],
        drawn_in=time.perf_counter() - t0,
    )
