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
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine, EngineOptions, JobState, ResponseType
from ..engine.campaigns import campaign_of
from ..engine.duplicates import CancelCopy, Duplicate
from ..engine.forecast import FORECAST_LIMIT
from ..engine.forecast import forecast as plan_forecast
from ..engine.power import PowerOff, PowerOn
from ..engine.reservations import GroupResolver, declare_entries
from ..engine.runlimits import RunLimits
from ..ids import IdSet, user_id
from ..power import PowerModel
from ..resource import ResourceGraph
from .energy import Energy, PowerLog, account, node_states, power_series
from .events import ExternalEvent, MachineEvent
from .records import CANCELLED, COMPLETED, KILLED, NOT_STARTED, PREEMPTED, REJECTED, JobRecord, Records
from .workload import Workload, WorkloadJob

__all__ = ["JobRecord", "ReplayResult", "replay"]

#: ``duplicate_runtime`` models: a copy runs its original's run time, or one
#: drawn (seeded by the copy's id) from the run times of its campaign's jobs.
DUPLICATE_RUNTIMES = ("same", "campaign")


@dataclass(slots=True)
class ReplayResult:
    workload: Workload
    options: EngineOptions
    nb_nodes: int
    records: Sequence[JobRecord]
    elapsed: float
    stats: dict = field(default_factory=dict)
    #: (time, ranks, reason) of each node drained for the sink effect (marked down: no job placed there after)
    drains: list[tuple[float, IdSet, str]] = field(default_factory=list)
    #: Whether first forecasts were recorded (``JobRecord.first_forecast``).
    forecast: bool = False
    #: End-of-campaign copies (``duplicates``): one record each, ``job.name`` is ``ORIGINAL+copy``.
    copies: Sequence[JobRecord] = field(default_factory=list)
    #: With a power model: the node power state changes, and the energy drawn.
    power_log: PowerLog | None = None
    energy: Energy | None = None
    models: Sequence[PowerModel] | None = None
    #: Whether each job's last reason_pending was recorded (``JobRecord.reason``).
    reasons: bool = False

    @property
    def policy(self) -> str:
        return self.options.queue_policy

    def job_runs(self) -> list[tuple[float, float, IdSet, bool]]:
        """Each job's last run: (start, finish, ranks, whether it computes)."""
        return [
            (r.start, r.finish, r.ranks, r.job.computes)  # type: ignore[misc]
            for r in self.records
            if r.start is not None and r.finish is not None
        ]

    def power_series(self) -> tuple[list[float], list[float]] | None:
        """The machine's watts over time (None without a power model)."""
        if self.models is None:
            return None
        return power_series(self.models, self.job_runs(), self.power_log or PowerLog())

    def node_states(self) -> list[tuple[float, int, int, int, int, int]] | None:
        """Nodes per power state over time (None without a power model)."""
        if self.models is None:
            return None
        return node_states(self.nb_nodes, self.job_runs(), self.power_log or PowerLog())

    def starts(self) -> dict[int, float | None]:
        return {r.job.id: r.start for r in self.records}


