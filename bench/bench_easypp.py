"""EASY++ against plain EASY: mean bounded slowdown (tau = 10 s) and mean wait per workload.

Tsafrir, Etsion and Feitelson (IEEE TPDS 2007) plan backfilling with the mean
of each user's last two run times instead of the user's walltime
(``predict-runtimes=true``).  This replays the bundled example and every
Batsim workload of the shared conformance corpus with at least ``--min-jobs``
jobs (their jobs carry both a walltime and a real run time), once under
``easy`` and once under ``easy`` with ``predict-runtimes=true``, on as many
one-core nodes as the workload's ``nb_res``.  The figures are schedule
metrics, deterministic: machine load changes only the seconds column.

The Batsim workloads name no users: every job then shares one history (the
last two jobs to complete).  ``--users N`` gives jobs N users round-robin
(job id mod N) instead, to see per-user histories.

    python bench/bench_easypp.py [--min-jobs 20] [--users 0]

``--archive`` replays whole Parallel Workloads Archive traces of
``../shared/conformance/swf/`` instead, one process per run
(``fluxsched-py replay TRACE --procs-per-node 1 ... --json``: every
processor a one-core node, as Gaussier et al. count them), ``-j`` at a time,
under each of the configurations of :data:`CONFIGS`, and prints the mean
bounded slowdown (tau = 10 s) of each:

    python bench/bench_easypp.py --archive [--traces KTH,SDSC-BLUE,NASA] [-j 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fluxsched_py.replay import load_workload, replay, summarize  # noqa: E402
from fluxsched_py.replay.platform import nodes_graph  # noqa: E402
from fluxsched_py.replay.synthetic import example_path  # noqa: E402
from t.shared import CONFORMANCE  # noqa: E402 - the one place that finds ../shared


def workloads(min_jobs: int) -> list[Path]:
    paths = [Path(example_path())]
    folder = CONFORMANCE / "batsim" / "workloads"
    if folder.is_dir():
        paths += sorted(folder.glob("*.json"))
    out = []
    for p in paths:
        try:
            w = load_workload(p)
        except Exception:  # a workload the replay cannot read (SMPI profiles, ...): not comparable
            continue
        if len(w.jobs) >= min_jobs:
            out.append(p)
    return out


#: The archive runs: (column, replay options).
CONFIGS = (
    ("EASY", ["--queue-policy", "easy"]),
    ("EASY++ queue order", ["--queue-policy", "easy", "--predict-runtimes"]),
    ("EASY++ SJBF", ["--queue-policy", "easy", "--predict-runtimes", "--backfill-order", "sjbf"]),
    (
        "EASY++ SJBF, 2 jobs",
        ["--queue-policy", "easy", "--predict-runtimes", "--backfill-order", "sjbf", "--predict-history", "2"],
    ),
    ("conservative", ["--queue-policy", "conservative"]),
)


def archive(traces: list[str], jobs: int) -> int:
    import json
    import shutil
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    exe = shutil.which("fluxsched-py") or "fluxsched-py"
    folder = CONFORMANCE / "swf"
    paths = [p for name in traces for p in sorted(folder.glob(f"{name}*.swf*"))]
    runs = [(p, col, opts) for p in paths for col, opts in CONFIGS]

    def one(run: tuple[Path, str, list[str]]) -> tuple[float, float]:
        path, _, opts = run
        t0 = time.perf_counter()
        cmd = [exe, "replay", str(path), "--procs-per-node", "1", *opts, "--no-progress", "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        bsld = json.loads(out)[0]["mean_bsld"]
        print(f"{path.name} {' '.join(opts)}: bsld {bsld:.2f} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        return bsld, time.perf_counter() - t0

    with ThreadPoolExecutor(jobs) as pool:
        results = dict(zip([(r[0], r[1]) for r in runs], pool.map(one, runs), strict=True))
    table = Table(title="Mean bounded slowdown (tau = 10 s), whole traces, a one-core node per processor")
    table.add_column("trace", justify="left")
    for col, _ in CONFIGS:
        table.add_column(col, justify="right")
    for p in paths:
        table.add_row(p.name.removesuffix(".gz"), *(f"{results[(p, col)][0]:.1f}" for col, _ in CONFIGS))
    Console(width=160).print(table)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-jobs", type=int, default=20, help="skip workloads with fewer jobs (default 20)")
    ap.add_argument("--users", type=int, default=0, help="give jobs N users round-robin (default 0: as in the file)")
    ap.add_argument("--archive", action="store_true", help="whole archive traces (see the module docstring)")
    ap.add_argument("--traces", default="KTH,SDSC-BLUE,NASA", help="archive trace name prefixes")
    ap.add_argument("-j", "--parallel", type=int, default=2, help="archive runs at once (default 2)")
    args = ap.parse_args()
    if args.archive:
        return archive(args.traces.split(","), args.parallel)
    table = Table(title="EASY vs EASY++ (mean bounded slowdown, tau = 10 s; mean wait, s)")
    for col in ("workload", "jobs", "nodes", "bsld EASY", "bsld EASY++", "ratio", "wait EASY", "wait EASY++", "ratio",
                "s"):  # fmt: skip
        table.add_column(col, justify="left" if col == "workload" else "right")
    for path in workloads(args.min_jobs):
        w = load_workload(path)
        if args.users > 0:
            for j in w.jobs:
                j.user = j.id % args.users
        nodes = w.nb_res or max(j.nodes for j in w.jobs)
        t0 = time.perf_counter()
        s0 = summarize(replay(w, nodes_graph(nodes), {"queue-policy": "easy"}))
        s1 = summarize(replay(w, nodes_graph(nodes), {"queue-policy": "easy", "predict-runtimes": "true"}))
        secs = time.perf_counter() - t0

        def ratio(a: float, b: float) -> str:
            return f"{b / a:.3f}" if a else "-"

        table.add_row(
            path.name,
            str(len(w.jobs)),
            str(nodes),
            f"{s0.mean_bsld:.2f}",
            f"{s1.mean_bsld:.2f}",
            ratio(s0.mean_bsld, s1.mean_bsld),
            f"{s0.mean_wait:.0f}",
            f"{s1.mean_wait:.0f}",
            ratio(s0.mean_wait, s1.mean_wait),
            f"{secs:.1f}",
        )
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
