#!/usr/bin/env python3
"""The long fuzz run: every target of ``t/fuzzing.py`` for N minutes, with
random seeds, then one 1 MB input per target.

Each target gets an equal share of the time.  Any input that raises
something other than the project's own error (FluxschedError), or takes
longer than the time bound, stops that target and is printed (shrunk by
hypothesis) with its traceback; the exit status is 1 when any target broke.
The table gives inputs tried, how many were accepted and refused, the
slowest input (CPU seconds), and the CPU time and peak traced memory of the
1 MB input.

    python bench/fuzz.py --minutes 10                 # every target
    python bench/fuzz.py --minutes 2 --target jobspec --target match
    python bench/fuzz.py --list
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from t.fuzzing import TARGETS, TIME_LIMIT, Bug, Target, check, one_megabyte  # noqa: E402


def run_target(target: Target, seconds: float) -> tuple[str | None, float]:
    """Fuzz ``target`` for about ``seconds``, in rounds of 200 inputs with a
    fresh random seed each; (the bug found or None, the slowest input)."""
    deadline = time.monotonic() + seconds
    slowest = 0.0

    @settings(
        max_examples=200,
        derandomize=False,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(target.inputs())
    def fuzz(value):
        nonlocal slowest
        t0 = time.process_time()
        check(target, value)
        slowest = max(slowest, time.process_time() - t0)

    while time.monotonic() < deadline:
        try:
            fuzz()
        except Bug as exc:
            return str(exc), slowest
        except Exception as exc:  # hypothesis may wrap several failures in a group
            parts = getattr(exc, "exceptions", None) or [exc]
            text = "\n    ".join("".join(traceback.format_exception_only(type(e), e)).strip()[:600] for e in parts)
            return text, slowest
    return None, slowest


def big_input(target: Target) -> tuple[float, float, str]:
    """Seconds, peak traced MB and the outcome of the target's 1 MB input
    (timed untraced, then run again under tracemalloc for the memory)."""
    value = one_megabyte(target)
    t0 = time.process_time()
    try:
        check(target, value, time_limit=TIME_LIMIT)
        outcome = "ok"
    except Bug as exc:
        outcome = f"BUG {str(exc)[:200]}"
    dt = time.process_time() - t0
    tracemalloc.start()
    try:
        check(target, value, time_limit=60.0)
    except Bug:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return dt, peak / 2**20, outcome


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="total time over all targets (default 5)")
    ap.add_argument("--target", action="append", choices=sorted(TARGETS), help="only these targets (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(sorted(TARGETS)))
        return 0
    if args.minutes <= 0:
        ap.error("--minutes must be positive")
    names = args.target or sorted(TARGETS)
    share = args.minutes * 60 / len(names)
    print(f"{'target':<16} {'inputs':>8} {'ok':>8} {'refused':>8} {'slowest':>8} {'1MB s':>7} {'1MB MB':>7}  result")
    broke = 0
    for name in names:
        target = TARGETS[name]()
        bug, slowest = run_target(target, share)
        dt, peak, outcome = big_input(target)
        st = target.stats
        result = "ok" if bug is None and outcome == "ok" else "BUG"
        broke += result != "ok"
        counts = f"{st['inputs']:>8} {st['ok']:>8} {st['errors']:>8}"
        print(f"{name:<16} {counts} {slowest:>7.3f}s {dt:>7.2f} {peak:>7.1f}  {result}", flush=True)
        for text in (bug, outcome if outcome != "ok" else None):
            if text:
                print(f"    {text}", flush=True)
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