def replay(
    workload: Workload,
    graph: ResourceGraph,
    options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    check: Callable[[Engine], None] | None = None,
    engine_factory: Callable[..., Engine] = Engine,
    resubmit_preempted: bool = False,
    limits: RunLimits | None = None,
    forecast: bool = False,
    duplicate_runtime: str = "same",
    reservations: Sequence[Mapping[str, Any]] = (),
    power: Sequence[PowerModel] | None = None,
    groups: GroupResolver | None = None,
    events: Sequence[ExternalEvent] = (),
    reasons: bool = False,
) -> ReplayResult:
    """Replay ``workload`` on ``graph`` (which it allocates from) and return the records.

    ``progress(done, total)`` is called as jobs finish; ``check(engine)`` after
    every pass (tests use it for invariants).  A preempted best-effort job
    is killed at once (state ``COMPLETED_KILLED``); with
    ``resubmit_preempted`` it is submitted again at that time, as CiGri
    does, and its record keeps its last run.  ``limits`` are the run limits
    (:mod:`fluxsched_py.engine.runlimits`; ``replay --config``).
    ``reservations`` are advance reservations (``--reservations FILE``
    entries, times on the replay's clock), declared before the first job, their
    ``groups`` resolved by ``groups`` (the file's table); a bad one raises
    ReservationError.

    With ``forecast``, each job's first forecast is recorded
    (``JobRecord.first_forecast``): at the first pass after its submission,
    before that pass decides, the start :func:`~fluxsched_py.engine.forecast.forecast`
    gives it, as ``flux sched-py forecast`` would print it then.  A forecast
    is made only at passes where a job was submitted, and plans at most
    :data:`~fluxsched_py.engine.forecast.FORECAST_LIMIT` jobs (no time
    budget: the replay stays deterministic); a job beyond that gets none.
    It only reads the engine: the decisions are those of a replay without it.
    End-of-campaign copies (the ``duplicates`` option) are submitted when the
    engine asks (:class:`~fluxsched_py.engine.duplicates.Duplicate`) with a
    fresh start and the run time ``duplicate_runtime`` gives
    (:data:`DUPLICATE_RUNTIMES`); the first of a job and its copies to
    finish wins, the others are cancelled at once.  A job whose copy won
    completes then (its record's finish is the copy's, its note says so).

    With ``preempt-grace``, a victim's notice comes first: a job that
    checkpoints on it (``attributes.user.checkpoint = "signal"``, or
    ``checkpoint-campaigns``) keeps the work done until then, and a job that
    ends before its preemption completed.  A preempted checkpointing job is
    requeued at once with its remaining work (``attributes.user.requeued-from``
    names it); its lost work is what ran after its last checkpoint.

    ``events`` are machines becoming unavailable and available again, and
    reservations declared (:mod:`.events`, Batsim's external events), in
    time order: at their time, after the jobs that end then and before those
    submitted then, their ranks go down or up (a job running there runs
    on), or the reservations they list replace those declared before (the
    file's first), as a config reload does under Flux.

    With ``reasons``, each job's last ``reason_pending`` (for the jobs the
    engine annotates: ``annotate-depth``) is recorded (``JobRecord.reason``),
    for ``jobs.csv``'s ``metadata`` column as the Batsim driver sends it.
    """
    if duplicate_runtime not in DUPLICATE_RUNTIMES:
        raise ValueError(f"duplicate_runtime={duplicate_runtime!r}: choose from {', '.join(DUPLICATE_RUNTIMES)}")
    t_wall = time.perf_counter()
    # No R and no resource_summary text: the replay sends no message.  And
    # t_estimate only where a decision plans one, unless annotations are asked.
    extra = {} if power is None else {"power": power}
    opts = options if isinstance(options, EngineOptions) else EngineOptions.parse(options)
    engine = engine_factory(
        graph,
        opts,
        build_R=False,
        summaries=False,
        estimates=opts.annotate_depth != 0,
        time_format=lambda t: f"t={t:.0f}s",
        limits=limits,
        user_id=user_id,
        **extra,
    )
    declare_entries(engine.reservations, reservations, 0.0, group=groups)
    jobs = sorted(workload.jobs, key=lambda j: (j.submit, j.id))
    records = Records(jobs)
    total = len(jobs)
    # The workload, the graph and the records live as long as the replay and
    # are never garbage: out of the collector's sight, its full collections
    # walk only what the replay makes (issue 15: 5 % of the CPU time).
    gc.freeze()
    try:
        copies = _Copies(jobs, records, duplicate_runtime)
        result = _run(
            workload,
            graph,
            engine,
            jobs,
            records,
            total,
            progress,
            check,
            resubmit_preempted,
            forecast,
            t_wall,
            copies,
            events,
            groups,
            reasons,
        )
        if power is not None:
            result.energy = _energy(power, result)
            result.models = power
        return result
    finally:
        gc.unfreeze()


