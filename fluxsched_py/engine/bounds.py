"""A bound on a campaign's concurrent jobs, per campaign and per node property.

CiGri (seed 003, "bad jobs"): "contentions may occur with bad jobs ... see
if we can run for example 1000 jobs on the same cluster without causing
damage to the NFS server".  A bound says how many of a campaign's jobs may
run at once, on the whole machine or on the nodes with an RFC 20 property
(a cluster, a rack, a file-system domain):

* the ``campaign-max-running`` option: ``CAMPAIGN[@PROPERTY]:N`` entries,
  comma-separated, ``*`` for every campaign (each on its own), e.g.
  ``*@lyon:100,bigsim:500`` (a TOML table ``{"*@lyon" = 100, bigsim = 500}``);
* a job's ``attributes.user.campaign-max-running``: ``N`` (an integer or its
  text), or entries ``[@PROPERTY:]N``, e.g. ``"@lyon:100,500"``: the bound the
  campaign's author asks for, applied to that job.

A pending best-effort job of campaign C is held off the nodes of property P
while C has as many running jobs touching a node of P as the tightest bound
on (C, P), and off every node while C's running jobs reach a bound on C;
its ``reason_pending`` names the bound.  Running jobs are counted with the
properties their ranks had when they started.  Regular jobs (and jobs of
no campaign) are counted but never held: a bound keeps best-effort load
off a cluster, it does not queue regular work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .campaigns import campaign_of
from .states import JobState

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..planner.flat import FlatCodec
    from ..resource import ResourceGraph
    from .jobs import Job
    from .options import EngineOptions

__all__ = ["Bound", "CampaignBounds", "parse_bounds", "parse_job_bounds"]


@dataclass(frozen=True, slots=True)
class Bound:
    """At most :attr:`limit` running jobs of :attr:`campaign` (``*``: each
    campaign) on nodes with :attr:`prop` (None: anywhere)."""

    campaign: str
    prop: str | None
    limit: int

    def text(self) -> str:
        return f"{self.campaign}{'' if self.prop is None else '@' + self.prop}:{self.limit}"


def _limit(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def parse_bounds(value: Any) -> tuple[Bound, ...]:
    """``CAMPAIGN[@PROPERTY]:N[,...]`` (or a mapping of the same) -> bounds;
    ValueError names the bad entries."""
    entries = [f"{k}:{v}" for k, v in value.items()] if isinstance(value, Mapping) else str(value).split(",")
    out: dict[tuple[str, str | None], Bound] = {}
    bad: list[str] = []
    for entry in (x.strip() for x in entries):
        if not entry:
            continue
        who, sep, n = entry.rpartition(":")
        name, at, prop = who.partition("@")
        limit = _limit(n)
        name, prop = name.strip(), prop.strip()
        if not sep or not name or limit is None or (at and not prop) or any(c.isspace() for c in name + prop):
            bad.append(repr(entry))
            continue
        key = (name, prop or None)
        if key in out:
            bad.append(f"{entry!r} (listed twice)")
            continue
        out[key] = Bound(name, prop or None, limit)
    if bad:
        raise ValueError(f"bad entries {', '.join(bad)}; expected CAMPAIGN[@PROPERTY]:N[,...] with N > 0")
    return tuple(out.values())


def parse_job_bounds(request: Request) -> tuple[Bound, ...]:
    """A request's ``attributes.user.campaign-max-running`` (``N`` or
    ``[@PROPERTY:]N,...``) as bounds on its campaign; ValueError if malformed."""
    attrs = getattr(request, "attributes", None)
    user = attrs.get("user") if isinstance(attrs, Mapping) else None
    if not isinstance(user, Mapping) or "campaign-max-running" not in user:
        return ()
    v = user["campaign-max-running"]
    name = campaign_of(request)[0]
    if name is None:
        raise ValueError("attributes.user.campaign-max-running needs attributes.user.campaign")
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str):
        raise ValueError(f"attributes.user.campaign-max-running={v!r}: expected N or [@PROPERTY:]N,...")
    entries = []
    for entry in (x.strip() for x in v.split(",")):
        if entry.startswith("@"):
            prop, _, n = entry[1:].partition(":")
            entries.append(f"{name}@{prop}:{n}")
        else:
            entries.append(f"{name}:{entry}")
    try:
        return parse_bounds(",".join(entries))
    except ValueError:
        raise ValueError(f"attributes.user.campaign-max-running={v!r}: expected N or [@PROPERTY:]N,...") from None


#: The events that start a pending job (a ``hello`` is a job running at a restart).
_STARTS = ("start", "preempt")


class CampaignBounds:
    """Running jobs per (campaign, property), and what a pending job may not use.

    It keeps no engine: it reads the ``graph`` (whose nodes' properties a
    bound names), and asks for the engine's current ``options`` and the
    planner's ``codec`` (both change: at a config reload, at a rebuild)."""

    def __init__(
        self, graph: ResourceGraph, options: Callable[[], EngineOptions], codec: Callable[[], FlatCodec]
    ) -> None:
        self._graph = graph
        self._options = options
        self._codec = codec
        self._running: dict[int, tuple[str, frozenset[str]]] = {}  # job -> (campaign, properties of its ranks)
        self._count: dict[tuple[str, str | None], int] = {}  # (campaign, property or None) -> running jobs
        self._fresh: dict[int, tuple[Job, str]] = {}  # started, not counted yet
        self._asked = False  # a job carried attributes.user.campaign-max-running

    def job_event(self, job: Job, event: str, old: JobState | None, now: float | None, preempted: bool) -> None:
        # Called before the table applies the event: a starting job's
        # resources are set after, so it is counted at the next question.
        if event == "alloc" and not self._asked:
            try:
                self._asked = bool(parse_job_bounds(job.request))
            except ValueError:
                pass  # denied
        elif job.request is not None and (event == "hello" or (event in _STARTS and old is JobState.PENDING)):
            name = campaign_of(job.request)[0]
            if name is not None:
                self._fresh[job.id] = (job, name)
        elif event in ("free-final", "revoke") or (event == "cancel" and old is JobState.STARTING):
            self._fresh.pop(job.id, None)
            got = self._running.pop(job.id, None)
            if got is not None:
                name, props = got
                for p in (None, *props):
                    self._count[name, p] -= 1

    def _settle(self) -> None:
        """Count the jobs started since the last question."""
        fresh, self._fresh = self._fresh, {}
        g = self._graph
        for job, name in fresh.values():
            ranks = () if job.resources is None else job.resources.ranks
            props = frozenset(p for r in ranks for p in g.properties(r))
            self._running[job.id] = (name, props)
            for p in (None, *props):
                self._count[name, p] = self._count.get((name, p), 0) + 1

    def running(self, campaign: str, prop: str | None = None) -> int:
        """Running jobs of ``campaign`` (on nodes with ``prop``; None: anywhere)."""
        if self._fresh:
            self._settle()
        return self._count.get((campaign, prop), 0)

    def held(self, job: Job) -> tuple[int, str] | None:
        """``(mask, reason)``: the flat mask of ranks a pending best-effort
        ``job`` may not use now (every rank when a whole-campaign bound is
        reached), and the ``reason_pending`` naming the tightest bound
        reached; None when no bound holds it."""
        configured = self._options().campaign_max_running
        if not self._asked and not configured:
            return None
        name = campaign_of(job.request)[0]
        if name is None:
            return None
        bounds = [b for b in configured if b.campaign in ("*", name)]
        try:
            bounds += parse_job_bounds(job.request)
        except ValueError:
            return None  # refused at alloc (Hooks.checked); a restart's job has no request checked
        reached = [b for b in bounds if self.running(name, b.prop) >= b.limit]
        if not reached:
            return None
        g = self._graph
        codec = self._codec()
        whole = [b for b in reached if b.prop is None]
        if whole:
            mask = codec.ranks_mask(list(g.ranks))
            b = min(whole, key=lambda x: x.limit)
        else:
            props = sorted({b.prop for b in reached if b.prop is not None})
            mask = codec.ranks_mask([r for r in g.ranks if not g.properties(r).isdisjoint(props)])
            b = min(reached, key=lambda x: (x.limit, x.prop or ""))
        where = "" if b.prop is None else f" on {b.prop} nodes"
        n = self.running(name, b.prop)
        return mask, f"campaign {name}: {n} jobs running{where}, its bound (campaign-max-running {b.text()})"
