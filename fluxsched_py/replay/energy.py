"""The replay's energy: what the machine drew, as Batsim counts it (``batsim -E``).

Each node draws its power state's watts (:class:`~fluxsched_py.power.PowerModel`):
idle while on, the switch's watts while switching, the sleep watts asleep;
while it runs a job, the computing watts if the job computes, else the idle
watts.  A job of a Batsim ``delay`` profile computes nothing: SimGrid's host
energy model draws idle watts for a host that only sleeps, and so does this.

Batsim's ``consumed_joules`` is the energy drawn from the first job's
submission to the last job's completion; :func:`account` counts the same
interval, so the two compare directly.  The power states over time come from
the replay's log of switches (:class:`PowerLog`), in Batsim's
``machine_states`` terms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..ids import IdSet
from ..power import PowerModel

__all__ = ["Energy", "PowerLog", "account", "energy_rows", "node_states", "power_series", "pstate_rows"]


@dataclass(slots=True)
class PowerLog:
    """Every node power state change of a replay: (time, ranks, new state)."""

    changes: list[tuple[float, IdSet, str]] = field(default_factory=list)

    def add(self, t: float, ranks: IdSet, state: str) -> None:
        self.changes.append((t, ranks, state))

    def per_rank(self) -> dict[int, list[tuple[float, str]]]:
        out: dict[int, list[tuple[float, str]]] = {}
        for t, ranks, state in self.changes:
            for r in ranks:
                out.setdefault(r, []).append((t, state))
        return out


@dataclass(frozen=True, slots=True)
class Energy:
    """Joules drawn over ``[start, end]``, by what drew them."""

    start: float
    end: float
    idle: float
    computing: float
    switching: float
    sleeping: float

    @property
    def total(self) -> float:
        return self.idle + self.computing + self.switching + self.sleeping


def account(
    models: Sequence[PowerModel],
    runs: Iterable[tuple[float, float, IdSet, bool]],
    log: PowerLog,
    start: float,
    end: float,
) -> Energy:
    """The energy of a replay over ``[start, end]``: ``runs`` are the jobs'
    runs (start, end, ranks, whether the job computes), ``log`` the power
    state changes."""
    idle = computing = switching = sleeping = 0.0
    changes = log.per_rank()
    for rank, model in enumerate(models):
        t, state = start, "idle"
        seq = changes.get(rank, [])
        k = 0
        while k < len(seq) and seq[k][0] <= start:
            state = seq[k][1]
            k += 1
        for when, new in [*seq[k:], (end, "idle")]:
            when = min(when, end)
            if when > t:
                joules = (when - t) * model.watts(state)
                if state == "idle":
                    idle += joules
                elif state == "sleeping":
                    sleeping += joules
                else:
                    switching += joules
            t, state = max(t, when), new
            if t >= end:
                break
    for a, b, ranks, computes in runs:
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        for r in ranks:
            m = models[r]
            draw = m.computing_watts if computes else m.idle_watts
            idle -= (b - a) * m.idle_watts
            computing += (b - a) * draw
    return Energy(start, end, idle, computing, switching, sleeping)


def node_states(
    nodes: int, runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> list[tuple[float, int, int, int, int, int]]:
    """How many nodes were in each state from each time something changed:
    rows of (time, sleeping, switching on, switching off, idle, computing),
    Batsim's ``out_machine_states.csv``."""
    deltas: dict[float, dict[str, int]] = {}

    def bump(t: float, state: str, n: int) -> None:
        row = deltas.setdefault(t, {})
        row[state] = row.get(state, 0) + n

    for a, b, ranks, _ in runs:
        n = len(ranks)
        bump(a, "computing", n)
        bump(a, "idle", -n)
        bump(b, "computing", -n)
        bump(b, "idle", n)
    for seq in log.per_rank().values():
        state = "idle"
        for t, new in seq:
            bump(t, state, -1)
            bump(t, new, 1)
            state = new
    counts = {"sleeping": 0, "switching_on": 0, "switching_off": 0, "idle": nodes, "computing": 0}
    rows = [(0.0, *counts.values())]
    for t in sorted(deltas):
        for state, n in deltas[t].items():
            counts[state] += n
        if math.isfinite(t):
            rows.append((t, *counts.values()))
    return rows  # type: ignore[return-value]


