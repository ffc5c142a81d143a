#!/usr/bin/env python3
"""Benchmark the resource graph and matcher on a 16,384-node machine.

Prints one table: for each graph source (the project's YAML recipe and
Fluxion's GRUG file ``../shared/bench/nodes16384.graphml``) the load time,
the process RSS after loading, and the median match time of each jobspec in
``../shared/bench/*.yaml`` (1 core, 1 exclusive node, 1024 exclusive nodes).
Each match is timed on a graph where earlier matches were allocated, as a
scheduler would see it, and every match's result is checked for size.

When a ``resource-query`` binary is on PATH, Fluxion runs on the same GRUG
file and jobspecs in the same run; otherwise the table says it was not run.

    python bench/bench_match.py            # 16,384 nodes, 25 matches per jobspec
    python bench/bench_match.py --quick    # 1,024 nodes, 5 matches per jobspec

This is a benchmark, not a test: it asserts nothing about time.

Each of our cells is "match / match + allocate".  Commit 5beef20 updated the
graph's availability aggregates at ``allocate``; now the next match brings
them up to date, so a match right after a big allocation costs more and the
allocation less.  Measured on the 2-core machine, otherwise idle, two runs
alternated (``--tree`` a worktree of 5beef20, ``--no-fluxion``), 1,024-node
exclusive match, median ms:

    tree      graph     match          match + allocate
    5beef20   recipe    8.07 / 10.79   47.04 / 58.30
    this      recipe    37.52 / 45.71  42.84 / 52.69   (0.90)
    5beef20   GRUG      8.07 / 7.44    44.39 / 42.14
    this      GRUG      24.29 / 27.61  26.25 / 31.43   (0.66)

So a job placed costs less than at 5beef20, while the match alone costs
3-4 times more.  In one run of this script with Fluxion on PATH (its
``match allocate``, the same GRUG file): 0.61 ms one core, 1.60 ms one
node, 919.74 ms 1,024 nodes, 4.01 GiB; ours 0.14 / 0.17 / 23.4 ms
(match) on 0.20 GiB.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from t.shared import SHARED as _SHARED  # noqa: E402 - the one place that finds ../shared

#: ``--tree DIR``: measure that checkout's fluxsched_py (a worktree of another
#: commit) with this script, so two commits are timed the same way.
_TREE = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--tree"), None)
if _TREE:
    sys.path.insert(0, str(Path(_TREE).resolve()))

from fluxsched_py.jobspec import load_jobspec  # noqa: E402
from fluxsched_py.match import match  # noqa: E402
from fluxsched_py.resource import ResourceGraph  # noqa: E402

SHARED = _SHARED / "bench"
JOBSPECS = ("core1.yaml", "node1x.yaml", "node1024x.yaml")


def rss_gib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / (1 << 20)
    return float("nan")


def recipe(nodes: int) -> dict:
    racks = max(1, nodes // 128)
    return {
        "cluster": {
            "racks": racks,
            "nodes_per_rack": nodes // racks,
            "sockets": 2,
            "cores_per_socket": 32,
            "gpus_per_socket": 2,
            "memory_gb": 256,
        }
    }


def time_matches(g: ResourceGraph, request, reps: int, policy: str) -> tuple[float, float, int]:
    """Median match time, and median match-and-allocate time (ms); each match
    is allocated so the next one sees a busier graph.

    Both, because where the cost of an allocation falls moved: the graph's
    availability aggregates are brought up to date when the next match reads
    them, not at ``allocate``, so a match after a big allocation pays for it.
    What a scheduler pays per job is the pair, and it is what Fluxion's
    ``match allocate`` times (its ELAPSE covers the allocation)."""
    times, cycles = [], []
    jobid = 1_000_000
    for _ in range(reps):
        t0 = time.perf_counter()
        rs = match(g, request, policy=policy)
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1000)
        if rs is None:
            break
        jobid += 1
        g.allocate(jobid, rs)
        cycles.append((time.perf_counter() - t0) * 1000)
    for j in list(g.jobs):
        g.release(j)
    return statistics.median(times), statistics.median(cycles) if cycles else math.nan, len(times)


def bench_ours(label: str, load, requests: dict, reps: int, policy: str) -> list[str]:
    gc.collect()
    rss0 = rss_gib()
    t0 = time.perf_counter()
    g = load()
    load_s = time.perf_counter() - t0
    rss = rss_gib()
    cells = [label, f"{len(g.ranks)}", f"{load_s:.2f} s", f"{rss:.2f} ({rss - rss0:+.2f}) GiB"]
    for name in JOBSPECS:
        req = requests.get(name)
        if req is None or (name == "node1024x.yaml" and len(g.ranks) < 1024):
            cells.append("-")
            continue
        med, cycle, n = time_matches(g, req, reps, policy)
        cells.append(f"{med:.2f} / {cycle:.2f} ms (n={n})")
    del g
    gc.collect()
    return cells


#: resource-query -e prints ``INFO: ELAPSE=<seconds>`` (std::to_string: 6 decimals) for every match
#: (print_schedule_info in resource/utilities/command.cpp).
ELAPSE = re.compile(r"^INFO: ELAPSE=([0-9.]+(?:[eE][-+]?[0-9]+)?)$", re.MULTILINE)


def parse_elapse(stdout: str) -> list[float]:
    """The per-match times, in seconds, of a ``resource-query -e`` session's output."""
    return [float(x) for x in ELAPSE.findall(stdout)]


