"""Best-effort work lost to preemption, with and without notice and checkpoints.

The issue-25 mix: Batsim's seed-1 HPC workload (250 regular jobs, 128
nodes) plus a 2,000-job campaign of one-node jobs of 5 to 60 minutes
(uniform whole minutes, walltime 3600 s, ``preemptible-after: 0``), made by
``bench/make_campaign_workload.py --minutes 5-60 --walltime 3600`` (and
``--checkpoint`` for the runs where every campaign job checkpoints on its
notice).  Under fcfs, easy and conservative it replays:

* ``main``: the main this branch started from (``--base``, default
  ``/tmp/base-s10``, commit 425bf7c), with no option: today's figures;
* ``default``: this code with no option: the same decisions, but the work
  of a job preempted after starting at t=0 counted as lost (main counted 0);
* ``fit``: this code with ``besteffort-fit=require`` and no grace time;
* ``fit+ckpt``: ``besteffort-fit=require``, ``preempt-grace=60`` and every
  campaign job checkpointing on the notice;

and prints best-effort work completed, lost and recovered (node-hours),
lost / completed, preemptions, and how the regular jobs' start times compare
with a replay of the regular workload alone: how many differ (by more than
1e-6 s), the most one is late, and how many of those that waited in that run
(a planned start) are late.  Simulated time: the figures do not depend on the
machine's load.

    python bench/bench_grace.py [--base /tmp/base-s10] [--policies fcfs,easy,conservative] [--runs fit+grace,...] [-j 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGULAR = ROOT / "t" / "data" / "batsim" / "example_workload_hpc_seed1_jobs250.json.gz"

#: run name -> (code: "main" or "here", workload: "plain" or "checkpoint", extra replay flags)
RUNS = {
    "main": ("main", "plain", []),
    "default": ("here", "plain", []),
    "fit": ("here", "plain", ["--besteffort-fit", "require"]),
    "fit+grace": ("here", "plain", ["--besteffort-fit", "require", "--preempt-grace", "60"]),
    "fit+ckpt": ("here", "checkpoint", ["--besteffort-fit", "require", "--preempt-grace", "60"]),
    "fewest+ckpt": (
        "here",
        "checkpoint",
        ["--besteffort-fit", "require", "--preempt-grace", "60", "--preempt-victims", "fewest"],
    ),
}


def make(out: Path, checkpoint: bool) -> None:
    cmd = [sys.executable, str(ROOT / "bench" / "make_campaign_workload.py"), str(REGULAR), str(out)]
    cmd += ["--minutes", "5-60", "--walltime", "3600"] + (["--checkpoint"] if checkpoint else [])
    subprocess.run(cmd, check=True)


def replay(pythonpath: Path, workload: Path, policy: str, flags: list[str], outdir: Path) -> tuple[dict, dict]:
    """The replay's summary and each job's (submit, start) from its jobs.csv."""
    # -S: no site, so no .pth of an editable install of this tree (whose
    # import hook would win over PYTHONPATH); the dependencies come from purelib.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), sysconfig.get_paths()["purelib"]])}
    cmd = [sys.executable, "-S", "-m", "fluxsched_py", "replay", str(workload), "--queue-policy", policy]
    cmd += ["--json", "--no-progress", "--output-dir", str(outdir), *flags]
    # run outside the tree: python -m puts the working directory first on sys.path
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=outdir.parent)
    data = json.loads(proc.stdout)
    row = data[0] if isinstance(data, list) else data
    summary = row.get("summary", row)
    starts = {}
    with open(outdir / "jobs.csv", newline="") as f:
        for r in csv.DictReader(f):
            start = float(r["starting_time"]) if r["starting_time"] not in ("", "-1") else None
            starts[r["job_id"]] = (float(r["submission_time"]), start)
    return summary, starts


def compare(alone: dict, mixed: dict) -> tuple[int, float, int]:
    """(regular jobs whose start differs, the most one is late, planned starts that are late)."""
    differ, late, planned_late = 0, 0.0, 0
    for jid, (submit, s0) in alone.items():
        s1 = mixed[jid][1]
        if s0 is None or s1 is None:
            differ += s0 != s1
            continue
        if abs(s1 - s0) > 1e-6:
            differ += 1
        late = max(late, s1 - s0)
        if s0 > submit + 1e-6 and s1 > s0 + 1e-6:
            planned_late += 1
    return differ, late, planned_late


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, default=Path("/tmp/base-s10"))
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--runs", default=",".join(RUNS), help="the runs to make (default: all)")
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    runs = [r for r in args.runs.split(",") if r]
    if unknown := sorted(set(runs) - set(RUNS)):
        ap.error(f"--runs: no run named {', '.join(unknown)} (runs: {', '.join(RUNS)})")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make(d / "plain.json", False)
        make(d / "checkpoint.json", True)
        jobs = []
        for pol in policies:
            jobs.append((pol, "alone", ROOT, REGULAR, []))
            for name in runs:
                code, wl, flags = RUNS[name]
                jobs.append((pol, name, args.base if code == "main" else ROOT, d / f"{wl}.json", flags))

        def one(job):
            pol, name, code, wl, flags = job
            return (pol, name), replay(code, wl, pol, flags, d / f"{pol}-{name}")

        with ThreadPoolExecutor(args.j) as pool:
            results = dict(pool.map(one, jobs))
    print(
        "| policy | run | completed (node-h) | lost (node-h) | lost / completed | recovered (node-h) "
        "| preemptions | regular starts changed | most late (s) | planned starts late |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pol in policies:
        alone = results[pol, "alone"][1]
        for name in runs:
            s, starts = results[pol, name]
            regular = {k: v for k, v in starts.items() if k in alone}
            differ, late, planned_late = compare(alone, regular)
            c, lost = s["besteffort_completed_nh"], s["besteffort_lost_nh"]
            rec = s.get("besteffort_recovered_nh", 0.0)
            print(
                f"| {pol} | {name} | {c:.1f} | {lost:.1f} | {lost / c:.3f} | {rec:.1f} | {s['preemptions']} "
                f"| {differ} | {late:.1f} | {planned_late} |"
            )


if __name__ == "__main__":
    main()
