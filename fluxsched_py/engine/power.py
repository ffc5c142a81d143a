"""Power saving: idle nodes switched off, and woken in time for their jobs.

``power-save=idle`` is Slurm's power saving (``SuspendTime``): a node idle
for ``power-idle-time`` is switched off, and a job that needs it waits for
its boot.  ``power-save=planned`` uses the plan: an idle node that a
pending job's reservation holds is never switched off, and a sleeping one
it holds is woken before the job could start, so that job does not wait
for the boot.  The plan's starts are upper bounds: it ends running jobs at
their walltimes, and a job ends at its walltime or sooner, so a reserved
job may start at any instant before its planned start.  A gap measured on
the plan therefore says nothing about how long a reserved node would sleep
(switched off, it would most often be woken again soon, the job waiting
for its boot), while a node no job is reserved on is idle until a job
arrives for it.  A sleeping node a reservation holds is woken a boot before
the planned start at the latest, and at once when the reservation holds at
least as many nodes on and free as asleep: those wait for the job too, so
every second its start would wait for the boot costs their idle watts,
which is at least what booting the sleeping ones that much earlier costs.

How the plan sees a node that is not on: its items are held, in the graph
and in the planner, by a *power hold* (id :func:`hold_id`, made and changed
only through the job table).  A sleeping node's hold ends a boot time from
now, and moves with the clock before every pass (:meth:`PowerSaving.advance`);
a node switching on is held until its boot ends; one switching off, until
the switch ends and a boot after it.  So every policy, reservation and
``t_estimate`` plans a job on sleeping nodes at the earliest time they can
be on, and nothing starts on a node that is not on.

Decisions are made after each complete pass (:meth:`PowerSaving.decide`),
in this order:

1. *wake*: for each reservation that holds sleeping nodes, when its
   start is a boot time away or less, or (under ``planned``) when it holds
   at least as many nodes on and free; under ``idle``, only when the rest
   of what it holds is free now too (the job would start but for the boot);
   and for each pending job without a reservation (a backfill candidate),
   when the earliest start the plan gives it is a boot away and lands on
   sleeping nodes (the job waits for their boot, and nothing else);
2. *switch off*: each node idle for ``power-idle-time`` that no job is
   planned on before a switch off and back on could end (under
   ``planned``, that no job is reserved on at all), keeping
   ``power-keep-on`` idle nodes on, at most ``power-rate`` switches a
   minute, never a node of ``power-exclude``.

Under a power cap (``power-cap``), each of these switches is made only if
the cap leaves room for it (:meth:`PowerCap.allows
<fluxsched_py.engine.powercap.PowerCap.allows>`, asked with the nodes as they
would be after it; :meth:`switches` is what the cap reads of them).

The driver carries the actions out (:class:`PowerOff`, :class:`PowerOn` in
``PassResult.power``) and reports each switch's end with
:meth:`Engine.power_changed <fluxsched_py.engine.core.Engine.power_changed>`:
a node is used only once its driver says it is on.  With
``power-save=off`` (the default) none of this exists: the engine makes no
:class:`PowerSaving` and decides exactly as without this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..ids import IdSet
from ..power import PowerModel

if TYPE_CHECKING:
    from ..planner import Planner
    from ..resource import ResourceGraph, ResourceSet
    from .jobs import Job
    from .options import EngineOptions

__all__ = ["NodeSwitch", "PowerOff", "PowerOn", "PowerSaving", "hold_id", "is_hold"]

#: How much sooner than a boot away a start may be and still wake its nodes (float noise).
_EPS = 1e-6
#: Backfill candidates examined for wakes after each pass (the rest wait for the next).
_DEMAND_DEPTH = 32


#: Power holds' ids start here, below every job id and the pass's own scratch ids.
_HOLD_BASE = -(1 << 40)


def hold_id(rank: int) -> int:
    """The id of ``rank``'s power hold in the graph and the planner."""
    return _HOLD_BASE - rank


