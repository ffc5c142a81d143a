"""``fluxsched-py replay``: evaluate a queue policy on a workload trace, no Flux needed.

Run with no arguments, it replays the bundled synthetic example under fcfs,
easy and conservative and prints them side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..engine import EngineError, EngineOptions
from ..policy import POLICIES
from .metrics import summarize
from .platform import PlatformError, load_platform, nodes_graph
from .report import print_summary, write_jobs_csv
from .sim import replay
from .synthetic import EXAMPLE_NAME, example_path, generate
from .workload import Workload, WorkloadError, load_workload, read_batsim

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="fluxsched-py replay",
        description="Replay a workload (SWF, Batsim workload JSON, or a YAML list of jobspecs) through the "
        "scheduler in simulated time and print schedule metrics.  With no arguments, replay the bundled example.",
    )
    ap.add_argument("workload", nargs="?", help="workload file (.swf, .json, .yaml)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--platform", metavar="FILE", help="YAML recipe, R (JSON), GRUG (.graphml) or Batsim XML")
    where.add_argument("--nodes", type=int, metavar="N", help="N identical nodes (default: the workload's nb_res)")
    ap.add_argument("--cores-per-node", type=int, default=1, metavar="C", help="cores per node with --nodes")
    ap.add_argument("--queue-policy", choices=POLICIES, default="easy")
    ap.add_argument("--policy", default="first", help="placement policy (first, low, high, ...)")
    ap.add_argument(
        "--reserve-depth",
        metavar="N",
        help="reservations per pass (conservative, hybrid; fcfs: jobs whose start is forecast)",
    )
    ap.add_argument("--queue-depth", metavar="N", help="pending jobs considered per pass")
    ap.add_argument(
        "--annotate-depth",
        metavar="N",
        default="0",
        help="compute reason_pending/jobs_ahead for the first N pending jobs, as under Flux (default 0: the "
        "replay only needs t_estimate, which every reserved job gets)",
    )
    ap.add_argument("--output-dir", metavar="DIR", help="write DIR/jobs.csv (DIR/POLICY/jobs.csv with --compare)")
    ap.add_argument("--compare", metavar="P1,P2,...", help="replay under several queue policies, side by side")
    ap.add_argument(
        "--report",
        metavar="DIR",
        help="write figures (PNG and SVG) and DIR/index.html; needs the plot extra (matplotlib)",
    )
    ap.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    return ap


def _options(args: argparse.Namespace, policy: str) -> EngineOptions:
    opts: dict[str, str] = {"queue-policy": policy, "policy": args.policy, "annotate-depth": args.annotate_depth}
    if args.reserve_depth is not None:
        opts["reserve-depth"] = args.reserve_depth
    if args.queue_depth is not None:
        opts["queue-depth"] = args.queue_depth
    return EngineOptions.parse(opts)


def _graph_factory(args: argparse.Namespace, workload: Workload) -> Callable[[], object]:
    if args.platform:
        return lambda: load_platform(args.platform)
    n = args.nodes or workload.nb_res
    if not n:
        raise PlatformError("the workload does not say how many nodes it needs (nb_res): give --nodes N or --platform")
    return lambda: nodes_graph(n, args.cores_per_node)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    args = ap.parse_args(argv)
    err = Console(stderr=True)
    # Piped output: a fixed, wide enough table instead of rich's 80 columns.
    out = Console() if sys.stdout.isatty() else Console(width=120)
    policies = [args.queue_policy]
    try:
        if args.workload:
            workload = load_workload(args.workload)
        else:
            p = example_path()
            workload = load_workload(p) if p else read_batsim(generate(), name=EXAMPLE_NAME.removesuffix(".json"))
            if not argv:
                policies = ["fcfs", "easy", "conservative"]
        if args.compare:
            policies = [p.strip() for p in args.compare.split(",") if p.strip()]
        for pol in policies:
            if pol not in POLICIES:
                raise EngineError(f"unknown queue policy {pol!r} (choose from {', '.join(POLICIES)})")
        make_graph = _graph_factory(args, workload)
        opts = [_options(args, pol) for pol in policies]
    except (WorkloadError, PlatformError, EngineError) as exc:
        err.print(f"[bold red]fluxsched-py replay:[/] {exc}", highlight=False)
        return 1
    for note in workload.notes:
        err.print(f"note: {note}", highlight=False)

    if args.report:
        from ..report import ReportError, require_matplotlib

        try:
            require_matplotlib()
        except ReportError as exc:
            print(f"fluxsched-py replay: {exc}", file=sys.stderr)
            return 1

    show = sys.stderr.isatty() and not args.no_progress and not args.json
    summaries, results = [], []
    for o in opts:
        try:
            graph = make_graph()
        except (PlatformError, OSError, ValueError) as exc:
            err.print(f"[bold red]fluxsched-py replay:[/] {exc}", highlight=False)
            return 1
        if show:
            with Progress(
                TextColumn(f"{o.queue_policy:>12}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("replay", total=len(workload.jobs))
                result = replay(
                    workload, graph, o, progress=lambda done, total, task=task: bar.update(task, completed=done)
                )
        else:
            result = replay(workload, graph, o)
        results.append(result)
        summaries.append(summarize(result))
        if args.output_dir:
            d = Path(args.output_dir)
            path = write_jobs_csv(result, d / o.queue_policy / "jobs.csv" if len(opts) > 1 else d / "jobs.csv")
            err.print(f"wrote {path}", highlight=False)
    nodes = results[0].nb_nodes if results else 0
    title = f"{workload.name}: {len(workload.jobs)} jobs on {nodes} nodes"
    if args.json:
        print(json.dumps([s.as_dict() for s in summaries], indent=1))
    else:
        print_summary(summaries, title, out)
    if args.report:
        from ..report.replay import report_replay

        page = report_replay(
            results, summaries, args.report, title, progress=not args.no_progress, jobs=os.cpu_count() or 1
        )
        print(f"wrote {page}", file=sys.stderr)
    return 0
