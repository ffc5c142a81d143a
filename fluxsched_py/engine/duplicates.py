"""End-of-campaign duplication: copies of a campaign's last running jobs on idle nodes.

CiGri (seed 003, "End of campains optimization: duplication of jobs at the
end of a campain if resources are free"; its *finalize* scheduling mode:
"replicate the remaining jobs of a given campaign").  With ``duplicates=N``
(N > 0), after a complete pass, for each named campaign whose jobs are all
running (none pending) and while nodes stay idle, the engine asks the
driver for a **copy** of the campaign's running best-effort job with the
longest predicted remaining run time (:meth:`.runtimes.CampaignStats.residual`),
up to N live copies of one job and ``duplicates-running`` live copies in all,
where a copy may start now (idle nodes its campaign's bounds allow).

A copy is an ordinary best-effort job the driver submits
(:class:`Duplicate`): the original's jobspec with
``attributes.system.preemptible-after = 0`` and
``attributes.system.duplicate-of = ORIGINAL``.  So a copy starts only on what
no regular job needs, never delays one (lent at once, every regular job
plans as if it were not there), and with ``preempt-victims=fewest`` costs
nothing as a victim: it goes first.

:class:`Duplicates` is the one owner of which copies exist and who won.  A
job and its copies are a *group*.  The first member whose final
``sched.free`` is not a preemption is the **winner**; every other live
member (the original included, when a copy wins) is cancelled by the
driver (:class:`CancelCopy`) and, when freed, counts as killed, not as a
campaign run time (:mod:`.hooks`).  ``sched.free`` does not say why a job
ended: a job cancelled by its user wins too (and its copies are
cancelled, as the user would want).

A driver that will not or cannot submit a copy asked for (the Flux module
copies only the instance owner's jobs) says so
(:meth:`.Engine.copy_dropped`): the copy stops counting against the bounds,
and its job is not asked about again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .besteffort import far_end
from .campaigns import campaign_of
from .states import JobState

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..planner.placement import Placement
    from .jobs import Job
    from .options import EngineOptions
    from .runtimes import CampaignStats

__all__ = ["CancelCopy", "Duplicate", "Duplicates", "IdleRoom", "duplicate_of"]


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Submit a copy of running job :attr:`of` (see the module docstring)."""

    of: int
    note: str


@dataclass(frozen=True, slots=True)
class CancelCopy:
    """Cancel job :attr:`id` (pending or running): :attr:`winner`, a member
    of its group, finished first."""

    id: int
    winner: int
    note: str


@dataclass(frozen=True, slots=True)
class IdleRoom:
    """What the engine tells :meth:`Duplicates.actions` of the machine after a
    complete pass; asked for only when a campaign has all its jobs running,
    so copies that are off cost no look at the plan."""

    #: Flat bits of the nodes free now and reserved for no one.
    free: int
    #: The pending best-effort jobs.
    pending: Sequence[Job]
    #: What keeps a best-effort job off nodes (:meth:`.Hooks.held`).
    held: Callable[[Job], tuple[int, str] | None]
    #: A request's placement on some flat bits under a placement policy, or None.
    match: Callable[[Request, int, str], Placement | None]
    #: A running job holds its nodes (lent, or a planned run): it was not preempted.
    holds_nodes: Callable[[int], bool]


def duplicate_of(request: Request) -> int | None:
    """``attributes.system.duplicate-of`` of a request (an int job id), else None."""
    attrs = getattr(request, "attributes", None)
    system = attrs.get("system") if isinstance(attrs, Mapping) else None
    if not isinstance(system, Mapping):
        return None
    v = system.get("duplicate-of")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(slots=True)
class _Group:
    """A job and its copies."""

    original: int
    members: set[int] = field(default_factory=set)  # live: pending or running, original included
    requested: int = 0  # copies asked for that have not arrived
    winner: int | None = None


