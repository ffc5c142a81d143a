"""Engine alone: a one-core job's scheduling cost against machine size.

Issue 15: a job's cost must not grow with the machine.  For each node count
this builds ``nodes x cores`` (no Flux), then, as a broker module sees a
stream of jobs, for each of ``--jobs`` one-core jobs: ``alloc`` it and run
a pass (which starts it); then ``free`` each and run a pass.  The figure is
CPU time per job (alloc + pass + free + pass), the median of ``--runs``
runs, under each queue policy, after one untimed warm-up job (the planner
builds its tables for a graph on its first match).  The ratio is to the
smallest machine.  The machine never fills, so every pass
starts the one job it was given.

    python bench/bench_scale_engine.py [--quick] [--nodes 10,1000,16384,200000]
        [--cores 32] [--jobs 256] [--runs 3] [--queue-policy fcfs,easy]

``--quick`` leaves out the sizes above 16,384 nodes and times one run per
size.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fluxsched_py.engine import Engine
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1


def nodes_graph(n: int, cores: int) -> ResourceGraph:
    """``n`` nodes of ``cores`` cores (the replay's ``nodes_graph`` without
    its 50,000-node input limit)."""
    return ResourceGraph.from_rv1(hosts_rv1([f"node{i}" for i in range(n)], cores))


def jobspec(duration: float) -> dict:
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sleep", "inf"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


def one_run(graph: object, policy: str, njobs: int) -> float:
    """CPU seconds per job for one stream of ``njobs`` jobs on a fresh engine."""
    e = Engine(graph, [f"queue-policy={policy}"], build_R=True)
    spec = jobspec(3600.0)
    now = 0.0
    # One job first, untimed: the planner builds its per-graph tables
    # (flat-set layout, node fields) on the first match, once per engine.
    e.alloc(10**9, 16, 1000, now, spec)
    e.schedule(now)
    e.free(10**9)
    e.schedule(now)
    t0 = time.process_time()
    for i in range(1, njobs + 1):
        now += 1.0
        e.alloc(i, 16, 1000, now, spec)
        e.schedule(now)
    for i in range(1, njobs + 1):
        now += 1.0
        e.free(i)
        e.schedule(now)
    dt = time.process_time() - t0
    if e.running:
        raise SystemExit(f"bench: {len(e.running)} jobs still running after the frees")
    return dt / njobs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10,1000,16384,200000")
    ap.add_argument("--quick", action="store_true", help="up to 16,384 nodes, one timed run per size")
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queue-policy", default="fcfs,easy")
    args = ap.parse_args()
    sizes = [int(x) for x in args.nodes.split(",")]
    if args.quick:
        sizes = [n for n in sizes if n <= 16384]
        args.runs = 1
    policies = args.queue_policy.split(",")
    print(f"one-core jobs, {args.jobs} per run, {args.cores} cores per node, median of {args.runs} runs")
    print(f"{'nodes':>8} " + " ".join(f"{p + ' us/job':>14}" for p in policies) + "   build s")
    base: dict[str, float] = {}
    for n in sizes:
        t0 = time.perf_counter()
        g = nodes_graph(n, args.cores)
        build = time.perf_counter() - t0
        cells = []
        for p in policies:
            per = statistics.median(one_run(g, p, min(args.jobs, n * args.cores)) for _ in range(args.runs))
            base.setdefault(p, per)
            cells.append(f"{per * 1e6:9.0f} ({per / base[p]:4.1f}x)")
        print(f"{n:>8,} " + " ".join(f"{c:>14}" for c in cells) + f"   {build:6.1f}")


if __name__ == "__main__":
    main()
