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
  and is still running was under-predicted.  The paper increases such a
  prediction; of the corrections it discusses, this module takes the
  simplest, the one the issue asks for: the prediction becomes the job's
  walltime (the user's estimate).  Reservations that the longer plan runs
  into are dropped and re-planned by the next pass.

Not followed: the paper's EASY++ also orders backfill candidates shortest
(predicted) job first (SJBF); here backfill keeps the queue's order, so the
queue policies are unchanged and only their durations differ.

With the option off nothing here runs: every job plans with its walltime,
so decisions and the replay digests are those of plain EASY.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["RuntimePredictor", "predict"]

#: Completed run times kept per user (the paper's "last two").
HISTORY = 2
#: No plan is shorter (a job that ended at once must not make zero-length plans).
MIN_PREDICTION = 1.0


def predict(history: Iterable[float], walltime: float) -> float:
    """The EASY++ prediction: the mean of ``history`` (the user's last run
    times), capped at ``walltime`` and at least :data:`MIN_PREDICTION`;
    ``walltime`` when there is no history."""
    runs = list(history)
    if not runs:
        return walltime
    return min(max(sum(runs) / len(runs), MIN_PREDICTION), walltime)


class RuntimePredictor:
    """Per-user run-time history, and the under-predicted jobs to correct.

    The engine calls :meth:`submitted` when a job arrives (it sets the
    job's planning ``duration``), :meth:`started` when it starts,
    :meth:`ended` when its resources are freed (the run time is measured at
    the next :meth:`tick`, which gives the time: ``sched.free`` carries
    none), and :meth:`tick` at the start of each pass."""

    def __init__(self) -> None:
        self._history: dict[int, deque[float]] = {}
        self._ended: list[tuple[int, float]] = []  # (user, start) of jobs freed since the last tick
        #: (predicted end, job id, job) of running jobs planned shorter than their walltime.
        self._watch: list[tuple[float, int, Any]] = []

    def history(self, user: int) -> list[float]:
        return list(self._history.get(user, ()))

    def submitted(self, job: Any) -> Any:
        """Plan ``job`` with its prediction (``job.walltime`` stays the kill time)."""
        job.duration = predict(self._history.get(job.userid, ()), job.walltime)
        return job

    def started(self, job: Any, now: float) -> None:
        if job.duration < job.walltime:
            heapq.heappush(self._watch, (now + job.duration, job.id, job))

    def ended(self, job: Any) -> None:
        if job.t_start is not None:
            self._ended.append((job.userid, job.t_start))

    def next_correction(self) -> float:
        """When the next running job reaches its prediction (inf: none)."""
        return self._watch[0][0] if self._watch else math.inf

    def record(self, user: int, runtime: float) -> None:
        """A job of ``user`` completed after ``runtime`` seconds."""
        self._history.setdefault(user, deque(maxlen=HISTORY)).append(max(0.0, runtime))

    def tick(self, engine: Any, now: float) -> bool:
        """Measure the run times of jobs freed since the last call, and
        correct running jobs that outlived their prediction (their plan now
        ends at their walltime).  True when a plan changed."""
        for user, start in self._ended:
            self.record(user, now - start)
        self._ended.clear()
        changed = False
        watch = self._watch
        while watch and watch[0][0] <= now:
            _, jobid, job = heapq.heappop(watch)
            if engine.job(jobid) is not job or job.t_start is None or not math.isfinite(job.duration):
                continue  # it ended (or its plan already moved)
            job.duration = job.walltime
            if jobid in engine.planner:
                for other in engine.planner.set_end(jobid, max(job.expiration, now + 1e-9)):
                    if (pending := engine.job(other)) is not None:
                        pending.estimate = pending.proof = None
            changed = True
        return changed
