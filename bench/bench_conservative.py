"""Conservative backfilling repaired, against the main it started from.

For each heavy trace (``bench/heavy_trace.py``, the given job counts and
seeds, 1,024 nodes), runs in turn, ``--repeat`` times each, alternating::

    fluxsched-py replay FILE --nodes 1024 --queue-policy conservative --no-progress --json --output-dir D

with this checkout and with a base checkout (``--base``, by default
``/tmp/base-main``: commit 175c917) by ``PYTHONPATH=BASE python -m
fluxsched_py``, each in its own process.  The table gives, per trace and
side, the median wall time and CPU time (user + system of the child; a run
cut off at ``--timeout`` shows ``> T s``), the ratios branch / base, and
from the last run of each side that finished: how many jobs start at a
different time than with the base, and the share of jobs started by their
first ``t_estimate`` (``estimate_kept`` of ``--json``: 100 % means no job
started later than its first reservation).

    python bench/bench_conservative.py [--jobs 20000,100000] [--seeds 1] [--repeat 3]
        [--timeout 900] [--base /tmp/base-main]

Measured (``--jobs 20000 --seeds 1,2 --repeat 1``; 2 cores loaded by four
other sessions, load average 6-7, so the CPU columns are the ones to read):

    trace           wall branch  wall base  ratio  CPU branch  CPU base  ratio  starts differ  by 1st est.
    20,000 seed 1   299.3 s      278.0 s    1.08   75.5 s      74.2 s    1.02   0 / 20000      100.0%
    20,000 seed 2   356.6 s      311.8 s    1.14   93.3 s      81.1 s    1.15   0 / 20000      100.0%

100,000 jobs (``--jobs 100000 --repeat 1 --timeout 900``, same load): both
cut off, branch > 900 s and base > 900 s of wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heavy_trace import write_heavy_swf  # noqa: E402


def run(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, float, dict | None]:
    """Wall seconds, child CPU seconds, and the JSON row (None when cut off)."""
    print("$", " ".join(cmd), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=timeout).stdout
        row = json.loads(out)
    except subprocess.TimeoutExpired:
        row = None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (row[0] if isinstance(row, list) else row)


def starts(path: Path) -> dict[str, str]:
    with path.open() as f:
        return {r["job_id"]: r["starting_time"] for r in csv.DictReader(f)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="20000,100000")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--base", default="/tmp/base-main")
    args = ap.parse_args()
    here_env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    base_env = {**os.environ, "PYTHONPATH": args.base}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for njobs in (int(x) for x in args.jobs.split(",")):
            for seed in (int(x) for x in args.seeds.split(",")):
                trace = Path(d) / f"heavy-{njobs}-{seed}.swf"
                write_heavy_swf(trace, njobs=njobs, seed=seed)
                got: dict[str, list[tuple[float, float, dict | None]]] = {"branch": [], "base": []}
                for i in range(args.repeat):
                    for side, env in (("branch", here_env), ("base", base_env)):
                        out = Path(d) / f"{side}-{njobs}-{seed}-{i}"
                        cmd = [sys.executable, "-m", "fluxsched_py", "replay", str(trace), "--nodes", "1024"]
                        cmd += ["--queue-policy", "conservative", "--no-progress", "--json", "--output-dir", str(out)]
                        got[side].append(run(cmd, env, args.timeout))
                med = {}
                for side, runs in got.items():
                    done = [r for r in runs if r[2] is not None]
                    if len(done) * 2 > len(runs):
                        med[side] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
                    else:
                        med[side] = None
                last = {s: max((i for i, r in enumerate(got[s]) if r[2] is not None), default=None) for s in got}
                differ = kept = "-"
                if last["branch"] is not None:
                    kept = f"{got['branch'][last['branch']][2]['estimate_kept']:.1%}"
                    if last["base"] is not None:
                        a = starts(Path(d) / f"branch-{njobs}-{seed}-{last['branch']}" / "jobs.csv")
                        b = starts(Path(d) / f"base-{njobs}-{seed}-{last['base']}" / "jobs.csv")
                        differ = f"{sum(a[k] != b.get(k) for k in a)} / {len(a)}"
                rows.append((f"{njobs:,} seed {seed}", med, differ, kept))
    tmo = f"> {args.timeout:.0f} s"
    print(f"\nconservative, heavy traces on 1,024 nodes, median of {args.repeat} (branch, base {args.base})")
    head = ("trace", "wall branch", "wall base", "ratio", "CPU branch", "CPU base", "ratio")
    head += ("starts differ", "by 1st est.")
    print(" | ".join(head))
    for name, med, differ, kept in rows:
        br, ba = med["branch"], med["base"]
        cells = [name]
        for k in (0, 1):
            cut = tmo if k == 0 else "cut off"
            cells += [f"{br[k]:.1f} s" if br else cut, f"{ba[k]:.1f} s" if ba else cut]
            cells.append(f"{br[k] / ba[k]:.2f}" if br and ba else "-")
        print(" | ".join([*cells, differ, kept]))


if __name__ == "__main__":
    main()
