"""A seeded heavy SWF trace: the hard case for the planner (issue 15).

``--jobs`` jobs (100,000) on ``--nodes`` nodes (1,024) at an offered load of
``--load`` (0.85, node-seconds asked per node-second); sizes from one node
to the whole machine (log-uniform, so every scale of job is common, with
powers of two favoured as on real machines); run times log-normal (median
10 minutes, sigma 1.5, from 10 s to 3 days); walltimes 1 to 3 times the run
time (uniform).  Poisson arrivals.  The same arguments give the same file.

    python bench/heavy_trace.py OUT.swf [--jobs 100000] [--nodes 1024] [--seed 1] [--load 0.85]
    fluxsched-py replay OUT.swf --nodes 1024 --queue-policy easy --no-progress

Figures (issue 15): the default trace (100,000 jobs, seed 1), each policy
by ``fluxsched-py replay heavy.swf --nodes 1024 --queue-policy P --json``,
CPU seconds (user + system, ``/usr/bin/time -v``), one run each, the three
run side by side on a 2-core machine loaded by other work (load average
8-11), at commit b480a04:

=============  =========  ==============  ============  =============
policy         CPU        replay (wall)   makespan      mean wait
=============  =========  ==============  ============  =============
fcfs           169.1 s    1,213 s         67,431,116 s  16,790,264 s
easy           196.8 s    1,381 s         32,680,066 s  16,830 s
conservative   589.5 s    4,149 s         32,692,408 s  13,783 s
=============  =========  ==============  ============  =============

conservative / easy 3.0 (the issue allows 6), easy / fcfs 1.16 (it allows
2).  After issue 15's later work (the graph's chunked free set, lazy
aggregates, linear proof carrying), by ``python bench/bench_replay_1024.py
--traces heavy --policies P`` (the same trace and command; each policy in its
own process, two or three side by side, load average 3-5): fcfs 91.8 s,
easy 105.5 s, conservative 358.6 s of CPU, makespans unchanged;
conservative / easy 3.4, easy / fcfs 1.15.  fcfs cannot keep up with a load of 0.85 (utilization 41 %, so its
queue grows to tens of thousands of jobs), yet its cost per job stays
flat: 1-2 ms of CPU per job from the first thousand jobs to the last.  easy
and conservative keep up (utilization 84 %).  conservative's cost is in its
bursts: when a long whole-machine-sized job holds the queue, hundreds of
jobs wait with reservations (around job 50,000: a replay of jobs 49,001 to
51,000 alone reaches 698), and every early end re-plans each of them, each
over a timeline as long as the queue (70-150 ms of CPU per job there,
against 2 ms with a short queue).  Most of
that is ``ProofLog.prove_none_before`` and ``Planner._earliest_whole``
(py-spy).  Carrying a proof forward in linear time (commit 4f02823) cut
that window, replayed alone under conservative, from 106.4 s to 88.5 s of
CPU (0.83; the two side by side, one run each, load average 8-9; the same
decisions, proofs and matches).  ``bench/bench_replay_1024.py --traces
heavy`` runs the same commands and prints the ratios.
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
