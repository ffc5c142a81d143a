"""The discrete-event loop: a workload through the engine in simulated time.

Nothing here decides anything.  At each event time the loop hands the engine
what happened (completions first, as ``sched.free``; then submissions, as
``sched.alloc``), asks for one scheduling pass at that time, and turns the
engine's answers into events: a SUCCESS starts the job, which then ends after
its run time or is killed at its walltime, whichever comes first.  That is the
same sequence of calls a Flux driver makes, so the decisions are the ones the
scheduler would make in production on the same inputs.
"""

from __future__ import annotations

import dataclasses
import gc
import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine, EngineOptions, ResponseType
from ..ids import IdSet
from .workload import Workload, WorkloadJob

__all__ = ["JobRecord", "ReplayResult", "replay"]

COMPLETED = "COMPLETED_SUCCESSFULLY"
KILLED = "COMPLETED_WALLTIME_REACHED"
PREEMPTED = "COMPLETED_KILLED"  # Batsim's state for a job it was told to kill
REJECTED = "REJECTED"
NOT_STARTED = "NOT_STARTED"


@dataclass(slots=True)
class JobRecord:
    """What happened to one job."""

    job: WorkloadJob
    start: float | None = None
    finish: float | None = None
    #: the ranks it ran on, as (first, last) runs (:attr:`ranks`): an IdSet
    #: is a bit mask as wide as its highest rank, 25 KB per job of a
    #: 200,000-node machine if kept for every job
    runs: tuple[tuple[int, int], ...] | None = None
    state: str = NOT_STARTED
    first_estimate: float | None = None
    note: str | None = None
    #: When the engine denied the job (state ``REJECTED``): its submit time, or a later pass's.
    rejected_at: float | None = None
    #: Best-effort jobs: times preempted, and node-seconds of work lost to it.
    preemptions: int = 0
    lost: float = 0.0
    #: Notices (``preempt-grace``) it got, and node-seconds of its work kept
    #: by checkpoints and not run again (a requeued checkpointing job).
    notices: int = 0
    recovered: float = 0.0
    #: Each preempted run: (start, end, nodes), for the busy time of the machine.
    preempted_runs: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def ranks(self) -> IdSet | None:
        """The ranks it ran on (None: it never started)."""
        if self.runs is None:
            return None
        mask = 0
        for lo, hi in self.runs:
            mask |= ((1 << (hi - lo + 1)) - 1) << lo
        return IdSet.from_mask(mask)

    @ranks.setter
    def ranks(self, value: IdSet | None) -> None:
        self.runs = None if value is None else tuple(value.runs())


@dataclass(slots=True)
class ReplayResult:
    workload: Workload
    options: EngineOptions
    nb_nodes: int
    records: list[JobRecord]
    elapsed: float
    stats: dict = field(default_factory=dict)
    #: (time, ranks, reason) of each node drained for the sink effect (marked down: no job placed there after)
    drains: list[tuple[float, IdSet, str]] = field(default_factory=list)

    @property
    def policy(self) -> str:
        return self.options.queue_policy

    def starts(self) -> dict[int, float | None]:
        return {r.job.id: r.start for r in self.records}


def replay(
    workload: Workload,
    graph: Any,
    options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    check: Callable[[Engine], None] | None = None,
    engine_factory: Callable[..., Engine] = Engine,
    resubmit_preempted: bool = False,
) -> ReplayResult:
    """Replay ``workload`` on ``graph`` (which it allocates from) and return the records.

    ``progress(done, total)`` is called as jobs finish; ``check(engine)`` after
    every pass (tests use it for invariants).  A preempted best-effort job
    is killed at once (state ``COMPLETED_KILLED``); with
    ``resubmit_preempted`` it is submitted again at that time, as CiGri
    does, and its record keeps its last run.

    With ``preempt-grace``, a victim's notice comes first: a job that
    checkpoints on it (``attributes.user.checkpoint = "signal"``, or
    ``checkpoint-campaigns``) keeps the work done until then, and a job that
    ends before its preemption completed.  A preempted checkpointing job is
    requeued at once with its remaining work (``attributes.user.requeued-from``
    names it); its lost work is what ran after its last checkpoint.
    """
    t_wall = time.perf_counter()
    # no R and no resource_summary text: the replay sends no message (issue 15: 4 % of its CPU)
    engine = engine_factory(graph, options, build_R=False, summaries=False, time_format=lambda t: f"t={t:.0f}s")
    jobs = sorted(workload.jobs, key=lambda j: (j.submit, j.id))
    records = {j.id: JobRecord(j) for j in jobs}
    if len(records) != len(jobs):
        raise ValueError("workload job ids must be unique")
    total = len(jobs)
    # The workload, the graph and the records live as long as the replay and
    # are never garbage: out of the collector's sight, its full collections
    # walk only what the replay makes (issue 15: 5 % of the CPU time).
    gc.freeze()
    try:
        return _run(workload, graph, engine, jobs, records, total, progress, check, resubmit_preempted, t_wall)
    finally:
        gc.unfreeze()


