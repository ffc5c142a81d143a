"""The pass context: what a queue policy may do during a scheduling pass.

:class:`Pass` implements :class:`~fluxsched_py.policy.base.PassContext` for
the engine: a policy walks its queue's jobs, asks the planner where and when
each fits (around what runs and every queue's reservations), and starts or
reserves through it.  It also remembers, for one pass, what failed (so equal
or bigger jobs are not matched again) and why jobs were passed over (for
``reason_pending``).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import memo
from ..planner import Placement, Slot
from ..resource.flatfree import as_int
from .jobs import Job, JobQueue
from .runlimits import held_by, need_of
from .states import JobState, Response

if TYPE_CHECKING:
    from ..jobspec import Request
    from .jobtable import JobTable
    from .lent import Lent
    from .options import EngineOptions
    from .powercap import PowerCap
    from .reservations import Reservations

__all__ = ["Pass"]


class Pass:
    """One scheduling pass: the :class:`~fluxsched_py.policy.PassContext`.

    A pass visits the queues one after the other (:meth:`enter`): what a
    policy sees of the queue (:meth:`jobs`, :meth:`clear_reservations`,
    :meth:`hopeless`, the job it backfills around) is the current queue's;
    what is free now and the planner, with every queue's reservations, are
    shared by all of them."""

    _SENTINEL = -1  # planner id for a tentative allocation (EASY rule 2)

    def __init__(
        self,
        table: JobTable,
        options: EngineOptions,
        now: float,
        *,
        start: Callable[[Pass, Job, Placement], Placement],
        counters: dict[str, int | float],
        reservations: Reservations,
        lent: Lent,
        excluded: Callable[[Job], Any],
        feasibility: Callable[[Request], str | None],
        limit_check: Callable[[Job, Any], str | None] | None = None,
        cap: PowerCap | None = None,
        compress: bool = True,
        multi: bool = False,
        plan_read: bool = True,
    ) -> None:
        #: The job table: the one door to the jobs' spans (reserve, unplan).
        self.table = table
        self.options = options
        #: The engine's planner for this pass (a rebuild restarts the pass).
        self.planner = table.planner
        #: Starts ``job`` on ``placement`` now (the engine's start, or the
        #: handoff from best-effort jobs); returns the placement it took.
        self._start = start
        self.counters = counters
        self.reservations = reservations
        #: What best-effort jobs hold, lent to regular jobs.
        self.lent = lent
        #: A job's nodes to avoid where it fits elsewhere (``affinity``), or None.
        self._excluded = excluded
        self._feasibility = feasibility
        #: The run limits' verdict on a job holding what it needs (None: no limits).
        self.limit_check = limit_check
        self.now = now
        self.compress = compress
        #: More than one queue has pending jobs: reservations are not all the current queue's.
        self.multi = multi
        #: Something reads the plan beyond the starts a policy makes (see
        #: :attr:`~fluxsched_py.policy.PassContext.plan_read`).
        self.plan_read = plan_read
        self.queue: JobQueue | None = None
        self.depth: int | None = None
        self.out: list[Response] = []
        self.held: dict[int, str] = {}
        self.held_ok: set[int] = set()  # jobs the policy passed over that do not block others
        #: The ``reason_pending`` of each job held by a limit (:mod:`.runlimits`).
        self.limit_text: dict[int, str] = {}
        self._free: Any = None
        self._constraint_cache: dict[Any, bool] | None = None  # made when first asked
        self.need_text: dict[int, tuple[Any, str]] = {}
        self._failed_shapes: set[Any] = set()
        self._failed_nodes: list[tuple[int, float]] = []
        self.whole_free: int | None = None
        # The reservation unreserve() took out, for earliest(): (job, start, log position).
        self._unreserved: tuple[Job, float, int] | None = None
        # The last search from now, for reserve(): (job, nothing fits before, log end then).
        self._searched: tuple[Job, float, int] | None = None
        # What keeps_reservation() found before a job's reservation, its
        # own span set aside, for earliest(): (job, reservation start, slot, log end then).
        self._aside: tuple[Job, float, Slot, int] | None = None
        #: (free set, its change number, how many nodes are wholly in it): see :meth:`fits_free`
        self._whole_now: tuple[Any, Any, int] | None = None
        #: (free set, its change number, nothing in it): see :meth:`nothing_free`
        self._none_free: tuple[Any, Any, bool] | None = None
        #: The first job the policy visited and left pending: a job started
        #: after it is backfilled around it (the ``backfill`` annotation).
        self.passed_over: Job | None = None
        #: The job :meth:`jobs` yielded last (denied if the policy raises).
        self.current: Job | None = None
        #: The pending jobs before the one :meth:`jobs` yielded last, as
        #: :func:`~.annotations.end_pass` counts its ``jobs_ahead``.
        self.ahead = 0
        self._skip_unfit = False  # see skip_unfit
        self._settled: tuple[Job, float, Any, float] | None = None  # see settle
        self._old = -1  # see skip_unfit
        self._windows: tuple[Any, tuple, int] | None = None  # see _window
        #: ``affinity`` is set: placements first try the job's preferred nodes.
        self.prefer = bool(options.affinity)
        self.backfill_order = options.backfill_order
        #: The power cap (``power-cap``), or None: every placement is then checked against it.
        self.cap = cap
        #: The ``reason_pending`` of each job the cap held back in this pass.
        self.cap_text: dict[int, str] = {}

    def enter(self, queue: JobQueue, depth: int | None = None) -> None:
        """Start on ``queue``'s jobs (at most ``depth`` of them)."""
        self.queue = queue
        self.depth = depth
        self.passed_over = None
        self.ahead = 0
        self._skip_unfit = False
        self._old = -1
        # What the last pass settled is good for this one only, and only
        # when nothing was freed, cancelled or re-prioritized since.
        self._settled = None if self.compress or self.multi else queue.settled
        queue.settled = None
        if self._failed_shapes or self._failed_nodes:
            # What failed in another queue may fit here: this queue's
            # reservations, not that one's, are the ones it may move.
            self._failed_shapes = set()
            self._failed_nodes = []

    # -- PassContext ---------------------------------------------------------

    def jobs(self) -> Iterator[Job]:
        depth = self.depth
        queue = self.queue
        assert queue is not None
        n = 0
        i = queue.head
        prev = None
        q = queue.jobs
        limit_check = self.limit_check
        table = self.table.jobs
        # Past annotate-depth, what a job left out would have been told is
        # read by nobody: there, after skip_unfit(), the jobs that cannot
        # backfill are left out (see skip_unfit).  Not under run limits,
        # which act on every job they hold, nor in sjbf order, where the
        # policy takes every job before it starts any.
        adepth = self.options.annotate_depth
        skip_from = math.inf if adepth is None or limit_check is not None or self.backfill_order != "queue" else adepth
        # Under run limits, past annotate-depth and in queue order, the stretches
        # held at the last pass are passed over whole while they would all be
        # held again, and stale entries anywhere in stretches (see _held_runs).
        runs, gaps = self._held_runs(queue, adepth is not None and self.backfill_order == "queue")
        held_from = math.inf if runs is None or adepth is None else adepth
        streak: list[Any] | None = None  # the stretch being held: [its first index, its jobs, their needs]
        walked: list[Any] | None = None  # a stretch not all held now, being walked: [its end, jobs left, needs]
        stale: int | None = None  # where the stale entries just walked begin
        planner = self.planner
        whole_fast = planner.matcher.whole_fast
        codec = planner.codec
        placement = self.options.placement
        # Nodes wholly free when the policy last had a job (they only get
        # fewer in a pass), counted when a whole-node job asks; -1: leave out none.
        wholly = -1
        fast: bool | None = None  # whole-node jobs are placed by the fast path (counts): asked once
        pend = 0  # pending jobs before the next one: its jobs_ahead, as end_pass counts them
        self.ahead = 0
        while i < len(q):
            if i < self._old and wholly != -1 and pend >= skip_from and not depth and not queue.npartial:
                if wholly == -2:
                    wholly = self._wholly_now()
                if wholly >= 0:
                    # Each one waiting at the last pass is a whole-node job: all
                    # left out (pend, from now on a lower bound, stays past skip_from).
                    i = self._old
                    continue
            if walked is not None and i >= walked[0]:
                walked = None  # walked to its end, every job held
            if runs is not None and (run := runs.pop(i, None)) is not None:
                assert limit_check is not None and gaps is not None
                if stale is not None:
                    gaps[stale] = i
                    stale = None
                end, count, needs = run
                if pend >= held_from and all(limit_check(j, need) is not None for m in needs.values() for need, j in m):
                    # Each of its jobs would be held again, beyond annotate-depth:
                    # none has a reservation to drop, no reason of theirs is read.
                    if streak is None:
                        streak = [i, count, needs]
                    else:
                        streak[1] += count
                        for m in needs.values():
                            for need, j in m:
                                _least(streak[2], j, need)
                    pend += count
                    i = end
                    continue
                walked = [end, count, needs]
            if gaps is not None and (end := gaps.pop(i, None)) is not None:
                if stale is None:
                    stale = i
                i = end  # stale entries only (within a stretch, its range grows over them)
                continue
            job = q[i]
            i += 1
            if job.state is not JobState.PENDING or table.get(job.id) is not job:
                if stale is None and gaps is not None:
                    stale = i - 1
                continue
            if stale is not None:
                assert gaps is not None
                gaps[stale] = i - 1
                stale = None
            if walked is not None:
                walked[1] -= 1
            if limit_check is not None:
                need = need_of(job)
                why = limit_check(job, need)
                if why is not None:
                    self.hold_limit(job, why)  # the policy never sees it: no reservation, nothing blocked
                    if pend >= held_from:
                        if streak is None:
                            streak = [i - 1, 0, {}]
                        streak[1] += 1
                        _least(streak[2], job, need)
                    pend += 1
                    continue
            if streak is not None:
                assert runs is not None  # a streak is only kept with them
                runs[streak[0]] = (i - 1, streak[1], streak[2])
                streak = None
            if walked is not None:
                assert runs is not None
                if i < walked[0] and walked[1]:
                    # The rest of the stretch, to pass over once its jobs would all be held
                    # again (its needs still cover them): after a start, or at the next pass.
                    runs[i] = (walked[0], walked[1], walked[2])
                walked = None
            n += 1
            if depth and n > depth:
                return
            if wholly != -1 and pend >= skip_from and (w := job.whole_nodes):
                if fast is None:  # the same answer for every whole-node job
                    fast = whole_fast(codec, job.request, placement) > 0
                if fast and wholly == -2:
                    wholly = self._wholly_now()
                if fast and wholly >= 0 and (w > wholly or i <= self._old):
                    pend += 1
                    continue  # as the policy would: held for backfill, unread
            if prev is not None and self.passed_over is None and prev.state is JobState.PENDING:
                self.passed_over = prev  # the policy is done with it, and it waits
            prev = self.current = job
            self.ahead = pend
            yield job
            if job.state is JobState.PENDING:
                pend += 1
            wholly = -2 if self._skip_unfit else -1  # -2: not known yet (see _wholly_now)
        if streak is not None:
            assert runs is not None
            runs[streak[0]] = (i, streak[1], streak[2])
        if stale is not None:
            assert gaps is not None
            gaps[stale] = i

    def _held_runs(
        self, queue: JobQueue, beyond: bool
    ) -> tuple[dict[int, tuple[int, int, dict[Any, list]]], dict[int, int]] | tuple[None, None]:
        """The stretches of ``queue.jobs`` that run limits held at its last
        pass beyond ``annotate-depth``, by first index: (end index, how many
        pending jobs, the least needs of their users); and its gaps, the
        stretches of stale entries only, by first index: their end (a job
        that left pending never comes back), passed over anywhere.  None
        when there are no limits, or every job is read (``beyond`` false).

        A stretch holds only jobs :meth:`jobs` held; it stays as it was until
        a job leaves it other than by starting (the queue's ``reshaped``
        changes) or a pass hands one of its jobs out (that pass walks it and
        records it anew), and :meth:`start` starts only jobs handed out.  Its
        jobs, held and never handed out, have no reservation.  Nothing
        between two held jobs changes the usage, and a job that needs at
        least as much as a held job of the same user and queue is held too:
        when the least needs of a stretch are all held, so is each of its jobs."""
        if self.limit_check is None or not beyond:
            queue.held_runs = None  # such a pass hands out any job: what was known no longer holds
            return None, None
        known = queue.held_runs
        if known is None or known[0] != queue.reshaped:
            known = queue.held_runs = (queue.reshaped, memo.store("held"), memo.store("held"))
        return known[1], known[2]

    def _wholly_now(self) -> int:
        """For :meth:`jobs`, which asks only when a job is placed by the
        whole-node fast path: the nodes wholly free, or -1 when the policy
        ends the pass at its next job (hand it one at once)."""
        return -1 if self.nothing_free() or self.nothing_fits() else self._wholly_free()

    def skip_unfit(self, head: Job) -> None:
        """From the next job on, :meth:`jobs` leaves out the jobs that cannot
        backfill around ``head``, beyond ``annotate-depth`` (where a job's
        ``reason_pending`` is not sent): a policy that holds every such job
        for ``backfill`` and does nothing else with it sees the same starts,
        and the walk costs a step per pending job instead of a visit (issue 21).

        Left out are the jobs :meth:`fits_free` rejects and, when this queue's
        last pass settled (:meth:`settle`) around ``head`` and its reservation and
        nothing was freed since, the whole-node jobs that were waiting then
        (see :meth:`settle`)."""
        self._skip_unfit = True
        s = self._settled
        self._settled = None
        if s is None or s[0] is not head or s[3] > self.now or not self._counted(head):
            return
        span = self.planner.span(head.id)
        if span is None or span.running or span.start != s[1]:
            return
        queue = self.queue
        assert queue is not None
        # The queue is in order and new jobs joined it at its end (else the
        # pass would compress): those waiting then are the ones up to there.
        self._old = bisect.bisect_right(queue.jobs, s[2], lo=queue.head, key=_sortkey)

    def settle(self, head: Job | None) -> None:
        """The policy is done with this queue, and every whole-node job behind
        ``head`` it did not start failed to backfill around ``head``'s
        reservation.

        For whole-node jobs placed by the matcher's whole-node fast path
        (``head`` one of them), starting now is a matter of counts: a job of
        ``n`` nodes for ``d`` seconds backfills iff ``n`` nodes are wholly
        free and, if it would still run at the shadow time, ``n`` is at most
        the nodes the head does not need then (rule 2's re-plan of the head
        around it succeeds exactly then; rule 1 starts only such jobs).
        Until something is freed, cancelled or re-prioritized, both counts
        only fall and ``now + d`` only grows: the next pass, if the head
        keeps its reservation, would find each of these jobs fails again,
        and :meth:`skip_unfit` leaves them out.  Only with one queue, one
        reservation and none of what can change the counts between passes
        or place by anything else (run limits, advance reservations, lent
        best-effort resources, affinity, EASY++ predictions)."""
        queue = self.queue
        assert queue is not None
        if head is None or self.multi or self.depth or not queue.jobs or not self._counted(head):
            return  # with queue-depth, jobs beyond it were never tried
        span = self.planner.span(head.id)
        if span is not None and not span.running:
            queue.settled = (head, span.start, queue.jobs[-1].sortkey, self.now)

    def _counted(self, head: Job) -> bool:
        """Backfilling around ``head`` is a matter of node counts (see :meth:`settle`)."""
        planner = self.planner
        return (
            self.limit_check is None
            and self.cap is None
            and not self.prefer
            and not self.options.predict_runtimes
            and planner.nreserved == 1
            and not planner.nblocked
            and not self.lent.bits
            and head.request.reservation is None
            and planner.matcher.whole_fast(planner.codec, head.request, self.options.placement) > 0
        )

    def free(self) -> Any:
        """What is free now, flat, minus what this pass started: the graph's
        live flat free set (allocating a job takes it out there), or an int
        when best-effort resources are lent (see :meth:`start`)."""
        if self._free is None:
            self._free = self.planner.free_bits()
        return self._free

    def withhold(self, bits: int) -> None:
        """``bits`` are not free for the rest of the pass (what a preempted
        job holds beyond the placement it is preempted for)."""
        free = self.free()
        self._free = free ^ (free & bits)  # & ~ without a negative int

    def nothing_free(self) -> bool:
        # Asked before every backfill candidate: answered once per free set
        # (an AND over the machine-wide int each time, on CEA Curie 186,624 bits).
        free = self.free()
        seq = getattr(free, "seq", None)
        known = self._none_free
        if known is None or known[0] is not free or known[1] != seq:
            codec = self.planner.codec
            known = self._none_free = (free, seq, not (free & (codec.leaf_mask or codec.ranked_mask)))
        return known[2]

    def nothing_fits(self) -> bool:
        """True when no pending job can start now: the fewest node vertices
        any of them needs (:mod:`.sizes`) are more than are free.  Every
        placement the pass could try is a subset of what is free, and the
        matcher rejects a set with fewer node vertices than a request's
        bound without a traversal (``MatchCache.flat``), so each job would
        fail.  One popcount of the free set, where walking the queue costs a
        step per pending job (issue 21)."""
        need = self.table.pending_sizes.smallest()
        if not need:
            return False
        return self.planner.codec.count(as_int(self.free()), "node") < need

    def fits_free(self, job: Job) -> bool:
        """False when ``job`` cannot start now whatever the reservations: a
        whole-node request (placed by the matcher's whole-node fast path)
        for more nodes than are wholly free.  Every set a backfill tries is
        a subset of what is free, so each of its matches would fail; the
        count is made once per free set, not once per job.  True otherwise."""
        planner = self.planner
        n = planner.matcher.whole_fast(planner.codec, job.request, self.options.placement) if job.whole_nodes else 0
        if not n:
            return True
        return n <= self._wholly_free()

    def _wholly_free(self) -> int:
        """How many nodes are wholly free now (once per free set)."""
        free = self.free()
        seq = getattr(free, "seq", None)
        known = self._whole_now
        if known is None or known[0] is not free or known[1] != seq:
            known = self._whole_now = (free, seq, self.planner.codec.whole_count(as_int(free)))
        return known[2]

    def hold_rest(self, job: Job, rest: Iterator[Job], why: str) -> None:
        """Hold ``job`` and the jobs ``rest`` would yield, each as :meth:`hold`
        would, without visiting them: only those whose reason an annotation
        reads (within ``annotate-depth``) are looked at."""
        self.hold(job, why)
        depth = self.options.annotate_depth
        if depth is not None and self.ahead + 1 >= depth:
            return
        for other in rest:
            if depth is not None and self.ahead >= depth:
                return
            self.hold(other, why)

    def _match(self, job: Job, avail: int) -> Placement | None:
        self.counters["matches"] += 1
        if self.prefer and (avoid := self._excluded(job)) is not None:
            # affinity: on the preferred nodes alone when it fits there, else anywhere
            found = self.planner.match_bits(job.request, avail ^ (avail & avoid), self.options.placement)
            if found is not None:
                return found
        return self.planner.match_bits(job.request, avail, self.options.placement)

    def fits_now(self, job: Job) -> Placement | None:
        # Running jobs hold what is not free; only reservations can take more:
        # those that hold bits take them, counted ones (they hold no bits)
        # their counts: a whole-node job fits when its count is free over its
        # window with theirs kept, any other when what it takes leaves them.
        planner = self.planner
        end = self.now + job.duration
        n = planner.matcher.whole_fast(planner.codec, job.request, self.options.placement) if planner.ncounted else 0
        if n and not planner.counts_allow(self.now, end, n):
            return None
        avail = self.free()
        if planner.nreserved:
            reserved = planner.reserved_during(self.now, end)
            if reserved:
                # x ^ (x & y) is x & ~y without a negative int (each of which
                # costs a full two's-complement copy of a set: issue 15)
                avail = as_int(avail)
                avail ^= avail & reserved
        found = self._match_windows(job, avail) if planner.nblocked else self._match(job, avail)
        if found is not None and planner.ncounted and not n and not planner.counts_hold(found.bits, self.now, end):
            return None
        if found is not None and self.cap is not None and not self._cap_allows(job, found):
            return None
        return found

    def _cap_allows(self, job: Job, placement: Placement) -> bool:
        """Whether ``job`` started now on ``placement`` keeps the machine under
        the power cap for its whole run; if not, the cap is its reason."""
        cap = self.cap
        assert cap is not None
        ranks = self.planner.resolve(placement).ranks
        if cap.fits(job, ranks, self.now):
            return True
        self.cap_text[job.id] = cap.reason(job, ranks, self.now)
        return False

    def fits_unplanned(self, job: Job) -> Placement | None:
        """What :meth:`fits_now` answers once this queue's reservations are
        cleared, asked while they are still in the plan; only when they are
        all the plan holds beyond running jobs (one queue, no window)."""
        assert not self.multi and not self.planner.nblocked
        found = self._match(job, self.free())
        if found is not None and self.cap is not None and not self._cap_allows(job, found):
            return None
        return found

    def fits_now_ignoring(self, job: Job, reserved: Job) -> Placement | None:
        planner = self.planner
        if planner.ncounted:
            return None  # counts, not nodes, hold it back: no other placement frees any
        avail = self.free()
        if planner.nreserved > 1:
            others = planner.reserved_during(self.now, self.now + job.duration, exclude=reserved.id)
            if others:
                avail = as_int(avail)
                avail ^= avail & others
        found = self._match_windows(job, avail) if planner.nblocked else self._match(job, avail)
        if found is not None and self.cap is not None and not self._cap_allows(job, found):
            return None
        return found

    def _match_windows(self, job: Job, avail: Any) -> Placement | None:
        """:meth:`_match` with advance reservations (engine/reservations.py):
        a job of one runs inside its window only, on its ranks; any other
        job keeps off every window it would still be running in."""
        now = self.now
        rs = self.reservations
        w = rs.window(job)
        if w is not None:
            start, end, bits, avoid = w
            if now < start or (job.walltime != math.inf and now + job.walltime > end):
                return None
            avail = as_int(avail) & bits
            t1 = end if job.walltime == math.inf else now + job.walltime
            for a, b, held in avoid:  # another window over it (a MAINT one)
                if a < t1 and b > now:
                    avail &= ~held
            return self._match(job, avail)
        allow = rs.flex(job)  # a FLEX reservation's job may use its window too
        held = self.planner.blocked_during(now, now + job.duration, allow)
        if not held:
            return self._match(job, avail)
        avail = as_int(avail)
        found = self._match(job, avail ^ (avail & held))
        if found is None and avail & held:
            # Would it fit but for the windows?  Then they hold it back (reason_pending).
            if self._match(job, avail) is not None:
                rs.note_held(job, self.planner.held_names(now, now + job.duration, allow))
        return found

    def _avail(self, job: Job, t0: float, t1: float) -> int:
        """What ``job`` may use over ``[t0, t1)`` in the plan: the planner's
        availability, less the windows it is not in (or only its own window)."""
        planner = self.planner
        avail = planner.available_bits(t0, t1)
        if planner.nblocked:
            rs = self.reservations
            w = rs.window(job)
            if w is not None:
                if not (w[0] <= t0 and t1 <= w[1]):
                    return 0
                avail &= w[2]
                for a, b, held in w[3]:
                    if a < t1 and b > t0:
                        avail &= ~held
                return avail
            avail &= ~planner.blocked_during(t0, t1, rs.flex(job))
        return avail

    def try_move(self, job: Job, blocker: Placement, blocker_end: float) -> bool:
        planner = self.planner
        if self._counted(job) and (held := planner.span(job.id)) is not None and blocker_end > held.start:
            # The head is placed by counts (see settle): it fits around the
            # blocker iff enough of what its window has, its own place
            # included, is wholly left.  A no is told without the re-plan.
            window = self._window(job, held)
            if self.planner.codec.whole_count(window ^ (window & as_int(blocker.bits))) < job.whole_nodes:
                self.counters["matches"] += 1  # the match it stands for
                return False
        kept = self.reservation(job)  # its placement as held: not decoded when it was not (issue 21)
        table = self.table
        span = table.unplan(job.id)
        if span is None:
            return True
        table.plan_reservation(self._SENTINEL, blocker.resources, self.now, blocker_end, blocker.bits)
        try:
            found = self._match(job, self._avail(job, span.start, span.end))
        finally:
            table.unplan(self._SENTINEL)
        if found is None:
            rs = kept.placement.resources if kept is not None else span.resources
            table.plan_reservation(job.id, rs, span.start, span.end, span.bits)
            return False
        table.plan_reservation(job.id, found.resources, span.start, span.end, found.bits)
        return True

    def _window(self, job: Job, span: Any) -> int:
        """What ``job`` could use over its reservation ``span``'s window, its
        own place included (the planner keeps spans that overlap in time
        disjoint): the same while nothing starts, wherever ``job`` is moved."""
        free = self.free()
        seq = getattr(free, "seq", None)
        known = self._windows
        if known is None or known[0] is not free or known[1] != (seq, job.id, span.start, span.end):
            avail = self._avail(job, span.start, span.end) | as_int(span.bits)
            known = self._windows = (free, (seq, job.id, span.start, span.end), avail)
        return known[2]

    def start(self, job: Job, placement: Placement) -> None:
        if self.limit_check is not None:
            # Checked again on what it would hold: a whole-node job holds
            # every core of its nodes, and a start earlier in this pass may
            # have used what :meth:`jobs` saw (sjbf sorts before it starts).
            rs = self.planner.resolve(placement)
            why = self.limit_check(job, held_by(rs))
            if why is not None:
                self.hold_limit(job, why)
                return
            placement = Placement(rs, placement.bits)
        self.table.unplan(job.id)
        placement = self._start(self, job, placement)
        free = self._free
        if type(free) is int and job.state is not JobState.PENDING:
            # The int of a graph with lent resources; the live set already
            # lost what the graph allocated (and never held what is lent).
            self._free = free ^ (free & as_int(placement.bits))  # & ~ without a negative int

    def earliest(self, job: Job, before: float = math.inf, not_before: float = -math.inf) -> Slot | None:
        """The planner's earliest placement, from ``not_before`` on when given.

        Right after :meth:`unreserve` took out ``job``'s reservation, a search
        for a place before it reads only where something became available
        since nothing fitted it there (:meth:`Planner.earliest_bits`,
        ``since``): the same answer, at the cost of the windows the gains
        touch."""
        self.counters["matches"] += 1
        planner = self.planner
        since = -1
        u = self._unreserved
        self._unreserved = None
        a = self._aside
        self._aside = None
        if a is not None and a[0] is job and a[1] == before and not_before <= self.now:
            gains = planner.gains_since(a[3])
            if gains is not None and all(g[3] == job.id for g in gains):
                # Found with its reservation set aside; taking it out since
                # changed nothing else.
                self.counters["matches"] -= 1  # counted when it was found
                self._searched = (job, a[2].start, planner.log_end)
                return a[2]
        if u is not None and u[0] is job and u[1] == before:
            since = u[2]
        if planner.nblocked and (w := self.reservations.window(job)) is not None:
            # for its walltime (none: until the window ends)
            window = w

            def search_in(t: float) -> Slot | None:
                return planner.earliest_in(
                    job.request, self.now, job.walltime, self.options.placement, window, before, t
                )

            found = search_in(not_before)
            if self.cap is not None and found is not None:
                found = self._cap_earliest(job, found, before, search_in)
            return found
        allow = self.reservations.flex(job) if planner.nblocked else None
        found = planner.earliest_bits(
            job.request, self.now, job.duration, self.options.placement, before, not_before, since, job.id, allow=allow
        )
        if self.cap is not None and found is not None:
            found = self._cap_earliest(
                job,
                found,
                before,
                lambda t: planner.earliest_bits(
                    job.request, self.now, job.duration, self.options.placement, before, t, -1, job.id, allow=allow
                ),
            )
        if planner.nblocked:
            self.reservations.note_held(job, planner.held_by)
        if not_before <= self.now:
            self._searched = (job, before if found is None else found.start, planner.log_end)
        return found

    def _cap_earliest(
        self, job: Job, found: Slot | None, before: float, search: Callable[[float], Slot | None]
    ) -> Slot | None:
        """The earliest slot from ``found`` on where both the nodes and the
        power cap's watts allow ``job``: the cap's earliest time on the
        nodes found, then the nodes' earliest from that time (``search``),
        until they agree.  Each turn starts later, at a time the draw or the
        plan changes, so it ends."""
        cap = self.cap
        assert cap is not None
        while found is not None:
            ranks = self.planner.resolve(found.placement).ranks
            t = cap.earliest(job, ranks, found.start)
            if t <= found.start:
                return found
            if job.id not in self.cap_text:
                self.cap_text[job.id] = cap.reason(job, ranks, self.now)
            if t >= before or t == math.inf:
                return None
            found = search(t)
        return found

    def keeps_reservation(self, job: Job) -> bool:
        """Re-plan ``job``'s reservation in the cheap cases: when nothing that
        became available since its last search could let it start earlier
        (:meth:`Planner.unchanged_for`), or a search with the reservation
        set aside but left in the plan finds nothing earlier
        (:meth:`Planner.can_search_aside`), do only the bookkeeping.  When
        that search finds an earlier place, :meth:`earliest` hands it out
        after :meth:`unreserve` rather than search again."""
        planner = self.planner
        if self.cap is not None:
            return False  # watts freed elsewhere may let it start earlier: re-planned
        if planner.unchanged_for(job.id, job.duration, self.now):
            self.counters["matches"] += 1  # the search it stands for
            return True
        if not planner.can_search_aside(job.id, job.duration, self.now):
            return False
        self.counters["matches"] += 1
        span = planner.span(job.id)
        assert span is not None
        found = planner.earliest_bits(
            job.request,
            self.now,
            job.duration,
            self.options.placement,
            before=span.start,
            since=span.seq,
            own=job.id,
            aside=True,
        )
        if found is None:
            planner.keep(job.id)
            return True
        self._aside = (job, span.start, found, planner.log_end)
        return False

    def reserve(self, job: Job, slot: Slot) -> None:
        planner = self.planner
        t, placement = slot.start, slot.placement
        searched = self._searched
        self._searched = None
        # Nothing fits before t, as of now: the search just made says so.
        fresh = searched is not None and searched[0] is job and searched[1] == t and searched[2] == planner.log_end
        fresh = fresh and self.cap is None  # under a cap, nodes may fit before t where watts do not
        self.table.plan_reservation(job.id, placement.resources, t, t + job.duration, placement.bits)
        if fresh:
            planner.searched(job.id)
        if job.first_estimate is None:
            job.first_estimate = t

    def forecast_stamp(self) -> tuple[Any, ...]:
        """What this queue's forecasts were made around, to tell at a later
        pass (:meth:`forecasts_stand`) whether they still hold."""
        planner = self.planner
        return (planner, planner.log_end, planner.running_added, planner.pool_bits())

    def forecasts_stand(self, stamp: tuple[Any, ...] | None, head_start: float) -> bool:
        """True when, since ``stamp``, the plan changed only by resources
        freed before ``head_start`` (jobs that ended early, before the
        head's forecast start): no job started, nothing went down or came
        up, no window is blocked and one queue is planned.  Forecasts made
        in queue order from ``head_start`` on then read the same
        availability; whether the head itself can now start earlier is
        :meth:`fits_just_before`'s to tell.  Call it before this pass
        changes the plan."""
        planner = self.planner
        if stamp is None or self.multi or planner.nblocked or self.cap is not None:
            return False
        owner, log_end, running, pool = stamp
        if owner is not planner or planner.running_added != running or planner.pool_bits() != pool:
            return False
        gains = planner.gains_since(log_end)
        return gains is not None and all(b <= head_start for _, b, _, _ in gains)

    def fits_just_before(self, job: Job, t: float) -> bool:
        """Whether ``job`` fits anywhere in ``[now, t)`` around the running
        jobs alone: reservations that start at ``t`` or later (this queue's
        forecasts behind a head forecast at ``t``) do not count."""
        return self.planner.fits_just_before(job.request, t, self.options.placement)

    def count_match(self) -> None:
        """Count a search that a reservation kept as it is stands for."""
        self.counters["matches"] += 1

    def still_free(self, job: Job, slot: Slot) -> bool:
        bits, t = slot.placement.bits, slot.start
        planner = self.planner
        if self.cap is not None and not self.cap.fits(job, planner.resolve(slot.placement).ranks, t):
            return False
        if planner.counted and (n := planner.whole_of(bits)) is not None and not planner.nblocked:
            return planner.counts_allow(t, t + job.duration, n)  # it promises a count
        return self._avail(job, t, t + job.duration) & bits == bits

    def clear_reservations(self) -> None:
        """Drop the current queue's reservations (another queue's stay)."""
        planner = self.planner
        jobs = self.table.jobs
        queue = self.queue
        for span in planner.reserved():
            job = jobs.get(span.jobid)
            if self.multi and (job is None or job.queue is not queue):
                continue
            self.table.unplan(span.jobid)

    def drop_reservations(self, jobids: list[int]) -> None:
        """Drop the reservations of ``jobids`` (those that have one)."""
        for jobid in jobids:
            if jobid in self.planner:
                self.table.unplan(jobid)

    # A placement's resources are None until decoded: see Planner.resolve.

    def reservation(self, job: Job) -> Slot | None:
        span = self.planner.span(job.id)
        return None if span is None or span.running else Slot(span.start, span.placement)

    def reserved_start(self, job: Job) -> float | None:
        """When ``job``'s reservation starts (its slot not built), or None."""
        span = self.planner.span(job.id)
        return None if span is None or span.running else span.start

    def unreserve(self, job: Job) -> Slot | None:
        span = self.table.unplan(job.id)
        if span is None:
            return None
        if not span.running and span.end == span.start + job.duration:
            self._unreserved = (job, span.start, span.seq)
        return Slot(span.start, span.placement)

    def hopeless(self, job: Job) -> bool:
        """True when a job at least as big and as long already failed to
        start now in this pass (nothing a pass does frees resources)."""
        if job.request.reservation is not None:
            return False  # its window, not its shape, decides
        if self.cap is not None:
            # Its watts too: only a job of the same shape that draws the same (see failed)
            return (job.shape_id, job.request.computes) in self._failed_shapes
        if job.shape_id in self._failed_shapes:
            return True
        n = job.whole_nodes
        if n:
            d = job.duration
            for fn, fd in self._failed_nodes:
                if fn <= n and fd <= d:
                    return True
        return False

    def failed(self, job: Job) -> None:
        """Record that ``job`` could not start now (see :meth:`hopeless`)."""
        if job.request.reservation is not None:
            return
        if self.cap is not None:
            # A bigger job need not draw more (a job that computes nothing adds no watts)
            self._failed_shapes.add((job.shape_id, job.request.computes))
            return
        self._failed_shapes.add(job.shape_id)
        n = job.whole_nodes
        if n:
            self._failed_nodes.append((n, job.duration))

    def hold_limit(self, job: Job, why: str) -> None:
        """``job`` would cross a limit (``why`` says which): it waits without
        a reservation, and the jobs behind it are not held for it."""
        self.held[job.id] = "limit"
        self.held_ok.add(job.id)
        self.limit_text[job.id] = why
        self.table.unplan(job.id)

    def hold(self, job: Job, why: str) -> None:
        self.held[job.id] = why
        if why in ("backfill", "depth"):
            self.held_ok.add(job.id)

    # -- annotations ---------------------------------------------------------

    def constraint_blocks(self, job: Job) -> bool:
        """True when ``job`` would fit now but for its constraint."""
        key = job.shape_id
        if self._constraint_cache is None:
            self._constraint_cache = memo.store("constraint")
        if key in self._constraint_cache:
            return self._constraint_cache[key]
        g = self.table.graph
        match = self.planner.matcher
        free = g.free()
        blocked = False
        if free:
            unconstrained = dataclasses.replace(job.request, constraints=None)
            with_c = match(g, job.request, policy=self.options.placement, available=free)
            if with_c is None:
                blocked = match(g, unconstrained, policy=self.options.placement, available=free) is not None
        if not blocked and job.request.constraints is not None:
            # Or: the constraint leaves too few resources ever to run.
            unconstrained = dataclasses.replace(job.request, constraints=None)
            blocked = self._feasibility(job.request) is not None and self._feasibility(unconstrained) is None
        self._constraint_cache[key] = blocked
        return blocked


def _least(needs: dict[Any, list[tuple[Any, Job]]], job: Job, need: Any) -> None:
    """Add ``job``'s ``need`` to ``needs``, the least needs (none of them at
    least another, resource by resource) of the jobs of each user and queue."""
    key = (job.request.queue, job.userid)
    mins = needs.get(key)
    if mins is None:
        needs[key] = [(need, job)]
        return
    if any(_covers(m, need) for m, _ in mins):
        return
    mins[:] = [e for e in mins if not _covers(need, e[0])]
    mins.append((need, job))


def _covers(less: Any, more: Any) -> bool:
    """Whether ``less`` needs no more than ``more`` of every resource."""
    return all(a <= b for a, b in zip(less, more, strict=True))


def _sortkey(job: Job) -> tuple[int, float, int]:
    return job.sortkey
