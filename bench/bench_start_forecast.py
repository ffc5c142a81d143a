#!/usr/bin/env python3
"""Cost of one ``flux sched-py forecast`` / ``when`` call (engine/forecast.py), no Flux.

The scenario: ``--nodes`` x ``--cores`` (default 128 x 32), filled with
1-core jobs of mixed walltimes (so nearly every one ends at its own time),
and a backlog of pending jobs of mixed shapes (1..64 cores in slots, 1..4
exclusive nodes) and walltimes, under easy; one pass has run.  Then, for
each backlog size, :func:`forecast` (every pending job, at most
``FORECAST_LIMIT`` planned) and :func:`when` (a 2-node job) are called
``--repeat`` times as the module calls them (``budget=FORECAST_BUDGET``),
and with ``--unbounded`` also without the time budget: median wall and
CPU (user+sys) time per call, and how many jobs were planned.  For
scale, the median time of one full scheduling pass after a free is shown
too (the forecast is not on that path: it runs in the RPC's own callback).

    python bench/bench_start_forecast.py [--backlogs 100,1000,5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time

from fluxsched_py.engine import Engine
from fluxsched_py.engine.forecast import FORECAST_BUDGET, FORECAST_LIMIT, forecast, when
from fluxsched_py.replay.platform import nodes_graph


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def spec(rng: random.Random, duration: float, nodes: int = 0, cores: int = 1, slots: int = 1) -> dict:
    slot = {"type": "slot", "count": slots, "label": "task", "with": [{"type": "core", "count": cores}]}
    if nodes:
        res = [{"type": "node", "count": nodes, "exclusive": True, "with": [{**slot, "count": 1}]}]
    else:
        res = [slot]
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


def build(nodes: int, cores: int, backlog: int, seed: int) -> Engine:
    rng = random.Random(seed)
    e = Engine(nodes_graph(nodes, cores), ["queue-policy=easy"], summaries=False)
    jid = 1
    for _ in range(nodes * cores):
        e.alloc(jid, 16, 1, 0.0, spec(rng, rng.uniform(300, 86400)))
        jid += 1
    e.schedule(0.0)
    for _ in range(backlog):
        d = rng.choice([600, 3600, 4 * 3600, 12 * 3600]) * rng.uniform(0.5, 1.0)
        if rng.random() < 0.3:
            js = spec(rng, d, nodes=rng.randint(1, 4))
        else:
            js = spec(rng, d, cores=rng.choice([1, 2, 4, 8]), slots=rng.randint(1, 8))
        e.alloc(jid, 16, 2, 1.0, js)
        jid += 1
    e.schedule(1.0)
    return e


def timed(fn, repeat: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), cpu()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(cpu() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--backlogs", default="100,1000,5000")
    ap.add_argument("--unbounded", action="store_true", help="also time the calls without the time budget")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    two_nodes = spec(random.Random(0), 3600.0, nodes=2)
    print(f"{args.nodes} nodes x {args.cores} cores, full; easy; limit {FORECAST_LIMIT}; median of {args.repeat}")
    head = ("pending", "budget", "planned", "forecast wall", "cpu", "when wall", "cpu", "pass wall")
    print(" ".join(f"{h:>13}" for h in head))
    budgets = [FORECAST_BUDGET, None] if args.unbounded else [FORECAST_BUDGET]
    now = 2.0
    for n in (int(x) for x in args.backlogs.split(",")):
        e = build(args.nodes, args.cores, n, args.seed)
        # one pass after a free, for scale (a running job ends early)
        passes = []
        for _ in range(args.repeat):
            e.free(e.running[0].id)
            w0 = time.perf_counter()
            e.schedule(now)
            passes.append(time.perf_counter() - w0)
        for b in budgets:
            planned = sum(1 for f in forecast(e, now, budget=b) if f.kind != "not planned")
            fw, fc = timed(lambda e=e, b=b: forecast(e, now, budget=b), args.repeat)
            ww, wc = timed(lambda e=e, b=b: when(e, two_nodes, now, budget=b), args.repeat)
            cells = [str(n), "none" if b is None else f"{b} s", str(planned)]
            cells += [f"{1e3 * x:.1f} ms" for x in (fw, fc, ww, wc, statistics.median(passes))]
            print(" ".join(f"{c:>13}" for c in cells))


if __name__ == "__main__":
    main()
