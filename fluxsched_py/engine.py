"""The scheduler side of RFC 27, as a state machine with no I/O.

Everything that decides what the scheduler answers lives here: which jobs it
knows, in which state, what it holds, and the responses it owes.  Drivers
(the Flux broker module, the Batsim drivers, the offline replay) turn their
wire messages into calls on :class:`Engine` and send back what it returns.

What the engine owns
    the job table; the pending queue in order (priority, t_submit, id); the
    resource graph's allocations for its jobs; the planner's spans (running
    jobs, and the reservations the queue policy keeps); the annotations it
    last sent for each job, so it only sends what changed.  It also knows
    *why* a pass may be needed: ``_dirty`` (anything happened), ``_restart``
    (a pass in progress is stale) and ``_compress`` (something may have made
    room, so reservations may move earlier).

What the engine never knows
    Flux, ZMQ, Batsim, the KVS, files, or the wall clock.  Time is always an
    argument (``now``).  The only clock it touches is an injectable stopwatch
    that bounds how much work one :meth:`Engine.schedule` call does; it never
    influences a decision, so a replay is deterministic whatever the budget.
    Committing R to the KVS before sending SUCCESS is the driver's job.

Job states and transitions (see :data:`TRANSITIONS`)::

    (new) --alloc--> PENDING --schedule: start--> RUNNING --free(final)--> (gone)
                     PENDING --alloc denied / infeasible--> (gone)    DENY
                     PENDING --cancel--> (gone)                       CANCEL
    (new) --hello--> RUNNING --free(partial)--> RUNNING
                     RUNNING --expiration--> RUNNING

Messages that do not fit the table are special cases with named handlers:
a second alloc for a pending job is ignored (RFC 27 allows one in flight);
an alloc for a job that holds resources is denied; cancel, prioritize and free
for unknown jobs are ignored; expiration for an unknown job raises
:class:`EngineError` (the driver answers it with an error).  An alloc after
a CANCEL is a new request (the job-manager re-sends allocs it cancelled).
Alloc and free never raise: RFC 27 forbids error responses to them.

:class:`EngineError` is the only exception the engine raises on purpose.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
import itertools
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from .ids import IdSet
from .planner import MatchCache, NoEarlier, Planner
from .policy import POLICIES, QueuePolicy, make_policy, order_key

__all__ = [
    "Engine",
    "EngineError",
    "EngineOptions",
    "Job",
    "JobState",
    "PassResult",
    "Response",
    "ResponseType",
    "TRANSITIONS",
    "rlist_summary",
]

log = logging.getLogger("fluxsched_py.engine")


class EngineError(Exception):
    """A request the engine refuses: bad options, expiration of an unknown job."""


class JobState(enum.Enum):
    PENDING = "pending"  # sched.alloc received, not answered yet
    RUNNING = "running"  # SUCCESS sent (or learned at hello): holds resources


class ResponseType(enum.IntEnum):
    """RFC 27 sched.alloc response types."""

    SUCCESS = 0
    ANNOTATE = 1
    DENY = 2
    CANCEL = 3


#: (state or None for an unknown job, event) -> new state, None meaning the
#: engine forgets the job.  Everything else is a special case (module docstring).
TRANSITIONS: dict[tuple[JobState | None, str], JobState | None] = {
    (None, "alloc"): JobState.PENDING,
    (None, "hello"): JobState.RUNNING,
    (JobState.PENDING, "start"): JobState.RUNNING,
    (JobState.PENDING, "deny"): None,
    (JobState.PENDING, "cancel"): None,
    (JobState.PENDING, "prioritize"): JobState.PENDING,
    (JobState.RUNNING, "free"): JobState.RUNNING,
    (JobState.RUNNING, "free-final"): None,
    (JobState.RUNNING, "expiration"): JobState.RUNNING,
}


@dataclass(slots=True)
class Response:
    """One sched.alloc response the driver must send.

    :meth:`payload` is the RFC 27 message body.  ``resources`` is the
    allocated :class:`~fluxsched_py.resource.ResourceSet` (for drivers that
    need more than R, like the replay); it is not part of the payload.
    """

    id: int
    type: ResponseType
    annotations: dict | None = None
    note: str | None = None
    R: dict | None = None
    resources: Any = None
    start: float | None = None
    expiration: float | None = None

    def payload(self) -> dict:
        p: dict[str, Any] = {"id": self.id, "type": int(self.type)}
        if self.type is ResponseType.SUCCESS and self.R is not None:
            p["R"] = self.R
        if self.annotations is not None and self.type in (ResponseType.SUCCESS, ResponseType.ANNOTATE):
            p["annotations"] = self.annotations
        if self.type is ResponseType.DENY and self.note is not None:
            p["note"] = self.note
        return p


@dataclass(slots=True)
class PassResult:
    """What :meth:`Engine.schedule` did: responses to send, and whether the
    pass stopped early because its budget ran out (call again soon)."""

    responses: list[Response]
    more: bool = False


def _parse_mode(value: str) -> int | None:
    if value == "unlimited":
        return None
    n = value[len("limited=") :] if value.startswith("limited=") else ""
    if not n.isdigit() or int(n) < 1:
        raise EngineError(f"mode={value!r}: expected 'unlimited' or 'limited=N' with N a positive integer")
    return int(n)


def _parse_depth(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "0", ""):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise EngineError(f"{key}={value!r}: expected a positive integer or 'unlimited'") from None
    if n < 0:
        raise EngineError(f"{key}={value!r}: expected a positive integer or 'unlimited'")
    return n or None


def _parse_per_queue(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """``debug:fcfs,batch:easy`` (or a ``{queue: policy}`` mapping) -> pairs;
    EngineError names every bad entry."""
    if isinstance(value, Mapping):
        entries = [f"{k}:{v}" for k, v in value.items()]
    else:
        entries = str(value).replace(",", " ").split()
    pairs: dict[str, str] = {}
    bad: list[str] = []
    for entry in entries:
        name, sep, pol = entry.partition(":")
        name, pol = name.strip(), pol.strip()
        if not sep or not name or pol not in POLICIES:
            bad.append(repr(entry))
        elif name in pairs:
            bad.append(f"{entry!r} (queue {name!r} listed twice)")
        else:
            pairs[name] = pol
    if bad or not entries:
        what = f"bad entries {', '.join(bad)}" if bad else "no entries"
        raise EngineError(
            f"{key}={value!r}: {what}; expected QUEUE:POLICY[,QUEUE:POLICY...] with POLICY one of {', '.join(POLICIES)}"
        )
    return tuple(pairs.items())


_LOG_LEVELS = {
    "emerg": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "crit": logging.CRITICAL,
    "critical": logging.CRITICAL,
    "err": logging.ERROR,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "notice": logging.INFO,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}

_PLACEMENTS = ("first", "low", "high", "worstfit", "lonodex", "hinodex", "locality", "variation")


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Module options (``flux module load sched-py queue-policy=easy ...``).

    Names are spelled with hyphens, as on the command line (``log_level`` is
    refused with a hint).  sched-simple's ``mode=unlimited`` and
    ``mode=limited=N`` are accepted as spellings of ``queue-depth``.
    ``queue_depth`` bounds how many pending jobs a pass considers and selects
    the RFC 27 ready mode (limited when set, unlimited otherwise).
    ``reserve_depth`` is None for the policy's default and 0 for unlimited
    (``reserve-depth=unlimited``).
    ``annotate_depth`` bounds how many pending jobs, from the head of each
    queue, get ``reason_pending`` and ``jobs_ahead`` (every reserved job gets
    ``t_estimate`` regardless).
    ``queue_policy_per_queue`` overrides ``queue_policy`` for named queues
    (``queue-policy-per-queue=debug:fcfs,batch:easy``, as Fluxion spells it;
    commas or spaces separate entries), as ``(name, policy)`` pairs.
    """

    queue_policy: str = "fcfs"
    reserve_depth: int | None = None
    queue_depth: int | None = None
    policy: str = "first"
    log_level: str = "info"
    annotate_depth: int = 64
    queue_policy_per_queue: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, args: Iterable[str] | Mapping[str, Any] | None = None) -> EngineOptions:
        """Options from ``key=value`` strings or a mapping; raises EngineError."""
        if args is None:
            return cls()
        if isinstance(args, Mapping):
            items = [(str(k), v) for k, v in args.items()]
        else:
            items = []
            for arg in args:
                key, sep, value = str(arg).partition("=")
                if not sep:
                    raise EngineError(f"option {arg!r}: expected key=value")
                items.append((key, value))
        kw: dict[str, Any] = {}
        for key, value in items:
            k = key.strip()
            if "_" in k:
                raise EngineError(f"unknown option {key!r} (did you mean {k.replace('_', '-')!r}?)")
            if k == "mode":
                # sched-simple's spellings of the ready mode: mode=unlimited, mode=limited=N
                kw["queue_depth"] = _parse_mode(str(value))
            elif k == "queue-policy":
                if value not in POLICIES:
                    raise EngineError(f"queue-policy={value!r}: choose from {', '.join(POLICIES)}")
                kw["queue_policy"] = value
            elif k == "queue-policy-per-queue":
                kw["queue_policy_per_queue"] = _parse_per_queue(k, value)
            elif k == "reserve-depth":
                # 0 is the policies' "unlimited"; None would mean the policy's default.
                d = _parse_depth(k, value)
                kw["reserve_depth"] = 0 if d is None else d
            elif k == "queue-depth":
                kw["queue_depth"] = _parse_depth(k, value)
            elif k == "annotate-depth":
                if str(value).strip() in ("0",) or value == 0:
                    kw["annotate_depth"] = 0
                else:
                    d = _parse_depth(k, value)
                    kw["annotate_depth"] = 1 << 62 if d is None else d
            elif k == "policy":
                if value not in _PLACEMENTS:
                    raise EngineError(f"policy={value!r}: choose from {', '.join(_PLACEMENTS)}")
                kw["policy"] = value
            elif k == "log-level":
                if str(value).lower() not in _LOG_LEVELS:
                    raise EngineError(f"log-level={value!r}: choose from {', '.join(_LOG_LEVELS)}")
                kw["log_level"] = str(value).lower()
            else:
                raise EngineError(
                    f"unknown option {key!r} (known: queue-policy, queue-policy-per-queue, reserve-depth, "
                    "queue-depth, policy, log-level, annotate-depth, mode)"
                )
        return cls(**kw)


