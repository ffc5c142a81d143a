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

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..ids import IdSet
from ..power import PowerModel

__all__ = [
    "Energy",
    "PowerLog",
    "account",
    "node_states",
    "power_series",
    "write_consumed_energy",
    "write_machine_states",
    "write_pstate_changes",
]


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


def power_series(
    models: Sequence[PowerModel], runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> tuple[list[float], list[float]]:
    """The machine's watts over time, a step function: (the times it
    changed, the watts from each on), from time 0."""
    steps: list[tuple[float, float]] = [(0.0, sum(m.idle_watts for m in models))]
    for a, b, ranks, computes in runs:
        if computes:
            extra = sum(models[r].computing_watts - models[r].idle_watts for r in ranks)
            steps += [(a, extra), (b, -extra)]
    for rank, seq in log.per_rank().items():
        m = models[rank]
        state = "idle"
        for t, new in seq:
            steps.append((t, m.watts(new) - m.watts(state)))
            state = new
    steps.sort(key=lambda x: x[0])
    times: list[float] = []
    watts: list[float] = []
    level = 0.0
    for t, dw in steps:
        level += dw
        if times and times[-1] == t:
            watts[-1] = level
        else:
            times.append(t)
            watts.append(level)
    return times, watts


def write_machine_states(
    path: Path, nodes: int, runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> None:
    """``machine_states.csv`` in the columns of Batsim's ``out_machine_states.csv``."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "nb_sleeping", "nb_switching_on", "nb_switching_off", "nb_idle", "nb_computing"])
        for t, *counts in node_states(nodes, runs, log):
            w.writerow([repr(t), *counts])


def write_pstate_changes(path: Path, nodes: int, models: Sequence[PowerModel], log: PowerLog) -> None:
    """``pstate_changes.csv`` in the columns of Batsim's ``out_pstate_changes.csv``:
    each node's pstate from time 0; a switch's start as Batsim marks it
    (-2 on the way to a sleep pstate, -1 on the way to a computing one);
    its end, the pstate it reached."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "machine_id", "new_pstate"])
        by_pstate: dict[int, list[int]] = {}
        for r in range(nodes):
            by_pstate.setdefault(models[r].compute_pstate, []).append(r)
        for ps, ranks in sorted(by_pstate.items()):
            w.writerow([0, _intervals(ranks), ps])
        for t, ranks, state in log.changes:
            groups: dict[int, list[int]] = {}
            for r in ranks:
                m = models[r]
                ps = {"switching_off": -2, "switching_on": -1, "sleeping": m.sleep_pstate}.get(state, m.compute_pstate)
                groups.setdefault(ps, []).append(r)
            for ps, rs in sorted(groups.items()):
                w.writerow([repr(t), _intervals(rs), ps])


def write_consumed_energy(
    path: Path, models: Sequence[PowerModel], runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> None:
    """``consumed_energy.csv`` in the columns of Batsim's ``out_consumed_energy.csv``:
    a row at each job start (``s``), job end (``e``) and switch start or
    end (``p``): the joules drawn since time 0, the sum of the nodes'
    least watts in their present states (``wattmin``), and the mean watts
    since the row before (``epower``, ``NA`` when no time passed)."""
    steps: list[tuple[float, float, float]] = []  # (time, change of watts, change of wattmin)
    rows: list[tuple[float, int, str]] = []  # (time, order, event type)
    for r, m in enumerate(models):
        del r
        steps.append((0.0, m.idle_watts, m.idle_watts))
    for a, b, ranks, computes in runs:
        extra = sum((models[r].computing_watts - models[r].idle_watts) for r in ranks) if computes else 0.0
        steps += [(a, extra, 0.0), (b, -extra, 0.0)]
        rows += [(a, len(rows), "s"), (b, len(rows) + 1, "e")]
    for rank, seq in log.per_rank().items():
        m = models[rank]
        state = "idle"
        for t, new in seq:
            delta = m.watts(new) - m.watts(state)
            least = m.watts(new if new != "computing" else "idle") - m.watts(state if state != "computing" else "idle")
            steps.append((t, delta, least))
            state = new
    for t, _, _ in log.changes:
        rows.append((t, len(rows), "p"))
    steps.sort(key=lambda x: x[0])
    rows.sort()
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "energy", "event_type", "wattmin", "epower"])
        k = 0
        t_now = energy = watts = wattmin = 0.0
        last_t, last_e = 0.0, 0.0
        for t, _, kind in rows:
            while k < len(steps) and steps[k][0] <= t:
                st, dw, dm = steps[k]
                energy += watts * (st - t_now)
                t_now = st
                watts += dw
                wattmin += dm
                k += 1
            energy += watts * (t - t_now)
            t_now = t
            epower = (
                "NA"
                if t <= last_t and rows[0][0] != t
                else f"{(energy - last_e) / (t - last_t):f}"
                if t > last_t
                else "NA"
            )
            w.writerow([f"{t:f}", f"{energy:f}", kind, f"{wattmin:f}", epower])
            last_t, last_e = t, energy


def _intervals(ranks: list[int]) -> str:
    """Batsim's interval-set text: ``0-3 7``."""
    return IdSet(ranks).encode().replace(",", " ")
