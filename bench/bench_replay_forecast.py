#!/usr/bin/env python3
"""What ``replay --forecast`` costs on an archive trace (no Flux).

``fluxsched-py replay TRACE --procs-per-node 1 --queue-policy P [--jobs N]
--no-progress --json`` is run ``--repeat`` times each way, alternated:
``base`` (``--base DIR``, a checkout of the main we started from, by
``PYTHONPATH``; it has no ``--forecast``), ``this`` without ``--forecast``
and ``this`` with it.  The table gives the median wall and CPU (user+sys)
seconds of the whole command, their ratio to ``this`` without, and the
forecast's figures (jobs given a forecast, MAE) next to the t_estimate's.

A forecast is made only when asked (``--forecast``), at passes where a job
was submitted, and plans at most ``FORECAST_LIMIT`` (1000) pending jobs;
its cost per pass grows with the queue, so it is measured where queues are
long (KTH-SP2 under easy).

    python bench/bench_replay_forecast.py [--trace KTH] [--policy easy] [--jobs 5000]
        [--repeat 3] [--base /tmp/base-s10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench_archive import run

HERE = Path(__file__).resolve().parent
SWF_DIR = HERE.parents[1] / "shared" / "conformance" / "swf"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--swf-dir", type=Path, default=SWF_DIR)
    ap.add_argument("--trace", default="KTH", help="a trace name prefix in --swf-dir")
    ap.add_argument("--policy", default="easy")
    ap.add_argument("--jobs", type=int, help="replay the first N jobs only (default: the whole trace)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", type=Path, help="a checkout of the base commit (run without --forecast)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args()
    traces = sorted(args.swf_dir.glob(f"{args.trace}*.swf*"))
    if not traces:
        raise SystemExit(f"no trace {args.trace}* in {args.swf_dir}")
    trace = traces[0]
    cmd = [sys.executable, "-m", "fluxsched_py", "replay", str(trace), "--procs-per-node", "1"]
    cmd += ["--queue-policy", args.policy, "--no-progress", "--json"]
    if args.jobs:
        cmd += ["--jobs", str(args.jobs)]
    ways = [("this", HERE.parent, []), ("this --forecast", HERE.parent, ["--forecast"])]
    if args.base:
        ways.insert(0, ("base", args.base, []))
    got: dict[str, list[tuple[float, float]]] = {w: [] for w, _, _ in ways}
    rows: dict[str, dict] = {}
    for i in range(args.repeat):
        for name, tree, extra in ways:
            wall, cpu, _, out = run([*cmd, *extra], tree, args.timeout)
            got[name].append((wall, cpu))
            rows[name] = json.loads(out)[0]
            print(f"# run {i + 1} {name}: wall {wall:.2f} s, CPU {cpu:.2f} s", file=sys.stderr, flush=True)
    ref = statistics.median(c for _, c in got["this"])
    jobs = rows["this"]["jobs"]
    print(f"{trace.name}, {jobs} jobs, {args.policy}, median of {args.repeat}")
    head = ("run", "wall s", "CPU s", "CPU ratio", "forecasted", "forecast MAE s", "t_est MAE s")
    print(f"{head[0]:<16} " + " ".join(f"{h:>{w}}" for h, w in zip(head[1:], (8, 8, 9, 10, 14, 11), strict=True)))
    for name, _, _ in ways:
        wall = statistics.median(w for w, _ in got[name])
        cpu = statistics.median(c for _, c in got[name])
        r = rows[name]
        fc = r.get("forecasted")
        mae = r.get("forecast_mae")
        est = r.get("estimate_mae")
        print(
            f"{name:<16} {wall:8.2f} {cpu:8.2f} {cpu / ref:9.2f} {'-' if fc is None else fc:>10} "
            f"{'-' if mae is None else f'{mae:.1f}':>14} {'-' if est is None else f'{est:.1f}':>11}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
