"""Engine throughput, memory and pass latency with a million pending jobs.

DESIGN.md, "Measures": 1,000,000 pending 1-core jobs on a 1,024-node machine
are accepted at >= 5,000 sched.alloc requests/s, held in < 4 GiB RSS, and a
scheduling pass does at most 100 ms of work before yielding (``schedule(now,
budget=0.1)`` returns ``more=True`` and is called again, as the broker's
reactor would between other messages).

Phases, each timed:
1. build the graph (1,024 nodes x 32 cores by default);
2. ``alloc`` N identical 1-core jobspecs (distinct ids, a realistic
   jobspec dict each time; parsing is cached per canonical jobspec);
3. schedule until the machine is full and the pass is complete, in budgeted
   slices: every slice's duration is recorded;
4. steady state: free a batch of running jobs, schedule again (budgeted).

Like a broker-module driver, the bench calls ``gc.freeze()`` after the
alloc burst (a million long-lived jobs would otherwise be rescanned by every
generation-2 collection, 70-140 ms each) and gives each slice an 80 ms budget,
leaving room for the one step that crosses it and a collection of the objects
made since.  The worst garbage-collector pause is reported on its own line.

There is no peer to compare with in this process (Fluxion and sched-simple
need a Flux instance); the Flux throughput benchmark does that.

    python bench/bench_engine.py [--jobs 1000000] [--nodes 1024] [--cores 32] [--queue-policy easy]
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from rich.console import Console
from rich.table import Table

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.replay.platform import nodes_graph


def jobspec(duration: float) -> dict:
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sleep", "inf"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration, "cwd": "/home/user"}},
    }


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def drain_passes(e: Engine, now: float, budget: float) -> tuple[list[float], int]:
    """Slices of work (CPU seconds: the machine may be shared; the engine's
    stopwatch is wall time, so under load a slice can only be shorter in CPU)."""
    slices, started = [], 0
    while True:
        t0 = time.process_time()
        r = e.schedule(now, budget=budget)
        slices.append(time.process_time() - t0)
        started += sum(1 for x in r.responses if x.type is ResponseType.SUCCESS)
        if not r.more:
            return slices, started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--queue-policy", default="easy")
    ap.add_argument("--budget", type=float, default=0.08, help="work per slice, seconds (target: slices <= 0.1 s)")
    ap.add_argument("--target", type=float, default=0.1)
    args = ap.parse_args()
    rows = []

    t0 = time.perf_counter()
    g = nodes_graph(args.nodes, args.cores)
    e = Engine(g, [f"queue-policy={args.queue_policy}"], build_R=True)
    rows.append(("graph + engine", f"{args.nodes} nodes x {args.cores} cores", f"{time.perf_counter() - t0:.2f} s", ""))

    spec = jobspec(3600.0)
    t0 = time.perf_counter()
    for i in range(1, args.jobs + 1):
        e.alloc(i, 16, 1000, float(i) * 1e-6, spec)
    dt = time.perf_counter() - t0
    rate = args.jobs / dt
    rows.append(
        ("alloc accepted", f"{args.jobs:,} jobs in {dt:.1f} s", f"{rate:,.0f} /s", _ok(rate >= 5000, ">= 5,000 /s"))
    )
    rows.append(("RSS after alloc", "", f"{rss_gib():.2f} GiB", _ok(rss_gib() < 4, "< 4 GiB")))
    gc.freeze()
    pauses: list[float] = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            watch.t0 = time.perf_counter()  # type: ignore[attr-defined]
        else:
            pauses.append(time.perf_counter() - watch.t0)  # type: ignore[attr-defined]

    gc.callbacks.append(watch)

    t0 = time.perf_counter()
    slices, started = drain_passes(e, 0.0, args.budget)
    dt = time.perf_counter() - t0
    rows.append(
        (
            "fill the machine",
            f"{started:,} started in {dt:.1f} s, {len(slices)} slices",
            f"{started / dt:,.0f} starts/s",
            "",
        )
    )
    rows.append(
        (
            "pass slice CPU (fill)",
            f"median {1000 * statistics.median(slices):.1f} ms",
            f"max {1000 * max(slices):.1f} ms",
            _ok(max(slices) <= args.target, f"<= {args.target * 1000:.0f} ms"),
        )
    )

    running = [j.id for j in e.running[:1000]]
    for jobid in running:
        e.free(jobid)
    t0 = time.perf_counter()
    slices2, started2 = drain_passes(e, 10.0, args.budget)
    dt = time.perf_counter() - t0
    rows.append(
        (
            "steady state",
            f"free {len(running)}, {started2:,} started in {dt:.2f} s",
            f"max slice {1000 * max(slices2):.1f} ms",
            _ok(max(slices2) <= args.target, f"<= {args.target * 1000:.0f} ms"),
        )
    )
    rows.append(("GC pauses", f"{len(pauses)} collections", f"max {1000 * max(pauses, default=0):.1f} ms", ""))
    rows.append(
        ("pending after", f"{e.pending_count:,}", f"{rss_gib():.2f} GiB max RSS", _ok(rss_gib() < 4, "< 4 GiB"))
    )

    title = f"engine: {args.jobs:,} pending 1-core jobs, queue-policy={args.queue_policy}"
    title += f", budget {args.budget * 1000:.0f} ms"
    table = Table(title=title)
    for col in ("phase", "detail", "measure", "target"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


def _ok(cond: bool, target: str) -> str:
    return f"{target} {'ok' if cond else 'MISSED'}"


if __name__ == "__main__":
    main()
