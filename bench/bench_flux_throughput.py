#!/usr/bin/env python3
"""Job throughput under a real flux-core: sched-py against flux-core's schedulers.

For each configuration, one ``flux start --test-size=1`` instance gets fake
resources (``flux resource reload -f``: NODES x CORES, no real ranks behind
them) and runs every scheduler in turn on the same instance: ``sched-simple``,
``sched-backfill``, ``sched-py`` (and Fluxion's ``sched-fluxion-resource`` +
``sched-fluxion-qmanager``, with the options its rc1 script loads them with,
when they are found: ``--fluxion-prefix`` / ``FLUXION_PREFIX``, else by name
on ``FLUX_MODULE_PATH``).  A run submits a burst
of N one-core jobs with mock execution
(``system.exec.test.run_duration=0.001s``, the job-exec test mode flux-core's
own throughput test uses) and measures the time from the first submit until
every job is inactive (``flux queue drain``).  Each scheduler runs ``--reps``
times, interleaved; the table shows the median jobs/s.  ``sched.free`` has no
response, so a job can be inactive before the scheduler has taken its free;
"settled" also counts the time until the scheduler answers a ping sent after
the drain, i.e. until it has worked through every free.

Wall time on a shared machine swings with whatever else runs, so each run
also reads CPU time from ``/proc`` over the same interval (from when the
loaded scheduler answers a ping, so reading the resources is left out): the scheduler's
(its broker thread, or its process for a Python module such as sched-py)
and the whole instance's (the broker and the scheduler process), both per
job.  Those are what a scheduler costs, whatever the load.

Usage::

    PATH=/opt/flux/bin:$PATH python bench/bench_flux_throughput.py            # every configuration
    python bench/bench_flux_throughput.py --config 10x64 --config 16384x32 --scheduler sched-py
    python bench/bench_flux_throughput.py --config 10x64 --njobs 4096 --reps 3
    python bench/bench_flux_throughput.py --sched-py-args queue-policy=easy
    python bench/bench_flux_throughput.py --fluxion-prefix /opt/fluxion   # or FLUXION_PREFIX=...

Targets (DESIGN.md): 4096 jobs on 10 nodes x 64 cores: sched-py >= sched-simple;
8192 jobs on 1000 nodes: sched-py >= Fluxion (~745 jobs/s reference).  Issue
15: at 16,384 nodes x 32 cores sched-py's scheduler CPU per job within 2x of
its cost at 10 x 64, and its jobs/s at least 90 % of it (the last table).
sched-simple takes minutes per 1,000 jobs at 16,384 nodes: ``--njobs 1024``
keeps a run of every scheduler short.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from t.flux.instance import FluxError, Instance, flux_exe  # noqa: E402

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
for i in range(n):
    futures[i].get_id()
    futures[i] = None  # a waited-on future keeps an epoll fd; thousands of them abort libev (EINVAL)
t1 = time.time()
print(json.dumps({"t0": t0, "submitted": t1}))
"""

CONFIGS = {
    "10x64": (10, 64, 4096),
    "1000x8": (1000, 8, 8192),
    "16384x32": (16384, 32, 4096),
}
#: seconds a scheduler may take to load (Fluxion reads 16,384 nodes in tens of seconds)
LOAD_TIMEOUT = 900
SCHEDULERS = ["sched-simple", "sched-backfill", "sched-py", "fluxion"]


# Fluxion's modules, loaded as its etc/rc1.d/01-sched-fluxion does (no options but the allowlist)
FLUXION_MODULES = [("sched-fluxion-resource", ["load-allowlist=node,core,gpu"]), ("sched-fluxion-qmanager", [])]

FLUXION_PARAMS = r"""
import flux
h = flux.Flux()
r = h.rpc("sched-fluxion-resource.params").get()["params"]
q = h.rpc("sched-fluxion-qmanager.params").get()["params"]
d = h.rpc("sched-fluxion-qmanager.stats-get").get()["queues"]["default"]
print(f"match policy={r['policy']}, traverser={r['traverser']}, queue policy={q['queue-policy']}, "
      f"queue-depth={d['queue_depth']}, load-allowlist={r['load-allowlist']}")
"""


def fluxion_targets(prefix: str | None) -> list[tuple[str, list[str]]] | None:
    """What to ``flux module load`` for Fluxion: paths under ``prefix``, or names without one."""
    if not prefix:
        return FLUXION_MODULES
    for lib in ("lib", "lib64"):
        d = Path(prefix) / lib / "flux" / "modules"
        if all((d / f"{m}.so").exists() for m, _ in FLUXION_MODULES):
            return [(str(d / f"{m}.so"), args) for m, args in FLUXION_MODULES]
    return None


