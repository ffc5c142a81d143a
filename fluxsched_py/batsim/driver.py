"""The scheduling engine as a Batsim decision process, with no I/O.

Every Batsim protocol (3/4 JSON, batprotocol, the legacy text protocol) says
the same few things — the platform's hosts, a job was submitted, a job ended,
call me later — in its own words.  :class:`BatsimScheduler` holds what they
have in common: it turns those facts into :class:`~fluxsched_py.engine.Engine`
calls and the engine's responses into protocol-neutral decisions
(:class:`Execute`, :class:`Reject`, :class:`CallMeLater`).  The protocol
modules only translate words.

The mapping is the replay's (``fluxsched_py.replay``), so that a policy run
under Batsim makes the decisions the offline replay computes:

* a Batsim host is a node (rank = Batsim resource id, one core unless the
  protocol says otherwise), its properties become RFC 20 properties;
* a submitted job is ``res`` whole nodes, exclusive, for ``walltime`` seconds
  (none, or a non-positive one, means unlimited), submitted at the event's
  timestamp with priority 0, by its user (uid 0 when the protocol names none),
  in the advance reservation it names (the replay's ``--reservations``
  entries are the engine's before the first job);
* its engine id is the number after ``!`` in the Batsim id when that is a
  free integer (the replay numbers Batsim workload jobs the same way, and the
  id breaks ties between jobs submitted at the same time), else a fresh one;
* completions are ``sched.free`` (final), submissions ``sched.alloc``, and one
  pass runs per workload instant, as in the replay; the engine runs on the
  workload's own clock rather than Batsim's, which lags it by a few
  milliseconds per message (see :class:`BatsimScheduler`).

Batsim wakes the scheduler on every completion, so a reservation whose start
is some running job's expected end needs no timer: that job's completion (at
or before its walltime, when Batsim kills it) arrives first.  Only a
reservation that no running job's end explains — one waiting on something
else, such as an instance expiration — gets a :class:`CallMeLater`.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine, EngineOptions, JobState, ResponseType
from ..engine.duplicates import CancelCopy, Duplicate
from ..engine.power import PowerOff, PowerOn
from ..engine.reservations import GroupResolver, ReservationError, declare_entries
from ..engine.runlimits import RunLimits
from ..ids import IdSet, user_id
from ..jobspec.constraints import Constraint
from ..jobspec.request import node_request as _node_request
from ..power import PowerModel
from ..resource.rv1 import hosts_rv1
from .errors import ProtocolError
from .metadata import job_metadata
from .platform import property_names

__all__ = [
    "Register",
    "SetMetadata",
    "SetPower",
    "BatsimScheduler",
    "Driver",
    "CallMeLater",
    "Decision",
    "Execute",
    "Host",
    "Kill",
    "Reject",
    "hosts_R",
    "profile_runtime",
]

log = logging.getLogger("fluxsched_py.batsim")

# Ids the engine gets for Batsim jobs whose name is not a free integer.
_FRESH_BASE = 1 << 40


@dataclass(frozen=True, slots=True)
class Host:
    """A Batsim compute host: ``id`` is its Batsim resource number."""

    id: int
    name: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    cores: int = 1


@dataclass(frozen=True, slots=True)
class Execute:
    job_id: str
    alloc: IdSet


@dataclass(frozen=True, slots=True)
class Reject:
    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class CallMeLater:
    when: float


@dataclass(frozen=True, slots=True)
class Kill:
    """Preempt a running best-effort job (KILL_JOB): the engine's :class:`~fluxsched_py.engine.actions.Preempt`."""

    job_id: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class SetPower:
    """Put ``ranks`` in ``pstate`` (SET_RESOURCE_STATE): the engine's
    :class:`~fluxsched_py.engine.power.PowerOff` (the sleep pstate) or
    :class:`~fluxsched_py.engine.power.PowerOn` (the computing pstate)."""

    ranks: IdSet
    pstate: int


@dataclass(frozen=True, slots=True)
class SetMetadata:
    """What Batsim writes in the job's ``metadata`` column of out_jobs.csv
    (SET_JOB_METADATA): :func:`job_metadata`."""

    job_id: str
    metadata: str


@dataclass(frozen=True, slots=True)
class Register:
    """Register a job with Batsim (``--dynamic-jobs``): REGISTER_PROFILE of
    ``profile`` as ``profile_name`` in the job's workload, then REGISTER_JOB
    of ``job``, the workload entry whose ``id`` is ``job_id`` and whose
    ``profile`` is ``profile_name``.  A requeued checkpointing job (its
    remaining work) or an end-of-campaign copy."""

    job_id: str
    job: Mapping[str, Any]
    profile_name: str
    profile: Mapping[str, Any]


Decision = Execute | Reject | CallMeLater | Kill | SetPower | SetMetadata | Register


