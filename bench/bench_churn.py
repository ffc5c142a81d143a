#!/usr/bin/env python3
"""In-process per-job cost of sched-py under flux-like alloc/free churn (no Flux).

Reproduces what the broker module does in ``bench_flux_throughput.py``,
without the broker: the :class:`~fluxsched_py.flux.driver.Driver` gets the
instance R (``NODES x CORES``, as ``flux R encode`` writes it), then
``sched.alloc`` messages (JSON text, decoded as the module decodes it; the
jobspec ``flux submit`` sends for a 1-core job), and ``sched.free`` for the
jobs it started.  Responses and KVS commits are JSON-encoded as the module
encodes them, and commits complete at once.

The traffic is a loop of *ticks*: ``--arrive`` allocs arrive, one pass runs
(budgeted like the module's), then frees arrive for started jobs once more
than ``--running`` jobs hold resources (oldest first).  ``--running 0``
frees nothing until every job has started (the machine fills up, as when
the job-exec pipeline is slower than the scheduler); a small value is
churn with few jobs running at once.

Prints the CPU time per job (every alloc, pass and free, plus the JSON work
the module does), the median of ``--repeat`` runs; ``--profile`` prints the
top of a cProfile of one run.

    python bench/bench_churn.py                          # 1000x8, 8192 jobs, both patterns
    python bench/bench_churn.py --running 0 --profile 25
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fluxsched_py.flux.driver import Driver  # noqa: E402

JOBSPEC = {
    "resources": [{"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}], "label": "task"}],
    "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
    "attributes": {
        "system": {
            "duration": 0,
            "cwd": "/tmp",
            "shell": {"options": {"rlimit": {"cpu": -1, "fsize": -1, "nofile": 20000, "stack": 8388608}}},
            "exec": {"test": {"run_duration": "0.001s"}},
        }
    },
    "version": 1,
}


def instance_R(nodes: int, cores: int) -> dict:
    return {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": f"0-{nodes - 1}", "children": {"core": f"0-{cores - 1}"}}],
            "nodelist": [f"node[0-{nodes - 1}]"],
            "starttime": 0.0,
            "expiration": 0.0,
        },
    }


class Transport:
    """The module's transport minus the broker: JSON-encode what would be sent."""

    def __init__(self) -> None:
        self.started: deque[int] = deque()
        self.driver: Driver | None = None

    def respond(self, msg, payload) -> None:
        if payload is not None:
            text = json.dumps(payload, separators=(",", ":"))
            if payload.get("type") == 0:
                self.started.append(payload["id"])
            del text

    def respond_error(self, msg, errnum, text) -> None:
        pass

    def commit(self, puts, done) -> None:
        for _key, value in puts:
            json.dumps(value)  # KVSTxn.put encodes the value
        done(None)

    def log(self, level, text) -> None:
        pass

    def raise_exception(self, jobid, type, severity, note) -> None:
        pass

    def request_pass(self, delay) -> None:
        pass


def run(nodes: int, cores: int, njobs: int, arrive: int, running: int, args: list[str]) -> tuple[float, dict]:
    tr = Transport()
    ticks = iter(range(1 << 62))
    d = Driver(tr, args, clock=lambda: 1000.0 + 1e-3 * next(ticks))  # every pass at a new time, as under flux
    tr.driver = d
    d.acquire({"resources": instance_R(nodes, cores), "up": f"0-{nodes - 1}"})
    d.hello_done()
    d.ready({"count": 0})
    d.run_pass()
    msgs = []
    for i in range(njobs):
        p = {"id": 1000 + i, "priority": 16, "userid": 0, "t_submit": 1.0 + i * 1e-4, "jobspec": JOBSPEC}
        msgs.append(json.dumps(p))
    gc.collect()
    t0 = time.process_time()
    i = 0
    held = tr.started
    freed = 0
    while freed < njobs:
        for _ in range(arrive):
            if i < njobs:
                d.handle("sched.alloc", i, json.loads(msgs[i]))
                i += 1
        while d.run_pass():
            pass
        limit = running if running > 0 and i < njobs else 0
        if running <= 0 and i < njobs:
            limit = len(held)
        while len(held) > limit:
            jobid = held.popleft()
            d.handle("sched.free", None, json.loads(json.dumps({"id": jobid, "final": True})))
            freed += 1
        if i >= njobs and not held and freed < njobs:
            while d.run_pass():
                pass
            if not held:
                raise RuntimeError(f"stuck: {freed} freed of {njobs}")
    dt = time.process_time() - t0
    stats = d.stats_get()
    d.close()
    return dt, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument("--njobs", type=int, default=8192)
    ap.add_argument("--arrive", type=int, default=32, help="allocs per tick")
    ap.add_argument("--running", type=int, action="append", help="jobs held before frees start (0: fill up)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N of a cProfile")
    ap.add_argument("--sched-py-args", nargs="*", default=[])
    a = ap.parse_args(argv)
    for running in a.running or [64, 0]:
        label = f"{a.nodes}x{a.cores} {a.njobs} jobs, {'fill' if running <= 0 else f'{running} running'}"
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            run(a.nodes, a.cores, a.njobs, a.arrive, running, a.sched_py_args)
            prof.disable()
            print(f"== profile: {label}")
            pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
            continue
        times = []
        for _ in range(a.repeat):
            dt, stats = run(a.nodes, a.cores, a.njobs, a.arrive, running, a.sched_py_args)
            times.append(dt)
        med = statistics.median(times)
        print(
            f"{label}: {1e6 * med / a.njobs:8.1f} us/job (median of {a.repeat}: "
            + ", ".join(f"{t:.2f}" for t in times)
            + f" s; passes {stats['sched_passes']}, yields {stats['sched_yields']})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
