#!/usr/bin/env python3
"""How the scheduler scales to the largest machines (Fugaku: 158,976 nodes).

Each measurement runs in a fresh process, so its RSS is its own:

* **replay**: ``fluxsched-py replay`` of a one-job Batsim workload with
  ``--nodes N`` (graph, engine, planner, one pass, metrics);
* **batsim**: a Batsim 3/4 driver answering ``SIMULATION_BEGINS`` with N
  compute resources (graph and engine built from the hosts' R).

It prints wall time, CPU time (user + system: the figure to read on a
loaded machine) and peak RSS for each N, and the targets (under 10 s and
2 GiB at 200,000 nodes).

    python bench/bench_scale.py                    # 50,000 and 200,000 nodes
    python bench/bench_scale.py --nodes 1000 4000  # any sizes

This is a benchmark, not a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_BATSIM = """
import json, sys
from fluxsched_py.batsim.driver import V4Driver
n = int(sys.argv[1])
res = [{"id": i, "name": f"n{i}", "state": "idle", "properties": {}} for i in range(n)]
data = {"nb_resources": n, "nb_compute_resources": n, "config": {}, "compute_resources": res, "workloads": {}}
msg = json.dumps({"now": 0.0, "events": [{"timestamp": 0.0, "type": "SIMULATION_BEGINS", "data": data}]}).encode()
out = json.loads(V4Driver().handle(msg))
assert out == {"now": 0.0, "events": []}, out
"""


#: runs a script or module and prints its own peak RSS (KiB) on stderr at exit
_WRAP = (
    "import atexit, resource, runpy, sys\n"
    "atexit.register(lambda: print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "what, sys.argv = sys.argv[1], sys.argv[1:]\n"
    "if what == '-c':\n"
    "    sys.argv = sys.argv[1:]\n"
    "    exec(compile(sys.argv[0], '<bench>', 'exec'), {'__name__': '__main__'})\n"
    "else:\n"
    "    runpy.run_module(what, run_name='__main__')\n"
)


def run(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (GiB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _WRAP, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if p.returncode:
        lines = [x for x in p.stderr.decode().splitlines() if not x.startswith("RSS ")]
        raise RuntimeError(lines[-1] if lines else f"exit status {p.returncode}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss = [int(line.split()[1]) for line in p.stderr.decode().splitlines() if line.startswith("RSS ")]
    return wall, cpu, rss[-1] / (1 << 20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[50_000, 200_000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wl = Path(tmp) / "one.json"
        job = {"id": 0, "subtime": 0, "walltime": 600, "res": 2, "profile": "d"}
        wl.write_text(json.dumps({"nb_res": 2, "jobs": [job], "profiles": {"d": {"type": "delay", "delay": 100}}}))
        print(f"{'what':<28} {'nodes':>8} {'wall':>9} {'cpu':>9} {'peak RSS':>10}")
        for n in sorted(args.nodes):
            rows = (
                ("replay, one job", ["fluxsched_py.cli", "replay", str(wl), "--nodes", str(n), "--no-progress"]),
                ("batsim SIMULATION_BEGINS", ["-c", _BATSIM, str(n)]),
            )
            for what, argv in rows:
                try:
                    wall, cpu, rss = run(argv)
                except RuntimeError as e:  # e.g. the replay's --nodes limit (fluxsched_py.limits.MAX_NODES)
                    print(f"{what:<28} {n:>8} refused: {e}", flush=True)
                    continue
                print(f"{what:<28} {n:>8} {wall:>8.2f}s {cpu:>8.2f}s {rss:>8.2f} GiB", flush=True)
    print("targets at 200,000 nodes: under 10 s and 2 GiB (wall time on an idle machine; CPU time otherwise)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
