"""The engine: the sans-I/O scheduler drivers call (see :mod:`fluxsched_py.engine`)."""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

from .. import memo
from ..ids import IdSet
from ..planner import MatchCache, Placement, Planner
from ..policy import QueuePolicy, make_policy
from .affinity import passwd_uid
from .annotations import end_pass, fmt_clock, resource_summary
from .besteffort import BestEffort
from .bounds import CampaignBounds
from .duplicates import CancelCopy, Duplicate, Duplicates, IdleRoom
from .hooks import Hooks
from .jobs import Job, depth_limits, run_queues
from .jobtable import JobTable
from .options import EngineOptions
from .passctx import Pass
from .power import NodeSwitch, PowerOn, PowerSaving
from .powercap import PowerCap
from .reservations import Reservations
from .resources import apply_resource_update
from .runlimits import RunLimits, Usage, need_of
from .states import EngineError, JobState, PassResult, Response, ResponseType

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..jobspec import Request
    from ..power import PowerModel
    from ..resource import ResourceGraph, ResourceSet

__all__ = ["Engine"]

log = logging.getLogger("fluxsched_py.engine")

_ALL = object()  # Engine.pending(): every queue


class Engine:
    """The sans-I/O scheduler.  See the module docstring.

    Parameters
    ----------
    graph:
        the :class:`~fluxsched_py.resource.ResourceGraph`; the engine
        allocates and releases its jobs in it.
    options:
        :class:`EngineOptions`, or ``key=value`` strings / a mapping for
        :meth:`EngineOptions.parse`.
    matcher:
        the placement function; defaults to :func:`fluxsched_py.match.match`
        (feasibility is always :func:`fluxsched_py.match.feasibility`).
    build_R, summaries:
        put RFC 20 R, and the ``resource_summary`` annotation, in SUCCESS
        responses (the replay, which needs only the ResourceSet and sends
        nothing, asks for neither).
    estimates:
        the driver shows pending jobs their ``t_estimate`` even where no
        decision needs a reservation: fcfs then forecasts the jobs at the
        head of its queue (``reserve-depth``).  Without it, fcfs plans a
        forecast only where something reads the plan (best-effort jobs,
        power saving, advance reservations, more than one queue) or when
        ``reserve-depth`` is given; its starts are the same either way.
    stopwatch, time_format:
        measure pass work for ``budget`` (never for decisions); show an absolute time (default ``HH:MM``).
    job_name:
        how annotations show a job id to users (default the decimal id; the
        Flux driver passes f58, ``ƒLqTPgb``, as ``flux jobs`` shows it).
    limits:
        what users and queues may hold running at once (:mod:`.runlimits`);
        None: no limit.  Changed by :meth:`set_limits`.
    power:
        each rank's :class:`~fluxsched_py.power.PowerModel` (index: rank),
        which ``power-save`` needs (:mod:`.power`).
    user_id:
        the uid of a user a name stands for in ``affinity``: the local
        passwd database's under Flux; the replay and the Batsim drivers pass
        :func:`~fluxsched_py.ids.user_id`, the uid their workloads give a name.
    """

    def __init__(
        self,
        graph: ResourceGraph,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
        *,
        matcher: Callable[..., Any] | None = None,
        build_R: bool = True,
        summaries: bool = True,
        estimates: bool = True,
        stopwatch: Callable[[], float] = time.perf_counter,
        time_format: Callable[[float], str] = fmt_clock,
        job_name: Callable[[int], str] = str,
        limits: RunLimits | None = None,
        power: Sequence[PowerModel] | None = None,
        user_id: Callable[[str], int | None] = passwd_uid,
    ) -> None:
        self.options = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        from .. import match as _match_mod

        matcher = matcher or _match_mod.match
        self.graph = graph
        self._feasibility = _match_mod.feasibility
        #: What the engine counts as it works (passes, matches, and each
        #: feature's own); :attr:`stats` adds the outcomes the job table counts.
        self.counters: dict[str, int | float] = {"passes": 0, "matches": 0}
        #: The queue policy of every queue not named in ``queue-policy-per-queue``.
        self.queue_policy: QueuePolicy = make_policy(self.options.queue_policy, self.options.reserve_depth)
        self._policies: dict[str, QueuePolicy] = {
            name: make_policy(pol, self.options.reserve_depth) for name, pol in self.options.queue_policy_per_queue
        }
        #: Virtual queue -> its parent (``queue-parent``, RFC 33).
        self._parents = dict(self.options.queue_parent)
        #: Every job the engine knows, its state and its queue: changed only
        #: through :meth:`JobTable.apply` (:mod:`.jobtable`).
        self.table = JobTable(graph, self.policy_for, self.scheduled_as)
        #: End-of-campaign copies and who won (engine/duplicates.py); it
        #: observes after the hooks, which read a loser before it is forgotten.
        self.duplicates = Duplicates(self.table.jobs, self.counters, job_name)
        #: Running jobs per campaign and node property (``campaign-max-running``).
        self.bounds = CampaignBounds(graph, lambda: self.options, lambda: self.planner.codec)
        #: Optional features (EASY++, affinity, campaigns, the sink effect):
        #: they observe job events through the table (engine/hooks.py).
        self.hooks = Hooks(
            self.table, graph, lambda: self.options, lambda: self.planner.codec, self.duplicates, self.bounds, user_id
        )
        self.table.observers += [self.hooks, self.duplicates, self.bounds]
        #: Best-effort jobs and preemption; the planner sees the graph through
        #: its view (so it comes before the planner, and after the hooks and
        #: copies it reads).  It asks for the options and the power cap (a
        #: config reload replaces them) and starts a job through the engine's
        #: kill_time and succeed.
        self.besteffort = BestEffort(
            self.table,
            graph,
            lambda: self.options,
            self.counters,
            self.hooks,
            self.duplicates.copies,
            lambda: self.cap,
            kill_time=self.kill_time,
            succeed=self.succeed,
            time_format=time_format,
            job_name=job_name,
        )
        #: Advance reservations: windows the planner holds for their own jobs.
        self.reservations = Reservations(self.table, graph, lambda: self.options, self.replan)
        self.table.use_planner(self.make_planner(MatchCache(matcher)))
        self.reservations.encode()
        self.build_R = build_R
        self.summaries = summaries
        self.estimates = estimates
        self._stopwatch = stopwatch
        #: How annotations show an absolute time, and a job id, to users.
        self.time_format = time_format
        self.job_name = job_name
        self.instance_expiration: float = 0.0  # 0 = none

        self._parse_cache: LRUCache = memo.store("jobspec", lambda: LRUCache(maxsize=4096))
        self._feasible_cache: LRUCache = memo.store("feasible", lambda: LRUCache(maxsize=4096))
        self._remember_whole = memo.on("feasible")
        #: The most nodes a whole-node request (``Request.whole_nodes``) is
        #: known to be feasible for since the graph last changed: fewer are
        #: too (a subset of its nodes), with no search of the whole machine
        #: (an archive trace has hundreds of job sizes; each search of 93,312
        #: nodes takes tens of ms: issue 21).  Where the whole-node fast path
        #: applies, one count of the machine's whole nodes sets it at once.
        self._whole_feasible = 0
        self._pass: Pass | None = None
        self._pass_gen: Iterator[None] | None = None
        self._dirty = True  # something changed since the last complete pass
        self._restart = False  # ... in a way that invalidates a pass in progress
        self._compress = True  # ... in a way that may let reservations move earlier
        #: The limits (:mod:`.runlimits`) and, while there are any, the usage
        #: they are checked against (an observer of the job table).
        self.limits: RunLimits | None = None
        self.usage: Usage | None = None
        self.set_limits(limits)
        #: Power saving (``power-save``), only when it is on.
        self.power: PowerSaving | None = None
        if self.options.power_save != "off":
            need = max(graph.ranks, default=-1) + 1
            if power is None or len(power) < need:
                have = 0 if power is None else len(power)
                raise EngineError(
                    f"power-save={self.options.power_save}: no power model for rank {have} "
                    "(give the platform's or the [sched-py.power] table)"
                )
            self.power = PowerSaving(power, self.options)
        self._models = power
        self.cap: PowerCap | None = None
        #: The power cap (``power-cap``), only when it is set.
        self.cap = self._make_cap(self.options)

    def _make_cap(self, options: EngineOptions) -> PowerCap | None:
        """The power cap ``options`` ask for (None: none); EngineError when it cannot be held."""
        if options.power_cap is None:
            return None
        need = max(self.graph.ranks, default=-1) + 1
        models = self._models
        if models is None or len(models) < need:
            have = 0 if models is None else len(models)
            raise EngineError(
                f"power-cap={options.power_cap:g}: no power model for rank {have} "
                "(give the platform's or the [sched-py.power] table)"
            )
        cap = self.cap
        if cap is None:
            cap = PowerCap(models, self.table, lambda: self.options, self._switches)
        cap.check(options)
        return cap

    # ------------------------------------------------------------------
    # Queries
    # ------------------------------------------------------------------

    def make_planner(self, match: MatchCache) -> Planner:
        """A planner over the regular jobs' view of the graph, matching through ``match``.

        The one place the engine's planner is made, at start and at every
        rebuild: a planner over the raw graph would not see what best-effort
        jobs hold as lent, and a regular job would wait behind them with no
        start time instead of preempting them.  What is lent is encoded anew
        in the new planner's flat layout (a grow lays it out anew).
        """
        #: The matcher, memoized, that the planner matches through.
        self.match = match
        planner = Planner(self.besteffort.view, matcher=match, counted=self.options.reservation_nodes == "counted")
        self.besteffort.encode_lent(planner.codec)
        return planner

    @property
    def stats(self) -> dict[str, int | float]:
        """The engine's counters, and the jobs started, denied and cancelled
        (counted by the job table as it applies those events), and with
        power saving the switches made."""
        out = {**self.counters, **self.table.outcomes()}
        if self.power is not None:
            out.update(self.power.counters)
        return out

    @property
    def planner(self) -> Planner:
        """The planner (the job table's: only the table changes its spans)."""
        return self.table.planner

    def job(self, jobid: int) -> Job | None:
        return self.table.jobs.get(jobid)

    @property
    def pending_count(self) -> int:
        return self.table.npending

    @property
    def running(self) -> list[Job]:
        return [j for j in self.table.jobs.values() if j.state is JobState.RUNNING]

    def pending(self, queue: str | None | object = _ALL) -> list[Job]:
        """Pending jobs in order (a copy; never disturbs a pass in progress):
        of every queue (best-effort jobs included), or of ``queue`` only
        (None: the anonymous queue)."""
        t = self.table
        qs = [*t.queues.values(), t.besteffort] if queue is _ALL else [q for q in t.queues.values() if q.name == queue]
        return sorted((j for q in qs for j in q.jobs if t.live(j)), key=lambda j: j.sortkey)

    def policy_for(self, queue: str | None) -> QueuePolicy:
        """The policy that schedules ``queue``'s jobs (``queue-policy-per-queue``, else ``queue-policy``;
        a virtual queue's is its parent's)."""
        queue = self.scheduled_as(queue)
        return self.queue_policy if queue is None else self._policies.get(queue, self.queue_policy)

    def scheduled_as(self, queue: str | None) -> str | None:
        """The queue whose jobs ``queue``'s jobs are scheduled with: its
        parent when it is a virtual queue (``queue-parent``), else itself."""
        return self._parents.get(queue, queue) if queue is not None else None

    def ready_mode(self) -> dict:
        """The ``job-manager.sched-ready`` request payload for these options."""
        if self.options.queue_depth:
            return {"mode": "limited", "limit": self.options.queue_depth}
        return {"mode": "unlimited"}

    def resource_status(self) -> dict:
        """``sched.resource-status``: ``{all, allocated, down}`` as R objects."""
        return self.graph.status_rv1()

    def check_invariants(self) -> None:
        """Raise AssertionError unless free + allocated + down == all, the
        three are disjoint, and no two running jobs share a resource."""
        g = self.graph
        free, alloc, down, every = g.free(), g.allocated(), g.down(), g.all()
        assert (free | alloc | down) == every, "free + allocated + down != all"
        assert not (free & alloc), "a resource is both free and allocated"
        assert not (free & down), "a resource is both free and down"
        seen = every - every
        for j in self.table.jobs.values():
            if j.state is JobState.RUNNING and j.resources is not None:
                assert not (seen & j.resources), f"job {j.id} shares resources with another job"
                seen = seen | j.resources

    # ------------------------------------------------------------------
    # Inputs
    # ------------------------------------------------------------------

    def hello(self, jobs: Iterable[Mapping[str, Any]]) -> list[Response]:
        """Jobs that hold resources at startup: ``{id, priority, userid,
        t_submit, R, free?, jobspec?, preemptible_after?, preempted?}`` (R
        from the KVS; ``free`` an idset of ranks already released).  Marks
        their resources allocated.

        With its ``jobspec``, a job is known again as it was at its alloc:
        its queue (so it counts against the queue's limits), whether it
        checkpoints, its campaign (bounds, run times) and whether it is
        best-effort.  A jobspec that cannot be parsed is logged and the job
        taken as regular, with no queue: it is never preempted, so nothing
        is lost by not knowing it.  Without a jobspec, ``preemptible_after``
        says whether it is best-effort; ``preempted``, that a preemption was
        already sent for it."""
        for h in jobs:
            jobid = int(h["id"])
            if jobid in self.table.jobs:
                log.warning("hello: job %d reported twice; ignored", jobid)
                continue
            R = h.get("R")
            try:
                rs = self._rs_from_R(R)
                if h.get("free"):
                    rs = self._drop_ranks(rs, IdSet.parse(str(h["free"])))
                self.table.allocate(jobid, rs, running=True)  # it runs: keeps what it holds on down ranks
            except Exception as exc:  # a bad R must not kill the scheduler
                log.error("hello: job %d: cannot mark its resources allocated: %s", jobid, exc)
                continue
            job = Job(
                jobid,
                int(h.get("priority", 0)),
                int(h.get("userid", 0)),
                float(h.get("t_submit", 0)),
                self._hello_request(jobid, h.get("jobspec")),
            )
            ex = ((R or {}).get("execution") or {}).get("expiration") or 0
            st = ((R or {}).get("execution") or {}).get("starttime") or 0
            job.reply.end()  # its alloc was answered before the restart
            self.table.apply(job, "hello", resources=rs, now=float(st), expiration=float(ex) if ex else math.inf)
            self.table.plan_run(jobid, rs, job.t_start, max(job.expiration, job.t_start + 1e-9))
            if job.request is None and h.get("preemptible_after") is not None:
                job.preemptible_after = float(h["preemptible_after"])
            if job.preemptible_after is not None:
                self.besteffort.adopt(job, bool(h.get("preempted")))
        self.changed()
        return []

    def _hello_request(self, jobid: int, jobspec: Mapping[str, Any] | None) -> Request | None:
        """The request of a job running at startup, from its jobspec; None
        when it has none or it cannot be parsed (logged)."""
        if jobspec is None:
            return None
        try:
            return self._parse(jobspec)
        except Exception as exc:
            log.error("hello: job %d: cannot parse its jobspec (%s); taken as a regular job", jobid, exc)
            return None

    def alloc(
        self,
        jobid: int,
        priority: int,
        userid: int,
        t_submit: float,
        jobspec: Mapping[str, Any] | Request,
        alloc_request: object = None,
    ) -> list[Response]:
        """``sched.alloc``: queue the job, or deny it if it can never run.

        ``jobspec`` is the RFC 14 object, or an already parsed
        :class:`~fluxsched_py.jobspec.Request`.  ``alloc_request`` is what
        the driver answers the alloc through, kept with the job
        (``Job.reply.request``) and handed back on each of its responses
        (``Response.reply``); a DENY returned here at once has no reply.
        """
        old = self.table.jobs.get(jobid)
        if old is not None:
            return self._duplicate_alloc(old)
        try:
            parsed = self.hooks.checked(self._parse(jobspec))
        except Exception as exc:
            self.table.refuse()
            return [Response(jobid, ResponseType.DENY, note=f"invalid jobspec: {exc}")]
        reason = self._feasible(parsed)
        if reason is None and self.cap is not None:
            reason = self.cap.never_fits(parsed)
        if reason is None and getattr(parsed, "reservation", None) is not None:
            reason = self.reservations.check(parsed, userid)
        if reason is not None:
            self.table.refuse()
            return [Response(jobid, ResponseType.DENY, note=reason)]
        job = Job(jobid, priority, userid, t_submit, parsed)
        job.reply.request = alloc_request
        if getattr(parsed, "reservation", None) is not None:
            self.reservations.admit(job)
        queue = self.table.queue_for(job)
        was_sorted = queue.sorted
        self.table.apply(job, "alloc", queue=queue)  # the observers (EASY++) may plan it shorter first
        if job.preemptible_after is not None:
            self.besteffort.queued(job)  # for regular jobs, nothing changed
            return []
        if was_sorted and not queue.sorted:
            # It goes ahead of queued jobs: re-plan their reservations too.
            self._restart = True
            self._compress = True
        self._dirty = True
        return []

    def cancel(self, jobid: int) -> list[Response]:
        """``sched.cancel``: answer the pending alloc with CANCEL, else ignore."""
        job = self.table.jobs.get(jobid)
        if job is not None and job.state is JobState.STARTING:
            out = self.besteffort.cancel_starting(job)
            self.changed()  # what it held, and its span, are free for others
            return out
        if job is None or job.state is not JobState.PENDING:
            log.debug("cancel: job %d has no pending alloc; ignored", jobid)
            return []
        self._forget_pending(job, "cancel")
        return [Response(jobid, ResponseType.CANCEL, reply=job.reply)]

    def free(self, jobid: int, R: Mapping[str, Any] | None = None, final: bool = True) -> list[Response]:
        """``sched.free``: release all (``final``) or part (ranks in ``R``) of a job's resources."""
        job = self.table.jobs.get(jobid)
        if job is None or job.state is not JobState.RUNNING:
            log.warning("free: job %d holds no resources; ignored", jobid)
            return []
        try:
            if final and job.preemptible_after is not None:
                if self.besteffort.freed(job):
                    self.changed()  # its protected window ended early: regular jobs may move up
                return []  # a lent job's free: for regular jobs, nothing changed
            if final:
                self.table.release(jobid)
                self.table.unplan(jobid)
                self.table.apply(job, "free-final")
            else:
                part = self._rs_from_R(R) & job.resources if R is not None else None
                if part:
                    part = self.table.release(jobid, part)  # with the node of a rank left with no core/GPU
                self.table.apply(job, "free", released=part)
                if part:
                    span = self.table.unplan(jobid)
                    if job.resources and span is not None:
                        self.table.plan_run(jobid, job.resources, span.start, span.end)
                    if job.preemptible_after is not None:
                        self.besteffort.resized(job, part)
        except Exception as exc:  # never crash on free: log it and carry on
            log.error("free: job %d: %s", jobid, exc)
        self.changed()
        return []

    def revoke(self, jobid: int, reason: str) -> list[Response]:
        """Undo the start of ``jobid``, which the driver could not complete
        (flux-core's job-manager never learned of it: its R could not be
        committed).  It gives back what it holds, and its request ends with
        DENY (``reason``): it counts as denied, never as started, and no
        feature takes it for a run (no run time, no usage)."""
        job = self.table.jobs.get(jobid)
        if job is None or job.state is not JobState.RUNNING:
            log.warning("revoke: job %d holds no resources; ignored", jobid)
            return []
        if job.preemptible_after is not None:
            self.besteffort.freed(job, "revoke")
        else:
            self.table.release(jobid)
            self.table.unplan(jobid)
            self.table.apply(job, "revoke")
        self.changed()
        return [Response(jobid, ResponseType.DENY, note=reason, reply=job.reply)]

    def prioritize(self, jobs: Iterable[tuple[int, int] | list[int]]) -> list[Response]:
        """``sched.prioritize``: new priorities for pending jobs; unknown ids ignored."""
        changed = False
        for jobid, prio in jobs:
            job = self.table.jobs.get(int(jobid))
            if job is None or job.state is not JobState.PENDING:
                continue
            if self.table.reprioritize(job, prio):
                changed = True
        if changed:
            self.changed()
        return []

    def expiration(self, jobid: int, expiration: float) -> None:
        """``sched.expiration``: move a running job's end; raises EngineError if it holds nothing."""
        job = self.table.jobs.get(jobid)
        if job is None or job.state is not JobState.RUNNING:
            raise EngineError(f"job {jobid} does not currently have an allocation")
        if expiration <= (job.t_start or 0):
            raise EngineError(f"expiration {expiration} is before job {jobid} started")
        self.table.apply(job, "expiration", expiration=float(expiration))
        if jobid in self.planner:
            self.set_plan_end(jobid, self.besteffort.span_end(job))
        self.changed()

    def reconfigure(self, options: EngineOptions | Iterable[str] | Mapping[str, Any]) -> None:
        """Change the options of a running engine (``flux config reload``).

        Every queue takes its new policy and every reservation is dropped, so
        the next pass re-plans; jobs and allocations are kept.  A bad option
        raises EngineError before anything changes.  ``queue_depth`` is also
        the RFC 27 ready mode: the driver decides whether it may change."""
        new = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        cap = self._make_cap(new)
        self.options = new
        self.cap = cap
        self.queue_policy = make_policy(new.queue_policy, new.reserve_depth)
        self._policies = {name: make_policy(pol, new.reserve_depth) for name, pol in new.queue_policy_per_queue}
        # Jobs already queued stay where they wait; new ones follow the new parents.
        self._parents = dict(new.queue_parent)
        for name, queue in self.table.queues.items():
            queue.policy = self.policy_for(name)
        if self.power is not None:  # its idle time, keep-on, exclusions and rate (power-save itself stays)
            self.power.options = new
        self.replan()

    def replan(self) -> None:
        """Drop every pending job's reservation: the next pass plans them
        all anew (new options, or a reservation window added or removed)."""
        for span in list(self.planner.reserved()):
            self.table.unplan(span.jobid)
        self.changed()

    def over_limit(self, job: Job) -> str | None:
        """The limit pending ``job`` would cross if it started now (its
        ``reason_pending``), or None."""
        if self.limits is None or self.usage is None:
            return None
        return self.limits.check(self.usage, job, need_of(job))

    def set_limits(self, limits: RunLimits | None) -> None:
        """New limits (``flux config reload``; None or empty: none).  Running
        jobs are left alone, even over a lowered limit; at the next pass a
        pending job over a limit is held (and loses its reservation) and one
        under them may start."""
        limits = limits or None
        if limits is None and self.usage is not None:
            self.table.observers.remove(self.usage)
            self.usage = None
        elif limits is not None and self.usage is None:
            self.usage = Usage(self.table.jobs)
            self.table.observers.append(self.usage)
        if limits != self.limits:
            self.limits = limits
            self.changed()

    def deny_pending(self, job: Job) -> None:
        """Deny pending ``job`` (the caller sends the DENY response)."""
        self._forget_pending(job, "deny")

    def resource_update(
        self,
        up: Any = None,
        down: Any = None,
        shrink: Any = None,
        expiration: float | None = None,
        grow: Mapping[str, Any] | None = None,
        properties: Mapping[int, Any] | None = None,
    ) -> list[Response]:
        """A ``resource.acquire`` update: ranks grown (an R fragment, up and
        free), ranks' properties replaced, ranks up/down/shrunk, or a new
        instance expiration (see :mod:`.resources`).  An update that changes
        nothing (ranks up that were up) leaves the plan as it is."""
        rebuilt, changed = apply_resource_update(self, up, down, shrink, expiration, grow, properties)
        if rebuilt:
            self._pass = self._pass_gen = None  # the planner it planned on is gone
        if changed:
            self._feasible_cache.clear()
            self._whole_feasible = 0
            self.changed()
        return []

    def feasibility(self, jobspec: Mapping[str, Any] | Any) -> str | None:
        """``feasibility.check``: None if the job could ever run, else the reason."""
        try:
            request = self._parse(jobspec)
        except Exception as exc:
            return f"invalid jobspec: {exc}"
        name = getattr(request, "reservation", None)
        if name is not None and self.reservations.get(name) is None:
            return f"reservation {name}: no such reservation"  # as Slurm, at submission when asked
        reason = self._feasible(request)
        if reason is None and self.cap is not None:
            reason = self.cap.never_fits(request)
        return reason

    def changed(self) -> None:
        """Something happened that may change the plan: the next
        :meth:`schedule` makes a pass, restarting one in progress, and lets
        reservations move earlier."""
        self._dirty = True
        self._restart = True
        self._compress = True

    def set_plan_end(self, jobid: int, end: float) -> bool:
        """Move the end of ``jobid``'s planner span to ``end``; the
        reservations in the way are dropped, for the next pass to re-plan.
        True when there were any."""
        return bool(self.table.set_plan_end(jobid, end))

    def kill_time(self, job: Job, now: float) -> float:
        """When ``job``, started at ``now``, is killed: at its walltime, or at
        the instance's expiration when it has none (the planner may plan
        shorter: EASY++, a protected window)."""
        end = now + job.walltime
        if getattr(job.request, "reservation", None) is not None:
            end = self.reservations.kill_time(job, end)  # at the end of its window at the latest
        if end == math.inf and self.instance_expiration:
            end = max(self.instance_expiration, now + 1e-9)
        return end

    def schedule(self, now: float, budget: float | None = None) -> PassResult:
        """Run (or resume) a scheduling pass at time ``now``.

        With a ``budget`` (seconds of work), the pass stops when the budget is
        spent and ``more`` is True: call again to resume it.  A pass resumes
        where it stopped unless something changed that invalidates it (a free,
        cancel, re-prioritization or resource change), in which case it
        restarts.  Without changes since the last complete pass, it does
        nothing.  The result carries the nodes to drain found meanwhile
        (``PassResult.drains``).
        """
        result = self._schedule(now, budget)
        result.drains = self.hooks.drains()
        if self.power is not None and not result.more:
            cap_allows = self.cap.allows if self.cap is not None else None
            result.power = self.power.decide(
                now, self.table, self.graph, self.planner, self._regular_pending, self.options.placement, cap_allows
            )
            if result.power:
                self.changed()  # holds changed: the next pass plans again
        return result

    def _switches(self) -> dict[int, NodeSwitch]:
        """The nodes that are not on (the power cap's baseline): none without power saving."""
        return {} if self.power is None else self.power.switches()

    def _regular_pending(self) -> list[Job]:
        """The pending regular jobs in order (power-save's backfill candidates)."""
        return [j for j in self.pending() if j.preemptible_after is None]

    def power_changed(self, ranks: IdSet | Iterable[int], on: bool, now: float) -> list[PowerOn]:
        """The driver says the switches of ``ranks`` ended at ``now``: they
        are on (``on``) or asleep.  Returns the nodes to switch on at once
        (planned for a job while they switched off).  EngineError when
        power saving is off."""
        if self.power is None:
            raise EngineError("power_changed: power-save is off")
        again = self.power.changed(IdSet.of(ranks), on, now, self.table)
        self.changed()
        return again

    def power_adopt(self, ranks: IdSet | Iterable[int], now: float) -> IdSet:
        """``ranks`` were switched off before this engine started (a module
        reload): they are asleep from ``now``.  The ranks adopted (free ones);
        EngineError when power saving is off."""
        if self.power is None:
            raise EngineError("power_adopt: power-save is off")
        taken = self.power.adopt(ranks, now, self.table, self.graph)
        if taken:
            self.changed()
        return taken

    def wakeup(self) -> float:
        """When the engine next needs a pass though no message comes (an
        EASY++ correction, the end of a best-effort job's protected window,
        a reservation window that opens or closes, a power-save decision
        that falls due, the end of the power cap's window); inf when never."""
        window = self.besteffort.next_wakeup()  # regular jobs may preempt it then
        t = min(
            self.hooks.wakeup(),
            math.inf if window is None else window,
            self.reservations.next_change(),  # a reservation window opens or closes
        )
        if self.power is not None:
            t = min(t, self.power.wakeup(self.planner))
        if self.cap is not None and self.pending_count:
            t = min(t, self.cap.wakeup())  # its window ends: jobs may start then
        return t

    def copies(self, now: float) -> list[Duplicate | CancelCopy]:
        """End-of-campaign copies to submit and copies to cancel, decided now
        (``duplicates``): call it after a complete pass (``more`` False)."""
        return self.duplicates.actions(now, self.options, self.hooks.runtimes.campaigns, lambda: self._idle_room(now))

    def _idle_room(self, now: float) -> IdleRoom:
        planner = self.planner
        free = planner.codec.encode(self.graph.free())
        if planner.nreserved:
            free ^= free & planner.reserved_during(now, now + 1e-9)
        lent = self.besteffort.lent

        def match(request: Request, bits: int, policy: str) -> Placement | None:
            self.counters["matches"] += 1
            return planner.match_bits(request, bits, policy)

        return IdleRoom(
            free,
            self.table.pending_in(self.table.besteffort),
            self.hooks.held,
            match,
            lambda jobid: jobid in lent or jobid in planner,
        )

    def copy_dropped(self, of: int) -> None:
        """The copy of job ``of`` that :meth:`copies` asked for will not come
        (the driver would not or could not submit it): it no longer counts
        against ``duplicates`` and ``duplicates-running``, and no other copy
        of ``of`` is asked for, so a driver that refuses one is not asked again."""
        self.duplicates.dropped(of)

    def _schedule(self, now: float, budget: float | None) -> PassResult:
        if self.hooks.tick(now):  # before the plan is read: EASY++ corrections, campaign bookkeeping
            self.changed()
        for sink in self.hooks.pending_drains():  # the sink effect: down here at once, drained by the driver after
            self.resource_update(down=sink.ranks)
        if self.power is not None and self.power.advance(now, self.table):
            self.changed()  # sleeping nodes are a boot from now: plan again
        if self.cap is not None and self.cap.tick(now):
            self.changed()  # the cap's window ended: what it held back may start
        out, moved = self.besteffort.start_ready(now)
        if moved:
            self.changed()  # a job was lent, or a started job's span dropped reservations
        orphans, due = self.reservations.tick(now)
        for job, note in orphans:
            self.deny_pending(job)
            out.append(Response(job.id, ResponseType.DENY, note=note, reply=job.reply))
        if due:
            self.changed()  # a window opened or closed, or its jobs were denied
        if self._pass is not None and self._plan_due(self._pass.now, now):
            self.changed()
        if self._pass is not None and (self._restart or now < self._pass.now):
            self._pass = self._pass_gen = None
        if self._pass is None:
            if not self._dirty:
                return self.besteffort.run(now, out)
            if not self.table.npending and not self.table.annotated and not self.planner.nreserved:
                self._idle_pass(now)  # what a pass with no job would do (half the replay's passes)
                return self.besteffort.run(now, out, passed=True)
            if not self._compress and self._waits_as_before():
                self._idle_pass(now)  # only jobs came, behind heads that stay where they were
                self.counters["matches"] += len(self.table.queues)  # the heads' matches it stands for
                return self.besteffort.run(now, out, passed=True)
            self._begin_pass(now)
        p = self._pass
        assert p is not None and self._pass_gen is not None
        p.now = max(p.now, now)
        self.planner.set_now(p.now)
        p.out = out
        t0 = self._stopwatch()
        gen = self._pass_gen
        try:
            for _ in gen:
                if budget is not None and self._stopwatch() - t0 >= budget:
                    return self.besteffort.result(out, more=True)
        except Exception as exc:  # a policy bug: deny the job it was on, keep the rest
            return self._policy_failed(p, exc)
        end_pass(self, p)
        self._pass = self._pass_gen = None
        return self.besteffort.run(now, out, passed=True)

    # ------------------------------------------------------------------
    # Special cases and helpers
    # ------------------------------------------------------------------

    def _plan_due(self, then: float, now: float) -> bool:
        """A pass cut short at ``then`` and resumed at ``now`` starts over (as
        after a change) when a reservation of the plan starts by ``now``: its
        job may start, and the estimate the pass would send is in the past."""
        planner = self.planner
        return now > then and planner.nreserved > 0 and any(s.start <= now for s in planner.reserved())

    def _policy_failed(self, p: Pass, exc: Exception) -> PassResult:
        """A policy raised: what the pass started stands, the job it was on is
        denied with the error, and the pass is dropped (``more``: re-plan now)."""
        self._pass = self._pass_gen = None
        self.changed()
        job = p.current
        log.error("scheduling pass: %s policy raised %r on job %s", p.queue.policy.name if p.queue else "?", exc, job)
        if job is None or not self.table.live(job):
            return PassResult(p.out)
        self._forget_pending(job, "deny")
        note = f"scheduler error: {type(exc).__name__}: {exc}"
        return PassResult([*p.out, Response(job.id, ResponseType.DENY, note=note, reply=job.reply)], more=True)

    def _duplicate_alloc(self, job: Job) -> list[Response]:
        if job.state is JobState.PENDING:
            log.warning("alloc: job %d already has an alloc in flight; ignored", job.id)
            return []
        log.warning("alloc: job %d already holds resources; denied", job.id)
        return [Response(job.id, ResponseType.DENY, note="job already holds resources")]

    def _forget_pending(self, job: Job, event: str) -> None:
        self.table.apply(job, event)
        self.table.unplan(job.id)
        self.changed()

    def _parse(self, jobspec: Any) -> Any:
        if hasattr(jobspec, "resources") and hasattr(jobspec, "key"):
            return jobspec  # already a Request
        key = json.dumps(jobspec, sort_keys=True, separators=(",", ":"))
        request = self._parse_cache.get(key)
        if request is None:
            from ..jobspec import parse_jobspec  # type: ignore[attr-defined]

            request = parse_jobspec(jobspec)
            self._parse_cache[key] = request
        return request

    def _feasible(self, request: Request) -> str | None:
        whole = request.whole_nodes
        if whole and whole <= self._whole_feasible:
            return None  # asked first: the cache never holds a reason for such a request
        key = request.key
        try:
            return self._feasible_cache[key]
        except KeyError:
            pass
        if whole and self._whole_feasible == 0 and self.match.whole_fast(self.planner.codec, request, "low"):
            # Nodes all alike, each a child of the root: a whole-node request
            # fits the machine exactly when that many of its nodes are whole
            # in it (the match cache's whole-node fast path), so one count
            # answers every size up to it, with no search of the machine.
            codec = self.planner.codec
            fit = codec.whole_count(codec.encode(self.graph.all()))
            if self._remember_whole:
                self._whole_feasible = fit
            if whole <= fit:
                return None
        try:
            reason = self._feasibility(self.graph, request)
        except Exception as exc:
            reason = f"unsatisfiable request: {exc}"
        self._feasible_cache[key] = reason
        if whole and reason is None and self._remember_whole:
            self._whole_feasible = max(self._whole_feasible, whole)
        return reason

    def _rs_from_R(self, R: Any) -> Any:
        from ..resource import ResourceSet

        return ResourceSet.from_rv1(self.graph, R)

    def _drop_ranks(self, rs: ResourceSet, ranks: IdSet) -> ResourceSet:
        return rs - rs.restrict(ranks)

    def _waits_as_before(self) -> bool:
        """A pass would change nothing: only jobs came since the last one,
        every queue's policy says its head waits as it did
        (:meth:`~fluxsched_py.policy.base.QueuePolicy.waits_as_it_did`), and
        nobody reads what the pass would say of the new jobs (no
        annotations, no forecasts, no run limits to hold them)."""
        if self.options.annotate_depth != 0 or self.limits is not None:
            return False
        if self.table.annotated or self.planner.nreserved:
            return False
        table = self.table
        for queue in table.queues.values():
            table.sort_queue(queue)  # its first pending job first
            if queue.head >= len(queue.jobs) or not queue.policy.waits_as_it_did(queue.jobs[queue.head]):
                return False
        return True

    def _idle_pass(self, now: float) -> None:
        """A pass that can change nothing (no pending job, no reservation and
        no annotation left, or :meth:`_waits_as_before`): what the full pass
        would do, without building one (drop the empty queues, clear the
        dirty flags, count the pass, move the planner's clock)."""
        self.table.drop_idle_queues()
        self._dirty = self._restart = self._compress = False
        self.counters["passes"] += 1
        self.planner.set_now(now)

    def _begin_pass(self, now: float) -> None:
        queues = self.table.drop_idle_queues()  # a queue with no job holds no reservation
        for queue in queues:
            self.table.sort_queue(queue)
        # The queue whose head comes first in (priority, t_submit, id) order
        # picks first; each leaves the others' reservations alone.
        queues.sort(key=lambda q: q.jobs[q.head].sortkey)
        self._dirty = False
        self._restart = False
        self.counters["passes"] += 1
        self.planner.set_now(now)
        multi = len(queues) > 1
        run_limits, usage = self.limits, self.usage
        p = self._pass = Pass(
            self.table,
            self.options,
            now,
            start=self._start_in_pass,
            counters=self.counters,
            reservations=self.reservations,
            lent=self.besteffort.lent,
            excluded=self.hooks.excluded,
            feasibility=self.feasibility,
            limit_check=None if run_limits is None or usage is None else functools.partial(run_limits.check, usage),
            cap=self.cap,
            compress=self._compress,
            multi=multi,
            plan_read=(
                self.estimates or multi or self.besteffort.seen or self.power is not None or len(self.reservations) > 0
            ),
        )
        self._compress = False
        limits = depth_limits(queues, self.options.queue_depth, self.table.live)
        for queue in queues:
            if not queue.policy.persistent_reservations:
                p.enter(queue)
                p.clear_reservations()
        if len(queues) == 1:
            p.enter(queues[0], limits[0])
            self._pass_gen = queues[0].policy.run(p)
        else:
            self._pass_gen = run_queues(p, queues, limits)

    def _start_in_pass(self, p: Pass, job: Job, placement: Placement) -> Placement:
        """Start ``job`` from a pass on ``placement``: on what is free, or,
        where it takes what best-effort jobs hold, once they are preempted
        (``BestEffort.handoff``).  The placement it took."""
        lent = self.besteffort.lent.bits
        waits = False
        if lent and placement.bits & lent:
            placement, waits = self.besteffort.handoff(p, job, placement)
        if not waits:  # (a handoff needing no victim: what is free holds it)
            self.start_job(p, job, placement)
        return placement

    def start_job(self, p: Pass, job: Job, placement: Placement) -> None:
        """Start pending ``job`` now on ``placement`` (a regular job on what
        is free: :meth:`Pass.start`); on an allocation error it stays
        pending, held with ``error``."""
        bits = placement.bits
        rs = self.planner.resolve(placement)
        now = p.now
        end = self.kill_time(job, now)  # the plan ends at now + duration (EASY++ plans shorter)
        try:
            self.table.allocate(job.id, rs)
        except Exception as exc:  # a matcher bug must not crash the scheduler
            log.error("job %d: allocation of matched resources failed: %s", job.id, exc)
            p.held[job.id] = "error"
            return
        self.table.plan_run(job.id, rs, now, min(end, now + job.duration), bits)
        ann: dict[str, Any] = {}
        ahead = p.passed_over
        if ahead is not None and self.table.live(ahead):
            # It starts while a job ahead of it waits (as sched-backfill annotates).
            ann["backfill"] = self.job_name(ahead.id)
        self.succeed(job, rs, now, end, ann, p.out)

    def succeed(
        self, job: Job, rs: ResourceSet, now: float, end: float, annotations: dict[str, Any], out: list[Response]
    ) -> None:
        """The one way a job starts running: ``job`` (pending, or waiting for
        its victims) holds ``rs`` in the graph and the planner; it runs from
        ``now`` until its kill time ``end``.  Its reply ends with SUCCESS
        (R, ``resource_summary``, ``annotations``), appended to ``out``."""
        R = None
        if self.build_R:
            R = rs.to_rv1(self.graph, now, 0.0 if end == math.inf else end, job.request.nslots or 1)
        if self.summaries:
            annotations = {"resource_summary": resource_summary(R, rs), **annotations}
        sched = job.reply.success(annotations)
        self.table.apply(job, "start", now=now, resources=rs, expiration=end)
        out.append(
            Response(
                job.id,
                ResponseType.SUCCESS,
                {"sched": sched},
                R=R,
                resources=rs,
                start=now,
                expiration=end,
                reply=job.reply,
            )
        )
