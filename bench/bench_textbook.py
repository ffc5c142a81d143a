"""The replay against the textbook simulator (``bench/textbook.py``), trace by trace, policy by policy.

Each trace is read with Gaussier et al.'s predictsim filter
(:func:`textbook.read_filtered`) and written out again as the SWF both
sides read, so that they see the same jobs: each processor a one-core
node (``--procs-per-node 1``), each run time cut to its requested time.
Then, one policy per process, alternated ``--repeat`` times:

- the textbook: ``python bench/textbook.py FILE --policy P --out CSV``;
- the replay: ``fluxsched-py replay FILE --procs-per-node 1 --queue-policy P
  --no-progress --output-dir DIR`` (``--base TREE`` adds the same command
  run from another source tree, by ``PYTHONPATH``, such as a worktree of
  the main this one started from).

The table gives the median CPU time (user + system) and peak RSS of each
whole process (``os.wait4``), the replay's CPU over the textbook's, and
whether every job started at the same time on both sides.  Conservative is
compared under ``--reservation-nodes counted`` too, the textbook's own
model of a reservation (a count of processors over a window).

    python bench/bench_textbook.py [--traces KTH,SDSC,heavy] [--policies fcfs,easy,conservative]
        [--repeat 1] [--base TREE] [--swf-dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import textbook  # noqa: E402
from heavy_trace import write_heavy_swf  # noqa: E402

TRACES = {
    "KTH": "KTH-SP2-1996-2.swf.gz",
    "SDSC": "SDSC-BLUE-2000-4.1-cln.swf.gz",
    "NASA": "NASA-iPSC-1993-3.1-cln.swf.gz",
    "CEA": "CEA-Curie-2011-2.1-cln.swf.gz",
}


def filtered_copy(source: Path, out: Path) -> int:
    """Write the jobs predictsim's filter keeps from ``source`` to ``out``; their count."""
    _, jobs, header = textbook.read_filtered(str(source))
    with out.open("w") as f:
        f.writelines(h + "\n" for h in header)
        for j in jobs:
            f.write(f"{j.id} {j.submit!r} -1 {j.run!r} {j.procs} -1 -1 {j.procs} {j.wall!r} -1 1 1 1 1 1 -1 -1 -1\n")
    return len(jobs)


def measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of one run of ``cmd``, which must succeed.

    It runs in the tree its ``PYTHONPATH`` names: ``python -m`` puts the
    working directory first on the path, so a run started in another
    checkout would import that one's code instead."""
    cwd = (env or {}).get("PYTHONPATH") or None
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {err.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def starts(path: Path) -> dict[str, float]:
    with path.open() as f:
        return {row["job_id"]: float(row["starting_time"]) for row in csv.DictReader(f)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="KTH,SDSC,heavy")
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--base", type=Path, help="another source tree whose replay is timed beside this one")
    ap.add_argument("--swf-dir", type=Path, default=HERE.parent.parent / "shared" / "conformance" / "swf")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-textbook-"))
    trees = {"this": HERE.parent}
    if a.base:
        trees["base"] = a.base.resolve()
    rows = []
    for trace in a.traces.split(","):
        src = work / "heavy-source.swf" if trace == "heavy" else a.swf_dir / TRACES[trace]
        if trace == "heavy":
            write_heavy_swf(src)
        swf = work / f"{trace}.swf"
        njobs = filtered_copy(src, swf)
        for policy in a.policies.split(","):
            variants = [("", [])]
            if policy == "conservative":
                variants.append((" counted", ["--reservation-nodes", "counted"]))
            for label, extra in variants:
                tb_csv = work / f"{trace}-{policy}-textbook.csv"
                sides: dict[str, list[tuple[float, float]]] = {"textbook": []}
                cmds = {
                    "textbook": (
                        [sys.executable, str(HERE / "textbook.py"), str(swf), "--policy", policy, "--out", str(tb_csv)],
                        None,
                    )
                }
                for name, tree in trees.items():
                    out = work / f"{trace}-{policy}{label.strip()}-{name}"
                    env = dict(os.environ, PYTHONPATH=str(tree))
                    cmds[name] = (
                        [
                            sys.executable,
                            "-m",
                            "fluxsched_py.cli",
                            "replay",
                            str(swf),
                            "--procs-per-node",
                            "1",
                            "--queue-policy",
                            policy,
                            "--no-progress",
                            "--output-dir",
                            str(out),
                            *extra,
                        ],
                        env,
                    )
                    sides[name] = []
                for _ in range(a.repeat):
                    for name, (cmd, env) in cmds.items():
                        sides[name].append(measured(cmd, env))
                oracle = starts(tb_csv)
                tb_cpu = statistics.median(c for c, _ in sides["textbook"])
                for name, runs in sides.items():
                    cpu = statistics.median(c for c, _ in runs)
                    rss = statistics.median(r for _, r in runs)
                    if name == "textbook":
                        same = "-"
                    else:
                        got = starts(work / f"{trace}-{policy}{label.strip()}-{name}" / "jobs.csv")
                        differ = sum(1 for k, v in oracle.items() if got.get(k) != v)
                        same = "yes" if not differ else f"no ({differ} differ)"
                    ratio = "" if name == "textbook" else f"{cpu / tb_cpu:.1f}"
                    rows.append((trace, njobs, policy + label, name, cpu, rss, ratio, same))
    print(f"{'trace':6} {'jobs':>7} {'policy':20} {'side':9} {'CPU s':>8} {'RSS MiB':>8} {'ratio':>6}  equal")
    for trace, njobs, policy, name, cpu, rss, ratio, same in rows:
        print(f"{trace:6} {njobs:7d} {policy:20} {name:9} {cpu:8.2f} {rss:8.0f} {ratio:>6}  {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
