"""The cost of an EASY pass, against the main it started from, both at once.

For each trace and policy, ``--repeat`` times, runs at the same time (one
process each, so both trees see the same load)::

    fluxsched-py replay FILE ... --queue-policy POLICY --no-progress --json --output-dir D

with this checkout and with a base checkout (``--base``, required: a
worktree of the main to compare with), by ``PYTHONPATH=TREE python -m
fluxsched_py``.  The traces: the heavy trace (``bench/heavy_trace.py``:
``--jobs`` counts, ``--seeds``, 1,024 nodes) and archive traces (``--swf``),
replayed whole with ``--procs-per-node 1`` (every processor a one-core
node).  The table gives per trace and policy the median wall time and CPU
time (user + system of each child, from ``wait4``), the ratios branch /
base, and whether every ``jobs.csv`` of the branch is byte for byte the
base's of the same repeat (start times, nodes and all).

    python bench/bench_easy.py [--jobs 20000,100000] [--seeds 1,2] [--policies easy,fcfs]
        [--swf ../shared/conformance/swf/KTH-SP2-1996-2.swf.gz,...] [--repeat 3]
        [--repeat-big 1] [--big 50000] --base DIR

``--repeat-big`` is the repeat count for heavy traces of at least
``--big`` jobs and for archive traces (the long runs).  The figures of
issue 21's session 12 are in the docstring of :mod:`fluxsched_py.policy.easy`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heavy_trace import write_heavy_swf  # noqa: E402


def run_both(cmds: dict[str, list[str]], envs: dict[str, dict[str, str]], cwd: Path) -> dict[str, tuple[float, float]]:
    """Start every side's command at once, in ``cwd``; each side's (wall, CPU) seconds."""
    t0 = time.perf_counter()
    procs = {}
    for side, cmd in cmds.items():
        print("$", " ".join(cmd), flush=True)
        # not from a checkout: ``python -m`` puts the working directory first on sys.path
        procs[side] = subprocess.Popen(cmd, env=envs[side], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out: dict[str, tuple[float, float]] = {}
    pids = {p.pid: side for side, p in procs.items()}
    while pids:
        pid, status, ru = os.wait4(-1, 0)
        side = pids.pop(pid, None)
        if side is None:
            continue
        procs[side].returncode = os.waitstatus_to_exitcode(status)
        if procs[side].returncode:
            err = procs[side].stderr.read().decode(errors="replace") if procs[side].stderr else ""
            raise SystemExit(f"bench_easy: {side} failed: {err.strip().splitlines()[-1:]}")
        out[side] = (time.perf_counter() - t0, ru.ru_utime + ru.ru_stime)
    for p in procs.values():
        if p.stderr:
            p.stderr.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="20000,100000")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--policies", default="easy,fcfs")
    ap.add_argument("--swf", default="", help="archive traces (comma-separated), whole, --procs-per-node 1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--repeat-big", type=int, default=1)
    ap.add_argument("--big", type=int, default=50000)
    ap.add_argument("--base", required=True, help="a checkout of the main to compare with")
    args = ap.parse_args()
    envs = {
        "branch": {**os.environ, "PYTHONPATH": str(HERE.parent)},
        "base": {**os.environ, "PYTHONPATH": args.base},
    }
    policies = [p for p in args.policies.split(",") if p]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        traces: list[tuple[str, Path, list[str], int]] = []
        for njobs in (int(x) for x in args.jobs.split(",") if x):
            for seed in (int(x) for x in args.seeds.split(",") if x):
                trace = d / f"heavy-{njobs}-{seed}.swf"
                write_heavy_swf(trace, njobs=njobs, seed=seed)
                repeat = args.repeat_big if njobs >= args.big else args.repeat
                traces.append((f"heavy {njobs:,} seed {seed}", trace, ["--nodes", "1024"], repeat))
        for path in (Path(x) for x in args.swf.split(",") if x):
            traces.append((path.name.split("-")[0] + " whole", path, ["--procs-per-node", "1"], args.repeat_big))
        for name, trace, extra, repeat in traces:
            for policy in policies:
                got: dict[str, list[tuple[float, float]]] = {"branch": [], "base": []}
                same = True
                for i in range(repeat):
                    cmds = {}
                    for side in got:
                        out = d / f"{side}-{trace.name}-{policy}-{i}"
                        cmds[side] = [sys.executable, "-m", "fluxsched_py", "replay", str(trace), *extra]
                        cmds[side] += ["--queue-policy", policy, "--no-progress", "--json", "--output-dir", str(out)]
                    for side, r in run_both(cmds, envs, d).items():
                        got[side].append(r)
                    a, b = (d / f"{s}-{trace.name}-{policy}-{i}" / "jobs.csv" for s in ("branch", "base"))
                    same = same and a.read_bytes() == b.read_bytes()
                med = {}
                for side, runs in got.items():
                    med[side] = (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
                rows.append((name, policy, repeat, med, same))
                print(json.dumps({"trace": name, "policy": policy, "runs": got, "same": same}), flush=True)
    print(f"\nbranch against base {args.base}, run at the same time; medians of the repeats")
    head = ("trace", "policy", "runs", "wall branch", "wall base", "ratio", "CPU branch", "CPU base", "ratio")
    print(" | ".join((*head, "jobs.csv identical")))
    for name, policy, repeat, med, same in rows:
        br, ba = med["branch"], med["base"]
        cells = [name, policy, str(repeat)]
        for k in (0, 1):
            cells += [f"{br[k]:.1f} s", f"{ba[k]:.1f} s", f"{br[k] / ba[k]:.2f}"]
        print(" | ".join([*cells, "yes" if same else "NO"]))


if __name__ == "__main__":
    main()