def _run(
    workload: Workload,
    graph: Any,
    engine: Engine,
    jobs: list[WorkloadJob],
    records: dict[int, JobRecord],
    total: int,
    progress: Callable[[int, int], None] | None,
    check: Callable[[Engine], None] | None,
    resubmit_preempted: bool,
    t_wall: float,
) -> ReplayResult:
    ends: list[tuple[float, int, int]] = []  # (finish, job id, run number)
    runs: dict[int, int] = {}  # job id -> its current run (stale ends are skipped)
    #: checkpointing jobs: run time done and kept, and when the current run last checkpointed
    kept: dict[int, float] = {}
    checkpointed: dict[int, float] = {}
    i = 0
    done = 0
    reported = 0
    drains: list[tuple[float, IdSet, str]] = []
    wake = engine.hooks.wakeup  # EASY++ corrections, ends of protected windows
    while i < total or ends:
        t = min(jobs[i].submit if i < total else math.inf, ends[0][0] if ends else math.inf, wake())
        while ends and ends[0][0] <= t:
            _, jobid, run = heapq.heappop(ends)
            if runs.get(jobid) != run:
                continue  # preempted before it ended
            engine.free(jobid, final=True)
            done += 1
        while i < total and jobs[i].submit <= t:
            j = jobs[i]
            i += 1
            for r in engine.alloc(j.id, 0, max(j.user, 0), j.submit, j.request):
                if r.type is ResponseType.DENY:
                    rec = records[r.id]
                    rec.state, rec.note, rec.rejected_at = REJECTED, r.note, t
                    done += 1
        result = engine.schedule(t)
        while result.preempt:  # kill at once, then pass again: the regular jobs start now
            done += _answer(engine, result.responses, records, ends, runs, t, kept, checkpointed)
            _notices(engine, result.notice, records, kept, checkpointed, t)  # after the starts they follow
            for a in result.preempt:
                rec = records[a.id]
                rec.state, rec.finish, rec.note = PREEMPTED, t, a.note
                rec.preemptions += 1
                begun = t if rec.start is None else rec.start
                rec.lost += (t - checkpointed.pop(a.id, begun)) * len(rec.ranks or ())
                rec.preempted_runs.append((begun, t, len(rec.ranks or ())))
                runs[a.id] = runs.get(a.id, 0) + 1  # its end event is stale, even once it runs again
                engine.free(a.id, final=True)
                j = rec.job
                if a.requeue:  # with its remaining work; it continues the job it was
                    engine.alloc(j.id, 0, max(j.user, 0), t, requeued(j.request, j.id))
                elif resubmit_preempted:
                    kept.pop(a.id, None)
                    engine.alloc(j.id, 0, max(j.user, 0), t, j.request)
                else:
                    done += 1
            result = engine.schedule(t)
        done += _answer(engine, result.responses, records, ends, runs, t, kept, checkpointed)
        _notices(engine, result.notice, records, kept, checkpointed, t)
        for d in engine.hooks.drains():
            engine.resource_update(down=d.ranks)
            drains.append((t, d.ranks, d.reason))
        if check is not None:
            check(engine)
        if progress is not None and done != reported and (done - reported >= 64 or done == total):
            progress(done, total)
            reported = done
        if i >= total and not ends and engine.pending_count and wake() is None:
            # Nothing left to happen: the rest can never start (resources down).
            break
    nb = len(graph.ranks) if hasattr(graph, "ranks") else 0
    return ReplayResult(
        workload,
        engine.options,
        nb,
        [records[j.id] for j in jobs],
        time.perf_counter() - t_wall,
        dict(engine.stats),
        drains,
    )


def requeued(request: Any, first: int) -> Any:
    """``request`` of a checkpointing job, requeued: ``attributes.user.requeued-from`` is ``first``."""
    attrs = dict(request.attributes or {})
    attrs["user"] = {**(attrs.get("user") or {}), "requeued-from": first}
    return dataclasses.replace(request, attributes=attrs)


def _notices(
    engine: Engine,
    notices: list[Any],
    records: dict[int, JobRecord],
    kept: dict[int, float],
    checkpointed: dict[int, float],
    t: float,
) -> None:
    """A job that checkpoints on its notice keeps the work done so far."""
    for n in notices:
        rec = records[n.id]
        rec.notices += 1
        job = engine.job(n.id)
        if job is not None and engine.besteffort.checkpoints(job):
            since = checkpointed.get(n.id, rec.start if rec.start is not None else t)
            kept[n.id] = kept.get(n.id, 0.0) + (t - since)
            checkpointed[n.id] = t


def _answer(
    engine: Engine,
    responses: list[Any],
    records: dict[int, JobRecord],
    ends: list[tuple[float, int, int]],
    runs: dict[int, int],
    t: float,
    kept: dict[int, float] | None = None,
    checkpointed: dict[int, float] | None = None,
) -> int:
    """Record one pass's answers; returns how many jobs they finished (denied)."""
    done = 0
    for r in responses:
        rec = records[r.id]
        if r.type is ResponseType.SUCCESS:
            j = rec.job
            rec.start = t
            ran = kept.get(r.id, 0.0) if kept else 0.0  # kept by checkpoints
            if checkpointed is not None:
                checkpointed.pop(r.id, None)
            rec.recovered = ran * len(r.resources.ranks)
            run = min(j.runtime - ran, j.walltime)
            rec.finish = t + run
            rec.state = KILLED if j.runtime - ran > j.walltime else COMPLETED
            rec.ranks = r.resources.ranks
            runs[r.id] = runs.get(r.id, 0) + 1
            heapq.heappush(ends, (rec.finish, r.id, runs[r.id]))
        elif r.type is ResponseType.ANNOTATE:
            est = (r.annotations or {}).get("sched", {}).get("t_estimate")
            if est is not None and rec.first_estimate is None:
                rec.first_estimate = est
        elif r.type is ResponseType.DENY:
            rec.state, rec.note, rec.rejected_at = REJECTED, r.note, t
            done += 1
    return done
