"""``fluxsched-py report``: the report page from existing ``jobs.csv`` files.

Each file is the replay's ``jobs.csv`` (``replay --output-dir``, ``sweep``)
or Batsim's ``out_jobs.csv``: the same columns, so a real Batsim run and a
replay of the same workload can be drawn side by side.  Each is labelled,
``LABEL=PATH``, or from its path (``out/easy/jobs.csv`` is ``easy``,
``out-easy_jobs.csv`` is ``out-easy``).  The summary's metrics are computed
from the files (:mod:`.metrics`), as ``replay`` computes its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..cliutil import ArgumentParser, CLIError, UsageError, boundary, bounded_int, check_output_dir, check_readable
from ..limits import MAX_NODES
from .data import JobsCsvError, RunData, run_from_jobs_csv
from .deps import ReportError, require_matplotlib
from .html import COLUMNS
from .metrics import run_metrics

__all__ = ["main", "build_parser", "label_of"]

PROG = "fluxsched-py report"
#: Summary columns printed on the terminal (the page has them all).
TERMINAL = ("jobs", "started", "rejected", "makespan", "mean_wait", "mean_bsld", "utilization")


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(
        prog=PROG,
        description="Draw the report page (figures, summary table, breakdowns) from existing jobs.csv files: "
        "the replay's (--output-dir, sweep) or Batsim's out_jobs.csv, side by side.  Needs the plot extra.",
    )
    ap.add_argument(
        "files",
        nargs="+",
        metavar="[LABEL=]JOBS_CSV",
        help="a jobs.csv, optionally labelled (default label: from the path)",
    )
    ap.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="where index.html and figures go")
    ap.add_argument(
        "--nodes",
        type=bounded_int(MAX_NODES),
        metavar="N",
        help="the machine's node count (default: one past the highest node a job used, per file)",
    )
    ap.add_argument("--title", help="the page's title (default: the labels)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    return ap


def label_of(path: str) -> str:
    """``out/easy/jobs.csv`` -> ``easy``; ``batsim/out-easy_jobs.csv`` -> ``out-easy``; else the file's stem."""
    p = Path(path)
    if p.name == "jobs.csv" and p.parent.name not in ("", "."):
        return p.parent.name
    stem = p.name.removesuffix(".csv")
    return stem.removesuffix("_jobs") or stem


def _split(arg: str) -> tuple[str, str]:
    """``LABEL=PATH`` (unless the whole text names a file), else a label from the path."""
    label, sep, path = arg.partition("=")
    if sep and label and path and not os.path.exists(arg):
        return label, path
    return label_of(arg), arg


def _labelled(args: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for arg in args:
        label, path = _split(arg)
        base, n = label, 2
        while any(label == x for x, _ in out):
            if "=" in arg and not os.path.exists(arg):
                raise UsageError(f"{arg}: the label {base!r} is given twice")
            label, n = f"{base}-{n}", n + 1
        out.append((label, path))
    return out


def _print_table(runs: list[RunData], rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cols = [(k, h, f) for k, h, f in COLUMNS if k in TERMINAL]
    t = Table(title=Text(f"{len(runs)} run{'s' if len(runs) != 1 else ''}"))
    t.add_column("run")
    t.add_column("nodes", justify="right")
    for _, head, _ in cols:
        t.add_column(head, justify="right")
    for r, row in zip(runs, rows, strict=True):
        t.add_row(Text(r.label), str(r.nb_nodes), *(fmt(row[k]) for k, _, fmt in cols))
    (Console() if sys.stdout.isatty() else Console(width=120)).print(t)


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    files = _labelled(args.files)
    for _, path in files:
        check_readable(path)
    try:
        require_matplotlib()
    except ReportError as exc:
        raise CLIError(str(exc)) from None
    out = check_output_dir(args.output_dir, "--output-dir")
    runs: list[RunData] = []
    for label, path in files:
        try:
            runs.append(run_from_jobs_csv(path, label, args.nodes))
        except JobsCsvError as exc:
            raise CLIError(str(exc)) from None
        except UnicodeDecodeError:
            raise CLIError(f"{path}: not a jobs.csv: not text") from None
    rows = []
    for r in runs:
        m = run_metrics(r)
        rows.append(
            {
                "label": r.label,
                **{k: getattr(m, k) for k, _, _ in COLUMNS if hasattr(m, k)},
            }
        )
    _print_table(runs, rows)
    from .write import write_report

    title = args.title or "fluxsched-py report: " + ", ".join(r.label for r in runs)
    page = write_report(runs, rows, out, title, progress=not args.no_progress, jobs=os.cpu_count() or 1)
    print(f"wrote {page}", file=sys.stderr)
    return 0
