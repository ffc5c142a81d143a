#!/usr/bin/env python3
"""Per-pass cost of the queue policies' forecasts on a full machine (no Flux).

The scenario: ``--nodes`` x ``--cores`` (default 1000 x 8), filled with
``--running`` 1-core jobs (default 8000) whose walltimes are mixed (5 min to
24 h, scaled by a random 0.5-1.0, so nearly every one ends at its own time),
and a backlog of ``--backlog`` pending jobs of mixed shapes (1..64 cores in
slots of 1..8 cores, 1..4 exclusive nodes) and walltimes.  Then, ``--passes``
times: one running job ends (``sched.free``), and one pass runs, as the
module would run it; its CPU time is recorded.  Every pass after a free
re-plans: fcfs forecasts ``t_estimate`` for up to reserve-depth (8) jobs,
easy reserves for the head and checks the backlog for backfill,
conservative re-plans every reservation.

Each row gives the median pass time and a digest of everything the passes
decided (responses, annotations, resources, reservations), so that with
``--baseline DIR`` (another checkout of the package, e.g.
``git archive <commit> | tar -x -C DIR``; run in a subprocess) the table
shows the old and new cost side by side and whether the decisions are the
same.

    python bench/bench_forecast.py
    python bench/bench_forecast.py --baseline /tmp/base --policies fcfs,easy
    python bench/bench_forecast.py --policies fcfs --profile 25
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: (slots, cores per slot, exclusive nodes) of the backlog's jobs
SHAPES = [
    (1, 1, 0),
    (1, 4, 0),
    (4, 1, 0),
    (1, 8, 0),
    (16, 1, 0),
    (0, 0, 1),
    (0, 0, 2),
    (0, 0, 4),
    (2, 8, 0),
    (64, 1, 0),
]
RUNNING_WALLTIMES = [300, 900, 1800, 3600, 7200, 14400, 43200, 86400]
BACKLOG_WALLTIMES = [600, 3600, 7200, 14400]


def jobspec(slots: int, cores: int, duration: float, nodes: int = 0) -> dict:
    core = [{"type": "core", "count": 1 if nodes else cores}]
    slot = {"type": "slot", "count": 1 if nodes else slots, "label": "task", "with": core}
    res = [{"type": "node", "count": nodes, "exclusive": True, "with": [slot]}] if nodes else [slot]
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


def build(policy: str, nodes: int, cores: int, running: int, backlog: int, seed: int):
    """The engine with ``running`` jobs started at t=0 and the backlog queued."""
    from fluxsched_py.engine import Engine
    from fluxsched_py.replay.platform import nodes_graph

    rng = random.Random(seed)
    e = Engine(nodes_graph(nodes, cores), [f"queue-policy={policy}"], build_R=False)
    jobid = 1
    for i in range(running):
        d = round(rng.choice(RUNNING_WALLTIMES) * rng.uniform(0.5, 1.0))
        e.alloc(jobid, 16, 0, float(i), jobspec(1, 1, d))
        jobid += 1
    e.schedule(0.0)
    for i in range(backlog):
        s, c, n = rng.choice(SHAPES)
        e.alloc(jobid, 16, 0, float(running + i), jobspec(s, c, rng.choice(BACKLOG_WALLTIMES), n))
        jobid += 1
    e.schedule(1.0)
    return e, rng


def digest_pass(h: Any, e: Any, responses: list) -> None:
    for r in responses:
        h.update(json.dumps(r.payload(), sort_keys=True, default=str).encode())
        h.update(str(r.resources).encode())
    for s in sorted(e.planner.reserved(), key=lambda s: s.jobid):
        h.update(f"{s.jobid} {s.start} {s.end} {s.bits:x}".encode())


def run(policy: str, a: argparse.Namespace, profile: int = 0) -> dict:
    e, rng = build(policy, a.nodes, a.cores, a.running, a.backlog, a.seed)
    h = hashlib.sha256()
    digest_pass(h, e, [])
    times = []
    now = 10.0
    prof = cProfile.Profile() if profile else None
    gc.collect()
    for _ in range(a.passes):
        e.free(rng.choice(sorted(j.id for j in e.running)))
        now += 1.0
        m0 = e.stats["matches"]
        if prof:
            prof.enable()
        t0 = time.process_time()
        r = e.schedule(now)
        times.append(time.process_time() - t0)
        if prof:
            prof.disable()
        digest_pass(h, e, r.responses)
        h.update(str(e.stats["matches"] - m0).encode())
    if prof:
        print(f"== profile: {policy}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(profile)
    return {"times": times, "digest": h.hexdigest()[:16], "reserved": e.planner.nreserved}


def baseline(tree: str, argv: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run(
        [sys.executable, __file__, "--tree", tree, "--json", *argv], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument("--running", type=int, default=8000)
    ap.add_argument("--backlog", type=int, default=64)
    ap.add_argument("--passes", type=int, default=9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N of a cProfile of the passes")
    ap.add_argument("--baseline", metavar="DIR", help="also run the package found in DIR, for a before/after table")
    ap.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sys.path.insert(0, a.tree)
    policies = a.policies.split(",")
    if a.profile:
        for p in policies:
            run(p, a, a.profile)
        return 0
    results = {p: run(p, a) for p in policies}
    if a.json:
        print(json.dumps(results))
        return 0
    same = ["--policies", a.policies, "--passes", str(a.passes), "--seed", str(a.seed)]
    for k in ("nodes", "cores", "running", "backlog"):
        same += [f"--{k}", str(getattr(a, k))]
    before = baseline(a.baseline, same) if a.baseline else None
    from rich.console import Console
    from rich.table import Table

    title = (
        f"forecast pass, {a.nodes}x{a.cores}, {a.running} running, backlog {a.backlog}: "
        f"CPU ms per pass, median of {a.passes}"
    )
    t = Table(title=title)
    t.add_column("policy")
    if before:
        t.add_column("before", justify="right")
    t.add_column("after" if before else "ms/pass", justify="right")
    if before:
        t.add_column("speed-up", justify="right")
        t.add_column("same decisions")
    t.add_column("max ms", justify="right")
    t.add_column("digest")
    for p, r in results.items():
        med = 1e3 * statistics.median(r["times"])
        row = [p]
        if before:
            b = 1e3 * statistics.median(before[p]["times"])
            row += [f"{b:.1f}", f"{med:.1f}", f"{b / med:.1f}x", "yes" if before[p]["digest"] == r["digest"] else "NO"]
        else:
            row.append(f"{med:.1f}")
        row += [f"{1e3 * max(r['times']):.1f}", r["digest"]]
        t.add_row(*row)
    Console().print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
