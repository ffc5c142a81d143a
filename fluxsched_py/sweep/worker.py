"""Run one sweep cell: replay, write its ``jobs.csv``, return one row.

A run that fails returns a row with ``status = "failed"`` and the error, so
the sweep goes on.  A run that rejected jobs (too big for the machine) is
failed too, with its metrics, its ``jobs.csv`` and the count and first ids
of the rejected jobs as its error.  Every row records how it was made
(:mod:`fluxsched_py.replay.provenance`).  ``python -m fluxsched_py.sweep.worker SPEC_JSON OUTDIR``
does the same and prints the row as one JSON line: that is what a Flux job
of ``sweep --flux`` runs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .grid import RunSpec

__all__ = ["run_one", "run_dir", "check_spec", "main"]


def run_dir(outdir: str | os.PathLike[str], spec: RunSpec) -> Path:
    from ..report.write import slug

    return Path(outdir) / "runs" / slug(spec.label.replace("/", "__"))


def _machine_size(spec: RunSpec) -> tuple[int | None, int]:
    """``nodes`` (None: the workload's nb_res) and ``cores-per-node`` of a run, as integers in range."""
    from ..limits import MAX_NODES, MAX_PER_NODE

    out = []
    for name, default, limit in (("nodes", None, MAX_NODES), ("cores-per-node", "1", MAX_PER_NODE)):
        text = spec.options.get(name, default)
        if text is None:
            out.append(None)
            continue
        try:
            v = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r}: not an integer") from None
        if not 1 <= v <= limit:
            raise ValueError(f"{name}={text!r}: expected 1..{limit}")
        out.append(v)
    return out[0], out[1]


#: Options that size the machine: the row's ``nodes`` and ``cores`` columns, not engine options.
_MACHINE = ("nodes", "cores-per-node")


def _engine_options(spec: RunSpec) -> Any:
    from ..engine import EngineOptions

    opts = {k: v for k, v in spec.options.items() if k not in _MACHINE}
    # annotate-depth 0, as `replay` runs: a replay needs t_estimate, never reason_pending texts
    return EngineOptions.parse(
        {"queue-policy": spec.queue_policy, "policy": spec.policy, "annotate-depth": "0", **opts}
    )


def check_spec(spec: RunSpec) -> None:
    """Raise ``ValueError`` naming the option if a run's options could never run (before any run starts)."""
    _machine_size(spec)
    try:
        _engine_options(spec)
    except Exception as exc:  # EngineError: a bad option value
        raise ValueError(str(exc)) from None


def _replay(spec: RunSpec, outdir: Path) -> dict[str, Any]:
    from ..replay.metrics import summarize
    from ..replay.platform import PlatformError, load_platform, nodes_graph
    from ..replay.provenance import describe
    from ..replay.report import rejected_line, write_jobs_csv
    from ..replay.sim import replay
    from ..replay.workload import load_workload

    workload = load_workload(spec.workload)
    nodes, cores = _machine_size(spec)
    if spec.platform:
        graph = load_platform(spec.platform)
    else:
        n = nodes or workload.nb_res
        if not n:
            raise PlatformError("the workload does not say how many nodes it needs: give --nodes N or --platform")
        graph = nodes_graph(n, cores)
    options = _engine_options(spec)
    cores = graph.all().count("core")
    result = replay(workload, graph, options)
    s = summarize(result)
    csv_path = write_jobs_csv(result, outdir / "jobs.csv")
    from ..engine.options import OPTIONS

    engine = {o.name for o in OPTIONS}  # those are listed from the engine's options, parsed
    extra: dict[str, Any] = {k: v for k, v in spec.options.items() if k not in engine and k not in _MACHINE}
    if spec.platform:
        extra["platform"] = spec.platform
    row = describe(spec.workload, workload, options, result.nb_nodes, cores, extra)
    row.update(s.as_dict())
    row.pop("policy", None)
    row["nb_nodes"] = result.nb_nodes
    row["jobs_csv"] = str(csv_path)
    rejected = rejected_line(result)
    row["status"], row["error"] = ("failed", rejected) if rejected else ("ok", "")
    return row


def run_one(spec: RunSpec, outdir: str | os.PathLike[str]) -> dict[str, Any]:
    """The row of one run: its parameters, then its metrics or its error."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"label": spec.label, **spec.params()}
    try:
        d = run_dir(Path(outdir).resolve(), spec)  # an absolute jobs_csv in the row, wherever it is read
        d.mkdir(parents=True, exist_ok=True)
        row.update(_replay(spec, d))
    except Exception as exc:  # a failed run is a row, not the end of the sweep
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        row["status"], row["error"] = "failed", f"{type(exc).__name__}: {msg}"
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return row


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m fluxsched_py.sweep.worker SPEC_JSON OUTDIR", file=sys.stderr)
        return 2
    row = run_one(RunSpec.from_json(args[0]), args[1])
    print(json.dumps(row))
    return 0 if row["status"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