class Job:
    """A job the engine knows (pending or running)."""

    __slots__ = (
        "id",
        "priority",
        "userid",
        "t_submit",
        "request",
        "duration",
        "shape",
        "nodes",
        "state",
        "sortkey",
        "resources",
        "t_start",
        "expiration",
        "sent",
        "estimate",
        "first_estimate",
        "proof",
        "queue",
    )

    def __init__(self, jobid: int, priority: int, userid: int, t_submit: float, request: Any) -> None:
        self.id = jobid
        self.priority = priority
        self.userid = userid
        self.t_submit = t_submit
        self.request = request
        d = float(getattr(request, "duration", 0.0) or 0.0) if request is not None else 0.0
        #: Walltime in seconds, ``math.inf`` when unlimited.
        self.duration = d if d > 0 else math.inf
        #: What makes two jobs interchangeable for matching; the engine
        #: replaces it with a small interned id (cheap to hash in a pass).
        self.shape: Any = (request.key, self.duration) if request is not None else None
        #: N for a plain whole-node request (see MatchCache.whole_nodes), else 0.
        self.nodes = 0
        self.state = JobState.PENDING
        self.sortkey = order_key(priority, t_submit, jobid)
        self.resources: Any = None
        self.t_start: float | None = None
        self.expiration: float = math.inf
        self.sent: dict[str, Any] = {}  # sched.* annotations the job-manager holds
        self.estimate: float | None = None
        self.first_estimate: float | None = None
        #: That it cannot start before its reservation (see _Pass.earliest).
        self.proof: NoEarlier | None = None
        #: The queue it waits in (set by the engine while it is pending).
        self.queue: _Queue | None = None

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.state.value})"


