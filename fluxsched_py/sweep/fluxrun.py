"""``sweep --flux``: every run is a job of the enclosing Flux instance.

Each spec becomes ``python -m fluxsched_py.sweep.worker SPEC OUTDIR``
submitted with flux-python (``flux.job.JobspecV1``, ``flux.job.submit``,
``flux.job.wait``), one core per job, so Flux spreads the runs over every
node of the allocation and runs as many at once as it has cores.  The job's
standard output, a file in the run's folder, carries the row back as one
JSON line; the output folder must therefore be on a file system that the
nodes share (as a home or project directory is).  A job that fails or
prints no row becomes a failed row with Flux's error and the tail of its
stderr.

``flux`` is imported only here, when ``--flux`` is given.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .grid import RunSpec
from .worker import run_dir

__all__ = ["run_flux", "FluxUnavailable"]


class FluxUnavailable(RuntimeError):
    """flux-python cannot be imported or no instance answers; one line for the user."""


def _connect() -> tuple[Any, Any]:
    try:
        import flux
        import flux.job
    except ImportError as exc:
        raise FluxUnavailable(f"--flux needs flux-python (run under 'flux start' or 'flux alloc'): {exc}") from None
    try:
        return flux.Flux(), flux.job
    except OSError as exc:
        raise FluxUnavailable(f"--flux: no Flux instance to connect to ({exc}); is FLUX_URI set?") from None


def _row_from_output(spec: RunSpec, out: Path, err: Path, success: bool, errstr: str) -> dict[str, Any]:
    row: dict[str, Any] | None = None
    try:
        for line in reversed(out.read_text().splitlines()):
            if line.startswith("{"):
                row = json.loads(line)
                break
    except (OSError, json.JSONDecodeError):
        row = None
    if row is not None:
        return row
    tail = ""
    try:
        tail = " ".join(err.read_text().strip().splitlines()[-1:])
    except OSError:
        pass
    why = errstr or ("job succeeded but printed no row" if success else "job failed")
    return {
        "label": spec.label,
        **spec.params(),
        "status": "failed",
        "error": f"flux job: {why}" + (f": {tail}" if tail else ""),
    }


def run_flux(
    specs: Sequence[RunSpec],
    outdir: str | os.PathLike[str],
    done: Callable[[dict[str, Any]], None] | None = None,
    python: str | None = None,
) -> list[dict[str, Any]]:
    """Submit every spec, then wait for each in turn; rows in the order of ``specs``."""
    h, fjob = _connect()
    out_root = Path(outdir).resolve()
    env = dict(os.environ)
    pending: list[tuple[Any, Path, Path]] = []
    for spec in specs:
        d = run_dir(out_root, spec)
        d.mkdir(parents=True, exist_ok=True)
        cmd = [python or sys.executable, "-m", "fluxsched_py.sweep.worker", spec.to_json(), str(out_root)]
        js = fjob.JobspecV1.from_command(cmd, num_tasks=1, cores_per_task=1)
        js.cwd = os.getcwd()
        js.environment = env
        out, err = d / "stdout.json", d / "stderr.txt"
        js.stdout, js.stderr = str(out), str(err)
        js.setattr("system.job.name", f"sweep:{spec.label}")
        jobid = fjob.submit(h, js, waitable=True)
        pending.append((jobid, out, err))
    rows = []
    # Wait for our own jobs by id (not "any waitable job", which may be someone else's).
    for spec, (jobid, out, err) in zip(specs, pending, strict=True):
        res = fjob.wait(h, jobid)
        row = _row_from_output(spec, out, err, bool(res.success), res.errstr or "")
        rows.append(row)
        if done:
            done(row)
    return rows
