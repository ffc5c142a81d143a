"""The engine: the sans-I/O scheduler drivers call (see :mod:`fluxsched_py.engine`)."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from cachetools import LRUCache

from ..ids import IdSet
from ..planner import MatchCache, Planner
from ..policy import QueuePolicy, make_policy, order_key
from .annotations import end_pass, fmt_clock, resource_summary
from .besteffort import BestEffort
from .hooks import Hooks
from .jobs import Job, JobQueue, depth_limits, idle_pass, run_queues
from .options import EngineOptions
from .passctx import Pass
from .resources import apply_resource_update
from .sizes import PendingSizes, node_bound
from .states import EngineError, JobState, PassResult, Response, ResponseType, next_state

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
    stopwatch, time_format:
        measure pass work for ``budget`` (never for decisions); show an absolute time (default ``HH:MM``).
    job_name:
        how annotations show a job id to users (default the decimal id; the
        Flux driver passes f58, ``ƒLqTPgb``, as ``flux jobs`` shows it).
    """

    def __init__(
        self,
        graph: Any,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
        *,
        matcher: Callable[..., Any] | None = None,
        build_R: bool = True,
        summaries: bool = True,
        stopwatch: Callable[[], float] = time.perf_counter,
        time_format: Callable[[float], str] = fmt_clock,
        job_name: Callable[[int], str] = str,
    ) -> None:
        self.options = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        from .. import match as _match_mod

        matcher = matcher or _match_mod.match
        self.graph = graph
        self._feasibility = _match_mod.feasibility
        self.stats = {"passes": 0, "matches": 0, "started": 0, "denied": 0, "canceled": 0}
        #: Best-effort jobs and preemption; the planner sees the graph through its view.
        self.besteffort = BestEffort(self)
        self.planner = self.make_planner(MatchCache(matcher))
        #: The queue policy of every queue not named in ``queue-policy-per-queue``.
        self.queue_policy: QueuePolicy = make_policy(self.options.queue_policy, self.options.reserve_depth)
        self._policies: dict[str, QueuePolicy] = {
            name: make_policy(pol, self.options.reserve_depth) for name, pol in self.options.queue_policy_per_queue
        }
        self.build_R = build_R
        self.summaries = summaries
        self._stopwatch = stopwatch
        self._time_format = time_format
        self._job_name = job_name
        self.instance_expiration: float = 0.0  # 0 = none

        self._jobs: dict[int, Job] = {}
        #: Queues with pending jobs, by name (None: the anonymous queue).
        self._queues: dict[str | None, JobQueue] = {}
        self._npending = 0
        self._annotated: set[int] = set()  # pending jobs holding annotations
        self._parse_cache: LRUCache = LRUCache(maxsize=4096)
        #: (request key, walltime) -> [shape id, pending jobs of that shape]:
        #: only shapes of pending jobs are kept; ids are never reused.
        self._shapes: dict[tuple[Any, float], list[int]] = {}
        #: The node bounds of the pending jobs, kept with their shapes (see :mod:`.sizes`).
        self.pending_sizes = PendingSizes()
        self._next_shape = 0
        self._feasible_cache: LRUCache = LRUCache(maxsize=4096)
        #: The most nodes a whole-node request (``Request.whole_nodes``) was
        #: found feasible for since the graph last changed: fewer are too (a
        #: subset of its nodes), with no search of the whole machine (an
        #: archive trace has hundreds of job sizes; each search of 93,312
        #: nodes takes tens of ms: issue 21).
        self._whole_feasible = 0
        self._pass: Pass | None = None
        self._pass_gen: Iterator[None] | None = None
        self._dirty = True  # something changed since the last complete pass
        self._restart = False  # ... in a way that invalidates a pass in progress
        self._compress = True  # ... in a way that may let reservations move earlier
        self.hooks = Hooks(self)  # optional features: EASY++, affinity, campaigns (engine/hooks.py)

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
        self._match = match
        planner = Planner(self.besteffort.view, matcher=match)
        self.besteffort.encode_lent(planner.codec)
        return planner

    def job(self, jobid: int) -> Job | None:
        return self._jobs.get(jobid)

    @property
    def pending_count(self) -> int:
        return self._npending

    @property
    def running(self) -> list[Job]:
        return [j for j in self._jobs.values() if j.state is JobState.RUNNING]

    def pending(self, queue: str | None | object = _ALL) -> list[Job]:
        """Pending jobs in order (a copy; never disturbs a pass in progress):
        of every queue (best-effort jobs included), or of ``queue`` only
        (None: the anonymous queue)."""
        qs = [*self._queues.values(), self.besteffort.queue] if queue is _ALL else self._queues.values()
        qs = qs if queue is _ALL else [q for q in qs if q.name == queue]
        return sorted((j for q in qs for j in q.jobs if self._live(j)), key=lambda j: j.sortkey)

    def policy_for(self, queue: str | None) -> QueuePolicy:
        """The policy that schedules ``queue``'s jobs (``queue-policy-per-queue``, else ``queue-policy``)."""
        return self.queue_policy if queue is None else self._policies.get(queue, self.queue_policy)

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
        for j in self._jobs.values():
            if j.state is JobState.RUNNING and j.resources is not None:
                assert not (seen & j.resources), f"job {j.id} shares resources with another job"
                seen = seen | j.resources

    # ------------------------------------------------------------------
    # Inputs
    # ------------------------------------------------------------------

    def hello(self, jobs: Iterable[Mapping[str, Any]]) -> list[Response]:
        """Jobs that hold resources at startup: ``{id, priority, userid,
        t_submit, R, free?}`` (R from the KVS; ``free`` an idset of ranks
        already released).  Marks their resources allocated."""
        for h in jobs:
            jobid = int(h["id"])
            if jobid in self._jobs:
                log.warning("hello: job %d reported twice; ignored", jobid)
                continue
            R = h.get("R")
            try:
                rs = self._rs_from_R(R)
                if h.get("free"):
                    rs = self._drop_ranks(rs, IdSet.parse(str(h["free"])))
                self.graph.allocate(jobid, rs, running=True)  # it runs: keeps what it holds on down ranks
            except Exception as exc:  # a bad R must not kill the scheduler
                log.error("hello: job %d: cannot mark its resources allocated: %s", jobid, exc)
                continue
            job = Job(jobid, int(h.get("priority", 0)), int(h.get("userid", 0)), float(h.get("t_submit", 0)), None)
            self._transition(job, "hello")
            job.resources = rs
            ex = ((R or {}).get("execution") or {}).get("expiration") or 0
            st = ((R or {}).get("execution") or {}).get("starttime") or 0
            job.expiration = float(ex) if ex else math.inf
            job.t_start = float(st)
            self._jobs[jobid] = job
            self.planner.add_running(jobid, rs, job.t_start, max(job.expiration, job.t_start + 1e-9))
            if h.get("preemptible_after") is not None:  # a best-effort job (the driver read its jobspec)
                job.preemptible_after = float(h["preemptible_after"])
                self.besteffort.adopt(job, bool(h.get("preempted")))
        self._changed()
        return []

    def alloc(
        self, jobid: int, priority: int, userid: int, t_submit: float, jobspec: Mapping[str, Any] | Any
    ) -> list[Response]:
        """``sched.alloc``: queue the job, or deny it if it can never run.

        ``jobspec`` is the RFC 14 object, or an already parsed
        :class:`~fluxsched_py.jobspec.Request`.
        """
        old = self._jobs.get(jobid)
        if old is not None:
            return self._duplicate_alloc(old)
        try:
            request = self.hooks.checked(self._parse(jobspec))
        except Exception as exc:
            self.stats["denied"] += 1
            return [Response(jobid, ResponseType.DENY, note=f"invalid jobspec: {exc}")]
        reason = self._feasible(request)
        if reason is not None:
            self.stats["denied"] += 1
            return [Response(jobid, ResponseType.DENY, note=reason)]
        job = self.hooks.submitted(Job(jobid, priority, userid, t_submit, request))
        job.shape_id = self._take_shape(job)
        self._transition(job, "alloc")
        self._jobs[jobid] = job
        self._npending += 1
        if job.preemptible_after is not None:
            return self.besteffort.add(job)
        name = request.queue or None
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = JobQueue(name, self.policy_for(name))
        job.queue = queue
        queue.npending += 1
        q = queue.jobs
        if q and queue.sorted and job.sortkey < q[-1].sortkey:
            # It goes ahead of queued jobs: re-plan their reservations too.
            queue.sorted = False
            self._restart = True
            self._compress = True
        q.append(job)
        self._dirty = True
        return []

    def cancel(self, jobid: int) -> list[Response]:
        """``sched.cancel``: answer the pending alloc with CANCEL, else ignore."""
        job = self._jobs.get(jobid)
        if job is not None and job.state is JobState.STARTING:
            return self.besteffort.cancel_starting(job)
        if job is None or job.state is not JobState.PENDING:
            log.debug("cancel: job %d has no pending alloc; ignored", jobid)
            return []
        self._forget_pending(job, "cancel")
        self.stats["canceled"] += 1
        return [Response(jobid, ResponseType.CANCEL)]

    def free(self, jobid: int, R: Mapping[str, Any] | None = None, final: bool = True) -> list[Response]:
        """``sched.free``: release all (``final``) or part (ranks in ``R``) of a job's resources."""
        job = self._jobs.get(jobid)
        if job is None or job.state is not JobState.RUNNING:
            log.warning("free: job %d holds no resources; ignored", jobid)
            return []
        try:
            if final and job.preemptible_after is not None:
                return self.besteffort.freed(job)
            if final:
                self._transition(job, "free-final")
                self.graph.release(jobid)
                self.planner.remove(jobid)
                self.hooks.ended(self._jobs.pop(jobid))
            else:
                self._transition(job, "free")
                part = self._rs_from_R(R) & job.resources if R is not None else None
                if part:
                    part = self.graph.release(jobid, part)  # with the node of a rank left with no core/GPU
                    span = self.planner.remove(jobid)
                    job.resources = job.resources - part
                    if job.resources and span is not None:
                        self.planner.add_running(jobid, job.resources, span.start, span.end)
                    if job.preemptible_after is not None:
                        self.besteffort.resized(job, part)
        except Exception as exc:  # never crash on free: log it and carry on
            log.error("free: job %d: %s", jobid, exc)
        self._changed()
        return []

    def prioritize(self, jobs: Iterable[tuple[int, int] | list[int]]) -> list[Response]:
        """``sched.prioritize``: new priorities for pending jobs; unknown ids ignored."""
        changed = False
        for jobid, prio in jobs:
            job = self._jobs.get(int(jobid))
            if job is None or job.state is not JobState.PENDING:
                continue
            self._transition(job, "prioritize")
            if job.priority != prio:
                job.priority = int(prio)
                job.sortkey = order_key(job.priority, job.t_submit, job.id)
                job.queue.sorted = False
                changed = True
        if changed:
            self._changed()
        return []

    def expiration(self, jobid: int, expiration: float) -> None:
        """``sched.expiration``: move a running job's end; raises EngineError if it holds nothing."""
        job = self._jobs.get(jobid)
        if job is None or job.state is not JobState.RUNNING:
            raise EngineError(f"job {jobid} does not currently have an allocation")
        if expiration <= (job.t_start or 0):
            raise EngineError(f"expiration {expiration} is before job {jobid} started")
        self._transition(job, "expiration")
        job.expiration = float(expiration)
        end = self.besteffort.span_end(job)
        for other in (
            self.planner.set_end(jobid, end) if jobid in self.planner else ()
        ):  # reservations in the way: re-planned
            if (pending := self._jobs.get(other)) is not None:
                pending.estimate = pending.proof = None
        self._changed()

    def reconfigure(self, options: EngineOptions | Iterable[str] | Mapping[str, Any]) -> None:
        """Change the options of a running engine (``flux config reload``).

        Every queue takes its new policy and every reservation is dropped, so
        the next pass re-plans; jobs and allocations are kept.  A bad option
        raises EngineError before anything changes.  ``queue_depth`` is also
        the RFC 27 ready mode: the driver decides whether it may change."""
        new = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        self.options = new
        self.queue_policy = make_policy(new.queue_policy, new.reserve_depth)
        self._policies = {name: make_policy(pol, new.reserve_depth) for name, pol in new.queue_policy_per_queue}
        for name, queue in self._queues.items():
            queue.policy = self.policy_for(name)
        for span in list(self.planner.reserved()):
            self.planner.remove(span.jobid)
            job = self._jobs.get(span.jobid)
            if job is not None:
                job.estimate = job.proof = None
        self._changed()

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
        instance expiration (see :mod:`.resources`)."""
        apply_resource_update(self, up, down, shrink, expiration, grow, properties)
        self._feasible_cache.clear()
        self._whole_feasible = 0
        self._changed()
        return []

    def feasibility(self, jobspec: Mapping[str, Any] | Any) -> str | None:
        """``feasibility.check``: None if the job could ever run, else the reason."""
        try:
            request = self._parse(jobspec)
        except Exception as exc:
            return f"invalid jobspec: {exc}"
        return self._feasible(request)

    def schedule(self, now: float, budget: float | None = None) -> PassResult:
        """Run (or resume) a scheduling pass at time ``now``.

        With a ``budget`` (seconds of work), the pass stops when the budget is
        spent and ``more`` is True: call again to resume it.  A pass resumes
        where it stopped unless something changed that invalidates it (a free,
        cancel, re-prioritization or resource change), in which case it
        restarts.  Without changes since the last complete pass, it does
        nothing.
        """
        self.hooks.tick(now)  # before the plan is read: EASY++ corrections, campaign bookkeeping
        out = self.besteffort.start_ready(now)
        if self._pass is not None and self._plan_due(self._pass.now, now):
            self._changed()
        if self._pass is not None and (self._restart or now < self._pass.now):
            self._pass = self._pass_gen = None
        if self._pass is None:
            if not self._dirty:
                return self.besteffort.run(now, out)
            if not self._npending and not self._annotated and not self.planner.nreserved:
                idle_pass(self, now)  # what a pass with no job would do (half the replay's passes)
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
                    return PassResult(out, more=True, preempt=self.besteffort.take_actions())
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
        self._changed()
        job = p.current
        log.error("scheduling pass: %s policy raised %r on job %s", p.queue.policy.name if p.queue else "?", exc, job)
        if job is None or not self._live(job):
            return PassResult(p.out)
        self._forget_pending(job, "deny")
        self.stats["denied"] += 1
        note = f"scheduler error: {type(exc).__name__}: {exc}"
        return PassResult([*p.out, Response(job.id, ResponseType.DENY, note=note)], more=True)

    def _transition(self, job: Job, event: str) -> None:
        new = next_state(job.state if job.id in self._jobs else None, event, job.id)
        if new is not None:
            job.state = new

    def _take_shape(self, job: Job) -> int:
        """The shape id of a job that starts pending (see :attr:`Job.shape_id`)."""
        key = (job.request.key, job.duration)
        entry = self._shapes.get(key)
        if entry is None:
            entry = self._shapes[key] = [self._next_shape, 0]
            self._next_shape += 1
        entry[1] += 1
        self.pending_sizes.add(node_bound(job.request))
        return entry[0]

    def _drop_shape(self, job: Job) -> None:
        """``job`` is no longer pending: forget its shape with its last job."""
        key = (job.request.key, job.duration)
        entry = self._shapes[key]
        entry[1] -= 1
        self.pending_sizes.discard(node_bound(job.request))
        if not entry[1]:
            del self._shapes[key]

    def _duplicate_alloc(self, job: Job) -> list[Response]:
        if job.state is JobState.PENDING:
            log.warning("alloc: job %d already has an alloc in flight; ignored", job.id)
            return []
        log.warning("alloc: job %d already holds resources; denied", job.id)
        return [Response(job.id, ResponseType.DENY, note="job already holds resources")]

    def _changed(self) -> None:
        self._dirty = True
        self._restart = True
        self._compress = True

    def _live(self, job: Job) -> bool:
        return job.state is JobState.PENDING and self._jobs.get(job.id) is job

    def _forget_pending(self, job: Job, event: str) -> None:
        self._transition(job, event)
        self.hooks.left(job)
        self._drop_shape(job)
        del self._jobs[job.id]
        self._npending -= 1
        job.queue.npending -= 1
        self._annotated.discard(job.id)
        if job.id in self.planner:
            self.planner.remove(job.id)
        self._changed()

    def _sort_queue(self, queue: JobQueue) -> None:
        q = queue.jobs
        if not queue.sorted or len(q) - queue.head > 2 * queue.npending + 64:
            queue.jobs = sorted((j for j in q[queue.head :] if self._live(j)), key=lambda j: j.sortkey)
            queue.sorted = True
            queue.head = 0
            return
        # Jobs start mostly from the front: skip the stale prefix for good.
        h, n = queue.head, len(q)
        while h < n and not self._live(q[h]):
            h += 1
        if h > 4096 and h > n // 2:
            del q[:h]
            h = 0
        queue.head = h

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

    def _feasible(self, request: Any) -> str | None:
        key = request.key
        try:
            return self._feasible_cache[key]
        except KeyError:
            pass
        whole = request.whole_nodes
        if whole and whole <= self._whole_feasible:
            return None
        try:
            reason = self._feasibility(self.graph, request)
        except Exception as exc:
            reason = f"unsatisfiable request: {exc}"
        self._feasible_cache[key] = reason
        if whole and reason is None:
            self._whole_feasible = max(self._whole_feasible, whole)
        return reason

    def _rs_from_R(self, R: Any) -> Any:
        from ..resource import ResourceSet

        return ResourceSet.from_rv1(self.graph, R)

    def _drop_ranks(self, rs: Any, ranks: IdSet) -> Any:
        return rs - rs.restrict(ranks)

    def _begin_pass(self, now: float) -> None:
        queues = []
        for name, queue in list(self._queues.items()):
            if not queue.npending:
                del self._queues[name]  # it holds no job and no reservation
                queue.jobs.clear()  # its stale jobs point back at it: no cycle left for the collector
                continue
            self._sort_queue(queue)
            queues.append(queue)
        # The queue whose head comes first in (priority, t_submit, id) order
        # picks first; each leaves the others' reservations alone.
        queues.sort(key=lambda q: q.jobs[q.head].sortkey)
        self._dirty = False
        self._restart = False
        self.stats["passes"] += 1
        self.planner.set_now(now)
        p = self._pass = Pass(self, now, self._compress, multi=len(queues) > 1)
        self._compress = False
        limits = depth_limits(queues, self.options.queue_depth, self._live)
        for queue in queues:
            if not queue.policy.persistent_reservations:
                p.enter(queue)
                p.clear_reservations()
        if len(queues) == 1:
            p.enter(queues[0], limits[0])
            self._pass_gen = queues[0].policy.run(p)
        else:
            self._pass_gen = run_queues(p, queues, limits)

    def _start(self, p: Pass, job: Job, placement: tuple[Any, int]) -> None:
        bits = placement[1]
        rs = self.planner.resolve(placement)
        now = p.now
        end = now + job.walltime  # the kill time; the plan ends at now + duration (EASY++ plans shorter)
        if end == math.inf and self.instance_expiration:
            end = max(self.instance_expiration, now + 1e-9)
        try:
            self.graph.allocate(job.id, rs)
        except Exception as exc:  # a matcher bug must not crash the scheduler
            log.error("job %d: allocation of matched resources failed: %s", job.id, exc)
            p.held[job.id] = "error"
            return
        self._transition(job, "start")
        self._drop_shape(job)
        self._npending -= 1
        job.queue.npending -= 1
        self.stats["started"] += 1
        job.resources = rs
        job.t_start = now
        job.expiration = end
        self.planner.add_running(job.id, rs, now, min(end, now + job.duration), bits)
        R = None
        if self.build_R:
            R = rs.to_rv1(self.graph, now, 0.0 if end == math.inf else end, job.request.nslots or 1)
        ann: dict[str, Any] = {k: None for k in job.sent if k != "resource_summary"}
        if self.summaries:
            ann["resource_summary"] = resource_summary(R, rs)
        ahead = p.passed_over
        if ahead is not None and self._live(ahead):
            # It starts while a job ahead of it waits (as sched-backfill annotates).
            ann["backfill"] = self._job_name(ahead.id)
        job.sent = {}
        self._annotated.discard(job.id)
        p.out.append(
            Response(job.id, ResponseType.SUCCESS, {"sched": ann}, R=R, resources=rs, start=now, expiration=end)
        )
