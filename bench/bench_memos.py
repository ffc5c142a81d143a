"""What each memo is worth: the replay with every memo on, with all off, and with each one alone off.

    python bench/bench_memos.py [--traces KTH] [--workloads limits,reservations,campaign]
        [--policies fcfs,easy,conservative] [--repeat 1] [--memos NAME,...]

Each run is one process (``fluxsched-py replay``), timed as CPU seconds of
the child.  A trace of ``--traces`` is cut by predictsim's filter as in
``bench_textbook.py``, each processor a one-core node.  The SWF traces
exercise none of the jobspec, limits, reserved and constraint memos,
so ``--workloads`` adds inputs that do:

- ``limits``: KTH-SP2 with run limits on every user (``--config`` with
  ``[policy.scheduler.limits] user = { jobs = 4, nodes = 64 }``);
- ``reservations``: KTH-SP2 with eight 2-hour advance reservations of a
  quarter of the machine spread over the trace (``--reservations``);
- ``campaign``: Batsim's seed-1 workload on its 128 nodes with a 2,000-job
  best-effort campaign (``t/data/batsim/seed1_campaign2000.json.gz``),
  whose jobs run on lent nodes, and ``--annotate-depth 64``.

The jobspec memo is timed apart (``jobspec parse``): the parse of the
jobspec of a recorded Flux alloc (``t/data/flux/alloc-free.jsonl``) against
the key the memo computes for it, since only the Flux driver hands the
engine jobspecs.  ``FLUXSCHED_PY_MEMOS`` turns memos off
(:mod:`fluxsched_py.memo`).  Each run with memos off alternates with one with
every memo on; the table gives the median CPU of each side, the median of the
pairs' ratios (above 1: the memo saves that much), and whether every
``jobs.csv`` is byte for byte the one with every memo on.  A memo whose
ratio stays near 1 on every trace and policy is not worth its code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_textbook import TRACES, filtered_copy, measured  # noqa: E402
from heavy_trace import write_heavy_swf  # noqa: E402

from fluxsched_py.memo import ENV, MEMOS  # noqa: E402


def replay_input(name: str, work: Path, swf_dir: Path) -> list[str]:
    """The replay's arguments for the input ``name`` (a trace or one of the workloads above)."""
    if name == "campaign":
        return [str(HERE.parent / "t" / "data" / "batsim" / "seed1_campaign2000.json.gz"), "--annotate-depth", "64"]
    trace = "KTH" if name in ("limits", "reservations") else name
    swf = work / f"{trace}.swf"
    if not swf.exists():
        src = work / "heavy-source.swf" if trace == "heavy" else swf_dir / TRACES[trace]
        if trace == "heavy":
            write_heavy_swf(src)
        filtered_copy(src, swf)
    argv = [str(swf), "--procs-per-node", "1"]
    if name == "limits":
        conf = work / "limits.toml"
        conf.write_text("[policy.scheduler.limits]\nuser = { jobs = 4, nodes = 64 }\n")
        argv += ["--config", str(conf)]
    elif name == "reservations":
        submits = [float(line.split()[1]) for line in swf.read_text().splitlines() if line and line[0] != ";"]
        last, nodes = max(submits), 100
        windows = [
            {"name": f"w{k}", "nodes": nodes // 4, "start": last * (k + 1) / 9, "duration": 7200} for k in range(8)
        ]
        resv = work / "reservations.json"
        resv.write_text(json.dumps(windows))
        argv += ["--reservations", str(resv)]
    return argv


def jobspec_parse() -> str:
    """The parse of a recorded Flux alloc's jobspec against the memo's key for it, per call."""
    from fluxsched_py.jobspec import parse_jobspec

    with (HERE.parent / "t" / "data" / "flux" / "alloc-free.jsonl").open() as f:
        spec = next(m["payload"]["jobspec"] for m in map(json.loads, f) if m.get("topic") == "sched.alloc")
    n = 2000
    parse = min(timeit.repeat(lambda: parse_jobspec(spec), number=n, repeat=3)) / n
    key = min(timeit.repeat(lambda: json.dumps(spec, sort_keys=True, separators=(",", ":")), number=n, repeat=3)) / n
    return f"{parse * 1e6:.1f} us a parse, {key * 1e6:.1f} us the key of a hit ({parse / key:.0f}x)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="KTH", help="SWF traces (KTH, SDSC, heavy, ...), or none")
    ap.add_argument("--workloads", default="", help="limits, reservations, campaign (see above)")
    ap.add_argument("--memos", default=",".join(MEMOS), help="the memos to turn off one by one")
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--swf-dir", type=Path, default=HERE.parent.parent / "shared" / "conformance" / "swf")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-memos-"))
    variants = [("all off", "off"), *((f"{name} off", name) for name in a.memos.split(",") if name)]
    print(f"jobspec parse: {jobspec_parse()}")
    print(f"{'input':12} {'policy':13} {'memos':16} {'on CPU':>8} {'off CPU':>8} {'ratio':>6}  same jobs.csv")
    inputs = [*(t for t in a.traces.split(",") if t and t != "none"), *(w for w in a.workloads.split(",") if w)]
    for trace in inputs:
        argv = replay_input(trace, work, a.swf_dir)
        for policy in a.policies.split(","):

            def run(
                label: str, value: str, policy: str = policy, trace: str = trace, argv: list[str] = argv
            ) -> tuple[float, bytes]:
                out = work / f"{trace}-{policy}-{label.replace(' ', '-')}"
                env = dict(os.environ, PYTHONPATH=str(HERE.parent), **{ENV: value})
                cmd = [sys.executable, "-m", "fluxsched_py.cli", "replay", *argv]
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
                    f"{trace:12} {policy:13} {label:16} {statistics.median(ons):8.2f} {cpu:8.2f} {ratio:6.2f}  "
                    f"{'yes' if same else 'NO'}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
