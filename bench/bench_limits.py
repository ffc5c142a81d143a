#!/usr/bin/env python3
"""What run limits (engine/runlimits.py) cost in the replay, against a base checkout.

Replays the first ``--jobs`` jobs of an SWF trace (default KTH-SP2, 100
nodes, from the shared conformance corpus) under each ``--policies`` policy,
as separate ``python -m fluxsched_py replay ... --json`` processes:

- ``base``: the code at ``--base`` (a checkout of the main this branch
  started from), no limit;
- ``no limit``: this code, no ``--config`` (the hot path's only change is a
  test of ``Engine.limits``);
- one row per ``--limits`` config: this code with ``--config`` holding
  ``[policy.scheduler.limits] user = {...}``.

Each cell is the median of ``--repeat`` runs, the variants alternated within
each round: wall time and CPU time (user+sys of the child), and the ratio of
CPU time to ``base``.  ``same`` says whether the summary (every metric but
the replay's own time and the provenance) equals base's; ``never`` counts
jobs a limit never let start (they ask more than the limit).

    python bench/bench_limits.py --base /tmp/base-s10 [--jobs 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from t.shared import CONFORMANCE  # noqa: E402

KEEP_OUT = {"replay_time", "elapsed", "version", "options", "workload", "workload_sha256"}


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(pythonpath: str, argv: list[str]) -> tuple[float, float, dict, int]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    c0, t0 = child_cpu(), time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "fluxsched_py", "replay", *argv], env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if p.returncode:
        raise SystemExit(f"replay failed: {p.stderr.strip()}")
    (row,) = json.loads(p.stdout)
    never = 0
    for line in p.stderr.splitlines():
        if "never started" in line:
            never = int(line.split(": ")[2].split()[0])
    return wall, cpu, {k: v for k, v in row.items() if k not in KEEP_OUT}, never


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="a checkout of the main this branch started from")
    ap.add_argument("--trace", default=str(CONFORMANCE / "swf" / "KTH-SP2-1996-2.swf.gz"))
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--policies", default="easy,fcfs")
    ap.add_argument("--limits", default="jobs = 4;nodes = 64", help="';'-separated user tables")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1])
    tmp = Path(tempfile.mkdtemp(prefix="bench-limits-"))
    variants: list[tuple[str, str, list[str]]] = [("base", args.base, []), ("no limit", here, [])]
    for i, table in enumerate(t.strip() for t in args.limits.split(";") if t.strip()):
        conf = tmp / f"limits{i}.toml"
        conf.write_text(f"[policy.scheduler.limits]\nuser = {{ {table} }}\n")
        variants.append((f"user {{ {table} }}", here, ["--config", str(conf)]))
    print(f"{Path(args.trace).name}, first {args.jobs} jobs; median of {args.repeat} runs (wall s / CPU s)")
    print("| policy | variant | wall | CPU | CPU vs base | same | never |\n|---|---|---|---|---|---|---|")
    for policy in args.policies.split(","):
        argv = [args.trace, "--jobs", str(args.jobs), "--queue-policy", policy, "--no-progress", "--json"]
        times: dict[str, list[tuple[float, float]]] = {v[0]: [] for v in variants}
        rows: dict[str, tuple[dict, int]] = {}
        for _ in range(args.repeat):
            for name, path, extra in variants:
                wall, cpu, row, never = run(path, argv + extra)
                times[name].append((wall, cpu))
                rows[name] = (row, never)
        base_cpu = statistics.median(c for _, c in times["base"])
        for name, _, _ in variants:
            wall = statistics.median(w for w, _ in times[name])
            cpu = statistics.median(c for _, c in times[name])
            same = "yes" if rows[name][0] == rows["base"][0] else "no"
            print(f"| {policy} | {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f}x | {same} | {rows[name][1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
