"""The report of one ``replay`` invocation (one run per compared policy)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .data import run_from_result
from .write import write_report

__all__ = ["report_replay"]


def report_replay(
    results: Sequence[Any],
    summaries: Sequence[Any],
    outdir: str | os.PathLike[str],
    title: str,
    *,
    progress: bool = True,
    jobs: int = 1,
) -> Path:
    """``results`` are ReplayResults, ``summaries`` their Summaries, in the same order."""
    runs = [run_from_result(r) for r in results]
    rows = [{"label": run.label, **s.as_dict()} for run, s in zip(runs, summaries, strict=True)]
    return write_report(runs, rows, outdir, title, progress=progress, jobs=jobs)
