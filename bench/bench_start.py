"""What it costs to start and end jobs on a very large machine: this tree
against another checkout, run at the same time.

Each case is one ``fluxsched-py replay ... --no-progress --json
--output-dir D`` command; in each round the command runs twice at once,
once with this tree and once with ``--base DIR`` (a worktree of the main we
started from, by ``PYTHONPATH``), so that both share the machine's load.
The table gives, per case and tree, the median over ``--rounds`` of the
wall time, the CPU time (user + system, ``os.wait4``) and the peak RSS, the
ratio this / base of the CPU medians, and whether every round's jobs.csv
was byte for byte the same in both trees (same jobs, start times, nodes).

Cases (``--cases``, comma-separated):

- ``curie-easy``, ``curie-cons``: CEA Curie 2011 (``--swf-dir``), its first
  ``--jobs`` (20,000) jobs, 93,312 one-core nodes (``--procs-per-node 1``),
  under easy and conservative;
- ``curie-late``: jobs 100,001-120,000 of Curie under easy (``--skip
  100000``);
- ``heavy-fcfs``: the heavy trace of ``bench/heavy_trace.py`` (seed 1,
  made in a temporary directory unless ``--heavy FILE``), its first 20,000
  jobs on 1,024 nodes under fcfs.

    python bench/bench_start.py --base /tmp/base-s12 [--rounds 3] [--cases curie-easy,heavy-fcfs]

This is a benchmark, not a test: it asserts nothing about time.

What changed (session 12): a placement the planner decodes into a
ResourceSet builds its ``{vertex: {type: ids}}`` leaves only when
something reads them (``ResourceSet.lazily``): a job of thousands of whole
one-core nodes starts, runs and ends with its containers, its ranks and its
flat bits only (the graph flips its free set by the bits; the timeline
keeps the bits); the feasibility of a whole-node request is one count of
the machine's whole nodes instead of a search of it for each new size; the
n highest or lowest whole nodes are cut by a binary search on a window
that halves (about four passes over the bits up to the cut, not
2 log2(width) passes over the machine); a placement of a few nodes finds
its bits from its nonzero bytes.

Measured on the 2-core machine shared with another session and its
benchmarks (load average 3-5: wall times are two to three times the CPU
times), main 8733fa3 and this tree (commit 6bd4c60; the later small-set
peel changes only placements of a few nodes) at the same time,
``--rounds 3``, medians:

    case        tree    wall s    CPU s  RSS MiB CPU ratio jobs.csv same
    curie-easy  main      68.8     38.3      400
    curie-easy  this      57.7     27.0      304      0.71           yes
    curie-late  main     157.7     60.7      385
    curie-late  this     149.7     52.9      314      0.87           yes
    heavy-fcfs  main      44.8     16.2      178
    heavy-fcfs  this      51.9     15.8      110      0.97           yes

Under conservative (``--cases curie-cons --rounds 1``, one round for lack
of time, load average 5-7):

    curie-cons  main     765.5    173.5      659
    curie-cons  this     731.5    160.7      403      0.93           yes

There the planner's searches dominate (``Planner._enough_whole`` about
half of the samples), which this change leaves alone.

``python bench/bench_match.py --no-fluxion`` (16,384 nodes), this tree
and ``--tree /tmp/base-s12`` at the same time, on the machine loaded as
above (load average 5-6, so every time is several times an idle
machine's), median ms, match / match + allocate:

    tree   graph     load s   1 core        1 node        1,024 nodes
    main   recipe    14.76    0.25 / 0.27   0.29 / 0.31   347.19 / 382.87
    this   recipe    14.38    0.24 / 0.26   0.31 / 0.34   329.41 / 378.20
    main   GraphML   15.56    0.26 / 0.28   0.28 / 0.30   260.39 / 301.40
    this   GraphML   15.40    0.21 / 0.22   0.28 / 0.30   250.76 / 287.35

(0.20 GiB each): no slower.  Its matches go through the matcher, not the
planner's flat paths: what changed there is only that a ResourceSet's
leaves are read through a property.

Where the time went (py-spy, Curie's first 20,000 jobs under easy):
decoding placements into ResourceSets 18.7 % of the samples on main
(``FlatCodec.decode``, 11 % at the line that made a dict per node), 7 %
now (placements of a few nodes, still decoded at once); feasibility
searches of the whole machine 10.3 %, none now; the cut of the n highest
whole nodes 6.3 % self on main.  By hand (``timeit``, best of 5, 93,312
one-core nodes, both trees in turn): decoding a placement of 64 scattered
nodes 2,522 us on main, 58 us now; of 20,000 scattered nodes 30.6 ms,
34 us (its leaves unbuilt); the 1,000 highest and 3,000 lowest of 93,312
whole nodes 117 us, 9 us; of a machine whose free nodes are sparse at the
top, 3,000 of each 207 us, 36 us.  What is left on these paths is the
planner's timeline (``Timeline._materialize``, ``available_bits``) and, on
the heavy trace, the backfill pass (another session's work).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CURIE = "CEA-Curie-2011-2.1-cln.swf.gz"


def default_swf_dir() -> Path:
    sys.path.insert(0, str(HERE.parent))
    from t.shared import SHARED  # the one place that finds ../shared

    return Path(SHARED) / "conformance" / "swf"


def start(cmd: list[str], tree: Path, out: Path) -> subprocess.Popen:
    """Start ``cmd`` with ``PYTHONPATH=tree``, its output and jobs.csv in ``out``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout", "wb") as stdout, open(out / "stderr", "wb") as stderr:
        return subprocess.Popen([*cmd, "--output-dir", str(out)], stdout=stdout, stderr=stderr, env=env, cwd="/")


