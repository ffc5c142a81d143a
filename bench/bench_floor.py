"""Where a replay's time goes, and what any policy pays before it decides anything.

Runs, in a fresh process for each policy (``--one``), the command::

    fluxsched-py replay HEAVY.swf --nodes 1024 --queue-policy POLICY --no-progress --json --output-dir D

on the heavy trace (``bench/heavy_trace.py``: ``--jobs`` jobs, ``--seed``),
with a stopwatch around the replay's parts: reading the trace, each
``Engine.alloc`` (a submission), ``Engine.free`` (an end), ``Pass.start``
(a job started: decoding its placement, allocating it in the graph and the
planner, its SUCCESS reply), the rest of each ``Engine.schedule`` (the
policy's decisions, its forecasts and the annotations), the driver's own
loop (event queue and records) and writing ``jobs.csv``.

The *floor* is what every policy pays the same whatever it decides: the
trace, the submissions, the ends, the starts and the driver loop and the
report.  Issue 21 asks for fcfs in 15 s and easy in 20 s on this trace; a
floor above that says the bound cannot be met by a policy's decisions
alone.  Each stopwatch costs about a microsecond a call, so the parts add up
to somewhat more than a run without them (the ``total`` row is the run with
them)::

    python bench/bench_floor.py [--jobs 100000] [--seed 1] [--policies fcfs,easy]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heavy_trace import write_heavy_swf  # noqa: E402

from fluxsched_py.cli import main as cli_main  # noqa: E402
from fluxsched_py.engine import core, passctx  # noqa: E402
from fluxsched_py.replay import cli as replay_cli  # noqa: E402


class Stopwatch:
    """Seconds and calls per part; ``inner`` parts are taken out of the
    part they run inside (a start inside a pass)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[float] = []  # time taken by inner parts, per open part

    def wrap(self, fn: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                inner = self._stack.pop()
                self.seconds[part] = self.seconds.get(part, 0.0) + spent - inner
                self.calls[part] = self.calls.get(part, 0) + 1
                if self._stack:
                    self._stack[-1] += spent

        return timed


PARTS = [
    ("read the trace", "load"),
    ("submissions (Engine.alloc)", "alloc"),
    ("ends (Engine.free)", "free"),
    ("starts (Pass.start)", "start"),
    ("driver loop and records", "driver"),
    ("write jobs.csv", "report"),
]
FLOOR = {"load", "alloc", "free", "start", "driver", "report"}


def measure(swf: Path, policy: str, out: Path) -> tuple[Stopwatch, float]:
    sw = Stopwatch()
    patched = [
        (replay_cli, "load_workload", "load"),
        (replay_cli, "write_jobs_csv", "report"),
        (replay_cli, "replay", "replay"),
        (core.Engine, "alloc", "alloc"),
        (core.Engine, "free", "free"),
        (core.Engine, "schedule", "decide"),
        (passctx.Pass, "start", "start"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, part in patched:
        setattr(owner, name, sw.wrap(getattr(owner, name), part))
    argv = sys.argv
    sys.argv = ["fluxsched-py", "replay", str(swf), "--nodes", "1024", "--queue-policy", policy]
    sys.argv += ["--no-progress", "--json", "--output-dir", str(out)]
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with contextlib.suppress(SystemExit):
                cli_main()
    finally:
        total = time.perf_counter() - t0
        sys.argv = argv
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    # The replay's own time, less the engine calls inside it, is the driver's.
    sw.seconds["driver"] = sw.seconds.pop("replay", 0.0)
    sw.calls["driver"] = sw.calls.pop("replay", 0)
    return sw, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="fcfs,easy")
    ap.add_argument("--one", nargs=2, metavar=("SWF", "POLICY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as tmp:
            sw, total = measure(Path(args.one[0]), args.one[1], Path(tmp))
        print(json.dumps({"seconds": sw.seconds, "calls": sw.calls, "total": total}))
        return
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        swf = Path(tmp) / f"heavy-{args.jobs}-{args.seed}.swf"
        write_heavy_swf(swf, args.jobs, 1024, args.seed)
        for policy in args.policies.split(","):
            cmd = [sys.executable, __file__, "--one", str(swf), policy]
            results[policy] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    policies = list(results)
    print(f"heavy trace, {args.jobs:,} jobs, seed {args.seed}, 1,024 nodes: seconds (calls)")
    print("part | " + " | ".join(policies))
    for label, part in [*PARTS, ("policy decisions, forecasts, annotations", "decide")]:
        cells = [f"{r['seconds'].get(part, 0.0):.1f} ({r['calls'].get(part, 0):,})" for r in results.values()]
        print(f"{label} | " + " | ".join(cells))
    floors = [sum(v for k, v in r["seconds"].items() if k in FLOOR) for r in results.values()]
    print("floor: every part but the decisions | " + " | ".join(f"{f:.1f}" for f in floors))
    print("total (with the stopwatches) | " + " | ".join(f"{r['total']:.1f}" for r in results.values()))


if __name__ == "__main__":
    main()
