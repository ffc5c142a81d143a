#!/usr/bin/env python3
"""Switches per job: ``policy=network`` against ``low`` and ``locality`` on a fat tree.

The machine is a recipe with ``nodes_per_switch`` (a two-level fat tree in
the graph's ``network`` subsystem: leaf switches of 32 nodes).  A seeded
stream of exclusive multi-node jobs (1-80 nodes, random lengths) runs
first come, first served through the matcher itself (``match``,
``allocate``, ``release``; no planner, so every policy sees the same
arrivals); each started job's leaf switch count is recorded.  The table
shows, per policy, the mean switches per job, the mean excess over the
fewest possible (``ceil(nodes / 32)``), and the share of jobs that spanned
more switches than they needed.

    python bench/bench_network.py [--nodes 512] [--per-switch 32] [--jobs 2000] [--seed 1]

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fluxsched_py.jobspec.request import Count, Request, ResourceRequest  # noqa: E402
from fluxsched_py.match import match  # noqa: E402
from fluxsched_py.match.network import switch_count  # noqa: E402
from fluxsched_py.resource import ResourceGraph  # noqa: E402


def nodes_request(n: int) -> Request:
    core = ResourceRequest("core", Count.fixed(1))
    return Request((ResourceRequest("node", Count.fixed(n), (core,), exclusive=True),))


def run(policy: str, nodes: int, per_switch: int, jobs: list[tuple[int, float]]) -> dict:
    g = ResourceGraph.from_recipe(
        {"cluster": {"nodes": nodes, "sockets": 1, "cores_per_socket": 4, "nodes_per_switch": per_switch}}
    )
    now, ends, queue, counts, excess = 0.0, [], list(enumerate(jobs)), [], []
    t0 = time.perf_counter()
    while queue:
        jid, (n, length) = queue[0]
        rs = match(g, nodes_request(n), policy=policy)
        if rs is None:  # FCFS: wait for the next end
            now, done = heapq.heappop(ends)
            g.release(done)
            continue
        queue.pop(0)
        g.allocate(jid, rs)
        heapq.heappush(ends, (now + length, jid))
        k = switch_count(g, rs)
        counts.append(k)
        excess.append(k - -(-n // per_switch))
    return {
        "mean": statistics.fmean(counts),
        "excess": statistics.fmean(excess),
        "spread": sum(1 for e in excess if e > 0) / len(excess),
        "seconds": time.perf_counter() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--per-switch", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    jobs = [(rnd.choice((1, 2, 4, 8, 16, 24, 40, 64, 80)), rnd.expovariate(1 / 600.0)) for _ in range(args.jobs)]
    print(f"{args.jobs} jobs, {args.nodes} nodes, {args.per_switch} nodes per leaf switch (seed {args.seed})")
    print(f"{'policy':<10} {'switches/job':>13} {'excess/job':>11} {'jobs spread':>12} {'time':>8}")
    for policy in ("low", "locality", "network"):
        r = run(policy, args.nodes, args.per_switch, jobs)
        print(
            f"{policy:<10} {r['mean']:>13.2f} {r['excess']:>11.2f} {100 * r['spread']:>11.1f}% {r['seconds']:>7.1f}s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