def run_together(runs: dict[str, tuple[list[str], Path, Path]], timeout: float) -> dict[str, tuple]:
    """Start every ``name: (cmd, tree, out)`` at once; each one's (wall s,
    CPU s, peak RSS bytes, jobs.csv) as it ends (``os.wait4`` on any child)."""
    t0 = time.perf_counter()
    procs = {}
    for name, (cmd, tree, out) in runs.items():
        p = start(cmd, tree, out)
        procs[p.pid] = (name, p, out)
    timers = [threading.Timer(timeout, p.kill) for _, p, _ in procs.values()]
    for timer in timers:
        timer.start()
    got = {}
    try:
        while procs:
            pid, status, ru = os.wait4(-1, 0)
            if pid not in procs:
                continue
            name, p, out = procs.pop(pid)
            wall = time.perf_counter() - t0
            p.returncode = code = os.waitstatus_to_exitcode(status)
            if code != 0:
                raise SystemExit(f"{out}: exit {code}: {(out / 'stderr').read_text()[-400:]}")
            json.loads((out / "stdout").read_text())  # a summary was printed
            got[name] = (wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, (out / "jobs.csv").read_bytes())
    finally:
        for timer in timers:
            timer.cancel()
        for _, p, _ in procs.values():
            p.kill()
    return got


def cases(args: argparse.Namespace, tmp: Path) -> dict[str, list[str]]:
    curie = str(Path(args.swf_dir) / CURIE)
    heavy = args.heavy
    wanted = args.cases.split(",")
    if "heavy-fcfs" in wanted and heavy is None:
        heavy = str(tmp / "heavy.swf")
        subprocess.run([sys.executable, str(HERE / "heavy_trace.py"), heavy], check=True, cwd="/")
    replay = [sys.executable, "-m", "fluxsched_py", "replay"]
    tail = ["--no-progress", "--json"]
    n = str(args.jobs)
    every = {
        "curie-easy": [*replay, curie, "--procs-per-node", "1", "--queue-policy", "easy", "--jobs", n, *tail],
        "curie-cons": [*replay, curie, "--procs-per-node", "1", "--queue-policy", "conservative", "--jobs", n, *tail],
        "curie-late": [
            *replay,
            curie,
            "--procs-per-node",
            "1",
            "--queue-policy",
            "easy",
            "--skip",
            "100000",
            "--jobs",
            n,
            *tail,
        ],
        "heavy-fcfs": [*replay, str(heavy), "--nodes", "1024", "--queue-policy", "fcfs", "--jobs", n, *tail],
    }
    unknown = [c for c in wanted if c not in every]
    if unknown:
        raise SystemExit(f"bench_start.py: --cases: unknown case {unknown[0]!r} (known: {', '.join(every)})")
    return {c: every[c] for c in wanted}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="a worktree of the main to compare with (run by PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each tree per case (default 3)")
    ap.add_argument("--cases", default="curie-easy,curie-late,heavy-fcfs,curie-cons")
    ap.add_argument("--jobs", type=int, default=20000, help="jobs replayed per case (default 20000)")
    ap.add_argument("--swf-dir", default=None, help="where CEA-Curie-2011-2.1-cln.swf.gz is")
    ap.add_argument("--heavy", default=None, help="the heavy trace (default: made with bench/heavy_trace.py)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is killed")
    args = ap.parse_args()
    args.swf_dir = args.swf_dir or str(default_swf_dir())
    trees = {"main": Path(args.base).resolve(), "this": HERE.parent}
    print(
        f"{'case':11s} {'tree':5s} {'wall s':>8s} {'CPU s':>8s} {'RSS MiB':>8s}"
        f" {'CPU ratio':>9s} {'jobs.csv same':>13s}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for case, cmd in cases(args, tmp).items():
            got: dict[str, list[tuple[float, float, int]]] = {t: [] for t in trees}
            same = True
            for r in range(args.rounds):
                runs = {t: (cmd, tree, tmp / f"{case}-{t}-{r}") for t, tree in trees.items()}
                done = run_together(runs, args.timeout)
                csvs = {}
                for t, (wall, cpu, rss, csv) in done.items():
                    got[t].append((wall, cpu, rss))
                    csvs[t] = csv
                    print(
                        f"  {case} {t} round {r + 1}: {wall:.1f} s, {cpu:.1f} s CPU, {rss / 2**20:.0f} MiB",
                        file=sys.stderr,
                    )
                same = same and csvs["main"] == csvs["this"]
            base_cpu = statistics.median(c for _, c, _ in got["main"])
            for t in trees:
                wall = statistics.median(w for w, _, _ in got[t])
                cpu = statistics.median(c for _, c, _ in got[t])
                rss = statistics.median(m for _, _, m in got[t])
                ratio = f"{cpu / base_cpu:.2f}" if t == "this" else ""
                verdict = ("yes" if same else "NO") if t == "this" else ""
                print(
                    f"{case:11s} {t:5s} {wall:8.1f} {cpu:8.1f} {rss / 2**20:8.0f} {ratio:>9s} {verdict:>13s}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
