#!/usr/bin/env python3
"""Wall time and peak memory of every hostile input of ``t/hostile.py``.

Each case runs ``fluxsched-py`` (the script next to this Python) in a fresh
process with its address space capped at 1.5 GiB; the table gives the exit
status, the wall time, the peak resident memory of the process (from
``wait4``; for a shell pipeline, of its largest process) and the error line.
Issue 23 asks for at most 10 s and 1 GiB per case.

    python bench/bench_hostile.py                 # every case, median of 3
    python bench/bench_hostile.py --runs 1 --case rv1-no-ranks
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from t.hostile import CASES, SCRIPT, Case  # noqa: E402

CAP = 3 << 29  # 1.5 GiB of address space


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_once(case: Case, folder: Path, argv: list[str]) -> tuple[int, float, float, str]:
    """(status, wall seconds, peak RSS MiB, stderr) of one run."""
    cmd = argv if case.shell else [str(SCRIPT), *argv]
    err = folder / "stderr"
    with open(err, "wb") as e, open(os.devnull, "wb") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=e, preexec_fn=_cap)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024
    if case.shell:  # the pipeline's own children are the shell's: wait4 saw only sh
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    return proc.returncode, wall, peak, err.read_text(errors="replace").strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--case", action="append", help="run only these cases")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.case or c.name in args.case]
    print(f"| case | status | wall s (median of {args.runs}) | peak RSS MiB | error line |")
    print("|---|---:|---:|---:|---|")
    worst_wall = worst_rss = 0.0
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            argv = case.make(folder)
            runs = [run_once(case, folder, argv) for _ in range(args.runs)]
        status = runs[-1][0]
        wall = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        line = runs[-1][3].replace(str(folder), "…").replace("|", "\\|")
        worst_wall, worst_rss = max(worst_wall, wall), max(worst_rss, rss)
        print(f"| {case.name} | {status} | {wall:.2f} | {rss:.0f} | {line[:110]} |", flush=True)
    print(f"\nworst: {worst_wall:.2f} s, {worst_rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
