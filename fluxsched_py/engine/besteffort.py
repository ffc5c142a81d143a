"""Best-effort jobs and preemption (``attributes.system.preemptible-after``).

A job with ``preemptible-after`` is *best-effort*; every other job is
*regular*.  The rules, all enforced here:

* **Regular jobs plan as if best-effort resources were free** from the
  moment each best-effort job becomes preemptible (``start +
  preemptible-after``).  Until then the planner holds them with a running
  span that ends then; afterwards they are *lent*: the planner's graph is a
  :class:`~.regularview.RegularView` that counts them free.  Reservations,
  shadow times, backfill and ``t_estimate`` all see that view.
* **Starting a regular job on lent resources** (:meth:`BestEffort.handoff`):
  the victims are chosen (:func:`choose_victims`), a :class:`~.actions.Preempt`
  goes out for each, and the job goes to ``STARTING``: its planner span is
  in place and it holds in the graph what was already free; what each victim
  frees is handed to it as the victim's ``sched.free`` arrives.  The SUCCESS
  goes out on the first pass after the last one.  Nobody else can take those
  resources meanwhile (they are the job's, or still the victims'), and a
  preempted job is never lent again, so it is never preempted twice.
* **A restart** (:meth:`BestEffort.adopt`): the driver says, for each
  running job, whether it is best-effort and whether it was preempted
  already.  A job preempted before the restart is *spent*: lent at no
  cost, so that the regular job it was preempted for (pending again) or
  another one takes it and waits for its free with no new preemption; no
  preemption is ever sent for it again.
* **Victim choice:** the fewest jobs, then the least lost work (elapsed
  node-seconds).  Only lent jobs are candidates: never a regular job, never
  a job inside its protected window.  A best-effort job never preempts.
* **Pending best-effort jobs** start after the regular pass, only on what is
  free in the graph and not reserved for a regular job over their protected
  window (``min(walltime, preemptible-after)``): they never delay a regular
  reservation.  They are placed from the other end of the placement order
  (:func:`far_end`: ``high`` when regular jobs take ``low`` or ``worstfit``,
  ``low`` when they take ``first`` or ``high``), so that regular jobs meet
  them last and never preempt one while what is free fits them.

* **Reservation windows** (:mod:`.reservations`) are kept clear of
  best-effort jobs: one is started only where no window opens before its
  expiration (its walltime ends it before), and one running on a window's
  ranks (the window was added while it ran) gets its notice
  ``preempt-grace`` before the window opens and is preempted when it opens
  (:meth:`BestEffort.clear_windows`).

Best-effort events (their alloc, their free once lent) do not make the
regular jobs re-plan: for those, nothing changed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..match.policy import POLICIES, get_policy
from ..planner import Placement
from .actions import Notice, Preempt
from .jobs import Job
from .lent import Lent
from .regularview import RegularView
from .states import JobState, PassResult, Response, ResponseType

if TYPE_CHECKING:
    from ..planner import Planner
    from ..planner.flat import FlatCodec
    from ..resource import ResourceGraph, ResourceSet
    from .hooks import Hooks
    from .jobtable import JobTable
    from .options import EngineOptions
    from .passctx import Pass
    from .powercap import PowerCap

__all__ = ["BestEffort", "checkpoints", "choose_victims", "far_end", "requeued_from"]

#: The far end of each node order (match/policy.py): ``low`` walks ids up,
#: ``high`` down; ``first`` takes the most available cores first with ties
#: to the higher id, ``worst`` (worstfit) the same with ties to the lower
#: id.  Regular jobs count lent resources available, so to them every node
#: a best-effort job holds alone looks idle: the ties decide, and the far end
#: of ``first`` is ``low``, that of ``worst`` is ``high``.
_FAR_ORDER = {"low": "high", "high": "low", "first": "low", "worst": "high"}


def far_end(placement: str) -> str:
    """The placement policy pending best-effort jobs use when regular jobs
    use ``placement``: the named policy that walks the nodes from the other
    end, with the same node exclusivity.  Socket locality and network
    packing are dropped (no named policy has them with a high-first order):
    for a best-effort job, being met last matters more."""
    p = get_policy(placement)
    order = _FAR_ORDER[p.order]
    for name, q in POLICIES.items():
        if q.order == order and q.node_exclusive == p.node_exclusive and not (q.locality or q.network):
            return name
    raise AssertionError(f"no policy with order {order!r} for {placement!r}")  # POLICIES has them all


@dataclass(slots=True)
class _Handoff:
    """A regular job waiting for the jobs preempted for it to be freed."""

    job: Job
    rs: ResourceSet
    waiting: set[int] = field(default_factory=set)


#: A lent checkpointing job's first notice comes this long (seconds) after
#: its start, or its grace time when that is shorter; then one every grace
#: time.  Soon, so that a grace time later it can be preempted with no wait;
#: not at its start: under Flux the job-manager refuses a signal to a job it
#: has not started yet (the Flux driver retries a refused one).  A fixed
#: delay, a wakeup of its own (:meth:`BestEffort.next_wakeup`), so that the
#: notice does not depend on when the next pass happens to run.
FIRST_NOTICE = 2.0

#: What making a regular job wait for a victim's notice costs in :func:`choose_victims`:
#: more than any lost work (node-seconds).
_WAIT_COST = 1e15


def lost_work(job: Job, now: float, since: float | None = None) -> float:
    """Elapsed node-seconds of a running job (since ``since``, its last
    checkpoint, when given): what preempting it loses."""
    start = (job.t_start or 0.0) if since is None else max(since, job.t_start or 0.0)
    return max(0.0, now - start) * len(job.resources.ranks)


def _user_attr(job: Job, name: str) -> Any:
    attrs = job.request.attributes if job.request is not None else None
    user = attrs.get("user") if isinstance(attrs, dict) else None
    return user.get(name) if isinstance(user, dict) else None


def checkpoints(job: Job, campaigns: Container[str] = ()) -> bool:
    """``job`` checkpoints on its notice: ``attributes.user.checkpoint`` is
    ``"signal"``, or its campaign (``attributes.user.campaign``) is one of ``campaigns``."""
    if _user_attr(job, "checkpoint") == "signal":
        return True
    campaign = _user_attr(job, "campaign")
    return isinstance(campaign, str) and campaign in campaigns


def requeued_from(job: Job) -> int | None:
    """The id of the job a requeued checkpointing job continues
    (``attributes.user.requeued-from``, set by the driver that requeued it), or None."""
    v = _user_attr(job, "requeued-from")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def choose_victims(
    match: Callable[[int], Placement | None],
    base: int,
    candidates: Iterable[tuple[Job, int]],
    now: float,
    spent: Container[int] = (),
    waits: Container[int] = (),
) -> tuple[list[Job], Placement] | None:
    """The victims to preempt so that ``match(avail)`` finds a placement.

    ``base`` is what is available without preempting anyone; each candidate
    is ``(job, bits)``.  Returns ``(victims, placement)``: no victim when
    ``base`` suffices; else one victim when one is enough, the one that
    loses the least work; else a greedy choice (biggest jobs first, cheapest
    first among equals), pruned of every victim the placement can do
    without, most costly first.  Exact for one victim and for victims of
    one size (the common case: one-node best-effort jobs); a heuristic
    otherwise.  None when even all of them are not enough.

    ``spent`` are candidates already preempted (before a scheduler restart)
    that no job waits for: taking them loses nothing more, so they cost
    less than any other.  ``waits`` are candidates that would make the job
    wait (their notice is not over, ``preempt-grace``): they cost more than
    any other."""
    got = match(base)
    if got is not None:
        return [], got
    cands = list(candidates)
    cost = {
        j.id: -1.0 if j.id in spent else lost_work(j, now) + (_WAIT_COST if j.id in waits else 0.0) for j, _ in cands
    }
    for j, b in sorted(cands, key=lambda c: (cost[c[0].id], c[0].id)):
        got = match(base | b)
        if got is not None:
            return [j], got
    chosen: list[tuple[Job, int]] = []
    avail = base
    for c in sorted(cands, key=lambda c: (-c[1].bit_count(), cost[c[0].id], c[0].id)):
        chosen.append(c)
        avail |= c[1]
        got = match(avail)
        if got is not None:
            break
    else:
        return None
    for c in sorted(chosen, key=lambda c: (-cost[c[0].id], -c[0].id)):
        rest = [o for o in chosen if o is not c]
        trial = base
        for o in rest:
            trial |= o[1]
        g2 = match(trial)
        if g2 is not None:
            chosen, got = rest, g2
    bits = got.bits
    return [j for j, b in chosen if b & bits], got


class BestEffort:
    """The engine's best-effort jobs: see the module docstring.

    It keeps no engine: it is given the job table (the one door to spans
    and allocations; the planner is read through it), the graph, the
    engine's counters, the hooks and the live copies, and asks for the
    current options and power cap (a config reload replaces them).  A job
    starts only through the engine (``kill_time``, ``succeed``); what else
    is the engine's to do it hands back: :meth:`handoff` says whether the
    job still has to be started, :meth:`start_ready` and :meth:`freed`
    whether a pass is due (after :meth:`cancel_starting`, one always is)."""

    #: Pending best-effort jobs a pass looks at past the last one it could
    #: try (the others were of shapes that already failed), once the
    #: annotated ones are done: a million queued jobs of one shape cost one
    #: failed match, not a million.
    LOOKAHEAD = 256

    def __init__(
        self,
        table: JobTable,
        graph: ResourceGraph,
        options: Callable[[], EngineOptions],
        counters: dict[str, int | float],
        hooks: Hooks,
        copies: Callable[[], frozenset[int]],
        cap: Callable[[], PowerCap | None],
        *,
        kill_time: Callable[[Job, float], float],
        succeed: Callable[[Job, ResourceSet, float, float, dict[str, Any], list[Response]], None],
        time_format: Callable[[float], str],
        job_name: Callable[[int], str],
    ) -> None:
        #: The one door to spans and allocations, and every job by id; its
        #: planner is read through it (a rebuild replaces the planner).
        self._table = table
        self._graph = graph
        self._options = options  # the engine's current ones: a config reload replaces them
        self._counters = counters  # the engine's (Engine.stats)
        #: Campaign order, affinity, what a pending job may not use, predicted run times.
        self._hooks = hooks
        self._copies = copies  # the live end-of-campaign copies (Duplicates.copies): victims first
        self._cap = cap  # the power cap, which a config reload may replace or remove
        #: The engine's own acts: when a job started now is killed, and the
        #: one way a job starts running (:meth:`.Engine.succeed`).
        self._kill_time = kill_time
        self._succeed = succeed
        self._time_format = time_format
        self._job_name = job_name
        #: What is lent: jobs preemptible now, their resources and flat bits.
        self.lent = Lent()
        #: The graph the planner reads: lent resources count as free.
        self.view = RegularView(graph, self.lent)
        #: A best-effort job arrived or left: the best-effort pass is due.
        self.dirty = False
        #: A best-effort job was ever known: preemption reads the regular
        #: jobs' reservations from then on (:attr:`Pass.plan_read`).
        self.seen = False
        self._windows: list[tuple[float, int]] = []  # (end of protected window, job id)
        self._preempted: dict[int, int | None] = {}  # victim -> the job it makes room for
        #: Preempted before a restart, for no job known now: lent, and a
        #: regular job that takes them waits for their free (no new preemption).
        self._spent: set[int] = set()
        self._handoffs: dict[int, _Handoff] = {}
        self._ready: list[int] = []
        self._actions: list[Preempt] = []
        #: Notice (``preempt-grace``): when each running job got its first
        #: notice signal (it may be preempted ``grace`` later), and its last
        #: (a checkpointing job checkpointed then).
        self._first_noticed: dict[int, float] = {}
        self._noticed: dict[int, float] = {}
        #: (time, victim): a victim given notice is preempted then unless it ends first.
        self._kills: list[tuple[float, int]] = []
        #: Victims whose Preempt went out.
        self._killed: set[int] = set()
        self._notices: list[Notice] = []
        #: When the next regular reservation on lent resources is ``preempt-grace`` away.
        self._next_notice: float | None = None
        #: Pending requeued jobs (``attributes.user.requeued-from``): they start first.
        self._requeued: set[int] = set()
        #: Where each preempted checkpointing job last ran, by its first job id.
        self._ran_on: dict[int, Any] = {}
        #: When the next notice for a reservation window is due (:meth:`clear_windows`).
        self._window_notice: float | None = None
        counters.update({"preemptions": 0, "preempted_node_seconds": 0.0})

    # -- queries ---------------------------------------------------------------

    def next_wakeup(self) -> float | None:
        """When the next protected window ends (a pass is due then), or None.

        A job's window is ``preemptible-after`` long; its planner span ends
        then or at its walltime, whichever comes first."""
        w = self._windows
        while w and not self._protected(w[0][1]):
            heapq.heappop(w)
        k = self._kills
        while k and (k[0][1] not in self._preempted or k[0][1] in self._killed):
            heapq.heappop(k)
        times = (w[0][0] if w else None, k[0][0] if k else None, self._next_notice, self._window_notice)
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def grace(self, job: Job) -> float:
        """The notice ``job`` gets before it is preempted: ``preempt-grace``,
        or less when its ``attributes.system.preempt-grace`` asks for less."""
        g = self._options().preempt_grace
        own = job.request.preempt_grace if job.request is not None else None
        return g if own is None else min(g, own)

    def checkpoints(self, job: Job) -> bool:
        """``job`` checkpoints on its notice (see :func:`checkpoints`)."""
        return checkpoints(job, self._options().checkpoint_campaigns)

    def starting(self) -> dict[int, set[int]]:
        """Regular jobs waiting for victims: ``{job: victims not freed yet}``."""
        return {y: set(h.waiting) for y, h in self._handoffs.items()}

    def _protected(self, jobid: int) -> bool:
        job = self._table.jobs.get(jobid)
        return job is not None and job.state is JobState.RUNNING and jobid in self._planner and jobid not in self.lent

    @property
    def _planner(self) -> Planner:
        """The engine's planner, the job table's (a rebuild replaces it)."""
        return self._table.planner

    # -- engine hooks -------------------------------------------------------------

    def span_end(self, job: Job) -> float:
        """Where a job's planner span ends: its expiration, or for a
        best-effort job the end of its protected window."""
        pa = job.preemptible_after
        return job.expiration if pa is None else min(job.expiration, (job.t_start or 0.0) + pa)

    def advance(self, now: float) -> bool:
        """Lend the jobs whose protected window ended by ``now``.  True when
        any was: for regular jobs, resources were freed (a pass is due)."""
        w = self._windows
        changed = False
        while w and w[0][0] <= now:
            _, jobid = heapq.heappop(w)
            if self._protected(jobid):
                self._table.unplan(jobid)
                self._lend(self._table.jobs[jobid])
                changed = True
        return changed

    def freed(self, job: Job, event: str = "free-final") -> bool:
        """``sched.free`` (final) of a best-effort job, or (``event``
        ``revoke``) its start undone (:meth:`Engine.revoke`).  True when it
        was still in its protected window: it ended early, and regular jobs
        may move up (a pass is due); a lent job's free changes nothing for
        them."""
        table = self._table
        jobid = job.id
        released = table.release(jobid)
        span = table.unplan(jobid)
        killed = jobid in self._killed
        table.apply(job, event, preempted=killed)
        if jobid in self.lent:
            self._unlend(jobid)
        self._spent.discard(jobid)
        self._killed.discard(jobid)
        self._noticed.pop(jobid, None)
        self._first_noticed.pop(jobid, None)
        if killed and self.checkpoints(job) and released:
            first = requeued_from(job)
            self._ran_on[jobid if first is None else first] = released
        if jobid in self._preempted:
            owner = self._preempted.pop(jobid)
            h = self._handoffs.get(owner) if owner is not None else None
            if h is not None:
                self._hand_over(h, released)
                h.waiting.discard(jobid)
                if not h.waiting:
                    self._ready.append(h.job.id)
        self.dirty = True
        return span is not None

    def resized(self, job: Job, released: Any) -> None:
        """A best-effort job freed part of what it holds (``released``).

        If it was preempted for a job, what that job's placement needs of
        ``released`` is that job's at once: left free, another job could
        take it before the victim's final free (a double allocation)."""
        if job.id in self.lent:
            self._unlend(job.id, job.resources | released)  # what was lent, before the free
            self._lend(job)
        owner = self._preempted.get(job.id)
        h = self._handoffs.get(owner) if owner is not None else None
        if h is not None:
            self._hand_over(h, released)

    def _hand_over(self, h: _Handoff, released: Any) -> None:
        """Give the job waiting in ``h`` what its placement needs of what a victim just released."""
        part = released & h.rs
        if part:  # held by nobody now, even if its rank went down meanwhile
            self._table.allocate(h.job.id, part, running=True)

    def cancel_starting(self, job: Job) -> list[Response]:
        """``sched.cancel`` of a regular job waiting for its victims: what it
        holds goes back; victims whose preemption went out stay preempted,
        victims still in their grace time are spared: lent again, no
        preemption (their notice was sent, and stays: docs/rfcs/preemption.md).
        What it held is free again: the engine marks a pass due."""
        table = self._table
        h = self._handoffs.pop(job.id)
        for vid in h.waiting:
            v = table.jobs.get(vid)
            if vid in self._killed or v is None or v.state is not JobState.RUNNING:
                self._preempted[vid] = None
                continue
            del self._preempted[vid]  # its pending kill (self._kills) is dropped with it
            self._lend(v)
        if job.id in self._ready:
            self._ready.remove(job.id)
        table.apply(job, "cancel")
        if self._graph.jobs.get(job.id) is not None:
            table.release(job.id)
        table.unplan(job.id)
        return [Response(job.id, ResponseType.CANCEL, reply=job.reply)]

    def adopt(self, job: Job, preempted: bool) -> None:
        """A best-effort job learned at ``hello`` (a scheduler restart): its
        span ends with its protected window, or it is lent; when a
        preemption was already sent for it, it is preempted (never again)
        and *spent*: lent, so that the regular job it was preempted for
        (re-sent after the restart) or another one takes its resources by
        waiting for its free rather than by preempting other jobs."""
        self.seen = True
        self._table.unplan(job.id)
        if preempted:
            self._preempted[job.id] = None
            self._killed.add(job.id)
            self._spent.add(job.id)
            self._lend(job)
            return
        until = self._protected_until(job)
        if until > (job.t_start or 0.0):
            self._table.plan_run(job.id, job.resources, job.t_start or 0.0, max(self.span_end(job), job.t_start + 1e-9))
            heapq.heappush(self._windows, (until, job.id))
        else:
            self._lend(job)

    @staticmethod
    def _protected_until(job: Job) -> float:
        return (job.t_start or 0.0) + (job.preemptible_after or 0.0)

    # -- lending -------------------------------------------------------------------

    def encode_lent(self, codec: FlatCodec) -> None:
        """Encode what is lent in ``codec``'s flat layout (a new planner's; a
        grow lays flat sets out anew, and bits of the old layout name other
        items)."""
        self.lent.reencode(codec.encode)

    def _lend(self, job: Job) -> None:
        self.lent.lend(job, self._planner.codec.encode(job.resources))

    def _unlend(self, jobid: int, lent: Any = None) -> None:
        """Stop lending ``jobid``; ``lent`` is what was lent when the job's
        resources shrank since (a partial free), else they are what was lent."""
        self.lent.unlend(jobid, lent)

    # -- starting a regular job on lent resources ---------------------------------

    def handoff(self, p: Pass, job: Job, placement: Placement) -> tuple[Placement, bool]:
        """Start ``job`` (regular) where ``placement`` meets lent resources:
        choose victims, preempt them, hold what they free for ``job``.
        Returns the placement used, and whether ``job`` waits for victims
        (in ``STARTING``); when it needs none (what is free holds it), the
        caller starts it there now (:meth:`.Engine.start_job`)."""
        opts = self._options()
        planner = self._planner
        counters = self._counters
        now = p.now
        policy = opts.placement
        reserved = planner.reserved_during(now, now + job.duration) if planner.nreserved else 0
        base = p.free() & ~self.lent.bits & ~reserved
        cands = [(j, b & ~reserved) for j, b in self.lent.items() if b & ~reserved]

        def match(avail: int) -> Placement | None:
            counters["matches"] += 1
            return planner.match_bits(job.request, avail, policy)

        waits = {j.id for j, _ in cands if self._waits_for(j, now)} if opts.preempt_grace > 0 else ()
        chosen = None
        if opts.preempt_victims != "plan":
            chosen = choose_victims(match, base, cands, now, self._spent | self._copies(), waits)  # copies go first
        elif waits and self._young_checkpointing([j for j, b in self.lent.items() if b & placement.bits], waits):
            # The plan's victims are checkpointing jobs still in their first
            # notice: rather what is free and checkpointing jobs ready now
            # (when that fits), so that the job does not wait.
            ready = [c for c in cands if c[0].id not in waits and self.checkpoints(c[0])]
            chosen = choose_victims(match, base, ready, now, self._spent | self._copies())
        if chosen is None:  # the plan's placement (with fewest, only if lent resources went down)
            chosen = ([j for j, b in self.lent.items() if b & placement.bits], placement)
        victims, placement = chosen
        rs = planner.resolve(placement)
        if not victims:
            return placement, False
        table = self._table
        end = self._kill_time(job, now)
        table.apply(job, "preempt", now=now, resources=rs, expiration=end)
        own = rs & self._graph.free()
        if own:
            table.allocate(job.id, own)
        table.plan_run(job.id, rs, now, min(end, now + job.duration), placement.bits)
        h = self._handoffs[job.id] = _Handoff(job, rs)
        name = self._job_name
        fmt = self._time_format
        spent = [v for v in victims if v.id in self._spent]
        last = now
        for v in victims:
            p.withhold(self.lent.bits_of(v.id))  # what a victim holds beyond the placement is not free either
            self._unlend(v.id)
            self._preempted[v.id] = job.id
            h.waiting.add(v.id)
            if v.id in self._spent:  # preempted already: just wait for its free
                self._spent.discard(v.id)
                continue
            if not self._waits_for(v, now):
                at = now  # its notice is over, or preempt-wait does not wait for it
            else:
                g = self.grace(v)
                noticed = self._first_noticed.get(v.id)
                if noticed is None:
                    self._notice(v, now, now + g, f"preempted at {fmt(now + g)} for job {name(job.id)}")
                    noticed = now
                at = noticed + g
            if at <= now:
                self._kill(v, job.id, now)
            else:  # it may end during its grace time: then it completed
                heapq.heappush(self._kills, (at, v.id))
                last = max(last, at)
        n = len(victims)
        what = f"{n} best-effort job{'s' if n > 1 else ''}"
        if len(spent) == n:  # all preempted before a restart
            ann = {"reason_pending": f"waiting for {what} preempted: {', '.join(name(v.id) for v in victims)}"}
        elif last > now:
            ann = {
                "reason_pending": f"preempting {what}: {', '.join(name(v.id) for v in victims)}; notice given, "
                f"waiting at most until {fmt(last)} (preempt-grace)"
            }
        else:
            ann = {"reason_pending": f"preempting {what}: {', '.join(name(v.id) for v in victims)}"}
        self._annotate(job, ann, p.out)
        return placement, True

    def _young_checkpointing(self, victims: list[Job], waits: Container[int]) -> bool:
        """Some of ``victims`` would make a regular job wait (``waits``), and
        all of those checkpoint: they are young, their first notice not yet
        a grace time old (it comes :data:`FIRST_NOTICE` after their start:
        :meth:`notice_due`)."""
        late = [v for v in victims if v.id in waits]
        return bool(late) and all(self.checkpoints(v) for v in late)

    def notice_due(self, job: Job) -> float:
        """When lent checkpointing ``job`` gets its next notice: the first
        :data:`FIRST_NOTICE` after its start (or its grace time, when
        shorter), then one every grace time after the last."""
        last = self._noticed.get(job.id)
        g = self.grace(job)
        return (job.t_start or 0.0) + min(g, FIRST_NOTICE) if last is None else last + g

    def _waits_for(self, v: Job, now: float) -> bool:
        """A regular job that can start now waits for victim ``v``: its
        notice is not over (it has a grace time, and got no notice or one
        less than a grace time ago), and ``preempt-wait`` waits for it
        (``grace``: every victim; ``checkpoint``: a victim that checkpoints
        on its notice; ``none``: none).  A victim not waited for is
        preempted at once, its notice (if any) cut short: a job that does
        not checkpoint loses its work either way, so waiting for it only
        gives it the chance to end within the grace time, at the price of a
        regular job's start, and of every start planned after that job's end."""
        g = self.grace(v)
        first = self._first_noticed.get(v.id)
        if g <= 0 or (first is not None and first + g <= now + 1e-9):
            return False
        wait = self._options().preempt_wait
        return wait == "grace" or (wait == "checkpoint" and self.checkpoints(v))

    def _notice(self, v: Job, now: float, at: float, note: str) -> None:
        self._noticed[v.id] = now
        self._first_noticed.setdefault(v.id, now)
        self._counters["notices"] = self._counters.get("notices", 0) + 1
        self._notices.append(Notice(v.id, self._options().preempt_signal, at, note))

    def _kill(self, v: Job, for_id: int | None, now: float, why: str | None = None) -> None:
        """Send the preemption of victim ``v`` (for job ``for_id``; None: that
        job was cancelled meanwhile, or ``why`` says what it is for)."""
        counters, name = self._counters, self._job_name
        self._killed.add(v.id)
        ck = self.checkpoints(v)
        counters["preemptions"] += 1
        counters["preempted_node_seconds"] += lost_work(v, now, self._noticed.get(v.id) if ck else None)
        note = "preempted for a job since cancelled" if for_id is None else f"preempted for job {name(for_id)}"
        note = why or note
        self._actions.append(Preempt(v.id, -1 if for_id is None else for_id, note, requeue=ck))

    def _due_kills(self, now: float) -> None:
        """Preempt the victims whose grace time is over and that did not end."""
        k = self._kills
        while k and k[0][0] <= now:
            _, vid = heapq.heappop(k)
            if (owner := self._preempted.get(vid)) is not None and vid not in self._killed:
                v = self._table.jobs.get(vid)
                if v is not None and v.state is JobState.RUNNING:
                    self._kill(v, owner, now)

    def _notice_planned(self, now: float) -> None:
        """Notices that are not a regular job's wait (:meth:`handoff`):

        * a lent job that checkpoints on its notice gets it
          :data:`FIRST_NOTICE` after its start and again every
          ``preempt-grace`` while it stays lent (:meth:`notice_due`): each
          notice is a checkpoint, so a preemption loses at most one grace
          time of its work, and once its first notice is that old it can be
          preempted at once (no regular job waits for it);
        * another lent job (for which the signal may be fatal) gets it once,
          ``preempt-grace`` before a regular reservation that claims its
          resources starts, so that the reservation's job starts on time.

        Remember when the next one is due (:meth:`next_wakeup`)."""
        g = self._options().preempt_grace
        self._next_notice = None
        if g <= 0 or not len(self.lent):
            return
        planner = self._planner
        soon = planner.reserved_during(now, now + g + 1e-6) if planner.nreserved else 0  # starting by now + g
        nxt = None
        waiting = 0  # lent jobs that do not checkpoint and got no notice yet
        for j, b in list(self.lent.items()):
            if j.id in self._preempted or (gj := self.grace(j)) <= 0:
                continue
            last = self._noticed.get(j.id)
            if self.checkpoints(j):
                due = self.notice_due(j)
                if due <= now + 1e-9:
                    self._notice(j, now, now + gj, "checkpoint: preemptible after this notice")
                    due = now + gj
                nxt = due if nxt is None else min(nxt, due)
            elif last is None:
                if b & soon:
                    self._notice(j, now, now + g, "a regular job's reservation claims its resources")
                else:
                    waiting |= b
        if waiting and planner.nreserved:
            for span in planner.reserved():
                if span.bits & waiting and span.start - g > now:
                    nxt = span.start - g if nxt is None else min(nxt, span.start - g)
        self._next_notice = nxt

    def clear_windows(self, now: float) -> None:
        """Keep the reservation windows clear of running best-effort jobs: one
        on the ranks of a window that opens before its expiration gets its
        notice ``preempt-grace`` before the window opens (at once when that
        is past) and is preempted when the window opens, through the same
        path as a regular job's victims (a checkpointing one is requeued).
        Remember when the next notice is due (:meth:`next_wakeup`)."""
        planner = self._planner
        self._window_notice = None
        running = [(j, b) for j, b in self.lent.items()]
        running += [(j, planner.codec.encode(j.resources)) for _, i in self._windows if (j := self._running_be(i))]
        if not running:
            return
        fmt = self._time_format
        for name, (start, end, bits) in sorted(planner.blocks().items(), key=lambda kv: kv[1][0]):
            if end <= now:
                continue
            for v, b in running:
                if not b & bits or v.id in self._killed or v.expiration <= start:
                    continue
                if getattr(v.request, "reservation", None) == name:
                    continue  # the window's own job
                g = self.grace(v)
                if start <= now + 1e-9:
                    if v.id in self.lent:
                        self._unlend(v.id)
                    self._preempted.setdefault(v.id, None)
                    self._kill(v, None, now, f"preempted: reservation {name} opens at {fmt(start)}")
                elif g > 0 and start - g <= now + 1e-9:
                    if v.id not in self._first_noticed:
                        self._notice(v, now, start, f"reservation {name} opens at {fmt(start)}")
                elif g > 0:
                    due = start - g
                    self._window_notice = due if self._window_notice is None else min(self._window_notice, due)

    def _running_be(self, jobid: int) -> Job | None:
        """Best-effort job ``jobid`` while it runs in its protected window, else None."""
        return self._table.jobs[jobid] if self._protected(jobid) else None

    def _annotate(self, job: Job, ann: dict[str, Any], out: list[Response]) -> None:
        """Annotations of a job the regular pass does not annotate (a pending
        best-effort job, a job waiting for its victims)."""
        r = self._table.annotate(job, ann, managed=False)
        if r is not None:
            out.append(r)

    def start_ready(self, now: float) -> tuple[list[Response], bool]:
        """Move protected windows on, and answer SUCCESS for the regular jobs
        whose victims have all been freed (called first in every schedule).

        Returns the responses, and whether the plan changed (a job was lent,
        or a started job's span, moved to its kill time, dropped reservations
        in its way): then a pass is due."""
        self._due_kills(now)
        changed = self.advance(now)
        out: list[Response] = []
        ready, self._ready = self._ready, []
        for jobid in ready:
            h = self._handoffs.pop(jobid, None)
            if h is None:
                continue
            job = h.job
            end = self._kill_time(job, now)
            if (job.t_start, job.expiration) != (now, end):
                if self._table.set_plan_end(job.id, min(end, now + job.duration)):
                    changed = True
            self._succeed(job, h.rs, now, end, {}, out)
        return out, changed

    # -- the best-effort pass -------------------------------------------------------

    def result(self, out: list[Response], more: bool = False) -> PassResult:
        """A pass's result: ``out``, with the notices and preemptions decided since the last one."""
        actions, self._actions = self._actions, []
        notices, self._notices = self._notices, []
        return PassResult(out, more=more, preempt=actions, notice=notices)

    def queued(self, job: Job) -> None:
        """A best-effort job was queued (its alloc)."""
        self.dirty = True
        self.seen = True
        if requeued_from(job) is not None:
            self._requeued.add(job.id)

    def run(self, now: float, out: list[Response], passed: bool = False) -> PassResult:
        """After the regular pass (``passed``), or when only best-effort
        jobs changed: start pending best-effort jobs where no regular job
        can go, annotate them; return the pass's result."""
        if self._planner.nblocked:
            self.clear_windows(now)
        q = self._table.besteffort
        if (self.dirty or passed) and q.npending:
            self._table.sort_queue(q)
            self._start_pending(now, out)
        self.dirty = False
        self._notice_planned(now)
        return self.result(out)

    def _pending(self, now: float) -> Iterator[Job]:
        """Pending best-effort jobs in the order they may start: queue order,
        or campaign order (test campaigns first, then least decayed usage:
        :mod:`.campaigns`) once a job named a campaign."""
        table, hooks = self._table, self._hooks
        pending = table.pending_in(table.besteffort)
        if self._requeued:  # requeued checkpointing jobs first (with what they ran kept)
            jobs = table.jobs
            live = [j for j in (jobs.get(i) for i in self._requeued) if j is not None and j.state is JobState.PENDING]
            self._requeued = {j.id for j in live}
            first = sorted(live, key=lambda j: j.sortkey)
            yield from hooks.order(first, now) if hooks.ordered else first
            skip = self._requeued
            pending = (j for j in pending if j.id not in skip)
        if hooks.ordered:
            yield from hooks.order(list(pending), now)
            return
        yield from pending

    def _match(self, job: Job, avail: int, policy: str) -> Placement | None:
        """A placement in ``avail``: on ``job``'s preferred nodes (``affinity``) when it fits there."""
        planner = self._planner
        self._counters["matches"] += 1
        if self._options().affinity and (avoid := self._hooks.excluded(job)) is not None:
            found = planner.match_bits(job.request, avail ^ (avail & avoid), policy)
            if found is not None:
                return found
        return planner.match_bits(job.request, avail, policy)

    def _start_pending(self, now: float, out: list[Response]) -> None:
        opts, hooks, graph = self._options(), self._hooks, self._graph
        planner = self._planner
        cap = self._cap()
        free = planner.codec.encode(graph.free())
        policy = far_end(opts.placement)
        failed: set[tuple[int, float, float]] = set()  # (shape, window, walltime near reservations) that did not fit
        windows = planner.nblocked
        depth = opts.annotate_depth
        predict = opts.campaign_predictor
        require = opts.besteffort_fit == "require"
        shown = misses = 0
        for job in self._pending(now):
            window = min(job.walltime, job.preemptible_after or 0.0)
            held = hooks.held(job)  # (ranks it may not use, reason): a campaign bound, a copy being cancelled
            # Not where a reservation starts within its notice: it could not
            # be given its notice in time (docs/rfcs/preemption.md).
            guard = max(window, self.grace(job))
            key = (job.shape_id, guard, job.walltime if windows else 0.0)
            if free and key not in failed:
                misses = 0
                avail = free if held is None else free & ~held[0]
                found = None
                if windows:  # not where a reservation window opens before its walltime ends
                    avail ^= avail & planner.blocked_during(now, now + job.walltime, job.request.reservation)
                if planner.nreserved:
                    avail ^= avail & planner.reserved_during(now, now + max(guard, 1e-9))
                    expected = hooks.expected_duration(job) if predict else 0.0
                    if expected > guard:
                        # First where its campaign's predicted run time ends
                        # before any reservation claims the nodes: less work
                        # lost to preemption (:mod:`.runtimes`).  Only when
                        # that is less than avail: else it is the same match.
                        # besteffort-fit=require: only there.
                        clear = avail ^ (avail & planner.reserved_during(now, now + expected))
                        if clear != avail:
                            found = self._match(job, clear, policy) if clear else None
                            if require:
                                avail = 0
                first = requeued_from(job)
                if found is None and avail and first is not None and (ran := self._ran_on.get(first)) is not None:
                    # a requeued checkpointing job: where it ran, when that is free (its checkpoint is there);
                    # else on nodes sharing a property with those (the same cluster)
                    here = avail & planner.codec.encode(ran & graph.free())
                    found = self._match(job, here, policy) if here else None
                    if found is None and (here := avail & self._near(job, ran)):
                        found = self._match(job, here, policy)
                if found is None and avail:
                    found = self._match(job, avail, policy)
                if found is not None and cap is not None and not cap.fits(job, planner.resolve(found).ranks, now):
                    found = None  # over the power cap for its walltime: it waits like a job that does not fit
                if found is not None:
                    self._start(job, found, now, window, out)
                    free ^= free & found.bits
                    continue
                if held is None:
                    failed.add(key)
            else:
                misses += 1
            if depth is None or shown < depth:
                shown += 1
                why = "best-effort: waiting for resources no regular job needs" if held is None else held[1]
                ann: dict[str, Any] = {"reason_pending": why}
                if (eta := hooks.campaign_eta(job, now)) is not None:
                    ann["campaign_eta"] = eta  # the campaign predictor (engine/runtimes.py)
                self._annotate(job, ann, out)
            elif not free or misses > self.LOOKAHEAD:
                break

    def _near(self, job: Job, ran: Any) -> int:
        """The flat mask of the ranks that share a node property with ``ran``
        (where a requeued ``job`` last ran: the same cluster, rack or file
        server), or 0.  Also 0 when ``job`` has an ``affinity`` property:
        :meth:`_match` then prefers that one's nodes."""
        if self._options().affinity and self._hooks.excluded(job) is not None:
            return 0
        g = self._graph
        ranks = g.ranks
        props: set[str] = set()
        for r in ran.ranks:
            if r in ranks:
                props |= g.properties(r)
        if not props:
            return 0
        return self._planner.codec.ranks_mask([r for r in ranks if g.properties(r) & props])

    def _start(self, job: Job, found: Placement, now: float, window: float, out: list[Response]) -> None:
        table = self._table
        rs = self._planner.resolve(found)
        table.allocate(job.id, rs)
        if (first := requeued_from(job)) is not None:
            self._ran_on.pop(first, None)  # (it is noted again if preempted again)
        until = now + (job.preemptible_after or 0.0)
        end = self._kill_time(job, now)
        self._succeed(job, rs, now, end, {"besteffort": f"preemptible from {self._time_format(until)}"}, out)
        if until > now:  # planned as a job that ends then (or at its walltime)
            table.plan_run(job.id, rs, now, now + window, found.bits)
            heapq.heappush(self._windows, (until, job.id))
        else:
            self._lend(job)
