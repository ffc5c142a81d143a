"""A replay's summary: the schedule metrics of :mod:`fluxsched_py.report.metrics`
(makespan, wait, bounded slowdown with ``tau = 10 s``, utilization), which
owns their definitions, and what only a replay knows:

* **t_estimate accuracy**: for jobs that were given a ``t_estimate``, the mean
  absolute error of the first estimate against the actual start, and the share
  of jobs that started no later than it.
* **forecast accuracy** (a replay with ``forecast=True``, ``replay --forecast``):
  for jobs that were given a forecast start at the first pass after their
  submission (:mod:`fluxsched_py.engine.forecast`, what ``flux sched-py
  forecast`` prints), how many, and the mean absolute error of that start
  against the actual one.

With best-effort jobs (``preemptible-after``) in the workload, every metric
above is of the regular jobs alone (so it compares with a run without the
best-effort load), and the summary adds: best-effort work completed and lost
to preemption (node-hours), preemptions, utilization counting every busy
node-second over the same window (best-effort work included, cut at the
regular makespan), and each campaign's makespan (its last finish minus its
first submission; None while some of its jobs did not complete).  With
end-of-campaign copies (``duplicates``): copies started, cancelled (they
lost), won (a job completed by its copy), and the node-hours of runs no
job kept (copies cancelled or preempted, and originals a copy completed);
a job completed by its copy counts as completed at the copy's finish (its
campaign's makespan), and the completed work is that of the runs that
finished (winning copies included).

``preempt-grace`` and checkpoints: the notices sent, and the work recovered
by checkpoints (run before a preemption, kept, and not run again by the
requeued job); completed work counts a completed job's whole run time, what
it recovered included, and lost work is what ran after a job's last
checkpoint.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from ..report.metrics import TAU, schedule_metrics
from .records import CANCELLED, COMPLETED, JobRecord
from .sim import ReplayResult

__all__ = ["Summary", "summarize", "TAU"]
_BESTEFFORT_FIELDS = (
    "besteffort",
    "besteffort_completed_nh",
    "besteffort_lost_nh",
    "preemptions",
    "utilization_with_besteffort",
    "campaigns",
    "duplicates",
    "duplicates_cancelled",
    "duplicates_won",
    "duplicates_wasted_nh",
    "besteffort_recovered_nh",
    "notices",
)

_FORECAST_FIELDS = ("forecasted", "forecast_mae")
_ENERGY_FIELDS = ("energy_joules", "energy_idle_joules", "energy_switching_joules", "power_off", "power_on")


@dataclass(frozen=True, slots=True)
class Summary:
    policy: str
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
    estimated: int
    estimate_mae: float | None
    estimate_kept: float | None
    elapsed: float
    besteffort: int = 0
    besteffort_completed_nh: float = 0.0
    besteffort_lost_nh: float = 0.0
    preemptions: int = 0
    utilization_with_besteffort: float | None = None
    campaigns: tuple[tuple[str, float | None], ...] = ()
    #: Jobs given a first forecast, and its mean absolute error (None: not measured).
    forecasted: int | None = None
    forecast_mae: float | None = None
    duplicates: int = 0
    duplicates_cancelled: int = 0
    duplicates_won: int = 0
    duplicates_wasted_nh: float = 0.0
    besteffort_recovered_nh: float = 0.0
    notices: int = 0
    #: With a power model (an energy platform): joules from the first
    #: submission to the last completion (Batsim's ``consumed_joules``), of
    #: them idle and switching, and the switches off and on made.
    energy_joules: float | None = None
    energy_idle_joules: float | None = None
    energy_switching_joules: float | None = None
    power_off: int | None = None
    power_on: int | None = None

    def as_dict(self) -> dict:
        """The fields by name; the best-effort ones only when the workload had
        such jobs, the forecast ones (after ``estimate_kept``) only when measured."""
        d = asdict(self)
        if not self.besteffort:
            for k in _BESTEFFORT_FIELDS:
                del d[k]
        if self.energy_joules is None:
            for k in _ENERGY_FIELDS:
                del d[k]
        fc = {k: d.pop(k) for k in _FORECAST_FIELDS}
        if self.forecasted is None:
            return d
        out = {}
        for k, v in d.items():
            out[k] = v
            if k == "estimate_kept":
                out.update(fc)
        return out


def summarize(result: ReplayResult, tau: float = TAU) -> Summary:
    be: list[JobRecord] = []
    estimate_errors, forecast_errors = array("d"), array("d")
    kept_estimates = 0
    first_submit = math.inf

    def regular() -> Iterator[tuple[float, float | None, float | None, int, str]]:
        # One walk over the records for every figure, the best-effort jobs set aside.
        nonlocal kept_estimates, first_submit
        for r in result.records:
            j = r.job
            if j.preemptible_after is not None:
                be.append(r)
                continue
            t0, t1 = r.start, r.finish
            ran = t0 is not None and t1 is not None
            first_submit = min(first_submit, j.submit)
            yield j.submit, t0 if ran else None, t1 if ran else None, r.nranks if r.started else j.nodes, r.state
            if not ran:
                continue
            if (est := r.first_estimate) is not None:
                estimate_errors.append(abs(t0 - est))  # type: ignore[operator]
                kept_estimates += t0 <= est + 1e-6  # type: ignore[operator]
            if result.forecast and (fc := r.first_forecast) is not None:
                forecast_errors.append(abs(t0 - fc))  # type: ignore[operator]

    m = schedule_metrics(regular(), result.nb_nodes, tau)
    if first_submit == math.inf:
        first_submit = 0.0
    n_est = len(estimate_errors)
    mae = statistics.fmean(estimate_errors) if n_est else None
    kept = kept_estimates / n_est if n_est else None
    extra = _besteffort(be, result.copies, first_submit, m.makespan, m.span, m.used) if be else {}
    if result.energy is not None:
        e = result.energy
        extra.update(
            energy_joules=e.total,
            energy_idle_joules=e.idle,
            energy_switching_joules=e.switching,
            power_off=result.stats.get("power_off", 0),
            power_on=result.stats.get("power_on", 0),
        )
    if result.forecast:
        extra["forecasted"] = len(forecast_errors)
        extra["forecast_mae"] = statistics.fmean(forecast_errors) if forecast_errors else None
    return Summary(
        **extra,
        policy=result.policy,
        jobs=m.jobs,
        started=m.started,
        killed=m.killed,
        rejected=m.rejected,
        makespan=m.makespan,
        mean_wait=m.mean_wait,
        median_wait=m.median_wait,
        max_wait=m.max_wait,
        mean_bsld=m.mean_bsld,
        utilization=m.utilization,
        estimated=n_est,
        estimate_mae=mae,
        estimate_kept=kept,
        elapsed=result.elapsed,
    )


def _besteffort(be: list, copies: list, t0: float, t1: float, span: float, used: float) -> dict:
    """The best-effort fields of :class:`Summary` (see the module docstring)."""
    # Completed work: every run that did its job's work, a copy that won included
    # (with what checkpoints kept of it); a job its copy completed ran for
    # nothing (as the copies that lost).
    done = [r for r in be if r.state == COMPLETED and r.start is not None and r.won_by is None]
    done += [r for r in copies if r.state == COMPLETED and r.start is not None]
    wasted = [r for r in be if r.wasted] + [r for r in copies if r.state != COMPLETED and r.start is not None]
    completed = sum((r.finish - r.start) * r.nranks + r.recovered for r in done)
    lost = sum(r.lost for r in be)
    # Every best-effort run in the window: the preempted ones (whole, what a
    # checkpoint kept included), the completing ones, and those no job kept
    # (a preempted copy's run is among these).
    busy = used
    for r in be:
        for start, end, n in r.preempted_runs or ():
            busy += max(0.0, min(end, t1) - max(start, t0)) * n
    for r in done + wasted:
        busy += max(0.0, min(r.finish, t1) - max(r.start, t0)) * r.nranks
    waste = sum(r.wasted for r in be) + sum(r.wasted + r.lost for r in copies)
    campaigns: dict[str, list] = {}
    for r in be:
        campaigns.setdefault(r.job.campaign or "(none)", []).append(r)
    spans = []
    for name, rs in sorted(campaigns.items()):
        complete = all(r.state == COMPLETED for r in rs)
        spans.append((name, max(r.finish for r in rs) - min(r.job.submit for r in rs) if complete else None))
    return {
        "besteffort": len(be),
        "besteffort_completed_nh": completed / 3600,
        "besteffort_lost_nh": lost / 3600,
        "preemptions": sum(r.preemptions for r in be),
        "utilization_with_besteffort": busy / span if span > 0 else 0.0,
        "campaigns": tuple(spans),
        "duplicates": sum(1 for r in copies if r.start is not None),
        "duplicates_cancelled": sum(1 for r in copies if r.state == CANCELLED),
        "duplicates_won": sum(1 for r in copies if r.start is not None and r.state == COMPLETED),
        "duplicates_wasted_nh": waste / 3600,
        "besteffort_recovered_nh": sum(r.recovered for r in done) / 3600,
        "notices": sum(r.notices for r in be),
    }