def _steps(
    models: Sequence[PowerModel], runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> list[tuple[float, float, float]]:
    """The changes of the machine's watts, in time order: (time, change of
    watts, change of the least watts its nodes' states allow, Batsim's
    ``wattmin``: a job changes the first only, a power state both)."""
    steps = [(0.0, sum(m.idle_watts for m in models), sum(m.idle_watts for m in models))]
    for a, b, ranks, computes in runs:
        if computes:
            extra = sum(models[r].computing_watts - models[r].idle_watts for r in ranks)
            steps += [(a, extra, 0.0), (b, -extra, 0.0)]
    for rank, seq in log.per_rank().items():
        m = models[rank]
        state = "idle"
        for t, new in seq:
            delta = m.watts(new) - m.watts(state)
            steps.append((t, delta, delta))
            state = new
    steps.sort(key=lambda x: x[0])
    return steps


def power_series(
    models: Sequence[PowerModel], runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> tuple[list[float], list[float]]:
    """The machine's watts over time, a step function: (the times it
    changed, the watts from each on), from time 0."""
    times: list[float] = []
    watts: list[float] = []
    level = 0.0
    for t, dw, _ in _steps(models, runs, log):
        level += dw
        if times and times[-1] == t:
            watts[-1] = level
        else:
            times.append(t)
            watts.append(level)
    return times, watts


def pstate_rows(nodes: int, models: Sequence[PowerModel], log: PowerLog) -> list[tuple[float, list[int], int]]:
    """Batsim's ``out_pstate_changes.csv`` rows, (time, ranks, pstate): each
    node's pstate from time 0; a switch's start as Batsim marks it (-2 on
    the way to a sleep pstate, -1 on the way to a computing one); its end,
    the pstate it reached."""
    rows: list[tuple[float, list[int], int]] = []
    by_pstate: dict[int, list[int]] = {}
    for r in range(nodes):
        by_pstate.setdefault(models[r].compute_pstate, []).append(r)
    rows += [(0.0, ranks, ps) for ps, ranks in sorted(by_pstate.items())]
    for t, changed, state in log.changes:
        groups: dict[int, list[int]] = {}
        for r in changed:
            m = models[r]
            ps = {"switching_off": -2, "switching_on": -1, "sleeping": m.sleep_pstate}.get(state, m.compute_pstate)
            groups.setdefault(ps, []).append(r)
        rows += [(t, ranks, ps) for ps, ranks in sorted(groups.items())]
    return rows


def energy_rows(
    models: Sequence[PowerModel], runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> list[tuple[float, float, str, float, float | None]]:
    """Batsim's ``out_consumed_energy.csv`` rows, (time, joules since time
    0, event, wattmin, epower): one at each job start (``s``), job end
    (``e``) and switch start or end (``p``); ``wattmin`` is the sum of the
    nodes' least watts in their present states, ``epower`` the mean watts
    since the row before (None when no time passed)."""
    events = [(a, "s") for a, _, _, _ in runs] + [(b, "e") for _, b, _, _ in runs]
    events += [(t, "p") for t, _, _ in log.changes]
    # at one instant as Batsim writes them: ends, then switches, then the starts they allow
    events.sort(key=lambda x: (x[0], "eps".index(x[1])))
    steps = _steps(models, runs, log)
    out: list[tuple[float, float, str, float, float | None]] = []
    k = 0
    t_now = energy = watts = wattmin = 0.0
    last_t, last_e = 0.0, 0.0
    for t, kind in events:
        while k < len(steps) and steps[k][0] <= t:
            st, dw, dm = steps[k]
            energy += watts * (st - t_now)
            t_now, watts, wattmin = st, watts + dw, wattmin + dm
            k += 1
        energy += watts * (t - t_now)
        t_now = t
        out.append((t, energy, kind, wattmin, (energy - last_e) / (t - last_t) if t > last_t else None))
        last_t, last_e = t, energy
    return out