class _Queue:
    """One queue's pending jobs in order (priority, t_submit, id), and its policy.

    ``name`` is the job's ``attributes.system.queue``, None for the anonymous
    queue.  ``jobs`` keeps stale entries (jobs that started or left), skipped
    as the queue is walked; entries before ``head`` are all stale.
    """

    __slots__ = ("name", "policy", "jobs", "head", "sorted", "npending")

    def __init__(self, name: str | None, policy: QueuePolicy) -> None:
        self.name = name
        self.policy = policy
        self.jobs: list[Job] = []
        self.head = 0
        self.sorted = True
        self.npending = 0

    def __repr__(self) -> str:
        return f"_Queue({self.name!r}, {self.policy.name}, {self.npending} pending)"


_ALL = object()  # Engine.pending(): every queue


def _fmt_clock(t: float) -> str:
    return time.strftime("%H:%M", time.localtime(t))


def describe_constraint(c: Any) -> str:
    """``properties=^login``, ``(ranks=0-3 and hostlist=n[1-2])``..."""
    describe = getattr(c, "describe", None)
    if describe is not None:
        return describe()
    if c.op in ("and", "or", "not"):
        return f"{c.op}(" + "; ".join(describe_constraint(a) for a in c.args) + ")"
    return f"{c.op}=" + ",".join(str(a) for a in c.args)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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
    matcher, feasibility:
        the placement functions; default to :mod:`fluxsched_py.match`.
    build_R:
        put RFC 20 R in SUCCESS responses (drivers that only need the
        ResourceSet, like the replay, turn it off).
    stopwatch:
        measures pass work for ``budget``; never used for decisions.
    time_format:
        how ``reason_pending`` shows an absolute time (default ``HH:MM``).
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
        feasibility: Callable[[Any, Any], str | None] | None = None,
        build_R: bool = True,
        stopwatch: Callable[[], float] = time.perf_counter,
        time_format: Callable[[float], str] = _fmt_clock,
        job_name: Callable[[int], str] = str,
    ) -> None:
        self.options = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        log.setLevel(_LOG_LEVELS[self.options.log_level])
        if matcher is None or feasibility is None:
            from . import match as _match_mod

            matcher = matcher or _match_mod.match
            feasibility = feasibility or _match_mod.feasibility
        self.graph = graph
        self._match = MatchCache(matcher)
        self._feasibility = feasibility
        self.planner = Planner(graph, matcher=self._match)
        #: The policy of every queue not named in ``queue-policy-per-queue``.
        self.policy: QueuePolicy = make_policy(self.options.queue_policy, self.options.reserve_depth)
        self._policies: dict[str, QueuePolicy] = {
            name: make_policy(pol, self.options.reserve_depth) for name, pol in self.options.queue_policy_per_queue
        }
        self.build_R = build_R
        self._stopwatch = stopwatch
        self._time_format = time_format
        self._job_name = job_name
        self.instance_expiration: float = 0.0  # 0 = none

        self._jobs: dict[int, Job] = {}
        #: Queues with pending jobs, by name (None: the anonymous queue).
        self._queues: dict[str | None, _Queue] = {}
        self._npending = 0
        self._annotated: set[int] = set()  # pending jobs holding annotations
        self._parse_cache: LRUCache = LRUCache(maxsize=4096)
        self._shape_ids: dict[Any, int] = {}
        self._feasible_cache: LRUCache = LRUCache(maxsize=4096)
        self._pass: _Pass | None = None
        self._pass_gen: Iterator[None] | None = None
        self._dirty = True  # something changed since the last complete pass
        self._restart = False  # ... in a way that invalidates a pass in progress
        self._compress = True  # ... in a way that may let reservations move earlier
        self.stats = {"passes": 0, "matches": 0, "started": 0, "denied": 0, "canceled": 0}

    # ------------------------------------------------------------------
    # Queries
    # ------------------------------------------------------------------

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
        of every queue, or of ``queue`` only (None: the anonymous queue)."""
        qs = self._queues.values() if queue is _ALL else [q for q in self._queues.values() if q.name == queue]
        return sorted((j for q in qs for j in q.jobs if self._live(j)), key=lambda j: j.sortkey)

    def policy_for(self, queue: str | None) -> QueuePolicy:
        """The policy that schedules ``queue``'s jobs (``queue-policy-per-queue``, else ``queue-policy``)."""
        return self.policy if queue is None else self._policies.get(queue, self.policy)

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
                self.graph.allocate(jobid, rs)
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
            request = self._parse(jobspec)
        except Exception as exc:
            self.stats["denied"] += 1
            return [Response(jobid, ResponseType.DENY, note=f"invalid jobspec: {exc}")]
        reason = self._feasible(request)
        if reason is not None:
            self.stats["denied"] += 1
            return [Response(jobid, ResponseType.DENY, note=reason)]
        job = Job(jobid, priority, userid, t_submit, request)
        job.shape = self._shape_ids.setdefault(job.shape, len(self._shape_ids))
        job.nodes = self.planner.matcher.whole_nodes(request)
        self._transition(job, "alloc")
        self._jobs[jobid] = job
        self._npending += 1
        name = request.queue or None
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = _Queue(name, self.policy_for(name))
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
            if final:
                self._transition(job, "free-final")
                version = getattr(self.graph, "version", None)
                self.graph.release(jobid)
                span = self.planner.remove(jobid)
                self.planner.graph_changed(version, given=span.bits if span is not None else None)
                del self._jobs[jobid]
            else:
                self._transition(job, "free")
                part = self._rs_from_R(R) & job.resources if R is not None else None
                if part:
                    self.graph.release(jobid, part)
                    span = self.planner.remove(jobid)
                    job.resources = job.resources - part
                    if job.resources and span is not None:
                        self.planner.add_running(jobid, job.resources, span.start, span.end)
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
        self.planner.set_end(jobid, job.expiration)
        self._changed()

    def reconfigure(self, options: EngineOptions | Iterable[str] | Mapping[str, Any]) -> None:
        """Change the options of a running engine (``flux config reload``).

        Every queue takes its new policy, every reservation is dropped and
        the next pass re-plans from scratch; jobs, allocations and the
        annotations already sent are kept (the next pass sends what
        changed).  Raises EngineError on a bad option, leaving the engine
        as it was.  ``queue_depth`` is also the RFC 27 ready mode, which
        the driver announced at startup: the driver decides whether it may
        change."""
        new = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
        self.options = new
        log.setLevel(_LOG_LEVELS[new.log_level])
        self.policy = make_policy(new.queue_policy, new.reserve_depth)
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
    ) -> list[Response]:
        """A ``resource.acquire`` update: ranks up/down/shrunk, or a new instance expiration."""
        g = self.graph
        if up:
            g.set_up(_idset(up))
        if down:
            g.set_down(_idset(down))
        if shrink:
            g.shrink(_idset(shrink))
        if expiration is not None:
            self.instance_expiration = float(expiration)
        self._feasible_cache.clear()
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
        out: list[Response] = []
        if self._pass is not None and (self._restart or now < self._pass.now):
            self._pass = self._pass_gen = None
        if self._pass is None:
            if not self._dirty:
                return PassResult(out)
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
                    return PassResult(out, more=True)
        except Exception as exc:  # a policy bug: deny the job it was on, keep the rest
            return self._policy_failed(p, exc)
        self._end_pass(p)
        self._pass = self._pass_gen = None
        return PassResult(out)

    # ------------------------------------------------------------------
    # Special cases and helpers
    # ------------------------------------------------------------------

    def _policy_failed(self, p: _Pass, exc: Exception) -> PassResult:
        """A policy raised during a pass.  What the pass started stands (its
        SUCCESS responses are returned); the job the policy was on is denied
        with the error, and the pass is dropped (``more``: re-plan at once).
        With no job to blame nothing is denied and the next change retries."""
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
        key = (job.state if job.id in self._jobs else None, event)
        if key not in TRANSITIONS:
            raise EngineError(f"job {job.id}: {event} is not valid in state {key[0]}")
        new = TRANSITIONS[key]
        if new is not None:
            job.state = new

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
        del self._jobs[job.id]
        self._npending -= 1
        job.queue.npending -= 1
        self._annotated.discard(job.id)
        if job.id in self.planner:
            self.planner.remove(job.id)
        self._changed()

    def _sort_queue(self, queue: _Queue) -> None:
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
            from .jobspec import parse_jobspec  # type: ignore[attr-defined]

            request = parse_jobspec(jobspec)
            self._parse_cache[key] = request
        return request

    def _feasible(self, request: Any) -> str | None:
        key = request.key
        try:
            return self._feasible_cache[key]
        except KeyError:
            pass
        try:
            reason = self._feasibility(self.graph, request)
        except Exception as exc:
            reason = f"unsatisfiable request: {exc}"
        self._feasible_cache[key] = reason
        return reason

    def _rs_from_R(self, R: Any) -> Any:
        from .resource import ResourceSet

        return ResourceSet.from_rv1(self.graph, R)

    def _drop_ranks(self, rs: Any, ranks: IdSet) -> Any:
        return rs - rs.restrict(ranks)

    def _begin_pass(self, now: float) -> None:
        queues = []
        for name, queue in list(self._queues.items()):
            if not queue.npending:
                del self._queues[name]  # it holds no job and no reservation
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
        p = self._pass = _Pass(self, now, self._compress, multi=len(queues) > 1)
        self._compress = False
        limits = self._depth_limits(queues)
        for queue in queues:
            if not queue.policy.persistent_reservations:
                p.enter(queue)
                p.clear_reservations()
        if len(queues) == 1:
            p.enter(queues[0], limits[0])
            self._pass_gen = queues[0].policy.run(p)
        else:
            self._pass_gen = self._run_queues(p, queues, limits)

    def _depth_limits(self, queues: list[_Queue]) -> list[int | None]:
        """How many jobs of each queue a pass considers: with ``queue-depth=N``,
        the first N pending jobs in (priority, t_submit, id) order over all
        queues (the same jobs as with one queue), each queue taking its own."""
        depth = self.options.queue_depth
        if not depth or len(queues) < 2:
            return [depth] * len(queues)
        live = self._live

        def keys(i: int, q: _Queue) -> Iterator[tuple[tuple[int, float, int], int]]:
            return ((j.sortkey, i) for j in itertools.islice(q.jobs, q.head, None) if live(j))

        counts = [0] * len(queues)
        for _, i in itertools.islice(heapq.merge(*(keys(i, q) for i, q in enumerate(queues))), depth):
            counts[i] += 1
        return counts  # type: ignore[return-value]

    @staticmethod
    def _run_queues(p: _Pass, queues: list[_Queue], limits: list[int | None]) -> Iterator[None]:
        """One pass over several queues: each queue's policy over its own jobs, in turn."""
        for queue, limit in zip(queues, limits, strict=True):
            if limit == 0:
                continue  # none of its jobs is within queue-depth
            p.enter(queue, limit)
            yield from queue.policy.run(p)

    def _start(self, p: _Pass, job: Job, placement: tuple[Any, int]) -> None:
        bits = placement[1]
        rs = self.planner.resolve(placement)
        now = p.now
        end = now + job.duration
        if end == math.inf and self.instance_expiration:
            end = max(self.instance_expiration, now + 1e-9)
        try:
            version = getattr(self.graph, "version", None)
            self.graph.allocate(job.id, rs)
            self.planner.graph_changed(version, taken=bits)
        except Exception as exc:  # a matcher bug must not crash the scheduler
            log.error("job %d: allocation of matched resources failed: %s", job.id, exc)
            p.held[job.id] = "error"
            return
        self._transition(job, "start")
        self._npending -= 1
        job.queue.npending -= 1
        self.stats["started"] += 1
        job.resources = rs
        job.t_start = now
        job.expiration = end
        self.planner.add_running(job.id, rs, now, end, bits)
        R = None
        if self.build_R:
            R = rs.to_rv1(self.graph, now, 0.0 if end == math.inf else end, job.request.nslots or 1)
        ann: dict[str, Any] = {k: None for k in job.sent if k != "resource_summary"}
        ann["resource_summary"] = _summary(R, rs) if R is not None else _summary_rs(rs)
        ahead = p.passed_over
        if ahead is not None and self._live(ahead):
            # It starts while a job ahead of it waits (as sched-backfill annotates).
            ann["backfill"] = self._job_name(ahead.id)
        job.sent = {}
        self._annotated.discard(job.id)
        p.out.append(
            Response(job.id, ResponseType.SUCCESS, {"sched": ann}, R=R, resources=rs, start=now, expiration=end)
        )

    def _end_pass(self, p: _Pass) -> None:
        """Annotations: post what changed, delete what no longer applies."""
        want: dict[int, dict[str, Any]] = {}
        depth = self.options.annotate_depth
        for queue in self._queues.values() if depth else ():
            # jobs_ahead and the job a job waits behind are of its own queue.
            head: Job | None = None
            pos = 0
            q = queue.jobs
            for i in range(queue.head, len(q)):
                job = q[i]
                if not self._live(job):
                    continue
                if pos >= depth:
                    break
                if head is None and job.id not in p.held_ok:
                    head = job
                want[job.id] = self._annotations(p, job, pos, head)
                pos += 1
        for span in self.planner.reserved():
            if span.jobid not in want:
                job = self._jobs[span.jobid]
                want[job.id] = {"t_estimate": span.start}
        for jobid in list(self._annotated):
            if jobid not in want:
                want[jobid] = {}
        for jobid, ann in want.items():
            job = self._jobs[jobid]
            if job.sent == ann:
                continue
            diff = {k: v for k, v in ann.items() if job.sent.get(k, _MISSING) != v}
            diff.update({k: None for k in job.sent if k not in ann})
            if not diff:
                continue
            job.sent = ann
            if ann:
                self._annotated.add(jobid)
            else:
                self._annotated.discard(jobid)
            p.out.append(Response(jobid, ResponseType.ANNOTATE, {"sched": diff}))

    def _annotations(self, p: _Pass, job: Job, pos: int, head: Job | None) -> dict[str, Any]:
        ann: dict[str, Any] = {}
        req = job.request
        if job.estimate is not None:
            ann["t_estimate"] = job.estimate
        ann["reason_pending"] = self._reason(p, job, head)
        ann["jobs_ahead"] = pos
        if getattr(req, "queue", None):
            ann["queue"] = req.queue
        return ann

    def _reason(self, p: _Pass, job: Job, head: Job | None) -> str:
        req = job.request
        why = p.held.get(job.id)
        need, enough = self._need(p, req)
        if why == "down":
            # No start time exists on what is up: either resources it needs are
            # down, or the jobs holding them have no time limit to plan around.
            if self.graph.down_ranks() or self.graph.drained_ranks():
                return f"cannot start on the resources that are up now: waiting for {need}"
            return f"waiting for {need} — no start time can be estimated: the jobs holding them have no time limit"
        c = getattr(req, "constraints", None)
        if c is not None and p.constraint_blocks(job):
            text = f"blocked by constraint: {describe_constraint(c)}"
        elif why == "order" and head is not None and head is not job:
            text = f"waiting for {need}, behind higher-priority job {self._job_name(head.id)}"
        elif enough and job.estimate is not None:
            text = f"waiting for {need}, held for jobs reserved ahead of it"
        else:
            text = f"waiting for {need}"
        if job.estimate is not None:
            return f"{text} — reserved to start at {self._time_format(job.estimate)}"
        if why == "depth":
            return f"{text} — no reservation (beyond reserve-depth={job.queue.policy.reserve_depth})"
        if why == "backfill":
            return f"{text} — cannot start without delaying a reservation"
        if head is not None and head is not job:
            return f"{text} — behind higher-priority job {self._job_name(head.id)}"
        return text

    def _need(self, p: _Pass, req: Any) -> tuple[str, bool]:
        """``3 nodes (2 free)``: what the job needs and what is free, per pass,
        and whether that much is free now (then reservations are what hold it)."""
        text = p.need_text.get(id(req))
        if text is not None and text[0] is req:
            return text[1], text[2]
        codec = self.planner.codec
        free = p.free()
        nnodes = req.nnodes
        if nnodes and req.exclusive:
            if p.whole_free is None:
                nb = codec.node_bits
                whole = sum(1 for full in nb.values() if free & full == full) if nb else codec.count(free, "node")
                p.whole_free = whole
            have = p.whole_free
            out = f"{_plural(nnodes, 'node')} ({have} free)"
            enough = have >= nnodes
        else:
            cores = req.nslots * req.slot_size
            gpus = req.nslots * req.slot_gpus
            parts = []
            free_gpus = codec.count(free, "gpu") if gpus else 0
            free_cores = codec.count(free, "core")
            enough = free_cores >= cores and free_gpus >= gpus and not nnodes
            if gpus:
                parts.append(f"{_plural(gpus, 'GPU')} ({free_gpus} free)")
            if cores or not parts:
                parts.insert(0, f"{_plural(cores, 'core')} ({free_cores} free)")
            if nnodes:
                parts.append(f"on {_plural(nnodes, 'node')}")
            out = ", ".join(parts)
        p.need_text[id(req)] = (req, out, enough)
        return out, enough


