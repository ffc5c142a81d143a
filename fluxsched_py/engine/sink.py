"""The sink effect: nodes where a campaign's jobs end almost at once, and the drain action.

Seed 003 names "the sink effect": "jobs running in near 0 seconds on a given
cluster without exiting with an error status".  A broken node (a missing
file system, a bad library) makes every job sent to it end at once, so it
looks idle and keeps attracting the campaign's jobs, which it swallows.

Rule: a node where each of a campaign's last ``N`` jobs (``sink-jobs``,
default 5; 0 turns the check off) ended in under a tenth of the campaign's
median run time (over all its completed jobs) is reported once, with the
reason, as a :class:`Drain` action.  A driver carries it out: the Flux
driver with ``resource.drain``, the replay by marking the node down.  A job
that spans several nodes counts for each of them.  Only jobs of a named
campaign count: without one there is no median to compare with.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from ..ids import IdSet

__all__ = ["Drain", "SinkDetector"]

#: A job "ends almost at once" under this fraction of the campaign's median run time.
FRACTION = 0.1


@dataclass(frozen=True, slots=True)
class Drain:
    """Output action: drain ``ranks`` (no further job is placed there), with ``reason``."""

    ranks: IdSet
    reason: str


class SinkDetector:
    """The last ``n`` run times of each (campaign, rank); :meth:`ended` returns the new drains."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._last: dict[tuple[str, int], deque[float]] = {}
        self.reported: set[int] = set()

    def ended(self, campaign: str, ranks: Any, runtime: float, median: float | None) -> list[Drain]:
        if self.n <= 0 or median is None:
            return []
        sinks = []
        limit = FRACTION * median
        for r in ranks:
            last = self._last.setdefault((campaign, r), deque(maxlen=self.n))
            last.append(runtime)
            if r not in self.reported and len(last) == self.n and all(t < limit for t in last):
                sinks.append(r)
        if not sinks:
            return []
        self.reported.update(sinks)
        ranks_s = IdSet(sinks)
        reason = (
            f"sink effect: the last {self.n} jobs of campaign {campaign} here each ended in under "
            f"{limit:.3g}s, a tenth of its median run time ({median:.3g}s)"
        )
        return [Drain(ranks_s, reason)]
