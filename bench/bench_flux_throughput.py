#!/usr/bin/env python3
"""Job throughput under a real flux-core: sched-py against flux-core's schedulers.

For each configuration, one ``flux start --test-size=1`` instance gets fake
resources (``flux resource reload -f``: NODES x CORES, no real ranks behind
them) and runs every scheduler in turn on the same instance: ``sched-simple``,
``sched-backfill``, ``sched-py`` (and Fluxion's ``sched-fluxion-resource`` +
``sched-fluxion-qmanager`` when they can be loaded).  A run submits a burst
of N one-core jobs with mock execution
(``system.exec.test.run_duration=0.001s``, the job-exec test mode flux-core's
own throughput test uses) and measures the time from the first submit until
every job is inactive (``flux queue drain``).  Each scheduler runs ``--reps``
times, interleaved; the table shows the median jobs/s.

Usage::

    PATH=/opt/flux/bin:$PATH python bench/bench_flux_throughput.py            # both configurations
    python bench/bench_flux_throughput.py --config 10x64 --njobs 4096 --reps 3
    python bench/bench_flux_throughput.py --sched-py-args queue-policy=easy

Targets (DESIGN.md): 4096 jobs on 10 nodes x 64 cores: sched-py >= sched-simple;
8192 jobs on 1000 nodes: sched-py >= Fluxion (~745 jobs/s reference).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from t.flux.instance import Instance, flux_exe  # noqa: E402

SUBMIT = r"""
import json, sys, time
import flux, flux.job
from flux.job import JobspecV1

n = int(sys.argv[1])
h = flux.Flux()
js = JobspecV1.from_command(["true"], num_tasks=1, cores_per_task=1)
js.setattr("system.exec.test.run_duration", "0.001s")
js.duration = 0
spec = js.dumps()
t0 = time.time()
futures = [flux.job.submit_async(h, spec) for _ in range(n)]
for f in futures:
    f.get_id()
t1 = time.time()
print(json.dumps({"t0": t0, "submitted": t1}))
"""

CONFIGS = {
    "10x64": (10, 64, 4096),
    "1000x8": (1000, 8, 8192),
}


def scheduler_available(inst: Instance, name: str, args: list[str]) -> bool:
    try:
        inst.use_scheduler(None)
        if name == "fluxion":
            p = inst.try_run("module", "load", "sched-fluxion-resource")
            if p.returncode != 0:
                return False
            p = inst.try_run("module", "load", "sched-fluxion-qmanager")
            return p.returncode == 0
        return inst.try_run("module", "load", name, *args).returncode == 0
    finally:
        inst.use_scheduler(None)


def one_run(inst: Instance, name: str, args: list[str], njobs: int, script: Path) -> dict:
    inst.use_scheduler(None)
    if name == "fluxion":
        inst.run("module", "load", "sched-fluxion-resource")
        inst.run("module", "load", "sched-fluxion-qmanager")
    else:
        inst.run("module", "load", name, *args)
    time.sleep(1.0)  # let the scheduler finish its hello/ready
    out = json.loads(inst.run("python", str(script), str(njobs), timeout=1200))
    inst.run("queue", "drain", timeout=1200)
    t_end = time.time()
    elapsed = t_end - out["t0"]
    stats = {}
    if name == "sched-py":
        st = inst.json("module", "stats", "sched-py")
        stats = {"passes": st["sched_passes"], "yields": st["sched_yields"], "commits": st["commits"]}
    inst.run("job", "purge", "--force", "--num-limit=0", check=False)
    return {"jobs_per_s": njobs / elapsed, "elapsed": elapsed, "submit_s": out["submitted"] - out["t0"], **stats}


def bench_config(label: str, nodes: int, cores: int, njobs: int, reps: int, py_args: list[str]) -> list[dict]:
    rows = []
    with Instance(1) as inst:
        inst.use_scheduler(None)
        inst.set_resources(nodes, cores)
        script = inst.dir / "submit.py"
        script.write_text(SUBMIT)
        scheds = [("sched-simple", []), ("sched-backfill", []), ("sched-py", py_args)]
        if scheduler_available(inst, "fluxion", []):
            scheds.append(("fluxion", []))
        else:
            print(f"[{label}] Fluxion (sched-fluxion-resource) not available: skipped", file=sys.stderr)
        results: dict[str, list[dict]] = {s: [] for s, _ in scheds}
        for rep in range(reps):
            for name, args in scheds:
                r = one_run(inst, name, args, njobs, script)
                results[name].append(r)
                print(
                    f"[{label}] rep {rep + 1}/{reps} {name:15s} {r['jobs_per_s']:8.1f} jobs/s "
                    f"({r['elapsed']:.2f}s, submit {r['submit_s']:.2f}s)",
                    file=sys.stderr,
                    flush=True,
                )
        for name, _ in scheds:
            rs = results[name]
            rows.append(
                {
                    "config": f"{nodes} nodes x {cores} cores",
                    "njobs": njobs,
                    "scheduler": name,
                    "median_jobs_per_s": statistics.median(r["jobs_per_s"] for r in rs),
                    "runs": [round(r["jobs_per_s"], 1) for r in rs],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), action="append", help="default: all")
    ap.add_argument("--njobs", type=int, help="override the number of jobs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sched-py-args", nargs="*", default=[], metavar="ARG")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args(argv)
    if flux_exe() is None:
        print("flux not on PATH", file=sys.stderr)
        return 1
    rows = []
    for label in a.config or list(CONFIGS):
        nodes, cores, njobs = CONFIGS[label]
        rows += bench_config(label, nodes, cores, a.njobs or njobs, a.reps, a.sched_py_args)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'configuration':24s} {'jobs':>6s} {'scheduler':15s} {'median jobs/s':>14s}  runs")
    for r in rows:
        print(
            f"{r['config']:24s} {r['njobs']:6d} {r['scheduler']:15s} {r['median_jobs_per_s']:14.1f}  "
            + ", ".join(str(x) for x in r["runs"])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
