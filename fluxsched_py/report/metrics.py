"""Schedule metrics from per-job times, as the literature defines them, and their breakdowns.

This is the one place the metrics are computed: ``replay`` summarises its
regular jobs with :func:`schedule_metrics`, and ``fluxsched-py report``
summarises any ``jobs.csv`` (the replay's or Batsim's) with
:func:`run_metrics`, so the two tables agree on the same schedule.

* **makespan**: the last finish time (the simulation starts at 0, as in Batsim);
* **wait**: start minus submit;
* **bounded slowdown** (Feitelson et al., JSSPP 1997):
  ``max(1, (wait + run) / max(run, tau))`` with ``tau = 10 s``;
* **utilization**: node-seconds used over node-seconds available between the
  first submission and the makespan.

Breakdowns (:func:`breakdown`) group the jobs that ran by size class (1
node, 2-3, 4-7, ...), run-time class, or user, and give each group's job
count, mean wait and mean bounded slowdown.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from .data import KILLED, REJECTED, RunData, size_class

__all__ = [
    "TAU",
    "ScheduleMetrics",
    "schedule_metrics",
    "run_metrics",
    "runtime_class",
    "breakdown",
    "BREAKDOWNS",
    "MAX_GROUPS",
]

TAU = 10.0
#: A breakdown by user keeps the users with the most jobs; the rest are one "other" row.
MAX_GROUPS = 12
#: Run-time classes: (upper bound in seconds, name); the last has no bound.
_RUNTIME_CLASSES = (
    (60.0, "< 1 min"),
    (600.0, "1-10 min"),
    (3600.0, "10 min-1 h"),
    (6 * 3600.0, "1-6 h"),
    (86400.0, "6-24 h"),
    (math.inf, "≥ 1 day"),
)
#: What a job can be grouped by: (key, heading).
BREAKDOWNS = (("size", "job size"), ("runtime", "run time"), ("user", "user"))


@dataclass(frozen=True, slots=True)
class ScheduleMetrics:
    jobs: int
    started: int
    killed: int
    rejected: int
    makespan: float
    mean_wait: float
    median_wait: float
    max_wait: float
    mean_bsld: float
    utilization: float
    #: node-seconds the started jobs used, and node-seconds from the first submission to the makespan
    used: float
    span: float


def _ran(start: float | None, finish: float | None) -> bool:
    return start is not None and finish is not None and not math.isnan(start) and not math.isnan(finish)


def schedule_metrics(
    jobs: Iterable[tuple[float, float | None, float | None, int, str]], nb_nodes: int, tau: float = TAU
) -> ScheduleMetrics:
    """The metrics of one schedule from its jobs' ``(submit, start, finish,
    size, state)``; ``start``/``finish`` None or NaN for a job that never ran.

    One walk over the jobs, which may come from a generator, with only the
    waits and slowdowns kept, as C doubles: an archive trace has hundreds of
    thousands of jobs, and a list of float objects per metric would cost
    more than the schedule itself."""
    waits = array("d")
    bsld = array("d")
    used = 0.0
    makespan = -math.inf
    first_submit = math.inf
    njobs = killed = rejected = 0
    for sub, s, f, n, state in jobs:
        njobs += 1
        first_submit = min(first_submit, sub)
        killed += state == KILLED
        rejected += state == REJECTED
        if not _ran(s, f):
            continue
        w, run = s - sub, f - s  # type: ignore[operator]
        waits.append(w)
        bsld.append(max(1.0, (w + run) / max(run, tau)))
        used += run * max(1, n)
        makespan = max(makespan, f)  # type: ignore[type-var]
    if not waits:
        makespan = 0.0
    if not njobs:
        first_submit = 0.0
    span = (makespan - min(first_submit, makespan)) * max(nb_nodes, 1)
    return ScheduleMetrics(
        jobs=njobs,
        started=len(waits),
        killed=killed,
        rejected=rejected,
        makespan=makespan,
        mean_wait=statistics.fmean(waits) if waits else 0.0,
        median_wait=statistics.median(waits) if waits else 0.0,
        max_wait=max(waits, default=0.0),
        mean_bsld=statistics.fmean(bsld) if bsld else 0.0,
        utilization=used / span if span > 0 else 0.0,
        used=used,
        span=span,
    )


def run_metrics(run: RunData, tau: float = TAU) -> ScheduleMetrics:
    return schedule_metrics(zip(run.submit, run.start, run.finish, run.size, run.state, strict=True), run.nb_nodes, tau)


def runtime_class(seconds: float) -> str:
    return next(name for top, name in _RUNTIME_CLASSES if seconds < top)


def breakdown(run: RunData, by: str, tau: float = TAU) -> list[tuple[str, int, float, float]]:
    """``[(group, jobs, mean wait, mean bounded slowdown)]`` over the jobs that ran, in the
    groups' natural order (sizes and run times ascending, users by job count).  Empty when
    grouping by user and no job carries one."""
    groups: dict[str, list[tuple[float, float]]] = {}
    order: dict[str, float] = {}
    for i in range(len(run)):
        s, f = run.start[i], run.finish[i]
        if not _ran(s, f):
            continue
        wait, rt = s - run.submit[i], f - s
        if by == "size":
            key, rank = size_class(run.size[i]), float(run.size[i].bit_length())
        elif by == "runtime":
            key = runtime_class(rt)
            rank = float(next(k for k, (top, _) in enumerate(_RUNTIME_CLASSES) if rt < top))
        elif by == "user":
            if run.user[i] is None:
                continue
            key, rank = str(run.user[i]), 0.0
        else:
            raise ValueError(f"unknown breakdown {by!r}")
        groups.setdefault(key, []).append((wait, max(1.0, (wait + rt) / max(rt, tau))))
        order[key] = rank
    if by == "user":
        names = sorted(groups, key=lambda k: (-len(groups[k]), k))
        if len(names) > MAX_GROUPS:
            other = [x for k in names[MAX_GROUPS - 1 :] for x in groups.pop(k)]
            names = names[: MAX_GROUPS - 1] + ["other"]
            groups["other"] = other
    else:
        names = sorted(groups, key=lambda k: order[k])
    return [
        (k, len(groups[k]), statistics.fmean(w for w, _ in groups[k]), statistics.fmean(b for _, b in groups[k]))
        for k in names
    ]