def load(inst: Instance, name: str, args: list[str], fluxion: list | None) -> None:
    if name == "fluxion":
        for target, fargs in fluxion or []:
            inst.run("module", "load", target, *fargs, timeout=LOAD_TIMEOUT)
    else:
        inst.run("module", "load", name, *args, timeout=LOAD_TIMEOUT)


def fluxion_available(inst: Instance, fluxion: list | None) -> str | None:
    """Fluxion's effective policies if its modules load, else None."""
    if fluxion is None:
        return None
    try:
        inst.use_scheduler(None)
        load(inst, "fluxion", [], fluxion)
        return inst.run("python", "-c", FLUXION_PARAMS, timeout=LOAD_TIMEOUT).strip()
    except (FluxError, subprocess.TimeoutExpired) as e:
        print(f"Fluxion did not load: {str(e).strip().splitlines()[-1]}", file=sys.stderr)
        return None
    finally:
        inst.use_scheduler(None)


def _ticks(stat_path: str) -> int:
    """utime + stime of a /proc stat file (clock ticks)."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_seconds(inst: Instance) -> tuple[float, float]:
    """``(scheduler, instance)`` CPU seconds so far: the scheduler is any
    ``sched-*`` broker thread or child process of the broker (one is loaded
    at a time); the instance is the broker plus such processes."""
    pid = int(inst.run("getattr", "broker.pid").strip())
    sched = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().startswith("sched-"):
            sched += _ticks(str(task / "stat"))
    procs = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != pid:
                continue
            if b"sched-" in (proc / "cmdline").read_bytes():
                procs += _ticks(str(proc / "stat"))
        except (OSError, ValueError, IndexError):
            continue
    hz = os.sysconf("SC_CLK_TCK")
    return (sched + procs) / hz, (_ticks(f"/proc/{pid}/stat") + procs) / hz


def one_run(inst: Instance, name: str, args: list[str], njobs: int, script: Path, fluxion: list | None) -> dict:
    inst.use_scheduler(None)
    load(inst, name, args, fluxion)
    time.sleep(1.0)  # let the scheduler finish its hello/ready
    # ... and answer a ping: on 16,384 nodes reading the resources takes
    # seconds (Fluxion: tens), a cost per instance, not per job.
    service = "sched-fluxion-qmanager" if name == "fluxion" else name
    inst.run("ping", "-c1", service, timeout=LOAD_TIMEOUT)
    cpu0 = cpu_seconds(inst)
    out = json.loads(inst.run("python", str(script), str(njobs), timeout=1200))
    inst.run("queue", "drain", timeout=1200)
    t_end = time.time()
    inst.run("ping", "-c1", service, timeout=1200)
    settled = time.time() - out["t0"]
    cpu1 = cpu_seconds(inst)
    elapsed = t_end - out["t0"]
    stats = {}
    if name == "sched-py":
        st = inst.json("module", "stats", "sched-py")
        stats = {"passes": st["sched_passes"], "yields": st["sched_yields"], "commits": st["commits"]}
    inst.run("job", "purge", "--force", "--num-limit=0", check=False)
    return {
        "jobs_per_s": njobs / elapsed,
        "settled_jobs_per_s": njobs / settled,
        "elapsed": elapsed,
        "settled": settled,
        "submit_s": out["submitted"] - out["t0"],
        "sched_ms_per_job": 1e3 * (cpu1[0] - cpu0[0]) / njobs,
        "instance_ms_per_job": 1e3 * (cpu1[1] - cpu0[1]) / njobs,
        **stats,
    }


def bench_config(
    label: str,
    nodes: int,
    cores: int,
    njobs: int,
    reps: int,
    py_args: list[str],
    fluxion: list | None,
    only: list[str] | None = None,
) -> tuple[list[dict], str | None]:
    rows = []
    with Instance(1) as inst:
        inst.use_scheduler(None)
        inst.set_resources(nodes, cores)
        script = inst.dir / "submit.py"
        script.write_text(SUBMIT)
        scheds = [("sched-simple", []), ("sched-backfill", []), ("sched-py", py_args)]
        fluxion_policies = fluxion_available(inst, fluxion) if not only or "fluxion" in only else None
        if fluxion_policies is not None:
            scheds.append(("fluxion", []))
        scheds = [(s, a) for s, a in scheds if not only or s in only]
        results: dict[str, list[dict]] = {s: [] for s, _ in scheds}
        for rep in range(reps):
            for name, args in scheds:
                r = one_run(inst, name, args, njobs, script, fluxion)
                results[name].append(r)
                print(
                    f"[{label}] rep {rep + 1}/{reps} {name:15s} {r['jobs_per_s']:8.1f} jobs/s "
                    f"({r['elapsed']:.2f}s, submit {r['submit_s']:.2f}s, settled {r['settled']:.2f}s; "
                    f"CPU ms/job: scheduler {r['sched_ms_per_job']:.3f}, instance {r['instance_ms_per_job']:.3f})",
                    file=sys.stderr,
                    flush=True,
                )
        for name, _ in scheds:
            rs = results[name]
            rows.append(
                {
                    "config": f"{nodes} nodes x {cores} cores",
                    "nodes": nodes,
                    "njobs": njobs,
                    "scheduler": name,
                    "median_jobs_per_s": statistics.median(r["jobs_per_s"] for r in rs),
                    "median_settled_jobs_per_s": statistics.median(r["settled_jobs_per_s"] for r in rs),
                    "runs": [round(r["jobs_per_s"], 1) for r in rs],
                    **({"fluxion_defaults": fluxion_policies} if name == "fluxion" else {}),
                    "sched_ms_per_job": statistics.median(r["sched_ms_per_job"] for r in rs),
                    "instance_ms_per_job": statistics.median(r["instance_ms_per_job"] for r in rs),
                }
            )
    return rows, fluxion_policies


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), action="append", help="default: all")
    ap.add_argument("--scheduler", choices=SCHEDULERS, action="append", help="default: every one found")
    ap.add_argument("--njobs", type=int, help="override the number of jobs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sched-py-args", nargs="*", default=[], metavar="ARG")
    ap.add_argument(
        "--fluxion-prefix",
        default=os.environ.get("FLUXION_PREFIX"),
        help="flux-sched install prefix (default $FLUXION_PREFIX; unset: load its modules by name)",
    )
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args(argv)
    if flux_exe() is None:
        print("flux not on PATH", file=sys.stderr)
        return 1
    fluxion = fluxion_targets(a.fluxion_prefix)
    rows, policies = [], None
    for label in a.config or list(CONFIGS):
        nodes, cores, njobs = CONFIGS[label]
        r, p = bench_config(label, nodes, cores, a.njobs or njobs, a.reps, a.sched_py_args, fluxion, a.scheduler)
        rows, policies = rows + r, policies or p
    if policies is None and (not a.scheduler or "fluxion" in a.scheduler):
        where = a.fluxion_prefix or "FLUX_MODULE_PATH (no --fluxion-prefix / FLUXION_PREFIX)"
        print(f"Fluxion not found (or not loadable) in {where}: not benchmarked", file=sys.stderr)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'configuration':24s} {'jobs':>6s} {'scheduler':15s} {'median jobs/s':>14s} {'settled':>8s} "
        f"{'sched CPU ms/job':>17s} {'inst. CPU ms/job':>17s}  runs (jobs/s)"
    )
    for r in rows:
        print(
            f"{r['config']:24s} {r['njobs']:6d} {r['scheduler']:15s} {r['median_jobs_per_s']:14.1f} "
            f"{r['median_settled_jobs_per_s']:8.1f} {r['sched_ms_per_job']:17.3f} {r['instance_ms_per_job']:17.3f}  "
            + ", ".join(str(x) for x in r["runs"])
        )
    print()
    print(growth_table(rows))
    if policies is not None:
        print(f"fluxion: its defaults: {policies}")
    return 0


def growth_table(rows: list[dict]) -> str:
    """Scheduler CPU ms per job (median) against node count: one row per
    scheduler, one column per configuration, and each configuration's
    ratio to the first one (so the growth with the machine is in one row)."""
    configs = list(dict.fromkeys((r["nodes"], r["config"]) for r in rows))
    cell: dict[tuple[str, str], float] = {(r["scheduler"], r["config"]): r["sched_ms_per_job"] for r in rows}
    heads = [f"{n:,} nodes" for n, _ in configs]
    lines = ["scheduler CPU ms/job (ratio to the first column) against node count:"]
    lines.append(f"{'scheduler':15s} " + " ".join(f"{h:>18s}" for h in heads))
    for name in dict.fromkeys(r["scheduler"] for r in rows):
        base = cell.get((name, configs[0][1]))
        out = []
        for _, label in configs:
            v = cell.get((name, label))
            if v is None:
                out.append(f"{'-':>18s}")
            elif base:
                out.append(f"{f'{v:.3f} ({v / base:.1f}x)':>18s}")
            else:
                out.append(f"{v:18.3f}")
        lines.append(f"{name:15s} " + " ".join(out))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
