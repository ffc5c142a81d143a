#!/usr/bin/env python3
"""Load: a burst of 100,000 jobs into a real flux-core with sched-py, and how
long sched-py ever keeps a request waiting.

One ``flux start --test-size=1`` instance gets fake resources (NODES x CORES,
``flux resource reload -f``) and sched-py; N one-core jobs with mock
execution (``system.exec.test.run_duration``) are submitted as fast as
flux-python can (``submit_async``), then the run waits until every job is
inactive (``flux queue drain``) and sched-py has worked through every free.

Two ``flux ping --interval=INTERVAL`` probes run the whole time (the
module's from when it is loaded):

``sched-py``
    the module's own ``ping`` method, served by sched-py's reactor: its
    round trip is how long sched-py kept a request waiting (a scheduling
    pass, a KVS commit callback, a burst of allocs).  sched-py runs in its
    own process (``flux module-python-exec``), so this is the figure that
    says whether it ever blocks for more than 100 ms;
``broker``
    the broker's ping: that the broker itself stays responsive.

The CPU seconds the broker process and the scheduler used in each phase are
reported too (``cpu_by_phase``): unlike the probes' wall times, machine load
barely changes them, so they compare schedulers on a shared machine.

Each probe's answers are timestamped, and the latencies are also given by
phase: ``submit`` (pings sent while the jobs were being submitted) and
``schedule`` (from the end of submission to the drain).  Each scheduler
configuration runs in two modes (``--modes``), one after the other in the
same instance:

``burst``
    the scheduler is loaded while the jobs are submitted, and works through
    the allocs as they arrive (what a site sees);
``staged``
    no scheduler is loaded while the jobs are submitted: the job-manager
    queues them and sends no alloc, so the submit phase is flux-core's
    ingest alone (validation, KVS writes, the job-manager's and job-list's
    bookkeeping) -- the baseline the broker's ping is compared against.
    The scheduler is then loaded (``flux module load``: hello, ready, and
    the job-manager sends the queued allocs), and the schedule phase is the
    scheduler's burst alone: every alloc, start, free and KVS commit, with
    nothing else submitting.  (Stopping the queue instead does not scale:
    flux-core 0.88's ``flux queue start`` re-inserts every held job into its
    sorted alloc queue in hash order, quadratic in the jobs held, and did
    not return within 7 minutes at 100,000.)

So the scheduler's share of the broker's ping tail is the ``burst`` submit
phase against the ``staged`` one, and its share of the schedule phase is
the ``staged`` schedule phase against sched-simple's.

``--compare sched-simple`` runs the same bursts under flux-core's own
scheduler in the same instance; ``--compare 'sched-py nice=5'`` a sched-py
configuration (a module name and its arguments, in one word).  Reported,
per run: the probes' max, p50, p99, p99.9 and the count over 100 ms; the jobs' final
states (every job must complete); the scheduler's peak RSS (VmHWM); and
sched-py's own record of the longest reactor callback, in wall and CPU ms
(``flux module stats sched-py``: ``callback_max_ms``,
``callback_max_cpu_ms``), which machine load inflates only in wall time,
with ``slow_callbacks`` (which callback, and what it did, for each over 50 ms
of CPU) and the garbage collector's figures (``gc_*``, flux/gcpace.py); the
module's CPU seconds (``cpu_s``); and the machine's load average.  One JSON
row per run goes to stderr as it ends; at the end stdout gets a table of
every run (``--json``: the rows as one JSON list instead).
``--engine-only`` runs the same burst through the engine alone, in this
process (no Flux: alloc every job, then passes with every started job
freed at once), and reports its peak RSS and time.

Usage::

    PATH=/opt/flux/bin:$PATH python bench/bench_flux_load.py                 # 100,000 jobs, 10 x 64
    python bench/bench_flux_load.py --njobs 20000 --compare sched-simple 'sched-py nice=5'
    python bench/bench_flux_load.py --engine-only                             # no Flux needed
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SUBMIT = r"""
import json, sys, time
import flux, flux.job
from flux.job import JobspecV1

