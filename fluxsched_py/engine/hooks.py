"""The engine's optional features, behind one object: a job-table observer.

The features below each live in their own module and are reached through
:class:`Hooks`.  They learn of job events as the job table applies them
(:meth:`Hooks.job_event`, a :class:`~.jobtable.JobObserver`), never from
the engine's code paths:

==========================  ==========================================  ======================
event                       what runs                                   module
==========================  ==========================================  ======================
``alloc``                   EASY++ prediction; campaign bookkeeping     :mod:`.predict`,
                                                                        :mod:`.runtimes`
``start`` of a pending job  EASY++ watch; campaign's first start        :mod:`.predict`,
or ``preempt``                                                          :mod:`.runtimes`
``free-final``              run times measured at the next ``tick``     all (a preempted job's
                                                                        is no campaign run time)
``cancel`` or ``deny`` of   a pending job left                          :mod:`.runtimes`
a pending job, ``revoke``
==========================  ==========================================  ======================

The engine also calls :meth:`checked` on a request before its alloc
(``campaign-type`` validated: a bad one DENYs) and :meth:`tick` at the start
of each ``schedule`` (EASY++ corrections; usage, predictor and the sink
effect, :meth:`drains`); and, during a pass, :meth:`order` (campaign order
of best-effort jobs, in :meth:`~.besteffort.BestEffort.run`),
:meth:`excluded` (affinity), :meth:`held` (a copy being cancelled, a
campaign bound: :mod:`.duplicates`, :mod:`.bounds`) and
:meth:`expected_duration` (the campaign predictor).  Each reads the engine's current options, so ``flux config
reload`` turns a feature on or off; with every feature off the engine
decides exactly as without this module.

``sched.free`` carries no time, so a job's run time is measured at the
next :meth:`tick` (the start of the next pass, which drivers run right
after a free).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .affinity import Affinity, passwd_uid
from .bounds import parse_job_bounds
from .campaigns import DecayedUsage, campaign_of, campaign_order
from .duplicates import duplicate_of
from .predict import RuntimePredictor
from .runtimes import CampaignRuntimes
from .sink import Drain, SinkDetector
from .states import JobState

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..planner.flat import FlatCodec
    from ..resource import ResourceGraph
    from .bounds import CampaignBounds
    from .duplicates import Duplicates
    from .jobs import Job
    from .jobtable import JobTable
    from .options import EngineOptions

__all__ = ["Hooks"]


class Hooks:
    """See the module docstring."""

    def __init__(
        self,
        table: JobTable,
        graph: ResourceGraph,
        options: Callable[[], EngineOptions],
        codec: Callable[[], FlatCodec],
        duplicates: Duplicates,
        bounds: CampaignBounds,
        user_id: Callable[[str], int | None] = passwd_uid,
    ) -> None:
        self._table = table
        self._graph = graph
        self._options = options  # the engine's current ones: a config reload turns a feature on or off
        self._codec = codec  # the planner's, which a rebuild replaces
        self._duplicates = duplicates
        self._bounds = bounds
        self.predictor = RuntimePredictor()
        self.runtimes = CampaignRuntimes()
        self._usage: DecayedUsage | None = None
        self._sink: SinkDetector | None = None
        self._affinity: Affinity | None = None
        self._ended: list[tuple[Job, float, bool]] = []  # (job, start, preempted) freed since the last tick
        #: job id -> (campaign, best-effort) of the jobs that have either (pruned in tick)
        self._info: dict[int, tuple[str | None, bool]] = {}
        self._drains: list[Drain] = []
        self._checked: tuple[Any, str | None, str] = (None, None, "default")  # the last request checked()
        #: A best-effort job named a campaign or a campaign type: campaign
        #: order applies (else best-effort jobs keep their queue order).
        self.ordered = False
        self._user_id = user_id  # the uid of a user ``affinity`` names (the driver's)

    # -- job events and the core's calls -----------------------------------------

    def job_event(self, job: Job, event: str, old: JobState | None, now: float | None, preempted: bool) -> None:
        """The job table applies ``event`` to ``job`` (see :class:`~.jobtable.JobObserver`)."""
        if event == "alloc":
            self._job_submitted(job)
        elif event == "preempt" or (event == "start" and old is JobState.PENDING):
            assert now is not None
            self._job_started(job, now)
        elif event == "hello" and job.request is not None:
            self._job_recovered(job, now if now is not None else 0.0)
        elif event == "free-final":
            self._job_ended(job, preempted)
        elif event == "revoke" or (event in ("cancel", "deny") and old is JobState.PENDING):
            self._job_left(job)

    def checked(self, request: Request) -> Any:
        # raises ValueError for a bad campaign-type or campaign-max-running: the alloc is denied
        self._checked = (request, *campaign_of(request))
        parse_job_bounds(request)
        return request

    def _job_submitted(self, job: Job) -> None:
        request, name, kind = self._checked
        if request is not job.request:  # not through checked(): read the attributes
            name, kind = campaign_of(job.request)
        opts = self._options()
        if opts.predict_runtimes and job.preemptible_after is None:
            self.predictor.submitted(job, opts.predict_history)
        self._joined(job, name, kind)

    def _joined(self, job: Job, name: str | None, kind: str) -> bool:
        """``job`` of campaign ``name`` (None: none) and ``kind`` is known from
        now on; True when its campaign counts it as a job still to run."""
        best_effort = job.preemptible_after is not None
        if name is None and not best_effort:
            return False
        self._info[job.id] = (name, best_effort)
        if best_effort and (name is not None or kind != "default"):
            self.ordered = True
        if name is not None and duplicate_of(job.request) is None:  # a copy is no job still to run
            self.runtimes.submitted(name, job.id)
            return True
        return False

    def _job_recovered(self, job: Job, start: float) -> None:
        """A job running at a restart, with its jobspec: its campaign counts
        it as submitted and started at ``start`` (its run time counts when
        it ends).  The runtime predictor learns only from jobs it saw start,
        so it is not told."""
        name, kind = campaign_of(job.request)
        if self._joined(job, name, kind):
            assert name is not None
            self.runtimes.started(name, job.id, start)

    def _job_started(self, job: Job, now: float) -> None:
        if job.duration < job.walltime:
            self.predictor.started(job, now)
        info = self._info.get(job.id)
        if info is not None:
            if info[0] is not None and not self._duplicates.is_copy(job.id):
                self.runtimes.started(info[0], job.id, now)

    def _job_left(self, job: Job) -> None:
        """A job left without running (cancelled, denied, or its start revoked)."""
        info = self._info.pop(job.id, None)
        if info is not None:
            if info[0] is not None:
                self.runtimes.left(info[0], job.id)

    def _job_ended(self, job: Job, preempted: bool) -> None:
        """``job`` was freed; ``preempted``: killed for a regular job (its
        usage counts, its run time is no campaign run time)."""
        if job.t_start is not None and (job.id in self._info or self._options().predict_runtimes):
            # a duplicate's loser (engine/duplicates.py) is killed, not a run time
            self._ended.append((job, job.t_start, preempted or self._duplicates.is_loser(job.id)))

    def tick(self, now: float) -> bool:
        """Measure the run times of the jobs freed since the last tick, and
        correct EASY++ predictions now outlived; True when a plan changed."""
        opts = self._options()
        ended, self._ended = self._ended, []
        for job, start, preempted in ended:
            runtime = max(0.0, now - start)
            name, best_effort = self._info.pop(job.id, (None, False))
            if opts.predict_runtimes and not best_effort:
                self.predictor.record(job.userid, runtime)
            ranks = job.resources.ranks if job.resources is not None else ()
            if best_effort or name is not None:
                self.usage().add(name, runtime * max(1, len(ranks)), now)
            if name is not None and preempted:
                self.runtimes.killed(name, job.id)
            elif name is not None:
                self.runtimes.ended(name, job.id, runtime)
                sink = self._sink_detector()
                if sink is not None:
                    self._drains += sink.ended(name, ranks, runtime, self.runtimes.get(name).median())
        changed = self.predictor.tick(self._table, now, opts.predict_correction)
        jobs = self._table.jobs
        if len(self._info) > 2 * len(jobs) + 1024:  # jobs that left pending (cancel, deny)
            self._info = {k: v for k, v in self._info.items() if k in jobs}
        return changed

    # -- during a pass -------------------------------------------------------

    def usage(self) -> DecayedUsage:
        half = self._options().campaign_half_life
        if self._usage is None:
            self._usage = DecayedUsage(half)
        self._usage.half_life = half
        return self._usage

    def order(self, jobs: Iterable[Job], now: float) -> list[Job]:
        """Best-effort ``jobs`` (queue order) in campaign order (:mod:`.campaigns`)."""
        return campaign_order(jobs, self.usage(), now)

    def held(self, job: Job) -> tuple[int, str] | None:
        """What keeps best-effort ``job`` off nodes now: (ranks mask, reason), or None.  Every node
        for a copy whose group was won, being cancelled (:mod:`.duplicates`); a campaign bound's (:mod:`.bounds`)."""
        if self._duplicates.is_loser(job.id):
            return self._codec().ranks_mask(list(self._graph.ranks)), "cancelled: another copy finished first"
        return self._bounds.held(job)

    def excluded(self, job: Job) -> int | None:
        """The flat mask of ranks ``job`` should avoid when it can (``affinity``), or None."""
        pairs = self._options().affinity
        if not pairs:
            return None
        if self._affinity is None or self._affinity.map != dict(pairs):
            self._affinity = Affinity(pairs, self._user_id)
        return self._affinity.excluded(job, self._graph, self._codec())

    def expected_duration(self, job: Job) -> float:
        """How long a best-effort ``job`` is expected to run: its campaign's
        predicted run time (:mod:`.runtimes`) capped at its walltime, else
        its walltime."""
        predicted = self.runtimes.predicted(campaign_of(job.request)[0])
        return job.walltime if predicted is None else min(predicted, job.walltime)

    def campaign_eta(self, job: Job, now: float) -> float | None:
        info = self._info.get(job.id)
        c = None if info is None else self.runtimes.get(info[0])
        return None if c is None else c.eta(now)

    # -- outputs --------------------------------------------------------------

    def _sink_detector(self) -> SinkDetector | None:
        n = self._options().sink_jobs
        if n <= 0:
            return None
        if self._sink is None or self._sink.n != n:
            reported = self._sink.reported if self._sink is not None else set()
            self._sink = SinkDetector(n)
            self._sink.reported = reported
        return self._sink

    def wakeup(self) -> float:
        """When a running job reaches its EASY++ prediction (a pass corrects
        it then, though nothing else happens); inf when never."""
        return self.predictor.next_correction()

    def pending_drains(self) -> list[Drain]:
        """The drain actions found since :meth:`drains` was last called, left for it."""
        return list(self._drains)

    def drains(self) -> list[Drain]:
        """The drain actions found since the last call (drivers carry them out)."""
        out, self._drains = self._drains, []
        return out

    def stats(self, now: float) -> dict[str, Any]:
        """For ``stats-get``: each campaign's counts, mean run time, ETA and decayed usage."""
        out = self.runtimes.stats(now)
        for name, row in out.items():
            row["usage"] = self._usage.at(name, now) if self._usage is not None else 0.0
        return out
