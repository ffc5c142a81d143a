"""The fewest nodes any pending job needs: a bound that ends a backfill pass early.

Why this exists (issue 21): on an overloaded machine, every event ran a pass
that visited every pending job behind the head (a py-spy sample of SDSC Blue
Horizon: 44 % in ``Pass.jobs``, 17 % in ``Pass.hopeless``, 9 % in
``Pass.hold``), each to find again that it does not fit.  A job whose request
needs at least ``N`` whole nodes (its ``lower_bounds`` say ``("node", N)``:
the matcher rejects any set with fewer node vertices without a traversal)
cannot start while fewer than ``N`` node vertices are free.  When the
fewest that any pending job needs is above what is free, nothing can start,
and the pass can say so at once (:meth:`~.passctx.Pass.nothing_fits`).

:class:`PendingSizes` keeps that minimum over the pending jobs as they come
and go: a count per node bound, and a heap of the bounds seen, whose top is
dropped lazily once no pending job has it (each bound is pushed when its
count becomes non-zero, so the heap holds each live bound at least once).
A job with no node bound (cores or GPUs only) counts as 0, so the bound
never fires while one waits.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..jobspec import Request

__all__ = ["PendingSizes", "node_bound"]


def node_bound(request: Request) -> int:
    """The node vertices any placement of ``request`` needs at least (0: no such bound)."""
    for rtype, n in request.lower_bounds:
        if rtype == "node":
            return n
    return 0


class PendingSizes:
    """A multiset of pending jobs' node bounds (:func:`node_bound`) and its minimum."""

    __slots__ = ("_count", "_heap")

    def __init__(self) -> None:
        self._count: dict[int, int] = {}
        self._heap: list[int] = []

    def add(self, n: int) -> None:
        c = self._count.get(n, 0)
        if not c:
            heap = self._heap
            if len(heap) > 2 * len(self._count) + 64:  # mostly bounds no job has now
                heap[:] = self._count
                heapq.heapify(heap)
            heapq.heappush(heap, n)
        self._count[n] = c + 1

    def discard(self, n: int) -> None:
        c = self._count[n] - 1
        if c:
            self._count[n] = c
        else:
            del self._count[n]

    def smallest(self) -> int | None:
        """The smallest bound of a pending job, or None when none is pending."""
        heap, count = self._heap, self._count
        while heap and heap[0] not in count:
            heapq.heappop(heap)
        return heap[0] if heap else None
