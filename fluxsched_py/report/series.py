"""Aggregates for the figures, on a fixed grid whatever the number of jobs.

* :func:`step_mean`: the exact mean, over each bin of a time grid, of a step
  function built from +w/-w events (busy nodes, queued jobs).  The integral
  of a step function is piecewise linear, so it is computed at the events
  and interpolated at the bin edges: one sort, no loop over bins.
* :func:`gantt_raster`: nodes x time cells, each holding the category of the
  last job that ran in it (-1 idle).  A job shorter than a cell still marks
  the cell it ran in, so short jobs stay visible at any scale.
* :func:`bounded_slowdown`: Feitelson's ``max(1, (wait + run) / max(run, tau))``.
"""

from __future__ import annotations

import math
from typing import Any

from .data import RunData

__all__ = [
    "time_span",
    "step_mean",
    "utilization",
    "queue_length",
    "free_nodes",
    "gantt_raster",
    "waits",
    "bounded_slowdown",
]


def _np() -> Any:
    import numpy as np

    return np


def time_span(run: RunData) -> tuple[float, float]:
    """From the first submission to the last finish (or submission)."""
    ends = [x for x in run.finish if not math.isnan(x)] + run.submit
    t0 = min(run.submit, default=0.0)
    t1 = max(ends, default=t0)
    return t0, t1 if t1 > t0 else t0 + 1.0


def step_mean(up: Any, down: Any, weight: Any, edges: Any) -> Any:
    """Mean per bin of ``sum(weight * [up <= t < down])`` over ``edges`` (len(edges)-1 bins)."""
    np = _np()
    up, down, weight = np.asarray(up, float), np.asarray(down, float), np.asarray(weight, float)
    times = np.concatenate([up, down])
    deltas = np.concatenate([weight, -weight])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)  # value just after each event
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    edges = np.asarray(edges, float)
    at = np.interp(edges, times, integral)
    # past the last event the level is level[-1]; before the first it is 0
    after = edges > times[-1]
    at[after] = integral[-1] + level[-1] * (edges[after] - times[-1])
    return np.diff(at) / np.diff(edges)


def _ran(run: RunData) -> Any:
    np = _np()
    start = np.asarray(run.start, float)
    return ~np.isnan(start)


def utilization(run: RunData, edges: Any) -> Any:
    """Busy node fraction, mean per bin."""
    np = _np()
    ok = _ran(run)
    if not ok.any():
        return np.zeros(len(edges) - 1)
    sizes = np.array([sum(hi - lo + 1 for lo, hi in r) for r in run.ranks], float)
    start, finish = np.asarray(run.start)[ok], np.asarray(run.finish)[ok]
    return step_mean(start, finish, sizes[ok], edges) / max(run.nb_nodes, 1)


def _leaves_queue(run: RunData, edges: Any) -> Any:
    """When each job stops pending: its start, else its rejection, else never (cut past the grid)."""
    np = _np()
    start = np.asarray(run.start, float)
    reject = np.asarray(run.reject, float)
    out = np.where(np.isnan(start), reject, start)
    # a job neither started nor rejected is pending to the end; np.inf cannot be integrated
    return np.where(np.isnan(out), edges[-1] + 1.0, np.minimum(out, edges[-1] + 1.0))


def queue_length(run: RunData, edges: Any) -> Any:
    """Jobs submitted and neither started nor rejected, mean per bin.

    A rejected job leaves the queue when it is rejected; a job that is
    neither started nor rejected (its resources went down) stays queued.
    """
    np = _np()
    submit = np.asarray(run.submit, float)
    if not len(submit):
        return np.zeros(len(edges) - 1)
    return step_mean(submit, _leaves_queue(run, edges), np.ones_like(submit), edges)


def _levels(up: Any, down: Any, weight: Any) -> tuple[Any, Any]:
    """``(times, level)``: the step function ``sum(weight * [up <= t < down])``, ``level[i]`` on
    ``[times[i], times[i+1])`` (0 before the first time)."""
    np = _np()
    times = np.concatenate([np.asarray(up, float), np.asarray(down, float)])
    w = np.asarray(weight, float)
    deltas = np.concatenate([w, -w])
    order = np.argsort(times, kind="stable")
    return times[order], np.cumsum(deltas[order])


def _at(times: Any, level: Any, t: Any) -> Any:
    """The step function's value at each of ``t``."""
    np = _np()
    i = np.searchsorted(times, t, side="right") - 1
    return np.where(i >= 0, level[np.maximum(i, 0)], 0.0)


def free_nodes(run: RunData, edges: Any) -> tuple[Any, Any]:
    """``(free, stranded)``, mean per bin: nodes free, and nodes free while at least one job waits.

    ``stranded`` is the fragmentation a policy leaves: capacity idle although
    work is queued (the jobs waiting are too big for it, or wait for a
    reservation).  Exact: both step functions are evaluated between every
    pair of consecutive events and integrated.
    """
    np = _np()
    edges = np.asarray(edges, float)
    ok = _ran(run)
    sizes = np.array([sum(hi - lo + 1 for lo, hi in r) for r in run.ranks], float)
    bt, bl = _levels(np.asarray(run.start)[ok], np.asarray(run.finish)[ok], sizes[ok])
    submit = np.asarray(run.submit, float)
    qt, ql = _levels(submit, _leaves_queue(run, edges), np.ones_like(submit))
    grid = np.unique(np.concatenate([bt, qt, edges]))
    grid = grid[(grid >= edges[0]) & (grid <= edges[-1])]
    busy = _at(bt, bl, grid[:-1])
    free = np.maximum(run.nb_nodes - busy, 0.0)
    stranded = np.where(_at(qt, ql, grid[:-1]) > 0.5, free, 0.0)
    out = []
    for values in (free, stranded):
        integral = np.concatenate([[0.0], np.cumsum(values * np.diff(grid))])
        out.append(np.diff(np.interp(edges, grid, integral)) / np.diff(edges))
    return out[0], out[1]


def waits(run: RunData) -> Any:
    np = _np()
    ok = _ran(run)
    return np.asarray(run.start)[ok] - np.asarray(run.submit)[ok]


def bounded_slowdown(run: RunData, tau: float = 10.0) -> Any:
    np = _np()
    ok = _ran(run)
    wait = np.asarray(run.start)[ok] - np.asarray(run.submit)[ok]
    runtime = np.asarray(run.finish)[ok] - np.asarray(run.start)[ok]
    return np.maximum(1.0, (wait + runtime) / np.maximum(runtime, tau))


def gantt_raster(
    run: RunData, codes: list[int], t0: float, t1: float, cols: int = 1200, max_rows: int = 512
) -> tuple[Any, int]:
    """``(grid, nodes_per_row)``: grid[row, col] is the code of the last job there, or -1."""
    np = _np()
    per_row = max(1, math.ceil(run.nb_nodes / max_rows))
    rows = max(1, math.ceil(run.nb_nodes / per_row))
    grid = np.full((rows, cols), -1, dtype=np.int16)
    scale = cols / (t1 - t0)
    for start, finish, runs, code in zip(run.start, run.finish, run.ranks, codes, strict=True):
        if not runs or math.isnan(start):
            continue
        c0 = min(cols - 1, max(0, int((start - t0) * scale)))
        c1 = min(cols, max(c0 + 1, math.ceil((finish - t0) * scale)))
        for lo, hi in runs:
            grid[lo // per_row : hi // per_row + 1, c0:c1] = code
    return grid, per_row
