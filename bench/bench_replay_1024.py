"""The 100,000-job replays on 1,024 nodes of issue 15, by the command line.

Two traces, written to a temporary folder:

- *synthetic*: ``fluxsched-py synthetic --jobs 100000 --nodes 1024 --swf
  synthetic.swf`` (the bundled generator: load 0.7, sizes up to 64 nodes);
- *heavy*: ``python bench/heavy_trace.py heavy.swf`` (load 0.85, sizes up to
  the whole machine, log-normal run times, walltimes 1-3x the run time).

Each is replayed under each policy with ``fluxsched-py replay FILE --nodes
1024 --queue-policy P --no-progress --json``; the table gives the replay's
own time (wall clock, from its summary), the child's CPU time (user + system,
which a loaded machine inflates less), the ratios the issue asks for
(conservative / easy and easy / fcfs, on CPU time) and the makespan.  The
commands are printed as they run.

    python bench/bench_replay_1024.py [--traces synthetic,heavy] [--policies fcfs,easy,conservative]
        [--jobs 100000] [--repeat 1] [--timeout 1800]

Measured (synthetic trace; the same commands alternated in one run, main
before and after issue 15's per-job work was cut: aggregates and what jobs
hold left to their first reader, IdSet runs peeled, no resource_summary
text in the replay, no queue/job cycles for the collector; 3 runs each,
median; 2-core machine loaded, load average 4.5-9.5, which inflates CPU
time too), CPU seconds (user + system):

    policy        before   after   ratio   replay wall time before -> after
    fcfs           25.2     12.2    0.48    75.2 s -> 36.0 s (20.3 s in the least loaded run)
    easy           24.6     11.0    0.45    64.5 s -> 31.9 s (12.6 s)
    conservative   28.0     16.0    0.57    61.6 s -> 40.9 s (19.6 s)

Makespan (3,620,748 s) and mean waits identical before and after.

Later (issue 15's last must-hold: fcfs and easy under 10 s): a placement
decoded by the planner carries its flat bits, so allocate and release flip
the graph's flat free set by them and leave the per-vertex state to its
first reader; a pass with nothing pending only does its bookkeeping; the
workload and records are frozen out of the garbage collector during the
replay; rich and jsonschema are imported only when used; read_swf
remembers repeated field values.  The same commands alternated in one run,
main 5b79107 against the branch, 3 runs each, median, CPU seconds (user +
system, the whole command: start-up and reading the SWF included); 2-core
machine loaded by other work, load average 3.6-6.0:

    policy        main    branch   ratio   replay wall time main -> branch (median)
    fcfs          11.3     7.9     0.70    31.0 s -> 21.6 s
    easy          10.1     7.5     0.74    18.7 s -> 12.1 s (6.2 s in the least loaded run)
    conservative  13.3    10.6     0.79    15.0 s -> 10.1 s

The wall times are what the load left of two cores; the CPU times are the
figure to compare.  Makespan 3,620,748 s in every run.  The heavy trace
(``bench/heavy_trace.py``), the same commands on the branch, one run each,
niced, machine loaded: fcfs 62.6 s CPU (91.8 s before), easy 76.3 s
(105.5 s), conservative 313.8 s (358.6 s): conservative / easy 4.1, easy /
fcfs 1.22; makespans 67,431,116 / 32,680,066 / 32,692,408 s, unchanged;
peak RSS 2.08 GB under fcfs (unchanged), 214 MB and 217 MB.

Merged main, quiet machine (load average about 2.5), ``--traces synthetic
--repeat 3``, median of 3: CPU fcfs 7.1 s, easy 6.9 s, conservative 10.1 s
(replay 6.1 / 6.0 / 9.1 s); makespan 3,620,748 s.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cli() -> list[str]:
    exe = shutil.which("fluxsched-py")
    return [exe] if exe else [sys.executable, "-m", "fluxsched_py"]


def run(cmd: list[str], timeout: float) -> tuple[float, float, dict | None]:
    """Wall seconds, child CPU seconds, and the JSON summary (None on timeout)."""
    print("$", " ".join(cmd), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, float("nan"), None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default="synthetic,heavy")
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for trace in args.traces.split(","):
            path = Path(d) / f"{trace}.swf"
            if trace == "synthetic":
                gen = [*cli(), "synthetic", "--jobs", str(args.jobs), "--nodes", "1024", "--swf", str(path)]
            elif trace == "heavy":
                gen = [sys.executable, str(HERE / "heavy_trace.py"), str(path), "--jobs", str(args.jobs)]
            else:
                raise SystemExit(f"bench: unknown trace {trace!r}")
            print("$", " ".join(gen), flush=True)
            subprocess.run(gen, check=True)
            cpu_of: dict[str, float] = {}
            for pol in args.policies.split(","):
                cmd = [*cli(), "replay", str(path), "--nodes", "1024", "--queue-policy", pol, "--no-progress", "--json"]
                runs = [run(cmd, args.timeout) for _ in range(args.repeat)]
                done = [r for r in runs if r[2] is not None]
                if not done:
                    rows.append((trace, pol, f"> {args.timeout:.0f} s", "-", "-", "-"))
                    continue
                summary = done[-1][2]
                (result,) = summary if isinstance(summary, list) else [summary]
                elapsed = [(r[2][0] if isinstance(r[2], list) else r[2]).get("elapsed", r[0]) for r in done]
                replay_s = statistics.median(elapsed)
                cpu = statistics.median(r[1] for r in done)
                cpu_of[pol] = cpu
                ratio = ""
                if pol == "easy" and "fcfs" in cpu_of:
                    ratio = f"easy/fcfs {cpu / cpu_of['fcfs']:.2f}"
                if pol == "conservative" and "easy" in cpu_of:
                    ratio = f"cons/easy {cpu / cpu_of['easy']:.2f}"
                span = f"{result.get('makespan', 0):,.0f}"
                rows.append((trace, pol, f"{replay_s:.1f} s", f"{cpu:.1f} s", ratio, span))
    print(f"\n100,000-job replays on 1,024 nodes (median of {args.repeat})")
    head = ("trace", "policy", "replay time", "CPU", "ratio", "makespan")
    print(" | ".join(f"{h:>14}" for h in head))
    for row in rows:
        print(" | ".join(f"{c:>14}" for c in row))


if __name__ == "__main__":
    main()