_MISSING = object()


def _idset(value: Any) -> IdSet:
    if isinstance(value, IdSet):
        return value
    if isinstance(value, str):
        return IdSet.parse(value)
    return IdSet(value)


def rlist_ids(ids: IdSet) -> str:
    """An idset as flux-core's rlist prints it: ``0``, ``[0-3]``, ``[0,2]``."""
    text = ids.encode()
    return text if text.isdigit() else f"[{text}]"


def rlist_summary(R_lite: Iterable[Mapping[str, Any]]) -> str:
    """``rank[0-1]/core[0-3],gpu0``: R_lite as flux-core's rlist summarizes
    it (``resource_summary``, ``flux resource list -o {rlist}``)."""
    parts = []
    for item in R_lite:
        kids = ",".join(
            f"{k}{rlist_ids(ids)}"
            for k, v in sorted((item.get("children") or {}).items())
            if (ids := IdSet.parse(str(v)))
        )
        parts.append(f"rank{rlist_ids(IdSet.parse(str(item['rank'])))}" + (f"/{kids}" if kids else ""))
    return " ".join(parts)


def _summary(R: Mapping[str, Any], rs: Any) -> str:
    return rlist_summary((R.get("execution") or {}).get("R_lite") or []) or _summary_rs(rs)


def _summary_rs(rs: Any) -> str:
    ranks = getattr(rs, "ranks", None)
    return f"rank{rlist_ids(ranks)}" if ranks is not None else str(rs)


