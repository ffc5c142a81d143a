"""Run the specs in a process pool on this machine."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from .grid import RunSpec
from .worker import run_one

__all__ = ["run_local"]


def run_local(
    specs: Sequence[RunSpec],
    outdir: str | os.PathLike[str],
    jobs: int,
    done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows in the order of ``specs``; ``done(row)`` is called as each run ends.

    ``jobs == 1`` runs in this process (no pool), which is also what a single
    run costs on its own.
    """
    rows: list[dict[str, Any] | None] = [None] * len(specs)
    if jobs <= 1:
        for i, spec in enumerate(specs):
            rows[i] = run_one(spec, outdir)
            if done:
                done(rows[i])
        return [r for r in rows if r is not None]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_one, spec, str(outdir)): i for i, spec in enumerate(specs)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # the worker process died (e.g. killed for memory)
                spec = specs[i]
                row = {"label": spec.label, **spec.params(), "status": "failed", "error": f"worker died: {exc}"}
            rows[i] = row
            if done:
                done(row)
    return [r for r in rows if r is not None]