n, batch = int(sys.argv[1]), 2048
h = flux.Flux()
js = JobspecV1.from_command(["true"], num_tasks=1, cores_per_task=1)
js.setattr("system.exec.test.run_duration", sys.argv[2])
js.duration = float(sys.argv[3])
spec = js.dumps()
t0 = time.time()
for start in range(0, n, batch):
    futures = [flux.job.submit_async(h, spec) for _ in range(min(batch, n - start))]
    for f in futures:
        f.get_id()
    del futures
print(json.dumps({"t0": t0, "submitted": time.time()}))
"""

JOBSPEC = {
    "version": 1,
    "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
    "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
    "attributes": {"system": {"duration": 0}},
}

_TIME = re.compile(r"time=([0-9.]+) ms")


def percentiles(ms: list[float]) -> dict:
    if not ms:
        return {"samples": 0}
    s = sorted(ms)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))]

    return {
        "samples": len(s),
        "max_ms": s[-1],
        "p50_ms": statistics.median(s),
        "p99_ms": q(0.99),
        "p999_ms": q(0.999),
        "over_100ms": sum(1 for x in s if x > 100.0),
    }


class Probe:
    """``flux ping --interval`` on one target, each answer timestamped as it
    arrives (so latencies can be split by phase) and copied to ``log``."""

    def __init__(self, inst: Any, target: str, interval: float, log: Path) -> None:
        from t.flux.instance import flux_exe

        self.samples: list[tuple[float, float]] = []  # (time answered, round trip ms)
        self.log = open(log, "w")
        # Line-buffered: each answer is timestamped when it is printed, not
        # when a 4 KiB pipe buffer fills (seconds later).
        stdbuf = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.proc = subprocess.Popen(
            [*stdbuf, flux_exe(), "ping", f"--interval={interval}", target],
            env=inst.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.log.write(line)
            m = _TIME.search(line)
            if m:
                self.samples.append((time.time(), float(m.group(1))))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.reader.join(timeout=10)
        self.log.close()

    def latencies(self, lo: float = -math.inf, hi: float = math.inf) -> list[float]:
        """Round trips of the pings *sent* in ``[lo, hi]``."""
        return [ms for t, ms in self.samples if lo <= t - ms / 1000.0 <= hi]


def vm_hwm_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (load barely changes it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parse_config(spec: str, sched_py_args: list[str]) -> tuple[str, list[str]]:
    """``sched-simple`` or ``sched-py nice=5 annotate-interval=1``: a module
    and its arguments (plain ``sched-py`` takes ``--sched-py-args``)."""
    name, *args = spec.split()
    if name == "sched-py" and not args:
        args = list(sched_py_args)
    return name, args


def flux_run(a: argparse.Namespace) -> list[dict]:
    from t.flux.instance import Instance, flux_exe

    if flux_exe() is None:
        raise SystemExit("bench_flux_load: flux not on PATH")
    rows = []
    with Instance(1) as inst:
        inst.use_scheduler(None)
        inst.set_resources(a.nodes, a.cores)
        script = inst.dir / "submit.py"
        script.write_text(SUBMIT)
        for _ in range(a.repeat):
            for spec in a.configs:
                for mode in a.modes:
                    rows.append(one_run(a, inst, spec, mode, script))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
                    inst.use_scheduler(None)
                    inst.run("job", "purge", "--force", "--num-limit=0", check=False, timeout=3600)
    return rows


def _scheduler_pid(inst: Any, name: str) -> int:
    return int(re.findall(rf"module-python-exec {name} pid=(\d+)", inst.dmesg())[-1])


def one_run(a: argparse.Namespace, inst: Any, spec: str, mode: str, script: Path) -> dict:
    """One burst.  ``burst``: the scheduler is loaded while the jobs are
    submitted.  ``staged``: no scheduler while they are submitted (the
    job-manager queues them and sends no alloc: flux-core's ingest alone),
    then the scheduler is loaded and works through all of them alone."""
    name, args = parse_config(spec, a.sched_py_args)
    inst.use_scheduler(None)
    if mode == "burst":
        inst.use_scheduler(name, *args)
        time.sleep(1.0)
    load: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample_load() -> None:  # the machine's 1-min load average every 10 s
        while not stop.wait(10.0):
            load.append((time.time(), os.getloadavg()[0]))

    sampler = threading.Thread(target=sample_load, daemon=True)
    sampler.start()
    probes = {"broker": Probe(inst, "broker", a.interval, inst.dir / "ping-broker.log")}
    bpid = int(inst.run("getattr", "broker.pid").strip())
    pid: int | None = None
    cpu: dict[str, list[float | None]] = {"broker": [cpu_seconds(bpid)], "scheduler": [0.0]}

    def watch_module() -> None:
        nonlocal pid
        pid = _scheduler_pid(inst, name)
        cpu["scheduler"] = [cpu_seconds(pid)] * len(cpu["scheduler"])  # nothing before it was loaded
        probes["module"] = Probe(inst, name, a.interval, inst.dir / "ping-module.log")

    def mark() -> None:  # CPU seconds of the broker and the scheduler so far
        cpu["broker"].append(cpu_seconds(bpid))
        cpu["scheduler"].append(cpu_seconds(pid) if pid is not None else cpu["scheduler"][-1])

    try:
        if mode == "burst":
            watch_module()
        out = json.loads(
            inst.run("python", str(script), str(a.njobs), f"{a.run_duration}s", str(a.duration), timeout=7200)
        )
        t_released = time.time()
        mark()
        if mode == "staged":
            inst.run("module", "load", name, *args, timeout=3600)
            watch_module()
        inst.run("queue", "drain", timeout=7200)
        t_drained = time.time()
        mark()
        inst.run("ping", "-c1", name, timeout=3600)
        t_settled = time.time()
    finally:
        stop.set()
        for probe in probes.values():
            probe.stop()
    assert pid is not None
    stats_line = inst.try_run("jobs", "--stats-only", "-a").stdout.strip()  # exits 1: no active job
    st = inst.json("module", "stats", name)
    phases = {"submit": (out["t0"], out["submitted"]), "schedule": (t_released, t_drained)}
    lat = {t: percentiles(p.latencies()) for t, p in probes.items()}
    by_phase = {t: {ph: percentiles(p.latencies(lo, hi)) for ph, (lo, hi) in phases.items()} for t, p in probes.items()}
    keys = ("allocs", "frees", "commits", "commit_errors", "annotations", "annotations_merged", "annotations_dropped")
    keys += ("sched_passes",)
    keys += ("callback_max_ms", "callback_max_cpu_ms", "callbacks_over_100ms_cpu", "pass_deferrals")
    keys += ("gc_max_ms", "gc_max_cpu_ms", "gc_over_50ms_cpu", "gc_full", "gc_full_max_cpu_ms")
    keys += ("gc_full_collected", "gc_full_limit", "nice", "slow_callbacks")
    return {
        "scheduler": name,
        "config": " ".join([name, *args]),
        "mode": mode,
        "njobs": a.njobs,
        "resources": f"{a.nodes} nodes x {a.cores} cores",
        "duration": a.duration,
        "args": args,
        "submit_s": round(out["submitted"] - out["t0"], 1),
        "drained_s": round(t_drained - out["t0"], 1),
        "schedule_s": round(t_drained - t_released, 1),
        "settled_s": round(t_settled - out["t0"], 1),
        "jobs_per_s": round(a.njobs / (t_drained - out["t0"]), 1),
        "jobs": stats_line,
        "peak_rss_mib": round((vm_hwm_kib(pid) or 0) / 1024, 1),
        "cpu_s": round(cpu_seconds(pid) or 0.0, 1),
        "load_average": {"median": statistics.median(x for _, x in load), "max": max(x for _, x in load)}
        if load
        else None,
        "stats": {k: st[k] for k in keys if k in st},
        "ping_module": lat["module"],
        "ping_broker": lat["broker"],
        "cpu_by_phase": {
            who: {ph: round(c[i + 1] - c[i], 2) for i, ph in enumerate(("submit", "schedule"))}
            for who, c in cpu.items()
            if None not in c
        },
        "ping_by_phase": by_phase,
        "load_by_phase": {
            ph: statistics.median(v) if (v := [x for t, x in load if lo <= t <= hi]) else None
            for ph, (lo, hi) in phases.items()
        },
    }


def _ping_cell(p: dict) -> str:
    if not p.get("samples"):
        return "-"
    return f"{p['p99_ms']:.0f}/{p['p999_ms']:.0f}/{p['max_ms']:.0f} ({p['over_100ms']})"


def table(rows: list[dict]) -> str:
    """One line per run: the broker's ping by phase (p99 / p99.9 / max ms,
    and how many pings over 100 ms), CPU seconds by phase, jobs/s, load.
    A ``staged`` run's submit phase is flux-core's ingest with no scheduler
    loaded (the baseline); its schedule phase is the scheduler alone."""
    head = (
        "config", "mode", "jobs/s", "submit s", "sched s",
        "broker ping submit", "broker ping schedule", "module ping schedule",
        "broker CPU s sub+sch", "sched CPU s sub+sch", "annotations", "load",
    )  # fmt: skip
    out = [head]
    for r in rows:
        cpu = r.get("cpu_by_phase", {})
        b, s = cpu.get("broker", {}), cpu.get("scheduler", {})
        la = r.get("load_average") or {}
        out.append(
            (
                r["config"],
                r["mode"],
                f"{r['jobs_per_s']:.1f}",
                f"{r['submit_s']:.0f}",
                f"{r['schedule_s']:.0f}",
                _ping_cell(r["ping_by_phase"]["broker"]["submit"]),
                _ping_cell(r["ping_by_phase"]["broker"]["schedule"]),
                _ping_cell(r["ping_by_phase"]["module"]["schedule"]),
                f"{b.get('submit', 0):.1f}+{b.get('schedule', 0):.1f}",
                f"{s.get('submit', 0):.1f}+{s.get('schedule', 0):.1f}",
                str(r["stats"].get("annotations", "-")),
                f"{la.get('median', 0):.1f}",
            )
        )
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in out]
    lines.insert(1, "  ".join("-" * w for w in widths))
    note = "ping cells: p99/p99.9/max ms (pings over 100 ms); staged submit = flux-core's ingest, no scheduler loaded"
    return "\n".join([*lines, note])


def engine_run(a: argparse.Namespace) -> dict:
    """The same burst through the engine alone: peak RSS and time."""
    from fluxsched_py.engine import Engine, ResponseType
    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.resource.rv1 import hosts_rv1

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    g = ResourceGraph.from_rv1(hosts_rv1([f"node{i}" for i in range(a.nodes)], a.cores))
    e = Engine(g, [*a.sched_py_args, "policy=low"])
    spec = {**JOBSPEC, "attributes": {"system": {"duration": a.duration}}}
    for jobid in range(1, a.njobs + 1):
        e.alloc(jobid, 16, 1, float(jobid), spec)
    done = 0
    now = 0.0
    while done < a.njobs:
        res = e.schedule(now, 0.05)
        started = [r.id for r in res.responses if r.type is ResponseType.SUCCESS]
        for jobid in started:
            e.free(jobid, None, True)
        done += len(started)
        now += a.run_duration
        if not started and not res.more and e.pending_count:
            raise SystemExit(f"engine stalled with {e.pending_count} pending")
    return {
        "njobs": a.njobs,
        "resources": f"{a.nodes} nodes x {a.cores} cores",
        "duration": a.duration,
        "engine_s": round(time.perf_counter() - t0, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_mib": round(rss0 / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--njobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--cores", type=int, default=64)
    ap.add_argument("--run-duration", type=float, default=0.001, help="mock execution seconds per job")
    ap.add_argument(
        "--duration", type=float, default=60.0, help="each job's time limit (jobspec duration; 0: unlimited)"
    )
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between pings of each probe")
    ap.add_argument("--sched-py-args", nargs="*", default=["queue-policy=easy"], metavar="ARG")
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=("burst", "staged"),
        default=["burst", "staged"],
        help="burst: scheduler loaded while submitting; staged: loaded once every job is submitted",
    )
    ap.add_argument("--engine-only", action="store_true", help="no Flux: the engine alone, for its peak RSS")
    ap.add_argument(
        "--compare",
        nargs="*",
        default=[],
        metavar="CONFIG",
        help="then the same bursts under these schedulers ('sched-simple', 'sched-py nice=5', ...)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="run every configuration this many times, interleaved")
    ap.add_argument("--only", action="store_true", help="run the --compare configurations only, in their order")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    a = ap.parse_args(argv)
    a.configs = list(a.compare) if a.only else ["sched-py", *a.compare]
    if a.engine_only:
        print(json.dumps(engine_run(a), indent=1))
        return 0
    rows = flux_run(a)
    print(json.dumps(rows, indent=1) if a.json else table(rows))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
