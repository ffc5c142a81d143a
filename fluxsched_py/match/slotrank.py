"""Fluxion's ranking of slots across slot hosts (resource-query mode only).

When a slot request can be met under several slot hosts, Fluxion's
traverser does not fill the first host before moving on: every host offers
each slot it can hold, each candidate slot is scored by the ids of what it
takes (higher ids first under ``high``, lower under ``low``), and the best
candidates win, wherever they are.  Under ``-S PA`` a job of two
``{node, power}`` slots therefore gets one node under each of two PDUs when
the second PDU's best slot outscores the first PDU's second-best.

The matcher fills hosts greedily (:meth:`_Search.sat_slot`); this module
re-ranks the slots that greedy pass gathered, then the caller places the
chosen number of slots per host again.  Only ``Policy.slot_host ==
"children"`` with the ``high``/``low`` orders uses it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ranked_counts", "rerank"]


def _ids_sum(mask: int) -> int:
    total = 0
    while mask:
        low = mask & -mask
        total += low.bit_length() - 1
        mask ^= low
    return total


def _score(topo: Any, log: list, lo: int, hi: int, sign: int) -> int:
    s = 0
    for op in log[lo:hi]:
        if op[0] == 0:
            s += _ids_sum(op[3])
        elif op[0] == 1:
            s += topo.id[op[1]]
    return sign * s


def ranked_counts(search: Any, hosts: list[tuple[int, list[int], int]], maxn: int) -> list[int] | None:
    """How many slots to keep per host, best ``maxn`` candidates first.

    ``hosts`` holds, per host in policy order, ``(host, marks, end)``: the
    log marks where each of its slots starts and where its last one ends.
    Returns None when ranking keeps what the greedy pass chose.
    """
    sign = 1 if search.policy.order == "high" else -1
    log, topo = search.log, search.topo
    cands: list[tuple[int, int, int]] = []  # (-score, host index, slot index)
    for hi, (_, marks, end) in enumerate(hosts):
        bounds = [*marks[1:], end]
        for si, lo in enumerate(marks):
            cands.append((-_score(topo, log, lo, bounds[si], sign), hi, si))
    cands.sort()
    counts = [0] * len(hosts)
    for _, hi, _ in cands[:maxn]:
        counts[hi] += 1
    greedy = []
    left = maxn
    for _, marks, _ in hosts:
        k = min(left, len(marks))
        greedy.append(k)
        left -= k
    return None if counts == greedy else counts


def rerank(search: Any, start: int, per_host: list[tuple[int, list[int], int]], maxn: int, shape: tuple) -> list[int]:
    """Keep the best ``maxn`` slots of ``per_host`` (all placed since log mark
    ``start``), placing them again when ranking moves any; return their marks."""
    counts = ranked_counts(search, per_host, maxn)
    if counts is None:
        every = [m for _, mine, _ in per_host for m in mine]
        if len(every) > maxn:
            search.rollback(every[maxn])
        return every[:maxn]
    search.rollback(start)
    marks: list[int] = []
    for (h, _, _), k in zip(per_host, counts, strict=True):
        for _ in range(k):
            mark = len(search.log)
            if not search.place_slot(h, shape):
                break
            marks.append(mark)
    return marks
