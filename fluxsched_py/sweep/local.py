"""Run the specs in a process pool on this machine, and stop it at once when interrupted."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from .grid import RunSpec
from .worker import run_one

__all__ = ["run_local", "Interrupted", "stop_workers", "remove_partial_files"]

#: Seconds a terminated worker gets to exit before it is killed.
STOP_GRACE = 2.0


class Interrupted(Exception):
    """Ctrl-C or SIGTERM during the runs: ``rows`` holds the rows of the runs that finished
    (None for the others)."""

    def __init__(self, rows: list[dict[str, Any] | None]) -> None:
        super().__init__("interrupted")
        self.rows = rows


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group: the workers leave it to the sweep, which stops them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The sweep stops a worker with SIGTERM: it dies at once, instead of raising the
    # handler it inherited from the sweep by fork (a traceback on stderr from an idle worker).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_workers() -> None:
    """Terminate this process's worker processes (a pool's), then kill any still alive."""
    children = multiprocessing.active_children()
    for p in children:
        p.terminate()
    for p in children:
        p.join(STOP_GRACE)
        if p.is_alive():
            p.kill()
            p.join()


def remove_partial_files(root: str | os.PathLike[str]) -> None:
    """Remove the ``.NAME.part`` files that interrupted writers left under ``root``."""
    for p in Path(root).rglob(".*.part"):
        p.unlink(missing_ok=True)


def run_local(
    specs: Sequence[RunSpec],
    outdir: str | os.PathLike[str],
    jobs: int,
    done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows in the order of ``specs``; ``done(row)`` is called as each run ends.

    ``jobs == 1`` runs in this process (no pool), which is also what a single
    run costs on its own.  On KeyboardInterrupt (Ctrl-C, or SIGTERM as the
    command line turns it) the workers are terminated and :class:`Interrupted`
    carries the rows of the runs that had finished.
    """
    rows: list[dict[str, Any] | None] = [None] * len(specs)
    if jobs <= 1:
        try:
            for i, spec in enumerate(specs):
                rows[i] = run_one(spec, outdir)
                if done:
                    done(rows[i])
        except KeyboardInterrupt:
            raise Interrupted(rows) from None
        return [r for r in rows if r is not None]
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init)
    try:
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
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_workers()
        raise Interrupted(rows) from None
    pool.shutdown()
    return [r for r in rows if r is not None]