class Duplicates:
    """See the module docstring: a job-table observer, and the actions drivers take."""

    def __init__(
        self, jobs: Mapping[int, Job], counters: dict[str, int | float], job_name: Callable[[int], str]
    ) -> None:
        self._jobs = jobs  # the job table's, read only
        self._counters = counters
        self._name = job_name
        self._groups: dict[int, _Group] = {}  # original -> group
        self._copy_of: dict[int, int] = {}  # live copy -> original
        self._losers: set[int] = set()  # cancelled, not yet freed or gone
        self._uncopied: set[int] = set()  # live jobs whose copy the driver dropped: never asked again
        self._actions: list[Duplicate | CancelCopy] = []
        counters.update({"duplicates_requested": 0, "duplicates_started": 0, "duplicates_cancelled": 0})
        counters["duplicates_won"] = 0  # groups a copy won

    # -- queries -----------------------------------------------------------------

    def is_copy(self, jobid: int) -> bool:
        return jobid in self._copy_of

    def is_loser(self, jobid: int) -> bool:
        """``jobid`` was cancelled because another member of its group won."""
        return jobid in self._losers

    def copies(self) -> frozenset[int]:
        """The live copies (pending or running)."""
        return frozenset(self._copy_of)

    # -- job events ----------------------------------------------------------------

    def job_event(self, job: Job, event: str, old: JobState | None, now: float | None, preempted: bool) -> None:
        if event == "alloc":
            self._arrived(job)
        elif event == "hello" and job.request is not None:
            self._recovered(job)
        elif event == "start" and old is JobState.PENDING and job.id in self._copy_of:
            self._counters["duplicates_started"] += 1
        elif event == "free-final":
            self._ended(job.id, won=not preempted and job.id not in self._losers)
        elif event == "revoke" or (event in ("cancel", "deny") and old is JobState.PENDING):
            self._ended(job.id, won=False)

    def _arrived(self, job: Job) -> None:
        of = duplicate_of(job.request) if job.preemptible_after is not None else None
        g = self._groups.get(job.id if of is None else of)
        if g is None:
            return
        if of is None:  # the original again (resubmitted after a preemption)
            g.members.add(job.id)
        else:
            g.requested = max(0, g.requested - 1)
            self._copy_of[job.id] = of
            g.members.add(job.id)
        if g.winner is not None:
            self._cancel(job.id, g)

    def _recovered(self, job: Job) -> None:
        """A job running at a restart, with its jobspec: a copy (its
        ``duplicate-of``) makes its group again, with its original if that
        runs too (told before or after it), so the first of them to end
        still wins and the other is cancelled."""
        of = duplicate_of(job.request) if job.preemptible_after is not None else None
        if of is None:
            g = self._groups.get(job.id)
            if g is not None:
                g.members.add(job.id)
            return
        g = self._groups.setdefault(of, _Group(of))
        g.members.add(job.id)
        self._copy_of[job.id] = of
        if (original := self._jobs.get(of)) is not None and original.state is JobState.RUNNING:
            g.members.add(of)

    def _ended(self, jobid: int, won: bool) -> None:
        self._losers.discard(jobid)
        self._uncopied.discard(jobid)
        original = self._copy_of.pop(jobid, jobid)
        g = self._groups.get(original)
        if g is None or jobid not in g.members:
            return
        g.members.discard(jobid)
        if won and g.winner is None:
            g.winner = jobid
            if jobid != original:
                self._counters["duplicates_won"] += 1
            for other in sorted(g.members):
                self._cancel(other, g)
        if not g.members and not g.requested:  # else a copy asked for is still to come (and be cancelled)
            del self._groups[original]

    def _cancel(self, jobid: int, g: _Group) -> None:
        if jobid in self._losers:
            return
        self._losers.add(jobid)
        if jobid in self._copy_of:
            self._counters["duplicates_cancelled"] += 1
        name = self._name
        what = "copy of" if jobid != g.original else "original of"
        self._actions.append(
            CancelCopy(jobid, g.winner or 0, f"{what} job {name(g.original)}: job {name(g.winner or 0)} finished first")
        )

    def dropped(self, of: int) -> None:
        """The copy of ``of`` asked for will not come (:meth:`.Engine.copy_dropped`)."""
        g = self._groups.get(of)
        if g is None or not g.requested:
            return
        g.requested -= 1
        if (job := self._jobs.get(of)) is not None and job.state is JobState.RUNNING:
            self._uncopied.add(of)
        # no copy left (the original, alone, is a job like any other), or the group is over
        if not g.requested and (not g.members or (g.winner is None and g.members == {of})):
            del self._groups[of]

    # -- the decision, after a complete pass ------------------------------------------

    def actions(
        self,
        now: float,
        opts: EngineOptions,
        campaigns: Mapping[str, CampaignStats],
        idle: Callable[[], IdleRoom],
    ) -> list[Duplicate | CancelCopy]:
        """The copies to submit and the jobs to cancel, decided now (after a
        complete pass: drivers call it when ``schedule`` returned with
        ``more`` False).  Cancels are given whatever the options."""
        if opts.duplicates > 0:
            self._request(now, opts, campaigns, idle)
        out, self._actions = self._actions, []
        return out

    def _request(
        self, now: float, opts: EngineOptions, campaigns: Mapping[str, CampaignStats], idle: Callable[[], IdleRoom]
    ) -> None:
        per_job = opts.duplicates
        live = len(self._copy_of) + sum(g.requested for g in self._groups.values())
        room = opts.duplicates_running
        if room is not None and live >= room:
            return
        if not any(c.running and not c.pending for c in campaigns.values()):
            return  # no campaign has all its remaining jobs running
        machine = idle()
        free = machine.free
        if not free:
            return
        pending = [j for j in machine.pending if j.id not in self._copy_of]
        busy = {campaign_of(j.request)[0] for j in pending}  # campaigns with jobs still to start
        if None in busy:  # best-effort jobs of no campaign are waiting: the nodes are not idle
            return
        cands: list[tuple[int, float, float, int]] = []  # (copies, -remaining, -elapsed, id): a heap
        for name, c in campaigns.items():
            if c.pending or name in busy or not c.running:
                continue
            for jid in c.running:
                job = self._jobs.get(jid)
                if job is None or not self._eligible(job, machine.holds_nodes):
                    continue
                g = self._groups.get(jid)
                n = 0 if g is None else len(g.members) - 1 + g.requested
                if n >= per_job or (g is not None and g.winner is not None):
                    continue
                elapsed = now - (job.t_start or now)
                cands.append((n, -c.residual(elapsed, job.walltime), -elapsed, jid))
        heapq.heapify(cands)
        policy = far_end(opts.placement)
        while cands and free and (room is None or live < room):
            n, left, elapsed, jid = heapq.heappop(cands)
            job = self._jobs[jid]
            held = machine.held(job)  # a copy counts against its campaign's bounds (engine/bounds.py)
            found = machine.match(job.request, free if held is None else free & ~held[0], policy)
            if found is None:
                continue
            free ^= free & found.bits
            g = self._groups.get(jid)
            if g is None:
                g = self._groups[jid] = _Group(jid, {jid})
            g.requested += 1
            live += 1
            self._counters["duplicates_requested"] += 1
            self._actions.append(Duplicate(jid, f"copy {n + 1} of job {self._name(jid)}: its campaign's last jobs run"))
            if n + 1 < per_job:
                heapq.heappush(cands, (n + 1, left, elapsed, jid))

    def _eligible(self, job: Job, holds_nodes: Callable[[int], bool]) -> bool:
        """A running best-effort original, not preempted, not a loser."""
        if job.state is not JobState.RUNNING or job.preemptible_after is None:
            return False
        if job.id in self._copy_of or job.id in self._losers or job.id in self._uncopied:
            return False
        return holds_nodes(job.id)  # else preempted, waiting for its free
