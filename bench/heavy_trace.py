"""A seeded heavy SWF trace: the hard case for the planner (issue 15).

``--jobs`` jobs (100,000) on ``--nodes`` nodes (1,024) at an offered load of
``--load`` (0.85, node-seconds asked per node-second); sizes from one node
to the whole machine (log-uniform, so every scale of job is common, with
powers of two favoured as on real machines); run times log-normal (median
10 minutes, sigma 1.5, from 10 s to 3 days); walltimes 1 to 3 times the run
time (uniform).  Poisson arrivals.  The same arguments give the same file.

    python bench/heavy_trace.py OUT.swf [--jobs 100000] [--nodes 1024] [--seed 1] [--load 0.85]
    fluxsched-py replay OUT.swf --nodes 1024 --queue-policy easy --no-progress
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path


def heavy_jobs(njobs: int, nodes: int, seed: int, load: float) -> list[tuple[float, int, int, int]]:
    """``(submit, nodes, run, walltime)`` per job, in submit order."""
    rng = random.Random(seed)
    top = math.log2(nodes)
    specs = []
    for _ in range(njobs):
        size = 2 ** rng.uniform(0.0, top)
        size = 2 ** round(math.log2(size)) if rng.random() < 0.6 else round(size)
        size = max(1, min(nodes, int(size)))
        run = int(min(max(rng.lognormvariate(math.log(600.0), 1.5), 10.0), 3 * 86400.0))
        wall = math.ceil(run * rng.uniform(1.0, 3.0))
        specs.append((size, run, wall))
    rate = load * nodes / (sum(n * run for n, run, _ in specs) / njobs)
    t = 0.0
    out = []
    for size, run, wall in specs:
        t += rng.expovariate(rate)
        out.append((t, size, run, wall))
    return out


def write_heavy_swf(path: Path, njobs: int = 100_000, nodes: int = 1024, seed: int = 1, load: float = 0.85) -> None:
    with path.open("w") as f:
        f.write(f"; heavy synthetic SWF (bench/heavy_trace.py), seed={seed} load={load}\n")
        f.write(f"; MaxNodes: {nodes}\n; MaxProcs: {nodes}\n")
        for i, (t, size, run, wall) in enumerate(heavy_jobs(njobs, nodes, seed, load), 1):
            f.write(f"{i} {t:.0f} -1 {run} {size} -1 -1 {size} {wall} -1 1 1 1 -1 1 -1 -1 -1\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", type=float, default=0.85)
    args = ap.parse_args()
    write_heavy_swf(args.out, args.jobs, args.nodes, args.seed, args.load)


if __name__ == "__main__":
    main()
