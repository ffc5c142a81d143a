"""``fluxsched-py sweep``: replay a grid of workloads x policies x options, in parallel."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from rich.console import Console

from ..cliutil import ArgumentParser, CLIError, UsageError, boundary, check_output_dir, check_readable
from ..policy import POLICIES
from ..report.progress import ProgressBar
from .grid import MAX_RUNS, OPTION_AXES, expand, grid_size
from .local import Interrupted, remove_partial_files, run_local, stop_workers
from .output import comparison_table, write_rows, write_sweep_report
from .worker import check_spec, run_dir

__all__ = ["main", "build_parser"]

PROG = "fluxsched-py sweep"
#: the most worker processes -j may ask for
MAX_WORKERS = 1024


def _list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog=PROG,
        description="Replay every combination of workloads x queue policies x placement policies x options, "
        "in a process pool (or as jobs of the enclosing Flux instance with --flux).  Writes OUT/sweep.csv, "
        "OUT/sweep.json, OUT/runs/*/jobs.csv and the report OUT/report/index.html (with the plot extra), and "
        "prints a comparison table.  A failed run is a row with its error; the others go on.",
    )
    ap.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="workload files (default: the bundled example)")
    ap.add_argument("--queue-policy", default="fcfs,easy,conservative", metavar="P1,P2", help="default: %(default)s")
    ap.add_argument("--policy", default="first", metavar="P1,P2", help="placement policies (default: %(default)s)")
    for name in OPTION_AXES:
        ap.add_argument(f"--{name}", metavar="V1,V2", help=f"{name} values (one run per value)")
    ap.add_argument("--platform", metavar="FILE", help="one platform for every run (instead of --nodes)")
    ap.add_argument("-o", "--output-dir", default="sweep-out", metavar="DIR", help="default: %(default)s")
    ap.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="runs at once (default: all cores)")
    ap.add_argument("--flux", action="store_true", help="submit each run as a job of the enclosing Flux instance")
    ap.add_argument(
        "--max-runs",
        type=int,
        default=MAX_RUNS,
        metavar="N",
        help="refuse a grid of more than N runs (default: %(default)s)",
    )
    ap.add_argument("--no-report", action="store_true", help="skip the figures and index.html")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    return ap


def _bundled_workload(out: Path) -> str:
    """The bundled example's path; when it is not installed (a ``pip install .`` outside the
    repository), the same workload generated and written once into OUT, as ``replay`` generates
    it in memory."""
    from ..replay.synthetic import EXAMPLE_NAME, example_path, generate

    p = example_path()
    if p is not None:
        return str(p)
    dest = out / "workload" / EXAMPLE_NAME
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.part")
        tmp.write_text(json.dumps(generate(), indent=1) + "\n")
        tmp.replace(dest)
    return str(dest)


class _Signalled(KeyboardInterrupt):
    """SIGTERM, turned into the same path as Ctrl-C."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Signalled()


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    # sweep takes its own interruptions (keeping the finished runs' rows), so
    # they are raised once, not again every second as the command line's are
    previous = signal.signal(signal.SIGTERM, _on_sigterm), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _main(build_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _main(args: argparse.Namespace) -> int:
    # every option first: a mistake is reported before anything is looked up or written
    queue_policies = _list(args.queue_policy)
    bad = [q for q in queue_policies if q not in POLICIES]
    if bad or not queue_policies:
        raise UsageError(f"unknown queue policy {bad[0] if bad else '(none)'!r} (choose from {', '.join(POLICIES)})")
    if not 0 <= args.jobs <= MAX_WORKERS:
        raise UsageError(f"-j must be 0 (all cores) or 1..{MAX_WORKERS}, got {args.jobs}")
    if args.max_runs < 1:
        raise UsageError(f"--max-runs must be at least 1, got {args.max_runs}")
    axes = {n: _list(getattr(args, n.replace("-", "_"))) for n in OPTION_AXES if getattr(args, n.replace("-", "_"))}
    if "nodes" in axes and args.platform:
        raise UsageError("--nodes and --platform exclude each other")
    policies = _list(args.policy) or ["first"]
    workloads = list(args.workloads)
    twice = [w for i, w in enumerate(workloads) if os.path.abspath(w) in map(os.path.abspath, workloads[:i])]
    if twice:
        raise UsageError(f"{twice[0]}: workload given twice")
    size = grid_size(workloads or ["example"], queue_policies, policies, axes)
    if size > args.max_runs:
        raise UsageError(f"{size} runs is more than --max-runs {args.max_runs}; narrow the grid or raise --max-runs")
    probe = expand(workloads or ["example"], queue_policies, policies, axes, args.platform)
    for spec in probe:
        try:
            check_spec(spec)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    for path in [*workloads, *([args.platform] if args.platform else [])]:
        check_readable(path)  # one line now rather than a failed row per run
    out = check_output_dir(args.output_dir, "--output-dir")
    if not workloads:
        workloads = [_bundled_workload(out)]
    specs = expand(workloads, queue_policies, policies, axes, args.platform)
    report = not args.no_report
    if report:
        from ..report import ReportError, require_matplotlib

        try:
            require_matplotlib()
        except ReportError as exc:
            print(f"note: no report: {exc}", file=sys.stderr)
            report = False
    jobs = min(args.jobs or os.cpu_count() or 1, len(specs))  # never more worker processes than runs
    show = not args.no_progress
    t0 = time.perf_counter()
    try:
        with ProgressBar("sweep", len(specs), enabled=show) as bar:

            def done(row: dict) -> None:
                bar.advance(note=row.get("label", ""))

            if args.flux:
                from .fluxrun import FluxUnavailable, run_flux

                try:
                    rows = run_flux(specs, out, done)
                except FluxUnavailable as exc:
                    raise CLIError(str(exc)) from None
            else:
                rows = run_local(specs, out, jobs, done)
        elapsed = time.perf_counter() - t0
        csv_path, json_path = write_rows(rows, out)
    except Interrupted as exc:
        return _interrupted(specs, exc.rows, out, isinstance(exc.__context__, _Signalled))
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM outside the pool (--flux)
        stop_workers()
        remove_partial_files(out)
        raise KeyboardInterrupt from exc
    varying = ["workload", "queue_policy", "policy", *axes]
    varying = [p for p in varying if len({str(r.get(p)) for r in rows}) > 1] or ["label"]
    title = f"sweep: {len(rows)} runs in {elapsed:.1f} s" + ("" if args.flux else f" (-j {jobs})")
    console = Console() if sys.stdout.isatty() else Console(width=160)
    console.print(comparison_table(rows, varying, title))
    err = sys.stderr
    failed = [row for row in rows if row.get("status") != "ok"]  # in the grid's order, as the table
    for row in failed:
        params = ", ".join(f"{k}={row.get(k)}" for k in ("workload", "queue_policy", "policy", *axes))
        print(f"failed: {params}: {row.get('error')}", file=err)
    print(f"wrote {csv_path} and {json_path}", file=err)
    if report:
        try:
            page = write_sweep_report(rows, out / "report", title, progress=show, jobs=jobs)
        except KeyboardInterrupt:
            stop_workers()
            remove_partial_files(out / "report")
            print(f"{PROG}: interrupted while drawing the report; the results are in {csv_path}", file=err)
            return 130
        if page is not None:
            print(f"wrote {page}", file=err)
    return 1 if failed else 0


def _interrupted(specs: list, rows: list[dict | None], out: Path, sigterm: bool) -> int:
    """Keep what finished: rows of finished runs, the others marked, no half-written file."""
    remove_partial_files(out)
    kept = []
    for spec, row in zip(specs, rows, strict=True):
        if row is None:
            row = {"label": spec.label, **spec.params(), "status": "interrupted", "error": "not run"}
            d = run_dir(out.resolve(), spec)
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        kept.append(row)
    csv_path, _ = write_rows(kept, out)
    n = sum(1 for r in rows if r is not None)
    why = "SIGTERM" if sigterm else "interrupted"
    print(f"{PROG}: {why}: {n} of {len(specs)} runs finished, written to {csv_path}", file=sys.stderr)
    return 143 if sigterm else 130
