"""The jobs the engine knows, and the queues pending jobs wait in."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..policy import QueuePolicy, order_key
from .reply import Reply
from .states import JobState

if TYPE_CHECKING:
    from ..jobspec import Request

__all__ = ["Job", "JobQueue", "depth_limits", "run_queues"]


class Job:
    """A job the engine knows (pending or running)."""

    __slots__ = (
        "id",
        "priority",
        "userid",
        "t_submit",
        "request",
        "duration",
        "walltime",
        "shape_id",
        "whole_nodes",
        "state",
        "sortkey",
        "resources",
        "t_start",
        "expiration",
        "reply",
        "estimate",
        "first_estimate",
        "queue",
        "preemptible_after",
    )

    def __init__(self, jobid: int, priority: int, userid: int, t_submit: float, request: Request) -> None:
        self.id = jobid
        self.priority = priority
        self.userid = userid
        self.t_submit = t_submit
        self.request = request
        d = float(getattr(request, "duration", 0.0) or 0.0) if request is not None else 0.0
        #: Walltime in seconds, ``math.inf`` when unlimited: the kill time.
        self.walltime = d if d > 0 else math.inf
        #: What the planner plans with: the walltime, or shorter with
        #: ``predict-runtimes`` (:mod:`fluxsched_py.engine.predict`).
        self.duration = self.walltime
        #: A small int the engine gives each (request shape, walltime) of its
        #: pending jobs: equal ids are interchangeable for matching.
        self.shape_id = -1
        #: N when the request is exactly N whole nodes (``node[N] exclusive >
        #: slot[1] > core[1]``, no constraint), else 0: see Request.whole_nodes.
        self.whole_nodes = request.whole_nodes if request is not None else 0
        self.state = JobState.PENDING
        self.sortkey = order_key(priority, t_submit, jobid)
        self.resources: Any = None
        self.t_start: float | None = None
        self.expiration: float = math.inf
        #: The reply its alloc request is owed (annotations sent, and its end).
        self.reply = Reply()
        self.estimate: float | None = None
        self.first_estimate: float | None = None
        #: The queue it waits in (set by the job table when it is queued).
        self.queue: JobQueue | None = None
        #: Seconds after its start from which the job may be preempted; None
        #: for a regular job (:mod:`fluxsched_py.engine.besteffort`).
        self.preemptible_after: float | None = getattr(request, "preemptible_after", None)

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.state.value})"

    def reprioritize(self, priority: int) -> None:
        """A new priority, and with it the job's place in its queue's order."""
        self.priority = int(priority)
        self.sortkey = order_key(self.priority, self.t_submit, self.id)


class JobQueue:
    """One queue's pending jobs in order (priority, t_submit, id), and its policy.

    ``name`` is the job's ``attributes.system.queue``, None for the anonymous
    queue.  ``jobs`` keeps stale entries (jobs that started or left), skipped
    as the queue is walked; entries before ``head`` are all stale.
    """

    __slots__ = ("name", "policy", "jobs", "head", "sorted", "npending", "npartial", "settled", "reshaped", "held_runs")

    def __init__(self, name: str | None, policy: QueuePolicy) -> None:
        self.name = name
        self.policy = policy
        self.jobs: list[Job] = []
        self.head = 0
        self.sorted = True
        self.npending = 0
        #: Of them, those that are not N whole nodes (``Job.whole_nodes`` 0).
        self.npartial = 0
        #: What the queue's last complete pass ended with, for the next one
        #: (:meth:`~.passctx.Pass.settle`): None when nothing is known.
        self.settled: Any = None
        #: Changes whenever a job leaves other than by starting, or ``jobs``
        #: is rebuilt or shifted (the job table counts it): what is known of
        #: stretches of ``jobs`` by index holds only while it stays the same.
        self.reshaped = 0
        #: (``reshaped`` then, the stretches run limits held at the last
        #: pass, the stretches of stale entries): see
        #: :meth:`~.passctx.Pass.jobs`; None when nothing is known.
        self.held_runs: Any = None

    def __repr__(self) -> str:
        return f"JobQueue({self.name!r}, {self.policy.name}, {self.npending} pending)"


def depth_limits(queues: list[JobQueue], depth: int | None, live: Callable[[Job], bool]) -> list[int | None]:
    """How many jobs of each queue a pass considers: with ``queue-depth=N``,
    the first N pending jobs in (priority, t_submit, id) order over all
    queues (the same jobs as with one queue), each queue taking its own."""
    if not depth or len(queues) < 2:
        return [depth] * len(queues)

    def keys(i: int, q: JobQueue) -> Iterator[tuple[tuple[int, float, int], int]]:
        return ((j.sortkey, i) for j in itertools.islice(q.jobs, q.head, None) if live(j))

    counts = [0] * len(queues)
    for _, i in itertools.islice(heapq.merge(*(keys(i, q) for i, q in enumerate(queues))), depth):
        counts[i] += 1
    return counts  # type: ignore[return-value]


def run_queues(p: Any, queues: list[JobQueue], limits: list[int | None]) -> Iterator[None]:
    """One pass over several queues: each queue's policy over its own jobs, in turn."""
    for queue, limit in zip(queues, limits, strict=True):
        if limit == 0:
            continue  # none of its jobs is within queue-depth
        p.enter(queue, limit)
        yield from queue.policy.run(p)