def _run(
    workload: Workload,
    graph: ResourceGraph,
    engine: Engine,
    jobs: list[WorkloadJob],
    records: Records,
    total: int,
    progress: Callable[[int, int], None] | None,
    check: Callable[[Engine], None] | None,
    resubmit_preempted: bool,
    with_forecast: bool,
    t_wall: float,
    copies: _Copies,
    events: Sequence[ExternalEvent],
    groups: GroupResolver | None,
    reasons: bool,
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
    wake = engine.wakeup  # EASY++ corrections, ends of protected windows, reservation windows
    submitted: set[int] = set()  # jobs submitted since the last pass (with_forecast)
    switches = _Switches(engine) if engine.power is not None else None
    k = 0  # the next machine event
    while (
        i < total
        or ends
        or (engine.pending_count and (wake() < math.inf or (switches and switches.heap) or k < len(events)))
    ):
        t = min(
            jobs[i].submit if i < total else math.inf,
            ends[0][0] if ends else math.inf,
            wake(),
            events[k].time if k < len(events) else math.inf,
        )
        if switches is not None:
            t = switches.until(t)
        while ends and ends[0][0] <= t:
            _, jobid, run = heapq.heappop(ends)
            if runs.get(jobid) != run:
                continue  # preempted (or cancelled: a copy won) before it ended
            del runs[jobid]  # it ended: it never runs again, and a trace's every job would stay here
            engine.free(jobid, final=True)
            if jobid in copies.of:
                copies.finished(engine, jobid, t)
            else:
                done += 1
        while k < len(events) and events[k].time <= t:
            ev = events[k]
            k += 1
            if not isinstance(ev, MachineEvent):
                declare_entries(engine.reservations, ev.entries, ev.time, where=ev.where, group=groups)
            elif ev.available:
                engine.resource_update(up=ev.ranks)
            else:
                engine.resource_update(down=ev.ranks)
        while i < total and jobs[i].submit <= t:
            j = jobs[i]
            i += 1
            for r in engine.alloc(j.id, 0, max(j.user, 0), j.submit, j.request):
                if r.type is ResponseType.DENY:
                    rec = records[r.id]
                    rec.state, rec.note, rec.rejected_at = REJECTED, r.note, t
                    done += 1
            if with_forecast:
                submitted.add(j.id)
        if submitted:
            _first_forecasts(engine, t, submitted, records)
        result = engine.schedule(t)
        found = result.drains  # the sink effect's drains, from every pass at t
        turned = result.power  # power-save's switches, from every pass at t
        while True:
            while result.preempt:  # kill at once, then pass again: the regular jobs start now
                done += _answer(engine, result.responses, records, ends, runs, t, kept, checkpointed, reasons)
                _notices(engine, result.notice, records, kept, checkpointed, t)  # after the starts they follow
                for a in result.preempt:
                    rec = records[a.id]
                    rec.state, rec.finish, rec.note = PREEMPTED, t, a.note
                    rec.preemptions += 1
                    begun = t if rec.start is None else rec.start
                    rec.lost += (t - checkpointed.pop(a.id, begun)) * rec.nranks
                    if rec.preempted_runs is None:
                        rec.preempted_runs = []
                    rec.preempted_runs.append((begun, t, rec.nranks))
                    runs[a.id] = runs.get(a.id, 0) + 1  # its end event is stale, even once it runs again
                    engine.free(a.id, final=True)
                    if a.id in copies.of:
                        continue  # a copy is not submitted again
                    j = rec.job
                    if a.requeue:  # with its remaining work; it continues the job it was
                        engine.alloc(j.id, 0, max(j.user, 0), t, requeued(j.request, j.id))
                    elif resubmit_preempted:
                        kept.pop(a.id, None)
                        engine.alloc(j.id, 0, max(j.user, 0), t, j.request)
                    else:
                        done += 1
                result = engine.schedule(t)
                found += result.drains
                turned += result.power
            done += _answer(engine, result.responses, records, ends, runs, t, kept, checkpointed, reasons)
            _notices(engine, result.notice, records, kept, checkpointed, t)
            acts = engine.copies(t)  # after a complete pass: copies to submit, losers to cancel
            if not acts:
                break
            done += copies.carry_out(engine, acts, runs, t)
            result = engine.schedule(t)
            found += result.drains
            turned += result.power
        if switches is not None and turned:
            switches.start(turned, t)
        for d in found:  # the engine already keeps them out
            drains.append((t, d.ranks, d.reason))
        if check is not None:
            check(engine)
        if progress is not None and done != reported and (done - reported >= 64 or done == total):
            progress(done, total)
            reported = done
        if i >= total and not ends and engine.pending_count and wake() is None:
            # Nothing left to happen: the rest can never start (resources down).
            break
    for rec in records.values():
        if rec.state == NOT_STARTED and (job := engine.job(rec.job.id)) is not None:
            rec.note = engine.over_limit(job)  # it asks for more than a limit allows
    nb = len(graph.ranks) if hasattr(graph, "ranks") else 0
    return ReplayResult(
        workload,
        engine.options,
        nb,
        records.of(j.id for j in jobs),
        time.perf_counter() - t_wall,
        dict(engine.stats),
        drains,
        with_forecast,
        records.of(copies.of),
        power_log=None if switches is None else switches.log,
        reasons=reasons,
    )


class _Switches:
    """The replay's power switches in flight (``power-save``): a switch off
    or on ends its model's time after the engine asked for it, and the
    engine is told at that time, as Batsim's ``RESOURCE_STATE_CHANGED``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        assert engine.power is not None
        self.models = engine.power.models
        self.heap: list[tuple[float, int, IdSet, bool]] = []  # (end, seq, ranks, on)
        self.log = PowerLog()
        self._seq = 0

    def start(self, actions: Sequence[PowerOff | PowerOn], t: float) -> None:
        for a in actions:
            on = isinstance(a, PowerOn)
            self.log.add(t, a.ranks, "switching_on" if on else "switching_off")
            by_end: dict[float, list[int]] = {}
            for r in a.ranks:
                m = self.models[r]
                by_end.setdefault(t + (m.on_time if on else m.off_time), []).append(r)
            for end, ranks in sorted(by_end.items()):
                self._seq += 1
                heapq.heappush(self.heap, (end, self._seq, IdSet(ranks), on))

    def until(self, t: float) -> float:
        """Tell the engine of the switches that end by ``t`` (and start those
        it asks for then); the time of the next event, ``t`` or earlier."""
        heap = self.heap
        if heap and heap[0][0] < t:
            t = heap[0][0]
        while heap and heap[0][0] <= t:
            _, _, ranks, on = heapq.heappop(heap)
            self.log.add(t, ranks, "idle" if on else "sleeping")
            again = self.engine.power_changed(ranks, on, t)
            if again:
                self.start(again, t)
        return t


def _energy(models: Sequence[PowerModel], result: ReplayResult) -> Energy:
    """The replay's energy over Batsim's interval: from the first
    submission to the last completion."""
    started = [r for r in result.records if r.start is not None and r.finish is not None]
    if not started:
        return Energy(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    first = min(r.job.submit for r in result.records)
    last = max(r.finish for r in started)  # type: ignore[type-var]
    return account(models, result.job_runs(), result.power_log or PowerLog(), first, last)


def _first_forecasts(engine: Engine, t: float, submitted: set[int], records: Records) -> None:
    """Record the forecast start of each job of ``submitted`` (pending ones: a
    denied job has none), then empty it."""
    for f in plan_forecast(engine, t, FORECAST_LIMIT):
        if f.jobid in submitted and f.start is not None:
            records[f.jobid].first_forecast = f.start
    submitted.clear()


class _Copies:
    """The replay's end-of-campaign copies: their records and run times."""

    def __init__(self, jobs: list[WorkloadJob], records: Records, model: str) -> None:
        self.records = records
        self.model = model
        self.of: dict[int, int] = {}  # copy -> original
        self._next = max((j.id for j in jobs), default=0) + 1
        self._runtimes: dict[str, list[float]] = {}  # campaign -> its jobs' run times (model "campaign")
        if model == "campaign":
            for j in jobs:
                name = j.campaign or campaign_of(j.request)[0]
                if name:
                    self._runtimes.setdefault(name, []).append(j.runtime)

    def carry_out(self, engine: Engine, acts: list[Duplicate | CancelCopy], runs: dict[int, int], t: float) -> int:
        """Submit the copies asked for, cancel the losers; returns how many
        workload jobs that finished (originals whose copy won)."""
        done = 0
        for a in acts:
            if isinstance(a, Duplicate):
                self._submit(engine, a.of, t)
                continue
            rec = self.records[a.id]
            job = engine.job(a.id)
            ran = job is None or job.state is JobState.RUNNING  # (it may have ended with the winner, and lost the tie)
            if job is not None and ran:
                runs.pop(a.id, None)
                engine.free(a.id, final=True)
            elif job is not None:
                engine.cancel(a.id)
            if ran and rec.start is not None:
                rec.wasted += (t - rec.start) * rec.nranks
            if a.id in self.of:
                rec.state, rec.finish, rec.note = CANCELLED, t, a.note
            elif job is not None:  # the original: its work is done, by the copy that won
                rec.state, rec.finish, rec.note = COMPLETED, t, f"completed by its copy {a.winner}"
                rec.won_by = a.winner
                done += 1
        return done

    def finished(self, engine: Engine, cid: int, t: float) -> None:
        """Copy ``cid`` ended on its own: if its original was preempted
        (and is not pending again), the copy did its work."""
        of = self.of[cid]
        rec = self.records[of]
        if rec.state == PREEMPTED and engine.job(of) is None:
            rec.state, rec.finish, rec.note, rec.won_by = COMPLETED, t, f"completed by its copy {cid}", cid

    def _submit(self, engine: Engine, of: int, t: float) -> None:
        orig = self.records[of].job
        cid = self._next
        self._next += 1
        attrs = dict(orig.request.attributes or {})
        attrs["system"] = {**(attrs.get("system") or {}), "duplicate-of": of, "preemptible-after": 0}
        request = dataclasses.replace(orig.request, attributes=attrs, preemptible_after=0.0)
        runtime = orig.runtime
        pool = self._runtimes.get(orig.campaign or campaign_of(orig.request)[0] or "")
        if self.model == "campaign" and pool:
            runtime = random.Random(cid).choice(pool)
        job = dataclasses.replace(orig, id=cid, label=f"{orig.name}+copy", submit=t, request=request, runtime=runtime)
        rec = self.records.add(job)
        self.of[cid] = of
        for r in engine.alloc(cid, 0, max(job.user, 0), t, request):
            if r.type is ResponseType.DENY:
                rec.state, rec.note, rec.rejected_at = REJECTED, r.note, t


def requeued(request: Any, first: int) -> Any:
    """``request`` of a checkpointing job, requeued: ``attributes.user.requeued-from`` is ``first``."""
    attrs = dict(request.attributes or {})
    attrs["user"] = {**(attrs.get("user") or {}), "requeued-from": first}
    return dataclasses.replace(request, attributes=attrs)


def _notices(
    engine: Engine,
    notices: list[Any],
    records: Records,
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
    records: Records,
    ends: list[tuple[float, int, int]],
    runs: dict[int, int],
    t: float,
    kept: dict[int, float] | None = None,
    checkpointed: dict[int, float] | None = None,
    reasons: bool = False,
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
            rec.recovered = ran * len(r.resources.ranks) if ran else 0.0
            run = min(j.runtime - ran, j.walltime)
            if j.request.reservation is not None:
                run = min(run, r.expiration - t)  # killed when its reservation ends
            rec.finish = t + run
            rec.state = KILLED if j.runtime - ran > run else COMPLETED
            rec.ranks = r.resources.ranks
            runs[r.id] = runs.get(r.id, 0) + 1
            heapq.heappush(ends, (rec.finish, r.id, runs[r.id]))
        elif r.type is ResponseType.ANNOTATE:
            sched = (r.annotations or {}).get("sched", {})
            est = sched.get("t_estimate")
            if est is not None and rec.first_estimate is None:
                rec.first_estimate = est
            if reasons and (reason := sched.get("reason_pending")) is not None:
                rec.reason = str(reason)  # None: it no longer applies (the last one given is kept)
        elif r.type is ResponseType.DENY:
            rec.state, rec.note, rec.rejected_at = REJECTED, r.note, t
            done += 1
    return done
