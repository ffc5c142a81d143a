"""The bundled example: a seeded synthetic HPC workload in Batsim's format.

``examples/synthetic_seed42_64nodes.json`` is ``generate()``'s output, written
by ``python -m fluxsched_py.replay.synthetic examples/``.  Arrivals are a
Poisson process; sizes favour powers of two; walltimes are round requests a
user would type; run times are a fraction of the walltime, and about 5 % of
jobs overrun it (the replay kills them at their walltime).  The CLI falls back
to generating the same workload in memory when the file is not installed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

__all__ = ["generate", "EXAMPLE_NAME", "example_path", "write_synthetic_swf"]

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
        t += rng.expovariate(rate)
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


def main(argv: list[str] | None = None) -> int:
    outdir = Path((argv or sys.argv[1:] or ["examples"])[0])
    outdir.mkdir(parents=True, exist_ok=True)
    p = outdir / EXAMPLE_NAME
    p.write_text(json.dumps(generate(), indent=1) + "\n")
    print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