def hosts_R(hosts: Sequence[Host]) -> dict:
    """RFC 20 R for Batsim hosts: rank = Batsim id, ``cores`` cores each."""
    if not hosts:
        raise ProtocolError("the platform has no compute resources")
    ordered = sorted(hosts, key=lambda h: h.id)
    ids = [h.id for h in ordered]
    if len(set(ids)) != len(ids) or ids[0] < 0:
        raise ProtocolError(f"compute resource ids must be distinct and non-negative, got {ids[:8]}...")
    if ids != list(range(len(ids))):
        raise ProtocolError(
            f"compute resource ids must be 0..N-1 (Batsim numbers hosts that way); got {IdSet(ids).encode()}"
        )
    names = [h.name for h in ordered]
    if len(set(names)) != len(names):
        names = [f"host{h.id}" for h in ordered]  # R needs distinct host names
    return hosts_rv1(names, [h.cores for h in ordered], [property_names(h.properties) for h in ordered])


def node_request(nnodes: int, walltime: float | None) -> Any:
    """The engine request for a Batsim job: the replay's, so decisions match."""
    return _node_request(nnodes, math.inf if walltime is None else float(walltime))


def profile_runtime(profile: Any) -> float | None:
    """A Batsim profile's run time when the profile alone fixes it (``delay``), else None."""
    if isinstance(profile, Mapping) and profile.get("type") == "delay":
        d = profile.get("delay")
        if isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) and d >= 0:
            return float(d)
    return None


#: Events closer than this in workload time are one instant (Batsim prints times with 6 decimals).
SAME_INSTANT = 2e-6


@dataclass(slots=True)
class _Job:
    batsim_id: str
    engine_id: int
    res: int
    walltime: float | None
    submit: float
    runtime: float | None = None
    preemptible_after: float | None = None
    user: int = 0
    reservation: str | None = None
    attributes: Mapping[str, Any] | None = None
    queue: str | None = None  # the queue it is submitted to (the workload's ``queue``), None: the default one
    constraints: Constraint | None = None  # RFC 31: the nodes it may run on (the workload's ``constraints``)
    state: str = "pending"  # pending | running | ending | done | killed (preempted: freed at once)
    vkill: float | None = None  # workload time of the decision to preempt it
    alloc: IdSet | None = None
    start: float | None = None  # Batsim time of the EXECUTE_JOB
    vstart: float | None = None  # workload time of the decision
    vend: float | None = None  # workload time it will end at, when its run time is known
    vexpire: float | None = None  # workload time its reservation ends, if before its walltime: killed then
    reason: str | None = None  # the last reason_pending the engine gave it (metadata)
    preemptions: int = 0
    metadata: str | None = None  # what Batsim holds as its metadata (sent last)
    # -- dynamic jobs (--dynamic-jobs) --
    profile: Mapping[str, Any] | None = None  # its profile's JSON, when Batsim sent it
    entry: Mapping[str, Any] | None = None  # its workload entry (what a job registered for it copies)
    root: _Job | None = None  # the workload job it continues (requeued) or copies; None: it is one
    copy_of: int | None = None  # a copy: the engine id of its original
    kept: float = 0.0  # seconds of the root's work kept by checkpoints, all its runs so far
    checkpointed: float | None = None  # workload time of the current run's last checkpoint
    registered: int = 0  # registrations made from it (a root: its requeues and copies, for their names)
    acked: bool | None = None  # a registered job: whether Batsim's JOB_SUBMITTED came back (None: not one)


@dataclass(order=True, slots=True)
class _Pending:
    """An event waiting to be given to the engine, in workload-time order (frees before submits)."""

    vtime: float
    rank: int  # 0 free, 1 resource change, 2 submit, 3 timer: the replay's order within an instant
    seq: int
    kind: str = field(compare=False)
    job: _Job | None = field(compare=False, default=None)
    arg: Any = field(compare=False, default=None)


