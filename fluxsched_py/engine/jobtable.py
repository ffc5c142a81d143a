"""The job table: every job the engine knows, and the one door that changes them.

:class:`JobTable` owns the jobs by id, each job's state, the pending queues
and their counts, the shape ids of pending jobs, and which pending jobs hold
annotations the end of a pass manages.  :meth:`JobTable.apply` is the only
code that changes any of them: it looks the event up in
:data:`~fluxsched_py.engine.states.TRANSITIONS` (state, event -> new state,
effects), tells the observers (the optional features, :mod:`.hooks`), and
applies the effects.  What is derived is never stored: the number of
pending jobs is the sum of the queues' counts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ..planner import Planner, Span
from ..policy import QueuePolicy
from ..resource import ResourceGraph, ResourceSet
from .jobs import Job, JobQueue
from .power import is_hold
from .sizes import PendingSizes, node_bound
from .states import TRANSITIONS, JobState, Response, ResponseType, next_state

__all__ = ["JobObserver", "JobTable"]

#: The effects :meth:`JobTable.apply` knows, in the order it applies them.
EFFECTS = ("admit", "enqueue", "unqueue", "run", "shrink", "extend", "end", "forget")

#: :data:`~.states.TRANSITIONS` with each effect as a flag, in :data:`EFFECTS` order.
_FLAGS: dict[tuple[JobState | None, str], tuple[Any, ...]] = {
    key: (new, *(e in effects for e in EFFECTS)) for key, (new, effects) in TRANSITIONS.items()
}
assert all(list(effects) == [e for e in EFFECTS if e in effects] for _, effects in TRANSITIONS.values()), (
    "TRANSITIONS lists effects in EFFECTS order"
)


class JobObserver(Protocol):
    """What watches job events (the optional features, :mod:`.hooks`)."""

    def job_event(self, job: Job, event: str, old: JobState | None, now: float | None, preempted: bool) -> None:
        """``event`` (a :data:`~.states.TRANSITIONS` event) is applied to
        ``job``, which was in state ``old`` (None: new); called before the
        table's effects.  ``now`` is given for ``start`` and ``preempt``;
        ``preempted`` is True for the final free of a preempted job."""


#: Stale entries past a queue's first pending job (jobs that started ahead
#: of jobs that wait: backfilled) kept before its list is rebuilt without
#: them: every pass steps over each one, a rebuild costs one step per entry.
_STALE_MAX = 16


class JobTable:
    """See the module docstring.  ``policy_for(name)`` is the policy of a new
    queue; ``scheduled_as(name)`` the queue a job of queue ``name`` waits in
    (a virtual queue's parent, RFC 33; default: ``name`` itself)."""

    def __init__(
        self,
        graph: ResourceGraph,
        policy_for: Callable[[str | None], QueuePolicy],
        scheduled_as: Callable[[str | None], str | None] = lambda name: name,
    ) -> None:
        #: The graph whose allocations, and the planner whose spans, only this table changes.
        self.graph = graph
        self.planner: Planner
        self.jobs: dict[int, Job] = {}
        #: Queues of regular jobs that have (or had, until the next pass) pending jobs.
        self.queues: dict[str | None, JobQueue] = {}
        #: Pending best-effort jobs, in order (:mod:`.besteffort`).
        self.besteffort = JobQueue(None, None)  # type: ignore[arg-type]
        #: Pending regular jobs holding annotations the end of a pass manages.
        self.annotated: set[int] = set()
        self.observers: list[JobObserver] = []
        self._policy_for = policy_for
        self._scheduled_as = scheduled_as
        #: (request key, planned duration) -> [shape id, pending jobs of that
        #: shape]: only shapes of pending jobs are kept; ids are never reused.
        self._shapes: dict[tuple[Any, float], list[int]] = {}
        self._next_shape = 0
        #: The node bounds of the pending jobs, kept with their shapes (see :mod:`.sizes`).
        self.pending_sizes = PendingSizes()
        #: How many times each event was applied, and (``refuse``) allocs denied before admission.
        self.tally: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def npending(self) -> int:
        """Pending jobs (best-effort ones included): the queues' counts."""
        n = self.besteffort.npending
        for q in self.queues.values():
            n += q.npending
        return n

    def live(self, job: Job) -> bool:
        """``job`` is pending, and is the table's job of that id (a queue
        keeps stale entries: jobs that started or left)."""
        return job.state is JobState.PENDING and self.jobs.get(job.id) is job

    def queue_for(self, job: Job) -> JobQueue:
        """The queue a new job waits in (made when it is the first)."""
        if job.preemptible_after is not None:
            return self.besteffort
        name = self._scheduled_as(job.request.queue or None)
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = JobQueue(name, self._policy_for(name))
        return queue

    # -- the door --------------------------------------------------------------

    def apply(
        self,
        job: Job,
        event: str,
        *,
        queue: JobQueue | None = None,
        now: float | None = None,
        resources: ResourceSet | None = None,
        expiration: float = math.inf,
        released: ResourceSet | None = None,
        preempted: bool = False,
    ) -> None:
        """Apply ``event`` to ``job``: see :data:`~.states.TRANSITIONS`.

        ``queue`` is the queue an ``alloc`` joins (:meth:`queue_for`);
        ``resources``, ``now`` and ``expiration`` what a job that runs
        holds, from when, and its kill time (``expiration`` also a running
        job's new one); ``released`` what a partial free gave back.  Raises EngineError for an
        event the table does not allow."""
        jobs = self.jobs
        old = job.state if job.id in jobs else None
        flags = _FLAGS.get((old, event))
        if flags is None:
            next_state(old, event, job.id)  # raises EngineError
        new, admit, enqueue, unqueue, run, shrink, extend, end, forget = flags  # type: ignore[misc]
        self.tally[event] += 1
        for observer in self.observers:
            observer.job_event(job, event, old, now, preempted)
        if new is not None:
            job.state = new
        if admit:
            jobs[job.id] = job
        if enqueue:
            assert queue is not None
            job.shape_id = self._take_shape(job)
            job.queue = queue
            queue.npending += 1
            if not job.whole_nodes:
                queue.npartial += 1
            q = queue.jobs
            if q and queue.sorted and job.sortkey < q[-1].sortkey:
                queue.sorted = False
            q.append(job)
        if unqueue:
            self._drop_shape(job)
            job.queue.npending -= 1
            if not run:  # a job starts only when a pass hands it out; any other leaves unseen
                job.queue.reshaped += 1
            if not job.whole_nodes:
                job.queue.npartial -= 1
        if run:
            job.resources = resources
            job.t_start = now
            job.expiration = expiration
        if shrink and released:
            job.resources = job.resources - released
        if extend:
            job.expiration = expiration
        if end:
            reply = job.reply
            if not reply.done:  # a SUCCESS ended it already
                reply.end()
            self.annotated.discard(job.id)
        if forget:
            del jobs[job.id]

    def refuse(self) -> None:
        """An alloc denied before it was admitted (a bad jobspec, a request
        that can never run): no job of the table, but a denial."""
        self.tally["refuse"] += 1

    def outcomes(self) -> dict[str, int]:
        """Jobs started (a revoked start never was one), denied (before or
        after admission, a revoked start included) and cancelled."""
        t = self.tally
        return {
            "started": t["start"] - t["revoke"],
            "denied": t["refuse"] + t["deny"] + t["revoke"],
            "canceled": t["cancel"],
        }

    def reprioritize(self, job: Job, priority: int) -> bool:
        """A pending job's new priority (``prioritize``); True when it changed
        (its queue must be sorted again)."""
        self.apply(job, "prioritize")
        if job.priority == priority:
            return False
        job.reprioritize(priority)
        job.queue.sorted = False
        return True

    def annotate(self, job: Job, want: dict[str, Any], managed: bool = True) -> Response | None:
        """The ANNOTATE response that takes ``job``'s annotations to ``want``
        (None: nothing changes, or its reply has ended).  ``managed``: the
        end of each pass keeps them (regular pending jobs); else they are the
        caller's (best-effort jobs, a job waiting for its victims)."""
        diff = job.reply.annotate(want)
        if not managed:
            self.annotated.discard(job.id)
        elif diff is not None:
            if want:
                self.annotated.add(job.id)
            else:
                self.annotated.discard(job.id)
        return None if diff is None else Response(job.id, ResponseType.ANNOTATE, {"sched": diff}, reply=job.reply)

    # -- spans and allocations ---------------------------------------------------
    #
    # The only code that changes the graph's allocations and the planner's
    # spans (``t/test_boundaries.py`` checks it): each method below is one
    # such change.  A pending job's estimate is its reservation's start, set
    # and cleared here with the span, never by hand elsewhere.

    def use_planner(self, planner: Planner) -> None:
        """Plan from now on in ``planner`` (a new one, empty but for what
        it encodes itself: the lent resources, the windows)."""
        self.planner = planner

    def rebuild(self, planner: Planner) -> None:
        """Move to ``planner``, a new one: the spans of the running jobs and
        of the jobs waiting for their victims go with them; pending jobs'
        reservations do not (the next pass plans them again)."""
        old = self.planner
        for span in old.spans():
            job = self.jobs.get(span.jobid)
            if span.running and is_hold(span.jobid):  # a power hold (engine/power.py)
                planner.add_running(span.jobid, span.resources, span.start, span.end)
                continue
            if not span.running or job is None:
                continue
            if job.state is JobState.RUNNING and job.resources is not None:
                planner.add_running(span.jobid, job.resources, span.start, span.end)
            elif job.state is JobState.STARTING:  # waiting for its victims: what is held for it
                planner.add_running(span.jobid, span.resources, span.start, span.end)
        for job in self.jobs.values():
            if job.state is JobState.PENDING:
                job.estimate = None
        if old.now > -math.inf:
            planner.set_now(old.now)
        self.planner = planner

    def allocate(self, jobid: int, rs: ResourceSet, *, running: bool = False) -> None:
        """``jobid`` holds ``rs`` in the graph (``running``: it keeps what
        it holds on down ranks, as a job learned at hello)."""
        self.graph.allocate(jobid, rs, running=running)

    def release(self, jobid: int, rs: ResourceSet | None = None) -> ResourceSet:
        """``jobid`` gives back ``rs`` (all it holds when None); what was released."""
        return self.graph.release(jobid, rs)

    def plan_run(
        self, jobid: int, rs: ResourceSet, start: float, end: float = math.inf, bits: int | None = None
    ) -> None:
        """The planner holds ``rs`` for ``jobid``, running from ``start`` to ``end``."""
        self.planner.add_running(jobid, rs, start, end, bits)

    def plan_reservation(self, jobid: int, rs: ResourceSet, start: float, end: float, bits: int | None) -> None:
        """The planner holds ``rs`` for pending ``jobid`` from ``start`` to
        ``end``: its estimate is ``start``."""
        self.planner.reserve(jobid, rs, start, end, bits)
        job = self.jobs.get(jobid)
        if job is not None:
            job.estimate = start

    def unplan(self, jobid: int) -> Span | None:
        """``jobid``'s span leaves the planner (the span, or None if it had
        none); a pending job has no estimate any more."""
        span = self.planner.remove(jobid)
        job = self.jobs.get(jobid)
        if job is not None and job.state is JobState.PENDING:
            job.estimate = None
        return span

    def hold_windows(self, windows: list[tuple[str, int, float, float]]) -> None:
        """The planner holds exactly these advance-reservation windows
        (name, the bits of their ranks, start, end), and no other."""
        planner = self.planner
        keep = {name for name, _, _, _ in windows}
        for name in list(planner.blocks()):
            if name not in keep:
                planner.unblock(name)
        for name, bits, start, end in windows:
            planner.block(name, bits, start, end)

    def set_plan_end(self, jobid: int, end: float) -> list[int]:
        """``jobid``'s span ends at ``end``; the pending jobs whose
        reservations were in the way lose them (their ids)."""
        dropped = []
        for other in self.planner.set_end(jobid, end):
            job = self.jobs.get(other)
            if job is not None:
                job.estimate = None
                dropped.append(other)
        return dropped

    # -- queues ------------------------------------------------------------------

    def drop_idle_queues(self) -> list[JobQueue]:
        """Forget the regular queues with no pending job (they hold no
        reservation either); the others, in no particular order."""
        for name, queue in list(self.queues.items()):
            if not queue.npending:
                del self.queues[name]
                queue.jobs.clear()  # its stale jobs point back at it: no cycle left for the collector
        return list(self.queues.values())

    def sort_queue(self, queue: JobQueue) -> None:
        """Put ``queue``'s live jobs in order from its head, dropping stale ones."""
        q = queue.jobs
        live = self.live
        if not queue.sorted:
            queue.jobs = sorted((j for j in q[queue.head :] if live(j)), key=lambda j: j.sortkey)
            queue.reshaped += 1
            queue.sorted = True
            queue.head = 0
            return
        # Jobs start mostly from the front: skip the stale prefix for good.
        h, n = queue.head, len(q)
        while h < n and not live(q[h]):
            h += 1
        # Under run limits the stretches they held index the list (a rebuild
        # drops them) and step over stale entries whole: rebuilt more rarely.
        most = _STALE_MAX if queue.held_runs is None else queue.npending + 64
        if n - h - queue.npending > most:
            queue.jobs = [j for j in q[h:] if live(j)]
            queue.reshaped += 1
            queue.head = 0
            return
        if h > 4096 and h > n // 2:
            del q[:h]
            h = 0
            queue.reshaped += 1
        queue.head = h

    def pending_in(self, queue: JobQueue) -> Iterator[Job]:
        """``queue``'s live jobs from its head, in its order."""
        live = self.live
        q = queue.jobs
        for i in range(queue.head, len(q)):
            job = q[i]
            if live(job):
                yield job

    # -- shapes ------------------------------------------------------------------

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
