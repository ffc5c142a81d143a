"""The power cap: a machine-wide budget of watts the machine stays under.

``power-cap=WATTS`` (optionally only over ``power-cap-window=START-END``,
as in the energy-budget work done with Batsim) is a one-dimensional
resource over time, like a count of processors: the machine draws its
nodes' idle watts with nothing running, and each job raises that by its
nodes' computing less idle watts for as long as it may run.  A job starts
only if that planned draw stays under the cap over its whole run, and a
reservation (so a ``t_estimate``) is placed only where both its nodes and
the watts are free: the planner's earliest place for the nodes and this
module's earliest time for the watts are asked in turn until they agree
(:meth:`Pass.earliest <fluxsched_py.engine.passctx.Pass.earliest>`).

Why the plan must never be below what the machine will draw: the cap is
checked against the power the machine really draws at every instant, and
a job may run until its kill time.  So a job's watts are planned from its
start to its kill time (its walltime, never an EASY++ prediction), and a
job is planned at computing watts unless its request says it computes
nothing (``Request.computes``: the replay's Batsim ``delay`` jobs, which
SimGrid counts at idle watts).  Two jobs that share a node each count the
node's extra watts.

Why there is no state here (but the clock of the last pass, for the end of
the window): what runs is the job table's and what is
reserved is the planner's, both changed only through the job table (its
one door), and which nodes are not on is power saving's.  The draw over
time is made from them when asked, so it can never disagree with them; a pass asks only when the cap is set, and an
engine without ``power-cap`` makes no :class:`PowerCap` at all.

With power saving (``power-save``), a node that is not on draws its
switch's watts until the switch ends, and its sleeping watts while asleep
(:meth:`PowerSaving.switches <fluxsched_py.engine.power.PowerSaving.switches>`
says which and until when): switching idle nodes off frees watts for jobs.
A job planned on sleeping nodes is planned with their boot before its start
(booting watts), and from its start on they draw at least idle watts for
good (nothing in the plan says when they will be switched off again).  Every
switch power saving decides is asked first (:meth:`PowerCap.allows`): a wake
the cap has no room for waits, so a sleeping node never boots into watts
the plan gave a job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..power import PowerModel
from .states import EngineError, JobState

if TYPE_CHECKING:
    from ..jobspec import Request
    from .jobs import Job
    from .jobtable import JobTable
    from .options import EngineOptions
    from .power import NodeSwitch

__all__ = ["PowerCap"]

#: Watts of float noise a planned draw may be over the cap by.
_EPS = 1e-6

#: A step function of watts: (the times it changes, sorted; the watts from each on).
Profile = tuple[list[float], list[float]]


class PowerCap:
    """The watts the plan leaves under the cap (see the module docstring).

    ``models[rank]`` is rank's power model; ``table`` the job table whose
    running jobs and planner's reservations are what draws; ``options``
    gives the options in force (the cap and its window); ``switches``, the
    nodes that are not on (power saving's, none without it)."""

    def __init__(
        self,
        models: Sequence[PowerModel],
        table: JobTable,
        options: Callable[[], EngineOptions],
        switches: Callable[[], Mapping[int, NodeSwitch]] = dict,
    ) -> None:
        self.models = list(models)
        self._table = table
        self._options = options
        self._switches = switches
        #: What the machine draws with every node on and idle (every node
        #: modelled: a node down draws as much, for all the cap knows).
        self.idle = sum(m.idle_watts for m in self.models)
        #: The time of the last pass (:meth:`tick`), for the window's end.
        self._now = -math.inf
        #: (computes, others asleep) -> the least the machine can draw with k
        #: nodes running one job, at index k: the k nodes it adds least on.
        self._least = {(c, a): self._least_draws(c, a) for c in (True, False) for a in (True, False)}

    def _least_draws(self, computes: bool, asleep: bool) -> list[float]:
        base = [m.sleeping_watts if asleep else m.idle_watts for m in self.models]
        work = [m.computing_watts if computes else m.idle_watts for m in self.models]
        out = [sum(base)]
        for d in sorted(w - b for w, b in zip(work, base, strict=True)):
            out.append(out[-1] + d)
        return out

    def check(self, options: EngineOptions) -> None:
        """EngineError when ``options`` ask for a cap that cannot be held."""
        watts = options.power_cap
        if watts is None:
            return
        if watts + _EPS < self.idle:
            raise EngineError(f"power-cap={watts:g}: below the {self.idle:g} W the machine draws with every node idle")

    @property
    def watts(self) -> float:
        """The cap in force (``power-cap``)."""
        cap = self._options().power_cap
        return math.inf if cap is None else cap

    def tick(self, now: float) -> bool:
        """Before a pass at ``now``: True when the cap's window ended since
        the last one, so that what it held back is planned again."""
        window = self._options().power_cap_window
        last, self._now = self._now, max(self._now, now)
        return window is not None and last < window[1] <= now

    def wakeup(self) -> float:
        """When a pass is due though nothing ends: the end of the cap's
        window after the last pass, when jobs held by it may start (a
        reservation may be placed there, and no job need end then)."""
        window = self._options().power_cap_window
        if window is None or window[1] <= self._now:
            return math.inf
        return window[1]

    def _steps(
        self, job: Job, ranks: Iterable[int], switches: Mapping[int, NodeSwitch]
    ) -> tuple[float, float, float, float]:
        """What ``job`` on ``ranks`` adds to the draw, relative to its start:
        ``(boot, booting, running, after)``: ``booting`` watts for the
        ``boot`` seconds before it (its sleeping nodes woken), ``running``
        while it runs, ``after`` from its end on (those nodes left on)."""
        computes = getattr(job.request, "computes", True)
        boot = booting = running = after = 0.0
        for r in ranks:
            m = self.models[r]
            work = m.computing_watts if computes else m.idle_watts
            s = switches.get(r)
            if s is not None and (s.state == "sleeping" or (s.state == "switching_off" and not s.then_on)):
                boot = max(boot, m.on_time)
                booting += m.on_watts - m.sleeping_watts
                running += work - m.sleeping_watts
                after += m.idle_watts - m.sleeping_watts
            else:
                running += work - m.idle_watts
        return boot, booting, running, after

    def never_fits(self, request: Request) -> str | None:
        """Why a job of ``request`` (whole nodes) could never run under the
        cap, or None: even on the nodes it adds least on, with every other
        node idle (asleep, under power saving), the machine would draw more
        than the cap.  A cap with a window lets it run outside it."""
        opts = self._options()
        n = getattr(request, "whole_nodes", 0)
        if opts.power_cap is None or opts.power_cap_window is not None or not n or n >= len(self._least[True, True]):
            return None
        asleep = opts.power_save != "off"
        least = self._least[getattr(request, "computes", True), asleep][n]
        if least <= self.watts + _EPS:
            return None
        others = "asleep" if asleep else "idle"
        return (
            f"power cap: on {n} nodes it draws at least {least:.0f} W with every other node {others}, "
            f"over the {self.watts:.0f} W cap"
        )

    def _planned_end(self, job: Job, start: float) -> float:
        """Until when ``job``, started at ``start``, may draw: its kill time."""
        end = job.expiration if job.state is not JobState.PENDING else start + job.walltime
        return max(end, start)

    def profile(self, exclude: int | None = None, switches: Mapping[int, NodeSwitch] | None = None) -> Profile:
        """The machine's planned draw over time (running jobs to their kill
        time, reservations to their start plus walltime, the nodes that are
        not on as ``switches`` says: as they are when None), ``exclude``'s
        reservation left out."""
        table = self._table
        jobs = table.jobs
        deltas: dict[float, float] = {}
        if switches is None:
            switches = self._switches()

        def add(a: float, b: float, w: float) -> None:
            if w and b > a:
                deltas[a] = deltas.get(a, 0.0) + w
                deltas[b] = deltas.get(b, 0.0) - w

        now = self._now
        for r, s in switches.items():
            m = self.models[r]
            if s.state == "switching_on":
                add(now, s.until, m.on_watts - m.idle_watts)
            elif s.state == "switching_off":
                add(now, s.until, m.off_watts - m.idle_watts)
                if s.then_on:
                    add(s.until, s.until + m.on_time, m.on_watts - m.idle_watts)
                else:
                    add(s.until, math.inf, m.sleeping_watts - m.idle_watts)
            else:
                add(now, math.inf, m.sleeping_watts - m.idle_watts)
        for job in jobs.values():
            if job.state is JobState.PENDING or job.resources is None or job.t_start is None:
                continue
            running = self._steps(job, job.resources.ranks, switches)[2]  # its nodes are on
            add(job.t_start, self._planned_end(job, job.t_start), running)
        for span in table.planner.reserved():
            job = jobs.get(span.jobid)
            if job is None or span.jobid == exclude or job.state is not JobState.PENDING:
                continue
            end = max(span.end, self._planned_end(job, span.start))
            boot, booting, running, after = self._steps(job, span.resources.ranks, switches)
            add(span.start - boot, span.start, booting)
            add(span.start, end, running)
            add(end, math.inf, after)
        deltas.pop(math.inf, None)
        times = sorted(deltas)
        watts = []
        level = self.idle
        for t in times:
            level += deltas[t]
            watts.append(level)
        return [-math.inf, *times], [self.idle, *watts]

    def _over(self, profile: Profile, need: float) -> list[tuple[float, float]]:
        """The intervals in which ``need`` more watts would cross the cap, in order."""
        cap = self.watts
        window = self._options().power_cap_window
        lo, hi = (-math.inf, math.inf) if window is None else window
        lo = max(lo, self._now)  # what is past is drawn already
        times, watts = profile
        out: list[tuple[float, float]] = []
        for k, t in enumerate(times):
            if watts[k] + need <= cap + _EPS:
                continue
            a, b = max(t, lo), min(times[k + 1] if k + 1 < len(times) else math.inf, hi)
            if a < b:
                if out and out[-1][1] >= a:
                    out[-1] = (out[-1][0], b)
                else:
                    out.append((a, b))
        return out

    def earliest(self, job: Job, ranks: Iterable[int], t0: float, exclude: int | None = None) -> float:
        """The earliest time from ``t0`` on at which ``job`` on ``ranks``
        keeps the machine under the cap for its whole run, the boot of its
        sleeping nodes before it and their idle watts after it included
        (inf: never)."""
        switches = self._switches()
        boot, booting, running, after = self._steps(job, ranks, switches)
        length = job.walltime
        # each step, as (its start and end from the job's start, its watts): disjoint in time
        steps = [
            (o1, o2, w)
            for o1, o2, w in ((-boot, 0.0, booting), (0.0, length, running), (length, math.inf, after))
            if w > 0 and o2 > o1
        ]
        if not steps:
            return t0
        profile = self.profile(exclude if exclude is not None else job.id, switches)
        overs = [self._over(profile, w) for _, _, w in steps]
        t = t0
        moved = True
        while moved:
            moved = False
            for (o1, o2, _), bad in zip(steps, overs, strict=True):
                for a, b in bad:
                    if b <= t + o1:
                        continue
                    if a >= t + o2:
                        break
                    t = b - o1  # past the watts it would cross
                    moved = True
                    break
                if t == math.inf:
                    return t
        return t

    def fits(self, job: Job, ranks: Iterable[int], start: float) -> bool:
        """Whether ``job`` on ``ranks`` from ``start`` keeps the machine under the cap."""
        return self.earliest(job, ranks, start) <= start

    def allows(self, switches: Mapping[int, NodeSwitch]) -> bool:
        """Whether the plan stays under the cap from now on with the nodes
        that are not on switching as ``switches`` says (power saving asks
        before it switches a node), and no more nodes are asleep than
        could all boot at once beside every other node idle: so a job
        that needs them can start once the machine is quiet, whatever the
        cap left it before."""
        window = self._options().power_cap_window
        if window is None or self._now < window[1]:
            quiet = self._quiet(switches)
            if quiet > self.watts + _EPS and quiet > self._quiet(self._switches()) + _EPS:
                return False
        return not self._over(self.profile(switches=switches), 0.0)

    def _quiet(self, switches: Mapping[int, NodeSwitch]) -> float:
        """What the machine draws with the nodes of ``switches`` booting and every other one idle."""
        models = self.models
        return self.idle + sum(models[r].on_watts - models[r].idle_watts for r in switches)

    def reason(self, job: Job, ranks: Iterable[int], now: float) -> str:
        """``reason_pending`` words for ``job``, held by the cap at ``now``:
        what it adds, and the least the cap leaves over its run from now."""
        need = self._steps(job, ranks, self._switches())[2]
        times, watts = self.profile(job.id)
        end = now + job.walltime
        window = self._options().power_cap_window
        lo, hi = (-math.inf, math.inf) if window is None else window
        peak = -math.inf
        for k, t in enumerate(times):
            nxt = times[k + 1] if k + 1 < len(times) else math.inf
            if nxt > max(now, lo) and t < min(end, hi):
                peak = max(peak, watts[k])
        left = max(0.0, self.watts - peak) if peak > -math.inf else self.watts
        return f"power cap: needs {need:.0f} W more over its run, {left:.0f} W left under the {self.watts:.0f} W cap"
