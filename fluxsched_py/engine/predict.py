"""EASY++ run-time prediction for regular jobs (``predict-runtimes=true``).

Dan Tsafrir, Yoav Etsion and Dror G. Feitelson, "Backfilling using
system-generated predictions rather than user runtime estimates", IEEE
Transactions on Parallel and Distributed Systems 18(6):789-803, 2007.

What this module follows from the paper:

* **The predictor.**  A job's predicted run time is the mean of the run
  times of its user's two most recently *completed* jobs, never more than
  its own walltime (the user's estimate is an upper bound the system
  enforces: a job is killed there).  A user with one completed job gets
  that job's run time; a user with none gets the walltime.  The prediction
  is made when the job is submitted and kept while it waits.
* **What predictions are used for.**  Only for planning: the shadow time
  and reservations, the backfill test ("ends before the shadow time"), and
  ``t_estimate``.  The walltime stays the job's kill time: R's
  ``expiration`` is unchanged.
* **Prediction correction.**  A running job that reaches its prediction
  and is still running was under-predicted.  The paper then adds to its
  prediction, each time by more: its first prediction + 1 min, then
  + 5 min, 15 min, 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, 50 h and 100 h
  (:data:`INCREMENTS`, as Gaussier et al.'s predictsim code applies them),
  never past the walltime (``predict-correction=increment``, the default).
  ``predict-correction=walltime`` plans it to its walltime at once.
  Reservations that the longer plan runs into are dropped and re-planned
  by the next pass.
* **Trusting a user's history** (``predict-history``): 1 (the default)
  predicts from the first completed job of the user (its run time alone);
  2 waits for two, as predictsim does, and plans with the walltime until then.
* **Backfill order.**  The paper's EASY++ tries backfill candidates
  shortest (predicted) job first (SJBF).  That is the easy policy's
  ``backfill-order=sjbf`` (:mod:`fluxsched_py.policy.easy`); the default
  keeps the queue's order.

With the option off nothing here runs: every job plans with its walltime,
so decisions and the replay digests are those of plain EASY.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .jobs import Job
    from .jobtable import JobTable

__all__ = ["INCREMENTS", "RuntimePredictor", "corrected", "predict"]

#: Completed run times kept per user (the paper's "last two").
HISTORY = 2
#: No plan is shorter (a job that ended at once must not make zero-length plans).
MIN_PREDICTION = 1.0
#: What the k-th correction adds to a job's first prediction (Tsafrir et
#: al. 2007; predictsim's ``tsafrir`` corrector): 1 min, 5 min, 15 min,
#: 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, 50 h, then 100 h for every later one.
INCREMENTS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 18000.0, 36000.0, 72000.0, 180000.0, 360000.0)


def predict(history: Iterable[float], walltime: float, min_history: int = 1) -> float:
    """The EASY++ prediction: the mean of ``history`` (the user's last run
    times), capped at ``walltime`` and at least :data:`MIN_PREDICTION`;
    ``walltime`` when there are fewer than ``min_history`` (or no) run times."""
    runs = list(history)
    if not runs or len(runs) < min_history:
        return walltime
    return min(max(sum(runs) / len(runs), MIN_PREDICTION), walltime)


def corrected(first: float, k: int, walltime: float) -> float:
    """The plan of a job predicted ``first`` seconds after its ``k``-th
    correction (k >= 1): ``first`` plus the k-th increment, at most ``walltime``."""
    return min(first + INCREMENTS[min(k, len(INCREMENTS)) - 1], walltime)


class RuntimePredictor:
    """Per-user run-time history, and the under-predicted jobs to correct.

    :class:`~.hooks.Hooks`, which observes the job table, calls
    :meth:`submitted` when a regular job arrives (it sets the job's planning
    ``duration``), :meth:`started` when it starts, :meth:`record` with the
    run time of each regular job freed since the last pass (``sched.free``
    carries no time: it is measured at the next pass), and :meth:`tick` at
    the start of each pass."""

    def __init__(self) -> None:
        self._history: dict[int, deque[float]] = {}
        #: (predicted end, job id, job, first prediction, corrections so far)
        #: of running jobs planned shorter than their walltime.
        self._watch: list[tuple[float, int, Any, float, int]] = []

    def submitted(self, job: Job, min_history: int = 1) -> Any:
        """Plan ``job`` with its prediction (``job.walltime`` stays the kill time)."""
        job.duration = predict(self._history.get(job.userid, ()), job.walltime, min_history)
        return job

    def started(self, job: Job, now: float) -> None:
        if job.duration < job.walltime:
            heapq.heappush(self._watch, (now + job.duration, job.id, job, job.duration, 0))

    def next_correction(self) -> float:
        """When the next running job reaches its prediction (inf: none)."""
        return self._watch[0][0] if self._watch else math.inf

    def record(self, user: int, runtime: float) -> None:
        """A job of ``user`` completed after ``runtime`` seconds."""
        self._history.setdefault(user, deque(maxlen=HISTORY)).append(max(0.0, runtime))

    def tick(self, table: JobTable, now: float, rule: str = "increment") -> bool:
        """Correct running jobs that outlived their prediction (``rule``:
        ``increment``, the paper's increments; ``walltime``, to the walltime
        at once): their planner spans grow, and the reservations in the way
        are dropped.  True when a plan changed."""
        changed = False
        watch = self._watch
        while watch and watch[0][0] <= now:
            _, jobid, job, first, k = heapq.heappop(watch)
            if table.jobs.get(jobid) is not job or job.t_start is None or not math.isfinite(job.duration):
                continue  # it ended (or its plan already moved)
            if rule == "walltime":
                job.duration = job.walltime
            else:
                job.duration = corrected(first, k + 1, job.walltime)
                if job.duration < job.walltime:
                    heapq.heappush(watch, (job.t_start + job.duration, jobid, job, first, k + 1))
            if jobid in table.planner:
                end = min(job.expiration, job.t_start + job.duration)
                table.set_plan_end(jobid, max(end, now + 1e-9))
            changed = True
        return changed
