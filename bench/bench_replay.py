"""Replay speed: the 250-job Batsim workload and a synthetic 100,000-job SWF trace.

Targets (DESIGN.md / issue 4): the 250-job replay in under 2 s, the
100,000-job SWF replay in under 60 s.  The SWF trace is generated here (seeded)
in a temporary folder, never committed.  Prints a table; ``--jobs N`` and
``--policies`` change the SWF run, ``--repeat`` the number of timed runs
(the median is shown).

    python bench/bench_replay.py [--jobs 100000] [--policies fcfs,easy,conservative,hybrid]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fluxsched_py.replay import load_workload, replay, summarize  # noqa: E402
from fluxsched_py.replay.platform import nodes_graph  # noqa: E402
from fluxsched_py.replay.synthetic import write_synthetic_swf  # noqa: E402
from t.shared import CONFORMANCE  # noqa: E402 - the one place that finds ../shared

SEED1 = CONFORMANCE / "batsim" / "workloads" / "example_workload_hpc_seed1_jobs250.json"


def timed(workload, nodes, policy, repeat):
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = replay(workload, nodes_graph(nodes), {"queue-policy": policy, "annotate-depth": 0})
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--policies", default="fcfs,easy,conservative,hybrid")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table = Table(title="replay speed (median of runs)")
    for col in ("workload", "policy", "jobs", "nodes", "time", "target", "jobs/s", "makespan"):
        table.add_column(col, justify="right")
    if SEED1.exists():
        w = load_workload(SEED1)
        for pol in ("fcfs", "easy", "conservative"):
            t, r = timed(w, 128, pol, args.repeat)
            s = summarize(r)
            ok = "ok" if t < 2 else "MISSED"
            table.add_row(
                "batsim seed1", pol, "250", "128", f"{t:.2f} s", f"< 2 s {ok}", f"{250 / t:,.0f}", f"{s.makespan:,.2f}"
            )
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "synthetic.swf"
        write_synthetic_swf(path, args.jobs, args.nodes)
        w = load_workload(path)
        for pol in args.policies.split(","):
            t, r = timed(w, args.nodes, pol, 1)
            s = summarize(r)
            ok = "ok" if t < 60 else "MISSED"
            table.add_row(
                "synthetic swf",
                pol,
                f"{len(w.jobs):,}",
                str(args.nodes),
                f"{t:.1f} s",
                f"< 60 s {ok}",
                f"{len(w.jobs) / t:,.0f}",
                f"{s.makespan:,.0f}",
            )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
