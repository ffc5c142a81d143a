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

__all__ = ["Energy", "PowerLog", "account", "write_machine_states", "write_pstate_changes"]


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


def write_machine_states(
    path: Path, nodes: int, runs: Sequence[tuple[float, float, IdSet, bool]], log: PowerLog
) -> None:
    """``machine_states.csv`` in the columns of Batsim's ``out_machine_states.csv``:
    at each time something changed, how many nodes were in each state."""
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
    for rank, seq in log.per_rank().items():
        del rank
        state = "idle"
        for t, new in seq:
            bump(t, state, -1)
            bump(t, new, 1)
            state = new
    counts = {"sleeping": 0, "switching_on": 0, "switching_off": 0, "idle": nodes, "computing": 0}
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "nb_sleeping", "nb_switching_on", "nb_switching_off", "nb_idle", "nb_computing"])
        w.writerow([0, *counts.values()])
        for t in sorted(deltas):
            for state, n in deltas[t].items():
                counts[state] += n
            if math.isfinite(t):
                w.writerow([f"{t:g}", *counts.values()])


def write_pstate_changes(path: Path, nodes: int, models: Sequence[PowerModel], log: PowerLog) -> None:
    """``pstate_changes.csv`` in the columns of Batsim's ``out_pstate_changes.csv``:
    each node's pstate from time 0, then each switch's end (its sleep pstate
    when it went to sleep, its computing pstate when it came back on)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "machine_id", "new_pstate"])
        by_pstate: dict[int, list[int]] = {}
        for r in range(nodes):
            by_pstate.setdefault(models[r].compute_pstate, []).append(r)
        for ps, ranks in sorted(by_pstate.items()):
            w.writerow([0, _intervals(ranks), ps])
        for t, ranks, state in log.changes:
            if state not in ("sleeping", "idle"):
                continue
            groups: dict[int, list[int]] = {}
            for r in ranks:
                m = models[r]
                groups.setdefault(m.sleep_pstate if state == "sleeping" else m.compute_pstate, []).append(r)
            for ps, rs in sorted(groups.items()):
                w.writerow([f"{t:g}", _intervals(rs), ps])


def _intervals(ranks: list[int]) -> str:
    """Batsim's interval-set text: ``0-3 7``."""
    return IdSet(ranks).encode().replace(",", " ")
