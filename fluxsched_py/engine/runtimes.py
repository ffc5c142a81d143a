"""The campaign predictor: each campaign's run time and completion estimate, from its completed jobs.

CiGri's *Spritz* predictor (seed 003, "Prediction Algorithms" and the 10th
July milestone) keeps, per campaign, "the average duration time" of its
terminated jobs and its throughput, and predicts the campaign's "end time
(based on throughput and average duration time)".  This module keeps the
same two figures for each campaign the engine sees:

* the **predicted run time** of the campaign's next job: the mean run time
  of its completed jobs (None before any completed; the engine then uses
  the job's own duration);
* the **completion estimate** (``campaign_eta``): ``now + remaining /
  throughput``, where the throughput is completed jobs per second since the
  campaign's first job started and ``remaining`` counts its pending and
  running jobs (None before any job completed).

The seed's job-ratio algorithms (slow-start, two-way adaptive) size how
many jobs CiGri submits to a remote batch system; a scheduler that sees
every job has no such flood to control, so they are not reproduced.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CampaignRuntimes", "CampaignStats"]


@dataclass(slots=True)
class CampaignStats:
    """What the engine knows of one campaign's jobs."""

    runtimes: list[float] = field(default_factory=list)  # of completed jobs, in completion order
    total: float = 0.0
    first_start: float | None = None
    pending: set[int] = field(default_factory=set)
    running: set[int] = field(default_factory=set)
    ordered: list[float] = field(default_factory=list)  # the run times, sorted
    suffix: list[float] = field(default_factory=list)  # suffix[i] = sum(ordered[i:]), built when read

    @property
    def completed(self) -> int:
        return len(self.runtimes)

    def mean(self) -> float | None:
        return self.total / len(self.runtimes) if self.runtimes else None

    def median(self) -> float | None:
        return statistics.median(self.runtimes) if self.runtimes else None

    def eta(self, now: float) -> float | None:
        """When the campaign's pending and running jobs are expected to be done."""
        if not self.runtimes or self.first_start is None:
            return None
        remaining = len(self.pending) + len(self.running)
        if not remaining:
            return now
        elapsed = now - self.first_start
        if elapsed <= 0:
            return None
        return now + remaining * elapsed / len(self.runtimes)

    def residual(self, elapsed: float, walltime: float = math.inf) -> float:
        """The predicted remaining run time of a job of this campaign that has
        run ``elapsed`` seconds: the mean run time of the completed jobs that
        ran longer, minus ``elapsed`` (the empirical mean residual life); a
        job that outran every completed one is expected to run as long again;
        with no completed job, its walltime's remainder (``elapsed`` when it
        has none).  Never past the walltime."""
        cap = walltime - elapsed
        o = self.ordered
        i = bisect.bisect_right(o, elapsed)
        if not o or i == len(o):
            guess = elapsed if o or math.isinf(cap) else cap
        else:
            if len(self.suffix) != len(o) + 1:
                acc = [0.0]
                for x in reversed(o):
                    acc.append(acc[-1] + x)
                self.suffix = acc[::-1]
            guess = self.suffix[i] / (len(o) - i) - elapsed
        return max(0.0, min(guess, cap))


class CampaignRuntimes:
    """Every campaign's :class:`CampaignStats`, fed by the engine's job events."""

    def __init__(self) -> None:
        self.campaigns: dict[str, CampaignStats] = {}

    def get(self, name: str | None) -> CampaignStats | None:
        return None if name is None else self.campaigns.get(name)

    def submitted(self, name: str, jobid: int) -> None:
        self.campaigns.setdefault(name, CampaignStats()).pending.add(jobid)

    def left(self, name: str, jobid: int) -> None:
        """A pending job left without running (cancelled or denied)."""
        self.campaigns[name].pending.discard(jobid)

    def started(self, name: str, jobid: int, now: float) -> None:
        c = self.campaigns.setdefault(name, CampaignStats())
        c.pending.discard(jobid)
        c.running.add(jobid)
        if c.first_start is None:
            c.first_start = now

    def killed(self, name: str, jobid: int) -> None:
        """A running job was preempted: it is no longer running, and its run
        time says nothing of the campaign's."""
        c = self.campaigns.setdefault(name, CampaignStats())
        c.running.discard(jobid)

    def ended(self, name: str, jobid: int, runtime: float) -> None:
        c = self.campaigns.setdefault(name, CampaignStats())
        c.running.discard(jobid)
        c.runtimes.append(runtime)
        bisect.insort(c.ordered, runtime)
        c.total += runtime

    def predicted(self, name: str | None) -> float | None:
        c = self.get(name)
        return None if c is None else c.mean()

    def stats(self, now: float) -> dict[str, Any]:
        """For ``stats-get``: per campaign, counts, mean run time and ETA."""
        return {
            name: {
                "pending": len(c.pending),
                "running": len(c.running),
                "completed": c.completed,
                "mean_runtime": c.mean(),
                "eta": c.eta(now),
            }
            for name, c in self.campaigns.items()
        }