def is_hold(jobid: int) -> bool:
    """``jobid`` is a power hold's."""
    return jobid <= _HOLD_BASE


@dataclass(frozen=True, slots=True)
class NodeSwitch:
    """A node that is not on: ``state`` (``switching_off``, ``sleeping``,
    ``switching_on``) until ``until`` (inf while asleep); ``then_on``: a
    node switching off that is woken as soon as it is off."""

    state: str
    until: float
    then_on: bool = False


#: Whether the power cap leaves room for the nodes' switches to be as given (rank -> switch).
CapAllows = Callable[[Mapping[int, NodeSwitch]], bool]


@dataclass(frozen=True, slots=True)
class PowerOff:
    """Switch ``ranks`` off (Batsim: their sleep pstate; Flux: the suspend program)."""

    ranks: IdSet


@dataclass(frozen=True, slots=True)
class PowerOn:
    """Switch ``ranks`` on; ``reason`` says for whom."""

    ranks: IdSet
    reason: str


class PowerDoor(Protocol):
    """What power saving may change: the job table's holds (its one door)."""

    def allocate(self, jobid: int, rs: ResourceSet) -> None: ...
    def release(self, jobid: int, rs: ResourceSet | None = None) -> ResourceSet: ...
    def plan_run(self, jobid: int, rs: ResourceSet, start: float, end: float = math.inf) -> None: ...
    def plan_reservation(self, jobid: int, rs: ResourceSet, start: float, end: float, bits: int | None) -> None: ...
    def unplan(self, jobid: int) -> object: ...
    def set_plan_end(self, jobid: int, end: float) -> list[int]: ...


