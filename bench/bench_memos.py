"""What each memo is worth: the replay with every memo on, with all off, and with each one alone off.

    python bench/bench_memos.py [--traces KTH] [--policies fcfs,easy,conservative] [--repeat 1]

Each run is one process (``fluxsched-py replay``, each processor a one-core
node, the trace cut by predictsim's filter as in ``bench_textbook.py``),
timed as CPU seconds of the child.  ``FLUXSCHED_PY_MEMOS`` turns memos off
(:mod:`fluxsched_py.memo`).  Each run with memos off alternates with one with
every memo on; the table gives the median CPU of each side, the median of the
pairs' ratios (above 1: the memo saves that much), and whether every
``jobs.csv`` is byte for byte the one with every memo on.  A memo whose
ratio stays near 1 on every trace and policy is not worth its code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_textbook import TRACES, filtered_copy, measured  # noqa: E402
from heavy_trace import write_heavy_swf  # noqa: E402

from fluxsched_py.memo import ENV, MEMOS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="KTH")
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--swf-dir", type=Path, default=HERE.parent.parent / "shared" / "conformance" / "swf")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-memos-"))
    variants = [("all off", "off"), *((f"{name} off", name) for name in MEMOS)]
    print(f"{'trace':6} {'policy':13} {'memos':16} {'on CPU':>8} {'off CPU':>8} {'ratio':>6}  same jobs.csv")
    for trace in a.traces.split(","):
        src = work / "heavy-source.swf" if trace == "heavy" else a.swf_dir / TRACES[trace]
        if trace == "heavy":
            write_heavy_swf(src)
        swf = work / f"{trace}.swf"
        filtered_copy(src, swf)
        for policy in a.policies.split(","):

            def run(
                label: str, value: str, policy: str = policy, trace: str = trace, swf: Path = swf
            ) -> tuple[float, bytes]:
                out = work / f"{trace}-{policy}-{label.replace(' ', '-')}"
                env = dict(os.environ, PYTHONPATH=str(HERE.parent), **{ENV: value})
                cmd = [sys.executable, "-m", "fluxsched_py.cli", "replay", str(swf), "--procs-per-node", "1"]
                cmd += ["--queue-policy", policy, "--no-progress", "--output-dir", str(out)]
                cpu = measured(cmd, env)[0]
                return cpu, (out / "jobs.csv").read_bytes()

            # Each variant alternates with a run with every memo on, so a drift
            # of the machine's speed moves both sides of each ratio alike.
            for label, value in variants:
                ons, offs, ratios, same = [], [], [], True
                for _ in range(a.repeat):
                    on_cpu, on_csv = run("all on", "")
                    off_cpu, off_csv = run(label, value)
                    ons.append(on_cpu)
                    offs.append(off_cpu)
                    ratios.append(off_cpu / on_cpu)
                    same = same and off_csv == on_csv
                cpu, ratio = statistics.median(offs), statistics.median(ratios)
                print(
                    f"{trace:6} {policy:13} {label:16} {statistics.median(ons):8.2f} {cpu:8.2f} {ratio:6.2f}  "
                    f"{'yes' if same else 'NO'}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
