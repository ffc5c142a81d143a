"""``fluxsched-py sweep``: replay a grid of workloads x policies x options, in parallel."""

from __future__ import annotations

import argparse
import os
import sys
import time

from rich.console import Console

from ..cliutil import ArgumentParser, CLIError, UsageError, boundary, check_output_dir, check_readable
from ..policy import POLICIES
from ..report.progress import ProgressBar
from .grid import OPTION_AXES, expand
from .local import run_local
from .output import comparison_table, write_rows, write_sweep_report
from .worker import check_spec

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
    ap.add_argument("--no-report", action="store_true", help="skip the figures and index.html")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    return ap


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    workloads = list(args.workloads)
    if not workloads:
        from ..replay.synthetic import example_path

        p = example_path()
        if p is None:
            raise UsageError("no WORKLOAD given and the bundled example is not installed")
        workloads = [str(p)]
    queue_policies = _list(args.queue_policy)
    bad = [q for q in queue_policies if q not in POLICIES]
    if bad or not queue_policies:
        raise UsageError(f"unknown queue policy {bad[0] if bad else '(none)'!r} (choose from {', '.join(POLICIES)})")
    if not 0 <= args.jobs <= MAX_WORKERS:
        raise UsageError(f"-j must be 0 (all cores) or 1..{MAX_WORKERS}, got {args.jobs}")
    axes = {n: _list(getattr(args, n.replace("-", "_"))) for n in OPTION_AXES if getattr(args, n.replace("-", "_"))}
    if "nodes" in axes and args.platform:
        raise UsageError("--nodes and --platform exclude each other")
    for path in [*workloads, *([args.platform] if args.platform else [])]:
        check_readable(path)  # one line now rather than a failed row per run
    specs = expand(workloads, queue_policies, _list(args.policy) or ["first"], axes, args.platform)
    for spec in specs:
        try:
            check_spec(spec)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    out = check_output_dir(args.output_dir, "--output-dir")
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
    failed: list[dict] = []
    with ProgressBar("sweep", len(specs), enabled=show) as bar:

        def done(row: dict) -> None:
            if row.get("status") != "ok":
                failed.append(row)
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
    varying = ["workload", "queue_policy", "policy", *axes]
    varying = [p for p in varying if len({str(r.get(p)) for r in rows}) > 1] or ["label"]
    title = f"sweep: {len(rows)} runs in {elapsed:.1f} s" + ("" if args.flux else f" (-j {jobs})")
    console = Console() if sys.stdout.isatty() else Console(width=160)
    console.print(comparison_table(rows, varying, title))
    err = sys.stderr
    for row in failed:
        params = ", ".join(f"{k}={row.get(k)}" for k in ("workload", "queue_policy", "policy", *axes))
        print(f"failed: {params}: {row.get('error')}", file=err)
    print(f"wrote {csv_path} and {json_path}", file=err)
    if report:
        page = write_sweep_report(rows, out / "report", title, progress=show, jobs=jobs)
        if page is not None:
            print(f"wrote {page}", file=err)
    return 1 if failed else 0
