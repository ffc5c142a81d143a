"""Report drawing time, this tree against another (the main this work started from).

A seeded synthetic SWF (``--jobs``, default 100,000, on 256 nodes) is
replayed once under easy; its ``jobs.csv`` is then read and drawn as a
one-run report (``run_from_jobs_csv`` + ``write_report``, PNG and SVG, one
process) by each tree in turn, alternating, ``--repeat`` times (default 3).
The table gives the median wall time of reading and of drawing, and the
size of the files.  The trees are run as subprocesses with their own
``PYTHONPATH``, so their code never mixes.

    git worktree add /tmp/base-report 81c87b7
    python bench/bench_report.py --base /tmp/base-report [--jobs 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

DRAW = """
import json, sys, time
from fluxsched_py.report import run_from_jobs_csv, write_report
t0 = time.perf_counter()
run = run_from_jobs_csv(sys.argv[1], "easy", 256)
t1 = time.perf_counter()
write_report([run], [{"label": "easy"}], sys.argv[2], progress=False)
t2 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1, __import__("fluxsched_py").__file__]))
"""


def _draw(tree: Path, csv: Path, out: Path) -> tuple[float, float, int, int]:
    # -S: no site hooks, so an editable install of either tree cannot win over PYTHONPATH;
    # the interpreter's site-packages (matplotlib) come after the tree
    site = [p for p in sys.path if p.endswith("site-packages")]
    p = subprocess.run(
        [sys.executable, "-S", "-c", DRAW, str(csv), str(out)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": ":".join([str(tree), *site]), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
        cwd=out,  # -c puts the working folder first on sys.path
        check=True,
    )
    read, draw, where = json.loads(p.stdout.strip().splitlines()[-1])
    assert Path(where).is_relative_to(tree), (where, tree)
    files = [f for f in out.iterdir() if f.suffix in (".png", ".svg")]
    return read, draw, len(files), sum(f.stat().st_size for f in files)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="a worktree of the main to compare with")
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from fluxsched_py.replay import load_workload, replay
    from fluxsched_py.replay.platform import nodes_graph
    from fluxsched_py.replay.report import write_jobs_csv
    from fluxsched_py.replay.synthetic import write_synthetic_swf

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        write_synthetic_swf(t / "w.swf", args.jobs, 256, seed=7)
        result = replay(load_workload(t / "w.swf"), nodes_graph(256), {"queue-policy": "easy", "annotate-depth": 0})
        csv = write_jobs_csv(result, t / "jobs.csv")
        samples: dict[str, list[tuple[float, float, int, int]]] = {"base": [], "this": []}
        for i in range(args.repeat):
            for name, tree in (("base", args.base.resolve()), ("this", HERE)):
                out = t / f"{name}-{i}"
                out.mkdir()
                samples[name].append(_draw(tree, csv, out))
        print(f"report of one easy run: {args.jobs:,} jobs on 256 nodes, median of {args.repeat} (wall s)")
        print(f"{'tree':<6} {'read jobs.csv':>14} {'draw figures':>13} {'files':>6} {'KiB':>7}")
        med = {}
        for name, rows in samples.items():
            read = statistics.median(r[0] for r in rows)
            draw = statistics.median(r[1] for r in rows)
            med[name] = (read, draw)
            print(f"{name:<6} {read:>14.2f} {draw:>13.2f} {rows[0][2]:>6} {rows[0][3] / 1024:>7.0f}")
        print(f"ratio  {med['this'][0] / med['base'][0]:>14.2f} {med['this'][1] / med['base'][1]:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
