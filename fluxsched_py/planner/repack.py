"""Counted reservations: whole-node reservations held to a count of nodes.

With ``reservation-nodes=counted`` a reservation of whole nodes promises a
*number* of nodes over its time, as the profile of free nodes in Mu'alem and
Feitelson's conservative backfilling does, not the particular nodes chosen
when it was made.  A search for a whole-node job then asks only whether
enough whole nodes are free in every segment of its window
(:meth:`Planner.earliest_bits <.search.Planner.earliest_bits>`), and the
nodes are named when they are needed: at the start time found, around the
running jobs and the reservations as they are pinned now, or, when those
pins leave too few of the same nodes free throughout, by giving every
reservation its nodes again (:func:`repack`).

Why a count is enough: take the reservations (and the new job) in order of
start time and give each, at its start, any whole nodes that are free then
of the running jobs and of those already given nodes.  Running jobs only
end, and every reservation given nodes so far started no later, so those
nodes stay free of both throughout its window; and when at every instant
the whole nodes of the pool cover the running jobs plus the reservations
over it (what the counts say), enough are free at each start.  Intervals
sharing a pool of identical units are an interval graph's colouring, and
interval graphs are perfect: the greedy in order of start never runs out.
It needs every reservation to hold whole nodes and nothing else; a plan
with any other reservation is left pinned (:func:`repack` returns None).

Reference:
    Ahuva W. Mu'alem and Dror G. Feitelson, "Utilization, Predictability,
    Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
    Backfilling", IEEE TPDS 12(6):529-543, 2001 (the profile of free nodes).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Held", "repack"]


@dataclass(frozen=True, slots=True)
class Held:
    """A reservation as :func:`repack` sees it: over ``[start, end)``, on
    the flat set ``bits`` now, which is ``nodes`` whole nodes (None: it holds
    more than whole nodes, and cannot be given others)."""

    jobid: int
    start: float
    end: float
    nodes: int | None
    bits: int


def repack(
    pool: int,
    busy_at: Callable[[float], int],
    held: list[Held],
    window: tuple[float, float],
    take: Callable[[int], int | None],
    pick: Callable[[int, int], int | None],
) -> tuple[dict[int, int], int] | None:
    """Nodes for a new job over ``window`` (``(start, end)``) and for the
    reservations that must move for it, given in order of start time (see
    the module docstring).

    ``pool``: what is up; ``busy_at(t)``: what the plan holds at ``t`` (the
    running jobs and the reservations, on the bits they hold now);
    ``held``: the reservations, a valid plan (those that overlap in time
    hold disjoint sets); ``take(free)``: the new job's bits in ``free``
    (None: it does not fit there); ``pick(free, n)``: ``n`` whole nodes of
    ``free`` (None: fewer).

    The new job takes its nodes around everything that holds nodes at its
    start.  Then each reservation that starts later, in order of start, keeps
    its bits unless they meet those given since to a job that overlaps it in
    time; then it is given whole nodes free at its start (the greedy's step:
    running jobs only end, and the reservations that start later are seen
    to in turn).  So only the reservations in the way are looked at.

    Returns the reservations whose bits change, as ``{jobid: bits}``, and
    the new job's bits; None when a start is short or a reservation in the
    way holds more than whole nodes (the counts did not allow it)."""
    t0, t1 = window
    busy = busy_at(t0)
    mine = take(pool ^ (pool & busy))
    if mine is None:
        return None
    changed: list[tuple[float, int, int]] = [(t1, 0, mine)]  # (end, old bits, new bits), by start
    moved: dict[int, int] = {}
    for h in sorted((h for h in held if h.start > t0), key=lambda h: h.start):
        s = h.start
        live = [c for c in changed if c[0] > s]
        if not live:
            break  # every change ended by now: none meets a later start
        if not any(h.bits & new for _, _, new in live):
            continue
        if h.nodes is None:
            return None
        busy = busy_at(s) ^ h.bits  # its own bits out: they are in the plan at s
        # Each change started by s and holds at s: its old bits out (no one
        # else held them at s), then every new one in.
        for _, old, _ in live:
            busy ^= busy & old
        for _, _, new in live:
            busy |= new
        got = pick(pool ^ (pool & busy), h.nodes)
        if got is None:
            return None
        moved[h.jobid] = got
        changed.append((h.end, h.bits, got))
    return moved, mine