class BatsimScheduler:
    """Batsim facts in, decisions out; see the module docstring.

    **Workload time.**  Batsim charges a little simulated time for every
    message (about 0.6 ms, more for several jobs started in one reply), so
    two jobs that end at the same instant in the workload's own time — same
    start, same run time — end a few milliseconds apart under Batsim and
    arrive in separate messages.  Deciding after the first would see half the
    nodes the replay sees, and EASY would backfill differently.  So the
    engine runs on *workload time*: a submission is at its ``subtime``; a job
    started by a pass at workload time ``V`` ends at ``V + min(run time,
    walltime)`` when the run time is known (a ``delay`` profile, which Batsim
    sends in SIMULATION_BEGINS), else at its Batsim completion time minus the
    lag Batsim added to its start.  Events are given to the engine in
    workload-time order, and a pass at instant ``V`` waits until every
    running job known to end by ``V`` has reported its completion — Batsim
    always sends it, so this never waits for nothing.  Run times are used for
    that bookkeeping only; the engine never sees them and schedules on
    walltimes, as in production.

    Raises :class:`ProtocolError` for facts that contradict what it was told
    before (a completion for a job never submitted or never started, a job
    submitted twice, events before the platform is known): the drivers stop
    on them rather than guess.
    """

    def __init__(
        self,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
        power: Sequence[PowerModel] | None = None,
        *,
        limits: RunLimits | None = None,
        reservations: Sequence[Mapping[str, Any]] = (),
        groups: GroupResolver | None = None,
        metadata: bool = False,
        dynamic: bool = False,
    ) -> None:
        self.options = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        #: Register jobs with Batsim (``--dynamic-jobs``: Batsim runs with
        #: ``--enable-dynamic-jobs``): a preempted checkpointing job again,
        #: with its remaining work, and the end-of-campaign copies the
        #: engine asks for (:class:`Register`), as the replay submits them.
        self.dynamic = dynamic
        #: The Batsim workload the registered jobs and profiles go in (the
        #: protocol driver picks one no static workload has).
        self.dyn_workload = "dyn"
        #: Tell Batsim each job's last reason_pending and preemptions
        #: (:class:`SetMetadata`), when they change.
        self.metadata = metadata
        #: Each host's power model (``--platform``), for ``power-save``.
        self.power = power
        #: The run limits (``--config``) and advance reservations
        #: (``--reservations``, :func:`~fluxsched_py.engine.reservations.parse_spec`
        #: entries, times on the workload's clock), given to the engine when
        #: the platform is known.
        self.limits = limits
        self.reservations = list(reservations)
        #: The groups the reservations name (the file's ``groups`` table).
        self.groups = groups
        self.engine: Engine | None = None
        self.hosts: list[Host] = []
        self.jobs: dict[str, _Job] = {}
        self._by_engine_id: dict[int, _Job] = {}
        self._next_fresh = _FRESH_BASE
        self._pending: list[_Pending] = []
        # (workload end, seq, job) of running jobs with a known run time; the
        # job, not its engine id, which a requeued job takes over
        self._ends: list[tuple[float, int, _Job]] = []
        self._expiries: list[tuple[float, int, _Job]] = []  # (reservation end, seq, job): jobs to kill then
        self._seq = 0
        self.vnow = 0.0  # workload time of the last pass
        self.lag = 0.0  # Batsim time minus workload time at the last pass
        self._calls: dict[float, float] = {}  # CALL_ME_LATER pending: workload time -> Batsim time asked
        self.no_more_static_jobs = False
        self.stats = {"submitted": 0, "started": 0, "rejected": 0, "completed": 0, "killed": 0, "calls": 0}

    # -- facts ---------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self.engine is not None

    def begin(self, hosts: Sequence[Host]) -> None:
        """SIMULATION_BEGINS: build the resource graph and the engine."""
        if self.engine is not None:
            raise ProtocolError("SIMULATION_BEGINS received twice")
        from ..resource import ResourceGraph

        R = hosts_R(hosts)
        try:
            graph = ResourceGraph.from_rv1(R, source="SIMULATION_BEGINS compute_resources")
        except Exception as exc:
            raise ProtocolError(f"cannot build a resource graph from the compute resources: {exc}") from None
        self.hosts = sorted(hosts, key=lambda h: h.id)
        extra = {}
        if self.options.power_save != "off" or self.options.power_cap is not None:
            if self.power is None or len(self.power) != len(hosts):
                have = 0 if self.power is None else len(self.power)
                raise ProtocolError(f"the platform has {have} compute hosts with a power model, Batsim {len(hosts)}")
            extra["power"] = self.power
        engine = Engine(
            graph,
            self.options,
            build_R=False,
            time_format=lambda t: f"t={t:.3f}",
            limits=self.limits,
            user_id=user_id,
            **extra,
        )
        # Before the first job, as in the replay; a bad entry (a rank the
        # platform lacks, two windows on one rank) raises ReservationError.
        declare_entries(engine.reservations, self.reservations, 0.0, user_id, group=self.groups)
        self.engine = engine
        log.info(
            "simulation begins: %d compute hosts, queue-policy=%s policy=%s",
            len(hosts),
            self.options.queue_policy,
            self.options.placement,
        )

    def _engine(self) -> Engine:
        if self.engine is None:
            raise ProtocolError("an event arrived before SIMULATION_BEGINS")
        return self.engine

    def _engine_id(self, batsim_id: str) -> int:
        tail = batsim_id.rsplit("!", 1)[-1]
        if tail.isdigit() and int(tail) < _FRESH_BASE and int(tail) not in self._by_engine_id:
            return int(tail)
        self._next_fresh += 1
        return self._next_fresh

    def _push(self, vtime: float, rank: int, kind: str, job: _Job | None = None, arg: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._pending, _Pending(vtime, rank, self._seq, kind, job, arg))

    def submit(
        self,
        batsim_id: str,
        res: int,
        walltime: float | None,
        t: float,
        runtime: float | None = None,
        preemptible_after: float | None = None,
        *,
        user: int = 0,
        reservation: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        queue: str | None = None,
        constraints: Constraint | None = None,
        profile: Mapping[str, Any] | None = None,
        entry: Mapping[str, Any] | None = None,
    ) -> None:
        """JOB_SUBMITTED at workload time ``t``; ``runtime`` only if the profile fixes it (see the class doc);
        ``preemptible_after`` for a best-effort job; ``user`` its uid (limits, reservations' users, EASY++
        history); ``reservation`` the advance reservation it runs in; ``attributes`` its jobspec's;
        ``queue`` the queue it is submitted to (its policy and limits); ``constraints`` the
        nodes it may run on (RFC 31, matched against the hosts' properties);
        ``profile`` and ``entry`` its profile's JSON and its workload entry, what the jobs registered
        for it (``dynamic``) are made of."""
        self._engine()
        if batsim_id in self.jobs:
            raise ProtocolError(f"job {batsim_id} submitted twice")
        if walltime is not None and walltime <= 0:
            walltime = None
        job = _Job(
            batsim_id,
            self._engine_id(batsim_id),
            res,
            walltime,
            t,
            runtime,
            preemptible_after,
            user,
            reservation,
            attributes,
            queue=queue,
            constraints=constraints,
            profile=profile,
            entry=entry,
        )
        self._add(job)
        self._push(t, 2, "submit", job)

    def _add(self, job: _Job) -> None:
        self.jobs[job.batsim_id] = job
        self._by_engine_id[job.engine_id] = job
        self.stats["submitted"] += 1

    def _reject(self, job: _Job, reason: str) -> Reject:
        job.state = "done"
        self.stats["rejected"] += 1
        log.warning("rejecting job %s (%d nodes): %s", job.batsim_id, job.res, reason)
        return Reject(job.batsim_id, reason)

    def _running(self, batsim_id: str, what: str) -> _Job | None:
        job = self.jobs.get(batsim_id)
        if job is None:
            raise ProtocolError(f"{what} for job {batsim_id!r}, which was never submitted")
        if job.state == "pending":
            raise ProtocolError(f"{what} for job {batsim_id!r}, which was never started")
        if job.state in ("done", "ending", "killed"):
            return None
        return job

    def _vtime_of_end(self, job: _Job, t: float) -> float:
        if job.vend is not None and t >= (job.start or 0.0) + (job.vend - (job.vstart or 0.0)) - 1e-6:
            return job.vend
        # Unknown run time (or ended early): shift by the lag Batsim added to its start.
        lag = (job.start or 0.0) - (job.vstart or 0.0)
        return max(self.vnow, t - lag)

    def complete(self, batsim_id: str, t: float, state: str | None = None) -> None:
        """JOB_COMPLETED at Batsim time ``t``: the job's nodes are freed at its workload end time."""
        if self.jobs.get(batsim_id) is not None and self.jobs[batsim_id].state == "killed":
            return  # preempted and freed already; Batsim reports the kill as COMPLETED_KILLED
        job = self._running(batsim_id, "JOB_COMPLETED")
        if job is None:
            raise ProtocolError(f"JOB_COMPLETED for job {batsim_id!r}, which had already ended")
        v = self._vtime_of_end(job, t)
        job.state = "ending"
        self.stats["completed"] += 1
        self._push(v, 0, "free", job)
        log.debug("job %s completed at %.6f (%s)", batsim_id, t, state or "?")

    def killed(self, batsim_ids: Iterable[str], t: float) -> None:
        """JOB_KILLED: free the jobs still running (some may have completed
        first: then their JOB_COMPLETED freed them and this says nothing;
        a job this scheduler preempted was freed when it sent KILL_JOB)."""
        for bid in batsim_ids:
            job = self._running(bid, "JOB_KILLED")
            if job is not None:
                job.state = "ending"
                self.stats["killed"] += 1
                lag = (job.start or 0.0) - (job.vstart or 0.0)
                self._push(max(self.vnow, t - lag), 0, "free", job)

    def _known(self, ids: IdSet, what: str) -> None:
        """Every protocol names machines by index: one the platform does not have is a protocol error."""
        if ids and ids.last() >= len(self.hosts):
            raise ProtocolError(f"{what} names machine {ids.last()}, but the platform has {len(self.hosts)} machines")

    def resources_down(self, ids: IdSet, t: float) -> None:
        """Machines unavailable at Batsim time ``t`` (an external event)."""
        self._engine()
        self._known(ids, "machine unavailable event")
        self._push(self._vtime_of_event(t), 1, "down", arg=ids)

    def resources_up(self, ids: IdSet, t: float) -> None:
        """Machines available again at Batsim time ``t`` (an external event)."""
        self._engine()
        self._known(ids, "machine available event")
        self._push(self._vtime_of_event(t), 1, "up", arg=ids)

    def reservations_declared(self, entries: Sequence[Mapping[str, Any]], t: float, what: str) -> None:
        """A reservations event at Batsim time ``t`` (:mod:`.external_events`):
        ``entries`` replace the reservations declared before (``--reservations``'
        or the last event's), as a config reload does under Flux.  ``what``
        names the event in the log."""
        self._engine()
        self._push(self._vtime_of_event(t), 1, "reservations", arg=(list(entries), what))

    def _vtime_of_event(self, t: float) -> float:
        """Batsim time ``t`` of an external event, in workload time.  Not the
        last pass's time: a pass run there would plan the jobs it starts to
        end sooner than they will, and backfill ahead of a reservation they
        in fact delay."""
        return max(self.vnow, t - self.lag)

    def power_changed(self, ids: IdSet, pstate: int, t: float) -> None:
        """RESOURCE_STATE_CHANGED at Batsim time ``t``: ``ids`` are in
        ``pstate`` (asleep in their sleep pstate, else on)."""
        self._known(ids, "RESOURCE_STATE_CHANGED")
        if self._engine().power is None or self.power is None:
            log.info("resources %s changed to pstate %d (power-save is off: ignored)", ids, pstate)
            return
        on = [r for r in ids if self.power[r].sleep_pstate != pstate]
        off = [r for r in ids if self.power[r].sleep_pstate == pstate]
        lag = self.lag
        for ranks, up in ((on, True), (off, False)):
            if ranks:
                self._push(max(self.vnow, t - lag), 1, "power", arg=(IdSet(ranks), up))

    def requested_call(self, t: float) -> None:
        """REQUESTED_CALL at Batsim time ``t``: the timers due have fired; a pass runs at their workload time."""
        due = [v for v, bt in self._calls.items() if bt <= t + SAME_INSTANT]
        for v in due:
            del self._calls[v]
            self._push(v, 3, "tick")

    # -- decisions -----------------------------------------------------------

    def _blocked(self, v: float) -> bool:
        """True while a running job known to end by workload time ``v`` has not reported it yet."""
        ends = self._ends
        while ends and ends[0][2].state != "running":
            heapq.heappop(ends)  # reported already (or preempted)
        return bool(ends) and ends[0][0] <= v + SAME_INSTANT

    def decide(self, now: float) -> list[Decision]:
        """Give the engine every event it can have, one workload instant at a time, and collect decisions.

        ``now`` is Batsim's time: the decisions are sent at it.  Returns
        nothing while a simultaneous completion is still on its way.
        """
        engine = self._engine()
        out: list[Decision] = []
        changed: list[_Job] = []  # jobs given a reason_pending by this call's passes
        pending = self._pending
        while pending:
            v = pending[0].vtime
            early = [c for c in self._calls if c < v - SAME_INSTANT]
            if early:
                # A timer of ours falls before this event in workload time: its pass
                # comes first, as in the replay, though Batsim's REQUESTED_CALL for it
                # comes later (Batsim time lags workload time by more at some jobs'
                # starts than at others': a job that ended meanwhile can report first).
                for c in early:
                    del self._calls[c]
                    self._push(c, 3, "tick")
                continue
            if self._blocked(v):
                break
            while pending and pending[0].vtime <= v + SAME_INSTANT:
                ev = heapq.heappop(pending)
                self._apply(engine, ev, out)
            v = max(v, self.vnow)
            self._expire(engine, v, out)
            self.vnow = v
            self.lag = now - v
            while True:
                result = engine.schedule(v)
                for r in result.responses:
                    job = self._by_engine_id.get(r.id)
                    if job is None:  # pragma: no cover - the engine only answers for our jobs
                        log.error("engine answered for unknown job id %d", r.id)
                        continue
                    if r.type is ResponseType.SUCCESS:
                        expires = math.inf if r.expiration is None else r.expiration
                        self._started(job, r.resources.ranks, v, now, expires)
                        out.append(Execute(job.batsim_id, job.alloc))
                    elif r.type is ResponseType.DENY:
                        out.append(self._reject(job, r.note or "denied"))
                    elif r.type is ResponseType.ANNOTATE and self.metadata and r.annotations:
                        reason = (r.annotations.get("sched") or {}).get("reason_pending")
                        if reason is not None:  # None: it no longer applies (kept: the last one given)
                            job.reason = str(reason)
                            changed.append(job)
                for a in result.preempt:
                    # Killed at once, as in the replay: KILL_JOB goes out
                    # before the EXECUTE_JOB of the job it makes room for,
                    # in the same reply (Batsim refuses an allocation on a
                    # host still running a job), and Batsim's report of the
                    # kill is only acknowledged.
                    victim = self._by_engine_id[a.id]
                    victim.state, victim.vkill = "killed", v
                    victim.preemptions += 1
                    self.stats["killed"] += 1
                    engine.free(victim.engine_id, final=True)
                    if self.metadata:
                        self._tell(victim, out)  # before Batsim writes its row (at the kill)
                    out.append(Kill(victim.batsim_id, a.note))
                    if a.requeue and self.dynamic and victim.copy_of is None:  # a copy is not run again
                        self._requeue(engine, victim, v, now, out)
                if self.dynamic:
                    self._checkpoint(engine, result.notice, v)
                self._switch(result.power, out)
                if result.preempt or result.more:
                    continue
                if self.dynamic and self.options.duplicates:
                    acts = engine.copies(v)  # after a complete pass, as the replay asks
                    if acts:
                        self._copies(engine, acts, v, now, out)
                        continue
                break
        for job in changed:  # pending, or started or denied since: V4Driver puts each where it counts
            self._tell(job, out)
        if not pending:
            when = self._wakeup(self.vnow)
            if when is not None:
                at = now + (when - self.vnow)
                if self.dynamic:
                    # At the workload time itself, not with this message's lag: a pass
                    # due then waits anyway for the jobs known to end by then (_blocked),
                    # and a regular job started by the timer (a victim's grace time
                    # over) does not inherit the lag of whatever message set it.
                    at = max(when, now)
                self._calls[when] = at
                self.stats["calls"] += 1
                out.append(CallMeLater(at))
        return out

    def _apply(self, engine: Engine, ev: _Pending, out: list[Decision]) -> None:
        job = ev.job
        if ev.kind == "free":
            assert job is not None
            if job.state != "ending":
                return  # a copy that lost: freed when it was cancelled
            job.state = "done"
            engine.free(job.engine_id, final=True)
        elif ev.kind == "submit":
            assert job is not None
            self._alloc(engine, job, out)
        elif ev.kind == "down":
            engine.resource_update(down=ev.arg)
        elif ev.kind == "up":
            engine.resource_update(up=ev.arg)
        elif ev.kind == "power":
            ranks, on = ev.arg
            self._switch(engine.power_changed(ranks, on, ev.vtime), out)
        elif ev.kind == "reservations":
            # A bad entry is refused whole, as a bad config reload is under
            # Flux: the reservations stay as they were, and the run goes on.
            entries, what = ev.arg
            try:
                changes = declare_entries(engine.reservations, entries, ev.vtime, user_id, "reservations", self.groups)
            except ReservationError as exc:
                log.error("%s refused; the reservations stay as they were: %s", what, exc)
            else:
                log.info("%s: %s", what, ", ".join(changes) or "no change")
        # "tick": nothing to give; the pass runs at its time.

    # -- dynamic jobs (--dynamic-jobs) ------------------------------------------------

    def _checkpoint(self, engine: Engine, notices: Sequence[Any], v: float) -> None:
        """A job that checkpoints on its notice keeps the work done so far
        (the replay's ``_notices``): Batsim has no signal, so the driver
        counts it, and a requeue registers only what is left."""
        for n in notices:
            job = self._by_engine_id.get(n.id)
            ej = engine.job(n.id)
            if job is None or ej is None or job.state != "running" or not engine.besteffort.checkpoints(ej):
                continue
            since = job.checkpointed if job.checkpointed is not None else job.vstart
            if since is None:  # pragma: no cover - a running job has a start
                continue
            job.kept += v - since
            job.checkpointed = v

    def _register(
        self, root: _Job, kind: str, profile: Mapping[str, Any], now: float, **fields: Any
    ) -> tuple[str, Register]:
        """A new Batsim job made of ``root``'s workload entry, in the dynamic
        workload, with a profile of its own: Batsim removes a profile with the
        first job of it that ends unless run with ``--enable-profile-reuse``
        (``src/jobs.cpp``, ``Jobs::delete_job``), so a registered job never
        names a workload's profile."""
        root.registered += 1
        name = f"{root.batsim_id.replace('!', '.')}.{kind}{root.registered}"
        job_id = f"{self.dyn_workload}!{name}"
        entry = {k: v for k, v in (root.entry or {}).items() if k not in ("id", "profile", "subtime")}
        entry.update(id=job_id, subtime=now, profile=name, **fields)
        return job_id, Register(job_id, entry, name, dict(profile))

    def _requeue(self, engine: Engine, old: _Job, v: float, now: float, out: list[Decision]) -> None:
        """Preempted checkpointing job ``old``, registered again for its
        remaining work (a ``delay`` profile of the seconds left) and queued
        under its engine id, as the replay requeues it
        (``attributes.user.requeued-from``); a profile that does not fix
        the run time is registered whole (its checkpoints cannot be counted)."""
        root = old.root or old
        kept = old.kept
        if root.runtime is not None:
            left = max(0.0, root.runtime - kept)
            profile: Mapping[str, Any] | None = {"type": "delay", "delay": left}
        else:
            left, kept, profile = None, 0.0, root.profile
            log.warning("job %s: its profile does not fix its run time; requeued with all its work", root.batsim_id)
        if profile is None:
            log.warning("job %s: Batsim did not send its profile; not requeued", root.batsim_id)
            return
        job_id, reg = self._register(root, "r", profile, now, **{"requeued-from": root.batsim_id})
        user = dict((old.attributes or {}).get("user") or {})
        user["requeued-from"] = old.engine_id
        attrs = {**(old.attributes or {}), "user": user}
        job = _Job(
            job_id,
            old.engine_id,
            old.res,
            old.walltime,
            v,
            left,
            old.preemptible_after,
            old.user,
            old.reservation,
            attrs,
            queue=old.queue,
            constraints=old.constraints,
            profile=profile,
            root=root,
            kept=kept,
            acked=False,
        )
        self._add(job)
        out.append(reg)
        log.info("job %s requeued as %s: %s s kept, %s s left", old.batsim_id, job_id, f"{kept:.3f}", left)
        self._alloc(engine, job, out)

    def _copies(
        self, engine: Engine, acts: Sequence[Duplicate | CancelCopy], v: float, now: float, out: list[Decision]
    ) -> None:
        """The engine's end-of-campaign copies: each :class:`Duplicate`
        registered with its original's profile and queued, as the replay
        submits it; each :class:`CancelCopy` killed (running) or rejected
        (pending: Batsim ends only once every job it knows has run or been
        rejected)."""
        for a in acts:
            if isinstance(a, Duplicate):
                orig = self._by_engine_id[a.of]
                root = orig.root or orig
                if root.profile is None:
                    log.warning("job %s: Batsim did not send its profile; no copy", root.batsim_id)
                    engine.copy_dropped(a.of)
                    continue
                job_id, reg = self._register(root, "c", root.profile, now, **{"copy-of": orig.batsim_id})
                system = {**((root.attributes or {}).get("system") or {}), "duplicate-of": a.of, "preemptible-after": 0}
                self._next_fresh += 1
                job = _Job(
                    job_id,
                    self._next_fresh,
                    root.res,
                    root.walltime,
                    v,
                    root.runtime,
                    0.0,
                    root.user,
                    root.reservation,
                    {**(root.attributes or {}), "system": system},
                    queue=root.queue,
                    constraints=root.constraints,
                    profile=root.profile,
                    root=root,
                    copy_of=a.of,
                    acked=False,
                )
                self._add(job)
                out.append(reg)
                self._alloc(engine, job, out)
                continue
            job = self._by_engine_id[a.id]
            ej = engine.job(a.id)
            if ej is None:
                continue  # it ended (with the winner, and lost the tie)
            if ej.state is JobState.PENDING:
                engine.cancel(a.id)
                out.append(self._reject(job, a.note))
                continue
            engine.free(a.id, final=True)
            if job.state == "running":
                job.state, job.vkill = "killed", v
                self.stats["killed"] += 1
                out.append(Kill(job.batsim_id, a.note))
            else:  # Batsim reported its end, not given to the engine yet
                job.state = "done"

    def acknowledged(self, batsim_id: str, res: int) -> bool:
        """JOB_SUBMITTED for a job this scheduler registered
        (``--acknowledge-dynamic-jobs``): True if it is one (checked against
        what was registered), False if not (a workload job)."""
        job = self.jobs.get(batsim_id)
        if job is None or job.acked is None:
            return False
        if job.acked:
            raise ProtocolError(f"JOB_SUBMITTED for registered job {batsim_id} came twice")
        if res != job.res:
            raise ProtocolError(f"JOB_SUBMITTED for registered job {batsim_id}: res {res}, registered with {job.res}")
        job.acked = True
        return True

    def _alloc(self, engine: Engine, job: _Job, out: list[Decision]) -> None:
        """``sched.alloc`` of ``job``, with the replay's request for it."""
        request = node_request(job.res, job.walltime)
        if job.preemptible_after is not None:
            request = dataclasses.replace(request, preemptible_after=job.preemptible_after)
        if job.reservation is not None:
            request = dataclasses.replace(request, reservation=job.reservation)
        if job.queue is not None:
            request = dataclasses.replace(request, queue=job.queue)
        if job.constraints is not None:
            request = dataclasses.replace(request, constraints=job.constraints)
        if job.attributes:
            request = dataclasses.replace(request, attributes=job.attributes)
        if job.runtime is not None:  # a delay profile: it draws idle watts (power-cap plans it so)
            request = dataclasses.replace(request, computes=False)
        for r in engine.alloc(job.engine_id, 0, job.user, job.submit, request):
            if r.type is ResponseType.DENY:
                out.append(self._reject(job, r.note or "infeasible"))

    def _switch(self, actions: Sequence[PowerOff | PowerOn], out: list[Decision]) -> None:
        """The engine's switches as SET_RESOURCE_STATE decisions, one per target pstate."""
        models = self.power
        for a in actions:
            assert models is not None
            by_pstate: dict[int, list[int]] = {}
            for r in a.ranks:
                m = models[r]
                by_pstate.setdefault(m.compute_pstate if isinstance(a, PowerOn) else m.sleep_pstate, []).append(r)
            for pstate, ranks in sorted(by_pstate.items()):
                out.append(SetPower(IdSet(ranks), pstate))

    def _started(self, job: _Job, ranks: IdSet, v: float, now: float, expiration: float = math.inf) -> None:
        if len(ranks) != job.res:  # pragma: no cover - a matcher bug
            raise ProtocolError(f"engine gave job {job.batsim_id} {len(ranks)} nodes, not {job.res}")
        job.state, job.alloc, job.start, job.vstart = "running", ranks, now, v
        limit = v + (job.walltime if job.walltime is not None else math.inf)
        if job.reservation is not None and expiration < limit:
            # Batsim kills it at its walltime only: the driver kills it when its
            # reservation ends, as the replay ends it then.
            job.vexpire = limit = expiration
            self._seq += 1
            heapq.heappush(self._expiries, (expiration, self._seq, job))
        if job.runtime is not None:
            job.vend = min(v + job.runtime, limit)
            if job.vexpire is None or job.vend < job.vexpire:
                self._seq += 1
                heapq.heappush(self._ends, (job.vend, self._seq, job))
        self.stats["started"] += 1

    def _tell(self, job: _Job, out: list[Decision]) -> None:
        """A :class:`SetMetadata` for ``job`` when its text is not what Batsim holds."""
        text = job_metadata(job.preemptions, job.reason)
        if text != job.metadata:
            job.metadata = text
            out.append(SetMetadata(job.batsim_id, text))

    def _expire(self, engine: Engine, v: float, out: list[Decision]) -> None:
        """Kill the running jobs whose reservation has ended by workload time ``v``."""
        heap = self._expiries
        while heap and heap[0][0] <= v + SAME_INSTANT:
            _, _, job = heapq.heappop(heap)
            if job.state != "running":
                continue  # it ended first
            job.state, job.vkill = "killed", v
            self.stats["killed"] += 1
            engine.free(job.engine_id, final=True)
            out.append(Kill(job.batsim_id, f"reservation {job.reservation} ended"))

    def _wakeup(self, v: float) -> float | None:
        """The earliest of: the next EASY++ correction (a running job reaching
        its predicted end, :meth:`Hooks.wakeup`), and the earliest reservation
        (workload time) that no running job's end explains; None if neither."""
        pred = self._engine().wakeup()
        if self._expiries:
            pred = min(pred, self._expiries[0][0])
        if not (v < pred < math.inf) or any(c <= pred for c in self._calls):
            return self._reservation_wakeup(v)
        t = self._reservation_wakeup(v)
        return pred if t is None else min(t, pred)

    def _reservation_wakeup(self, v: float) -> float | None:
        engine = self._engine()
        starts = sorted(s.start for s in engine.planner.reserved() if s.start > v)
        if not starts:
            return None
        t = starts[0]
        if any(c <= t for c in self._calls):
            return None
        ends = [s.end for s in engine.planner.spans() if s.running]
        if any(e <= t + 1e-9 for e in ends):
            return None  # that job's JOB_COMPLETED wakes us up first
        return t

    def estimate_waiting_time(self, res: int, walltime: float | None, now: float) -> float:
        """QUERY estimate_waiting_time: seconds until a ``res``-node job could start.

        Asked of the planner as it stands after the last pass: running jobs
        until their walltime and the reservations of pending jobs.  Jobs
        queued without a reservation are not counted.  ``-1`` if it never fits.
        """
        engine = self._engine()
        req = node_request(res, walltime)
        if engine.feasibility(req) is not None:
            return -1.0
        duration = math.inf if walltime is None or walltime <= 0 else float(walltime)
        v = max(self.vnow, now - self.lag)  # Batsim's now, in workload time
        found = engine.planner.earliest(req, v, duration, self.options.placement)
        if found is None:
            return -1.0
        return max(0.0, found[0] - v)

    # -- reporting -----------------------------------------------------------

    def unfinished(self) -> list[str]:
        return [j.batsim_id for j in self.jobs.values() if j.state not in ("done", "killed")]

    def summary(self) -> str:
        s = self.stats
        text = (
            f"{s['submitted']} submitted, {s['started']} started, {s['rejected']} rejected, "
            f"{s['completed']} completed, {s['killed']} killed, {s['calls']} CALL_ME_LATER"
        )
        if self.engine is not None and self.engine.power is not None:
            p = self.engine.power.counters
            text += f", {p['power_off']} nodes switched off, {p['power_on']} on"
        if "consumed_joules" in s:
            text += f", {s['consumed_joules']:.3f} J consumed (Batsim, from t=0)"
        return text


class Driver:
    """What the I/O loop needs from a protocol driver: bytes in, bytes out.

    :meth:`handle` takes one message from Batsim and returns the reply (or
    None when the protocol expects none); it raises :class:`ProtocolError`
    when the message breaks the protocol.  :attr:`finished` becomes True once
    the simulation has ended and the last reply has been produced.
    """

    finished: bool = False
    scheduler: BatsimScheduler

    def handle(self, raw: bytes) -> bytes | None:  # pragma: no cover - interface
        raise NotImplementedError