class _Pass:
    """One scheduling pass: the :class:`~fluxsched_py.policy.PassContext`.

    A pass visits the queues one after the other (:meth:`enter`): what a
    policy sees of the queue (:meth:`jobs`, :meth:`clear_reservations`,
    :meth:`hopeless`, the job it backfills around) is the current queue's;
    what is free now and the planner, with every queue's reservations, are
    shared by all of them."""

    _SENTINEL = -1  # planner id for a tentative allocation (EASY rule 2)

    def __init__(self, engine: Engine, now: float, compress: bool = True, multi: bool = False) -> None:
        self.e = engine
        self.now = now
        self.compress = compress
        #: More than one queue has pending jobs: reservations are not all the current queue's.
        self.multi = multi
        self.queue: _Queue | None = None
        self.depth: int | None = None
        self.out: list[Response] = []
        self.held: dict[int, str] = {}
        self.held_ok: set[int] = set()  # jobs the policy passed over that do not block others
        self._free: Any = None
        self._constraint_cache: dict[Any, bool] = {}
        self.need_text: dict[int, tuple[Any, str]] = {}
        self._failed_shapes: set[Any] = set()
        self._failed_nodes: list[tuple[int, float]] = []
        self.whole_free: int | None = None
        self._proof: tuple[Job, NoEarlier] | None = None  # from the last search, for reserve()
        #: The first job the policy visited and left pending: a job started
        #: after it is backfilled around it (the ``backfill`` annotation).
        self.passed_over: Job | None = None
        #: The job :meth:`jobs` yielded last (denied if the policy raises).
        self.current: Job | None = None

    def enter(self, queue: _Queue, depth: int | None = None) -> None:
        """Start on ``queue``'s jobs (at most ``depth`` of them)."""
        self.queue = queue
        self.depth = depth
        self.passed_over = None
        if self._failed_shapes or self._failed_nodes:
            # What failed in another queue may fit here: this queue's
            # reservations, not that one's, are the ones it may move.
            self._failed_shapes = set()
            self._failed_nodes = []

    # -- PassContext ---------------------------------------------------------

    def jobs(self) -> Iterator[Job]:
        e = self.e
        depth = self.depth
        queue = self.queue
        assert queue is not None
        n = 0
        i = queue.head
        prev = None
        q = queue.jobs
        while i < len(q):
            job = q[i]
            i += 1
            if job.state is not JobState.PENDING or e._jobs.get(job.id) is not job:
                continue
            n += 1
            if depth and n > depth:
                return
            if prev is not None and self.passed_over is None and prev.state is JobState.PENDING:
                self.passed_over = prev  # the policy is done with it, and it waits
            prev = self.current = job
            yield job

    # A placement handed to policies is an opaque (ResourceSet, flat bits) pair.

    def free(self) -> int:
        """What is free now, flat, minus what this pass started."""
        if self._free is None:
            self._free = self.e.planner.free_bits()
        return self._free

    def nothing_free(self) -> bool:
        codec = self.e.planner.codec
        return not (self.free() & (codec.leaf_mask or codec.ranked_mask))

    def _match(self, job: Job, avail: int) -> tuple[Any, int] | None:
        self.e.stats["matches"] += 1
        return self.e.planner.match_bits(job.request, avail, self.e.options.policy)

    def fits_now(self, job: Job) -> tuple[Any, int] | None:
        # Running jobs hold what is not free; only reservations can take more.
        planner = self.e.planner
        avail = self.free()
        if planner.nreserved:
            avail &= ~planner.reserved_during(self.now, self.now + job.duration)
        return self._match(job, avail)

    def fits_now_ignoring(self, job: Job, reserved: Job) -> tuple[Any, int] | None:
        planner = self.e.planner
        avail = self.free()
        if planner.nreserved > 1:
            avail &= ~planner.reserved_during(self.now, self.now + job.duration, exclude=reserved.id)
        return self._match(job, avail)

    def try_move(self, job: Job, blocker: tuple[Any, int], blocker_end: float) -> bool:
        planner = self.e.planner
        span = planner.remove(job.id)
        if span is None:
            return True
        planner.reserve(self._SENTINEL, blocker[0], self.now, blocker_end, blocker[1])
        try:
            found = self._match(job, planner.available_bits(span.start, span.end))
        finally:
            planner.remove(self._SENTINEL)
        if found is None:
            planner.reserve(job.id, span.resources, span.start, span.end, span.bits)
            return False
        planner.reserve(job.id, found[0], span.start, span.end, found[1])
        return True

    def start(self, job: Job, placement: tuple[Any, int]) -> None:
        if job.id in self.e.planner:
            self.e.planner.remove(job.id)
        job.estimate = None
        self.e._start(self, job, placement)
        if self._free is not None and job.state is JobState.RUNNING:
            self._free &= ~placement[1]

    def earliest(
        self, job: Job, before: float = math.inf, not_before: float = -math.inf
    ) -> tuple[float, tuple[Any, int]] | None:
        """The planner's earliest placement, from ``not_before`` on when given;
        a search that is proven to find nothing before ``before`` is not made.

        A whole-node job's search leaves a proof that it fits nowhere before
        its reservation (:class:`~fluxsched_py.planner.NoEarlier`).
        Conservative backfilling asks every reserved job for an earlier
        place on every pass after a job ends early, and most such searches
        fail: when the proof still holds for the plan as it is now (what was
        freed since cannot make ``n`` whole nodes), the answer is None,
        exactly what the search would return."""
        e = self.e
        e.stats["matches"] += 1
        planner = e.planner
        policy = e.options.policy
        self._proof = None
        if not_before > self.now:  # no proofs for a search that does not start now
            found = planner.earliest_bits(job.request, self.now, job.duration, policy, before, not_before=not_before)
            return None if found is None else (found[0], (found[1], found[2]))
        n = planner.whole_node_request(job.request, policy) if job.nodes else 0
        trace = None
        if n:
            proof = job.proof
            if proof is not None and proof.t == before and proof.n == n:
                proof = planner.prove_none_before(proof, job.id, job.duration, self.now)
                if proof is not None:
                    planner.proofs += 1
                    self._proof = (job, proof)
                    return None
            trace = NoEarlier(n, self.now)
        found = planner.earliest_bits(job.request, self.now, job.duration, policy, before, trace)
        if trace is not None:
            trace.t = before if found is None else found[0]
            self._proof = (job, trace)
        return None if found is None else (found[0], (found[1], found[2]))

    def keeps_reservation(self, job: Job) -> bool:
        """Re-plan ``job``'s reservation in the cheap case: when taking it out,
        finding its place still free, searching for an earlier one and
        putting it back is provably what would happen (see
        :meth:`Planner.keep_if_none_before`), do only the bookkeeping."""
        proof = job.proof
        if proof is None:
            return False
        planner = self.e.planner
        kept = planner.keep_if_none_before(job.id, proof, job.duration, self.now)
        if kept is None:  # the proof no longer holds: search
            job.proof = None
            return False
        if not kept:
            return False
        self.e.stats["matches"] += 1  # the search it stands for
        planner.proofs += 1
        return True

    def reserve(self, job: Job, t: float, placement: tuple[Any, int]) -> None:
        planner = self.e.planner
        planner.reserve(job.id, placement[0], t, t + job.duration, placement[1])
        job.estimate = t
        if job.first_estimate is None:
            job.first_estimate = t
        proof = self._proof
        self._proof = None
        if proof is not None and proof[0] is job and proof[1].t == t:
            proof[1].seq = planner.certify()
            job.proof = proof[1]
        else:
            job.proof = None

    def still_free(self, job: Job, t: float, placement: tuple[Any, int]) -> bool:
        bits = placement[1]
        return self.e.planner.available_bits(t, t + job.duration) & bits == bits

    def clear_reservations(self) -> None:
        """Drop the current queue's reservations (another queue's stay)."""
        planner = self.e.planner
        jobs = self.e._jobs
        queue = self.queue
        for span in planner.reserved():
            job = jobs.get(span.jobid)
            if self.multi and (job is None or job.queue is not queue):
                continue
            planner.remove(span.jobid)
            if job is not None:
                job.estimate = None

    # Placements are (ResourceSet or None when not decoded yet, bits): see Planner.resolve.

    def reservation(self, job: Job) -> tuple[float, tuple[Any, int]] | None:
        span = self.e.planner.span(job.id)
        return None if span is None or span.running else (span.start, (span._rs, span.bits))

    def unreserve(self, job: Job) -> tuple[float, tuple[Any, int]] | None:
        span = self.e.planner.remove(job.id)
        job.estimate = None
        return None if span is None else (span.start, (span._rs, span.bits))

    def hopeless(self, job: Job) -> bool:
        """True when a job at least as big and as long already failed to
        start now in this pass (nothing a pass does frees resources)."""
        if job.shape in self._failed_shapes:
            return True
        n = job.nodes
        if n:
            d = job.duration
            for fn, fd in self._failed_nodes:
                if fn <= n and fd <= d:
                    return True
        return False

    def failed(self, job: Job) -> None:
        """Record that ``job`` could not start now (see :meth:`hopeless`)."""
        self._failed_shapes.add(job.shape)
        n = job.nodes
        if n:
            self._failed_nodes.append((n, job.duration))

    def hold(self, job: Job, why: str) -> None:
        self.held[job.id] = why
        if why in ("backfill", "depth"):
            self.held_ok.add(job.id)

    # -- annotations ---------------------------------------------------------

    def constraint_blocks(self, job: Job) -> bool:
        """True when ``job`` would fit now but for its constraint."""
        key = job.shape
        if key in self._constraint_cache:
            return self._constraint_cache[key]
        e = self.e
        g = e.graph
        free = g.free()
        blocked = False
        if free:
            unconstrained = dataclasses.replace(job.request, constraints=None)
            with_c = e._match(g, job.request, policy=e.options.policy, available=free)
            if with_c is None:
                blocked = e._match(g, unconstrained, policy=e.options.policy, available=free) is not None
        if not blocked and job.request.constraints is not None:
            # Or: the constraint leaves too few resources ever to run.
            unconstrained = dataclasses.replace(job.request, constraints=None)
            blocked = e._feasible(job.request) is not None and e._feasible(unconstrained) is None
        self._constraint_cache[key] = blocked
        return blocked
