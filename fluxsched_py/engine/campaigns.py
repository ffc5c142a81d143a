"""CiGri campaigns: which campaign a job belongs to, and the order of pending best-effort jobs.

CiGri (seed 003, "Campaign Types Definition") runs *campaigns* of many small
best-effort jobs on the idle nodes of clusters.  Here a job names its
campaign with ``attributes.user.campaign`` (``flux submit --setattr
user.campaign=NAME``) and its type with ``attributes.user.campaign-type``:

* ``test`` campaigns "have a big priority in relation to default
  campaigns": their pending best-effort jobs go ahead of every ``default``
  campaign's;
* among ``default`` campaigns (the type when none is given), jobs are
  ordered by each campaign's *decayed recent usage*, least first: the
  node-seconds of its completed jobs, each weighted by ``2 ** (-age /
  half-life)`` (``campaign-half-life``), the fair share the seed asks for
  ("equity between users ... depend[s] on accounting"; the decay is the
  usual one of fair-share schedulers such as Slurm's multifactor priority).

A job is *best-effort* when it carries ``attributes.system.preemptible-after``
(RFC 14; ``Job.preemptible_after``).  Only best-effort jobs are ordered so:
they start after the regular pass, in this order
(:meth:`~.besteffort.BestEffort.run`); regular jobs never see them in their
queues.  Best-effort jobs of no campaign form one ``default`` campaign
(named None).  Within a campaign, jobs keep the queue order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..jobspec import Request

__all__ = ["CAMPAIGN_TYPES", "DecayedUsage", "campaign_key", "campaign_of", "campaign_order"]

#: ``attributes.user.campaign-type`` values; the first is the one that goes first.
CAMPAIGN_TYPES = ("test", "default")


def campaign_of(request: Request) -> tuple[str | None, str]:
    """``(name, type)`` from ``attributes.user``; raises ValueError for a bad type."""
    attrs = getattr(request, "attributes", None)
    if attrs is None:  # most requests (a trace's): no ABC instance check
        return None, "default"
    user = attrs.get("user") if isinstance(attrs, Mapping) else None
    if not isinstance(user, Mapping):
        return None, "default"
    name = user.get("campaign")
    kind = user.get("campaign-type", "default")
    if kind not in CAMPAIGN_TYPES:
        raise ValueError(f"attributes.user.campaign-type={kind!r}: expected one of {', '.join(CAMPAIGN_TYPES)}")
    return (None if name is None else str(name)), kind


class DecayedUsage:
    """Each campaign's node-seconds, decayed with a half-life.

    ``U(t) = sum of w_i * 2 ** (-(t - t_i) / half_life)`` over the jobs that
    ended at ``t_i`` having used ``w_i`` node-seconds; kept as one value
    and the time it was last brought up to date."""

    def __init__(self, half_life: float) -> None:
        self.half_life = float(half_life)
        self._u: dict[str | None, tuple[float, float]] = {}

    def add(self, campaign: str | None, node_seconds: float, t: float) -> None:
        u = self.at(campaign, t)
        self._u[campaign] = (u + node_seconds, t)

    def at(self, campaign: str | None, t: float) -> float:
        u, t0 = self._u.get(campaign, (0.0, t))
        return u * math.pow(2.0, -(t - t0) / self.half_life) if t > t0 else u

    def campaigns(self) -> list[str | None]:
        return list(self._u)


def campaign_key(kind: str, usage: float) -> tuple[int, float]:
    """Sort key of a campaign: test campaigns first, then least usage."""
    return (CAMPAIGN_TYPES.index(kind), usage if kind == "default" else 0.0)


def campaign_order(jobs: Iterable[Any], usage: DecayedUsage, now: float) -> list[Any]:
    """The best-effort ``jobs`` (in queue order) in campaign order: by
    :func:`campaign_key`, then the campaign's first job, then queue order."""
    jobs = list(jobs)
    first: dict[str | None, int] = {}
    keys = []
    for i, job in enumerate(jobs):
        name, kind = campaign_of(job.request)
        first.setdefault(name, i)
        keys.append((campaign_key(kind, usage.at(name, now)), first[name], i))
    return [jobs[k[2]] for k in sorted(keys)]