def bench_fluxion(grug: Path, reps: int) -> list[str]:
    rq = shutil.which("resource-query")
    if rq is None:
        return ["Fluxion resource-query", "-", "not run: no resource-query on PATH", "", "", "", ""]
    cells = ["Fluxion resource-query (match allocate)", "", "", ""]
    with tempfile.TemporaryDirectory() as tmp:
        cmds = Path(tmp) / "cmds"
        lines = []
        for name in JOBSPECS:
            lines += [f"match allocate {SHARED / name}"] * reps
        cmds.write_text("\n".join(lines + ["quit"]) + "\n")
        t0 = time.perf_counter()
        p = (
            subprocess.run(
                ["/usr/bin/time", "-v", rq, "-L", str(grug), "-P", "first", "-F", "simple", "-e"],
                stdin=cmds.open(),
                capture_output=True,
                text=True,
            )
            if shutil.which("/usr/bin/time")
            else subprocess.run(
                [rq, "-L", str(grug), "-P", "first", "-F", "simple", "-e"],
                stdin=cmds.open(),
                capture_output=True,
                text=True,
            )
        )
        total = time.perf_counter() - t0
        elapsed = parse_elapse(p.stdout)
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        cells[2] = f"{total:.1f} s total"
        cells[3] = f"{int(m.group(1)) / (1 << 20):.2f} GiB" if m else "?"
        for i, _ in enumerate(JOBSPECS):
            chunk = elapsed[i * reps : (i + 1) * reps]
            cells.append(f"{statistics.median(chunk) * 1000:.2f} ms" if chunk else "?")
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,024 nodes and 5 matches per jobspec")
    ap.add_argument("--policy", default="first")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--tree", metavar="DIR", help="measure this checkout's fluxsched_py (read before the imports)")
    ap.add_argument("--no-fluxion", action="store_true", help="do not run resource-query even when it is on PATH")
    args = ap.parse_args(argv)
    nodes = 1024 if args.quick else 16384
    reps = args.reps or (5 if args.quick else 25)
    if not SHARED.is_dir():
        print(f"{SHARED} is missing: the jobspecs and GRUG files live there", file=sys.stderr)
        return 1
    requests = {name: load_jobspec(SHARED / name) for name in JOBSPECS}
    grug = SHARED / ("nodes1024.graphml" if args.quick else "nodes16384.graphml")
    tree = f" @ {Path(args.tree).name}" if args.tree else ""
    rows = [
        bench_ours(
            f"fluxsched-py{tree} recipe ({nodes} nodes)",
            lambda: ResourceGraph.from_recipe(recipe(nodes)),
            requests,
            reps,
            args.policy,
        ),
        bench_ours(
            f"fluxsched-py{tree} {grug.name}", lambda: ResourceGraph.from_grug(grug), requests, reps, args.policy
        ),
    ]
    if not args.no_fluxion:
        rows.append(bench_fluxion(grug, reps))
    head = ["graph", "ranks", "load", "RSS (delta)", *(f"median {n}: match / +allocate" for n in JOBSPECS)]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(f"policy={args.policy}  reps={reps}  pid={os.getpid()}")
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
