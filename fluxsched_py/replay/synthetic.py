"""The bundled example: a seeded synthetic HPC workload in Batsim's format.

``examples/synthetic_seed42_64nodes.json`` is ``generate()``'s output, written
by ``fluxsched-py synthetic --json examples/synthetic_seed42_64nodes.json``
(the defaults: 300 jobs, 64 nodes, seed 42, load 0.7).  ``--swf OUT`` writes the
same jobs in the Standard Workload Format (:func:`to_swf`), so both files
replay to the same schedule.  Arrivals are a
Poisson process; sizes favour powers of two; walltimes are round requests a
user would type; run times are a fraction of the walltime, and about 5 % of
jobs overrun it (the replay kills them at their walltime).  The CLI falls back
to generating the same workload in memory when the file is not installed.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

from ..cliutil import ArgumentParser, UsageError, boundary, bounded_int, open_output
from ..limits import MAX_JOBS, MAX_NODES, MAX_SECONDS

__all__ = ["generate", "to_swf", "EXAMPLE_NAME", "example_path", "write_synthetic_swf", "main"]

PROG = "fluxsched-py synthetic"

EXAMPLE_NAME = "synthetic_seed42_64nodes.json"


def generate(seed: int = 42, njobs: int = 300, nodes: int = 64, load: float = 0.7) -> dict:
    """A Batsim workload dict: ``{nb_res, jobs, profiles}`` (delay profiles)."""
    rng = random.Random(seed)
    sizes = [1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32, 3, 6, 12, 24, 48]
    walls = [600, 1800, 3600, 7200, 14400]
    jobs, profiles = [], {}
    specs = []
    for _ in range(njobs):
        res = min(rng.choice(sizes), nodes)
        wall = rng.choice(walls)
        frac = rng.uniform(1.0, 1.3) if rng.random() < 0.05 else rng.betavariate(1.2, 1.8)
        run = round(max(30.0, wall * frac), 2)
        specs.append((res, wall, run))
    mean_area = sum(r * min(run, w) for r, w, run in specs) / njobs
    rate = load * nodes / mean_area  # arrivals per second for the target load
    t = 0.0
    for i, (res, wall, run) in enumerate(specs):
        t += rng.expovariate(rate) if rate > 0 else math.inf
        if not t <= MAX_SECONDS:
            raise ValueError(
                f"at this load job {i} would be submitted at {t:.3g} s, beyond the limit of {MAX_SECONDS:g} s"
            )
        name = f"delay{i}"
        profiles[name] = {"type": "delay", "delay": run}
        jobs.append({"id": i, "subtime": round(t, 3), "walltime": wall, "res": res, "profile": name})
    return {
        "nb_res": nodes,
        "description": f"fluxsched-py synthetic workload: seed={seed} jobs={njobs} nodes={nodes} load={load}",
        "jobs": jobs,
        "profiles": profiles,
    }


def write_synthetic_swf(path: Path, njobs: int, nodes: int, seed: int = 1, load: float = 0.85) -> None:
    """A seeded SWF trace with Poisson arrivals at the given offered load.

    The benchmarks and the replay regression test share it, so a trace of a
    given (njobs, nodes, seed, load) is the same everywhere.
    """
    rng = random.Random(seed)
    sizes = [1, 1, 2, 4, 8, 16, 32, 64, 3, 5, 12, 24]
    walls = [300, 900, 1800, 3600, 7200]
    specs = []
    for _ in range(njobs):
        res = min(rng.choice(sizes), nodes)
        wall = rng.choice(walls)
        run = max(1, int(wall * rng.betavariate(1.3, 2.0)))
        specs.append((res, wall, run))
    rate = load * nodes / (sum(r * run for r, _, run in specs) / njobs)
    t = 0.0
    with path.open("w") as f:
        f.write(f"; synthetic SWF, seed={seed}\n; MaxNodes: {nodes}\n; MaxProcs: {nodes}\n")
        for i, (res, wall, run) in enumerate(specs, 1):
            t += rng.expovariate(rate)
            f.write(f"{i} {t:.0f} -1 {run} {res} -1 -1 {res} {wall} -1 1 1 1 -1 1 -1 -1 -1\n")


def example_path() -> Path | None:
    """The bundled example file, when the source tree (or a copy) is at hand."""
    here = Path(__file__).resolve()
    for base in (here.parents[2], Path.cwd()):
        p = base / "examples" / EXAMPLE_NAME
        if p.is_file():
            return p
    return None


def to_swf(workload: dict) -> str:
    """A :func:`generate` workload as SWF text: same ids, submit, run and requested times, sizes."""
    lines = [
        f"; {workload.get('description', 'fluxsched-py synthetic workload')}",
        f"; MaxNodes: {workload['nb_res']}",
        f"; MaxProcs: {workload['nb_res']}",
    ]
    for j in workload["jobs"]:
        run = workload["profiles"][j["profile"]]["delay"]
        res = j["res"]
        lines.append(f"{j['id'] + 1} {j['subtime']} -1 {run} {res} -1 -1 {res} {j['walltime']} -1 1 1 1 -1 1 -1 -1 -1")
    return "\n".join(lines) + "\n"


def _load(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (0 < v <= 10):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 10], got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog=PROG,
        description="Write a seeded synthetic HPC workload (Poisson arrivals at an offered load; sizes favour "
        "powers of two; run times a fraction of round walltimes, about 5 %% overrunning them). "
        "The defaults give the bundled example.",
    )
    out = ap.add_mutually_exclusive_group(required=True)
    out.add_argument("--json", metavar="OUT", help="write a Batsim workload JSON ('-' for stdout)")
    out.add_argument("--swf", metavar="OUT", help="write a Standard Workload Format trace ('-' for stdout)")
    ap.add_argument("--jobs", type=bounded_int(MAX_JOBS), default=300, metavar="N", help="number of jobs (300)")
    ap.add_argument("--nodes", type=bounded_int(MAX_NODES), default=64, metavar="N", help="machine size (64)")
    ap.add_argument("--seed", type=int, default=42, help="random seed (42)")
    ap.add_argument("--load", type=_load, default=0.7, help="offered load, node-seconds asked per node-second (0.7)")
    return ap


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    """``fluxsched-py synthetic --jobs N --nodes N --swf|--json OUT``."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    dest = args.json or args.swf
    if dest != "-" and Path(dest).is_dir():
        raise UsageError(f"{dest}: {'--json' if args.json else '--swf'}: is a folder; give a file name")
    try:
        w = generate(seed=args.seed, njobs=args.jobs, nodes=args.nodes, load=args.load)
    except ValueError as e:
        raise UsageError(f"--load {args.load:g}: {e}") from None
    text = json.dumps(w, indent=1) + "\n" if args.json else to_swf(w)
    if dest == "-":
        sys.stdout.write(text)
        return 0
    with open_output(dest, "--json" if args.json else "--swf") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
