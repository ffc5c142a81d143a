"""The jobs the engine knows, and the queues pending jobs wait in."""

from __future__ import annotations

import math
from typing import Any

from ..planner import NoEarlier
from ..policy import QueuePolicy, order_key
from .states import JobState

__all__ = ["Job", "JobQueue"]


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
        self.sent: dict[str, Any] = {}  # sched.* annotations the job-manager holds
        self.estimate: float | None = None
        self.first_estimate: float | None = None
        #: That it cannot start before its reservation (:mod:`fluxsched_py.planner.noearlier`).
        self.proof: NoEarlier | None = None
        #: The queue it waits in (set by the engine while it is pending).
        self.queue: JobQueue | None = None

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.state.value})"


class JobQueue:
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
        return f"JobQueue({self.name!r}, {self.policy.name}, {self.npending} pending)"
