"""Figures and an HTML page for replays and sweeps (the ``plot`` extra).

``write_report(runs, summaries, outdir)`` draws, for every run, a Gantt chart
of jobs over nodes and time, utilization and queue length over time, and the
distributions of wait time and bounded slowdown, plus figures that overlay
the runs; each figure is written as PNG and SVG, and ``index.html`` shows the
summary table and the figures side by side.  Everything is aggregated on a
fixed grid (:mod:`.series`), so the cost and the look do not depend on the
number of jobs beyond one pass over them.

matplotlib (and numpy, which it brings) are imported only when a report is
drawn: the rest of fluxsched-py does not need them.
"""

from typing import Any

from .data import RunData, run_from_jobs_csv, run_from_result
from .deps import ReportError, require_matplotlib

__all__ = ["ReportError", "RunData", "require_matplotlib", "run_from_jobs_csv", "run_from_result", "write_report"]


def __getattr__(name: str) -> Any:
    # the drawing code (and its process pool) only when a report is drawn: the replay's
    # summary imports this package for its metrics (start-up time, issue 15)
    if name == "write_report":
        from .write import write_report

        return write_report
    raise AttributeError(name)