class PowerSaving:
    """The power state of every managed node and the decisions about it
    (see the module docstring).  ``models[rank]`` is rank's power model."""

    def __init__(self, models: Sequence[PowerModel], options: EngineOptions) -> None:
        self.models = list(models)
        self.options = options
        #: rank -> "switching_off" | "sleeping" | "switching_on" (absent: on)
        self.state: dict[int, str] = {}
        #: ranks to wake as soon as their switch off ends
        self.wake_after_off: set[int] = set()
        #: rank -> when its switch ends (inf: asleep), for each rank in ``state``
        self.until: dict[int, float] = {}
        #: rank -> since when it has been on and idle
        self.idle_since: dict[int, float] = {}
        #: rank -> when it last came on (it is not switched off again at that same instant)
        self._came_on: dict[int, float] = {}
        #: the times of the recent switches off (``power-rate``)
        self._recent: list[float] = []
        #: when the last decisions were made (the wakeups are after it)
        self._decided = -math.inf
        self.counters = {"power_off": 0, "power_on": 0}

    # -- what the plan sees ------------------------------------------------------

    def advance(self, now: float, door: PowerDoor) -> bool:
        """Before a pass: each sleeping node's hold ends a boot from ``now``.
        True when that moved a hold (the pass must plan again)."""
        moved = False
        for rank, state in self.state.items():
            if state == "sleeping":
                door.set_plan_end(hold_id(rank), now + self.models[rank].on_time)
                moved = True
        return moved

    def _hold(self, r: int, now: float, end: float, graph: ResourceGraph, door: PowerDoor) -> None:
        """``r``'s items held from ``now`` to ``end`` (it is not on)."""
        rs = graph.all().restrict(IdSet.of(r))
        door.allocate(hold_id(r), rs)
        door.plan_run(hold_id(r), rs, now, end)

    # -- decisions ----------------------------------------------------------------

    def decide(
        self,
        now: float,
        door: PowerDoor,
        graph: ResourceGraph,
        planner: Planner,
        pending: Callable[[], Iterable[Job]],
        placement: str,
        cap_allows: CapAllows | None = None,
    ) -> list[PowerOff | PowerOn]:
        """The switches to make after a complete pass at ``now``
        (``pending()``: the pending regular jobs in order, asked for only
        when a sleeping node might be woken for one).  Under a power cap,
        ``cap_allows`` says whether the machine stays under it with the
        switches made: a switch that would cross it is not made (a wake
        waits for room, a switch off for the next decision)."""
        self._decided = now
        opts = self.options
        actions: list[PowerOff | PowerOn] = []
        sleeping = {r for r, s in self.state.items() if s == "sleeping"}
        wake: dict[int, str] = {}
        next_use: dict[int, float] = {}
        #: ``idle``: nodes on that a reservation holds with nodes not on.  Its
        #: sleeping nodes are woken once the rest is free: switched off, these
        #: would make it wait for their boot too, and the nodes woken for it
        #: could be switched off in turn while these boot, again and again.
        waiting: set[int] = set()
        free_ranks = _idle_ranks(graph)
        for span in planner.reserved():
            ranks = span.resources.ranks
            for r in ranks:
                if span.start < next_use.get(r, math.inf):
                    next_use[r] = span.start
                if self.state.get(r) == "switching_off" and r not in self.wake_after_off:
                    if cap_allows is None or cap_allows(self._after({r: self._woken_after_off(r)})):
                        self.wake_after_off.add(r)  # woken once it is off
            if opts.power_save == "idle" and any(r in self.state for r in ranks):
                waiting.update(r for r in ranks if r not in self.state)
            asleep = [r for r in ranks if r in sleeping]
            if not asleep:
                continue
            # its start is a boot away (or less): its nodes must be woken now for it ...
            due = span.start - max(self.models[r].on_time for r in asleep) <= now + _EPS
            if opts.power_save == "idle":
                # ... and, reactive, only when the rest of what it holds is free now
                due = due and all(r in free_ranks or r in sleeping for r in ranks)
            elif not due:
                # ... or sooner, once as many of its nodes wait for it on as asleep
                # (their idle watts over a late boot outweigh booting early)
                due = sum(1 for r in ranks if r in free_ranks and r not in self.state) >= len(asleep)
            if due:
                for r in asleep:
                    wake.setdefault(r, f"job {span.jobid}")
        if sleeping - set(wake):
            self._demand(now, door, planner, pending, placement, sleeping, wake)
        keep = opts.power_keep_on
        if keep:
            # keep-on counts nodes on and idle or on their way: wake sleeping ones to make it up
            ready = sum(1 for r in free_ranks if r not in self.state and r not in next_use)
            ready += sum(1 for s in self.state.values() if s == "switching_on")
            ready += len(wake)
            for r in sorted(sleeping - set(wake) - set(next_use) - opts.power_exclude):
                if ready >= keep:
                    break
                wake[r] = "power-keep-on"
                ready += 1
        if wake and cap_allows is not None:
            wake = self._within_cap(now, wake, cap_allows)
        if wake:
            for r in wake:
                self.wake_after_off.discard(r)
            actions += self._switch_on(now, door, wake)
        # idle nodes
        excluded = opts.power_exclude
        idle = [r for r in free_ranks if r not in self.state and r not in excluded and r not in waiting]
        for r in list(self.idle_since):
            if r not in free_ranks or r in self.state:
                del self.idle_since[r]
        for r in idle:
            self.idle_since.setdefault(r, now)
        candidates = []
        for r in idle:
            if now - self.idle_since[r] + _EPS < opts.power_idle_time or self._came_on.get(r) == now:
                continue  # not idle long enough, or on since this very instant (no switch back at once)
            model = self.models[r]
            gap = next_use.get(r, math.inf) - now
            if gap <= model.off_time + model.on_time:
                continue  # a job waits for it (it could not be back in time)
            if opts.power_save == "planned" and gap < math.inf:
                continue  # a job is reserved on it, and may start on it any time before its planned start
            candidates.append(r)
        if keep:
            # keep the idle nodes that would be left on last: those idle the shortest
            spare = len(idle) - len(candidates)
            drop = max(0, keep - spare)
            candidates.sort(key=lambda r: (-self.idle_since[r], r))
            candidates = candidates[drop:]
        if opts.power_rate is not None:
            self._recent = [t for t in self._recent if t > now - 60.0]
            room = max(0, opts.power_rate - len(self._recent))
            candidates.sort(key=lambda r: (self.idle_since[r], r))
            candidates = candidates[:room]
        if candidates and cap_allows is not None:
            # a switch off draws more than idle while it lasts: as many as the cap has room for
            going: dict[int, NodeSwitch] = {}
            for k, r in enumerate(candidates):
                trial = {**going, r: NodeSwitch("switching_off", now + self.models[r].off_time)}
                if not cap_allows(self._after(trial)):
                    candidates = candidates[:k]
                    break
                going = trial
        if candidates:
            off = sorted(candidates)
            for r in off:
                model = self.models[r]
                self._hold(r, now, now + model.off_time + model.on_time, graph, door)
                self.state[r] = "switching_off"
                self.until[r] = now + model.off_time
                del self.idle_since[r]
                self._recent.append(now)
            self.counters["power_off"] += len(off)
            actions.append(PowerOff(IdSet(off)))
        return actions

    def switches(self) -> dict[int, NodeSwitch]:
        """Each node that is not on, with its switch (what it draws until when: the power cap's baseline)."""
        return {
            r: NodeSwitch(state, self.until[r], r in self.wake_after_off and state == "switching_off")
            for r, state in self.state.items()
        }

    def _after(self, changes: Mapping[int, NodeSwitch]) -> dict[int, NodeSwitch]:
        """The switches as they would be with ``changes`` made."""
        out = self.switches()
        out.update(changes)
        return out

    def _woken_after_off(self, r: int) -> NodeSwitch:
        return NodeSwitch("switching_off", self.until[r], True)

    def _within_cap(self, now: float, wake: dict[int, str], cap_allows: CapAllows) -> dict[int, str]:
        """The wakes of ``wake`` the power cap leaves room for, taken for
        whom they are in turn, each all or none (a job's nodes boot together)."""
        groups: dict[str, list[int]] = {}
        for r, why in wake.items():
            groups.setdefault(why, []).append(r)
        taken: dict[int, NodeSwitch] = {}
        out: dict[int, str] = {}
        for why, ranks in groups.items():
            trial = {r: NodeSwitch("switching_on", now + self.models[r].on_time) for r in ranks}
            if cap_allows(self._after({**taken, **trial})):
                taken.update(trial)
                out.update(dict.fromkeys(ranks, why))
        return out

    def _demand(
        self,
        now: float,
        door: PowerDoor,
        planner: Planner,
        pending: Callable[[], Iterable[Job]],
        placement: str,
        sleeping: set[int],
        wake: dict[int, str],
    ) -> None:
        """Backfill candidates (pending jobs with no reservation, of a
        queue whose policy backfills) whose earliest start is a boot away,
        on sleeping nodes: those nodes are woken for them.  While the
        candidates are examined, each one woken for holds its place (a
        reservation, dropped at the end), so the next is placed around it:
        every candidate the plan can serve now is served by this one
        decision, whenever the next pass comes."""
        claimed: list[int] = []
        seen = 0
        try:
            for job in pending():
                if not job.queue.policy.backfills or planner.span(job.id) is not None:
                    continue  # its order or its reservation decides: above
                seen += 1
                if seen > _DEMAND_DEPTH or not sleeping - set(wake):
                    return
                slot = planner.earliest_bits(job.request, now, job.duration, placement)
                if slot is None:
                    continue
                rs = planner.resolve(slot.placement)
                asleep = [r for r in rs.ranks if r in sleeping and r not in wake]
                if not asleep or slot.start - max(self.models[r].on_time for r in asleep) > now + _EPS:
                    continue
                for r in asleep:
                    wake[r] = f"job {job.id}"
                door.plan_reservation(job.id, rs, slot.start, slot.start + job.duration, slot.placement.bits)
                claimed.append(job.id)
        finally:
            for jobid in claimed:
                door.unplan(jobid)

    def _switch_on(self, now: float, door: PowerDoor, wake: dict[int, str]) -> list[PowerOn]:
        """Start booting the nodes of ``wake`` (rank -> for whom): each is held until its boot ends."""
        ranks = sorted(wake)
        for r in ranks:
            end = now + self.models[r].on_time
            door.set_plan_end(hold_id(r), end)
            self.state[r] = "switching_on"
            self.until[r] = end
        self.counters["power_on"] += len(ranks)
        reasons = sorted(set(wake.values()))
        return [PowerOn(IdSet(ranks), ", ".join(reasons[:4]) + (" ..." if len(reasons) > 4 else ""))]

    # -- what the driver reports ------------------------------------------------------

    def changed(self, ranks: Iterable[int], on: bool, now: float, door: PowerDoor) -> list[PowerOn]:
        """Switches that ended at ``now``: ``ranks`` are on (``on``) or
        asleep.  A node a job was planned on while it switched off is
        woken at once (the actions to send)."""
        again = []
        for r in ranks:
            state = self.state.get(r)
            if on:
                if state is None:
                    continue
                door.unplan(hold_id(r))
                door.release(hold_id(r))
                del self.state[r]
                del self.until[r]
                self.idle_since[r] = now
                self._came_on[r] = now
            else:
                if state != "switching_off":
                    continue
                self.state[r] = "sleeping"
                self.until[r] = math.inf
                if r in self.wake_after_off:
                    self.wake_after_off.discard(r)
                    again.append(r)
        if not again:
            return []
        return self._switch_on(now, door, dict.fromkeys(again, "planned while it switched off"))

    def wakeup(self, planner: Planner) -> float:
        """When the next decision falls due with no message: an idle node's
        ``power-idle-time`` ending, a planned start a boot away (after the
        last decisions)."""
        now = self._decided
        t = math.inf
        idle_time = self.options.power_idle_time
        for since in self.idle_since.values():
            due = since + idle_time
            if due > now:
                t = min(t, due)
        if self.options.power_save == "planned" and "sleeping" in self.state.values():
            for span in planner.reserved():
                for r in span.resources.ranks:
                    if self.state.get(r) == "sleeping":
                        due = span.start - self.models[r].on_time
                        if due > now:
                            t = min(t, due)
        return t

    def not_on(self, ranks: Iterable[int]) -> int:
        """How many of ``ranks`` are not on (asleep or switching)."""
        state = self.state
        return sum(1 for r in ranks if r in state)

    def adopt(self, ranks: Iterable[int], now: float, door: PowerDoor, graph: ResourceGraph) -> IdSet:
        """``ranks`` are asleep already (switched off before a restart):
        held as sleeping nodes from ``now``.  Those not free (a running
        job's, down) are left alone.  Returns the ranks adopted."""
        free = _idle_ranks(graph)
        taken = []
        for r in sorted(set(ranks)):
            if r in self.state or r not in free or r >= len(self.models):
                continue
            self._hold(r, now, now + self.models[r].on_time, graph, door)
            self.state[r] = "sleeping"
            self.until[r] = math.inf
            self.idle_since.pop(r, None)
            taken.append(r)
        return IdSet(taken)

    def states(self) -> dict[str, str]:
        """The nodes in each state that is not on, as idsets (``flux module stats``)."""
        out: dict[str, list[int]] = {"switching_off": [], "sleeping": [], "switching_on": []}
        for r, state in sorted(self.state.items()):
            out[state].append(r)
        return {k: str(IdSet(v)) for k, v in out.items()}


def _idle_ranks(graph: ResourceGraph) -> set[int]:
    """The up, undrained ranks none of whose items anyone holds."""
    busy = graph.allocated().ranks
    down = set(graph.down_ranks()) | set(graph.drained_ranks())
    return {r for r in graph.free().ranks if r not in busy and r not in down}
