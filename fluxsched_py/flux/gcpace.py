"""When the module's cyclic garbage collector may scan everything.

CPython's collector is generational.  Young collections (generations 0 and 1)
scan at most a few thousand recent objects: a few milliseconds.  A full
collection (generation 2) scans every tracked object, and with 100,000 pending
jobs that is a few hundred thousand objects: 100-300 ms of CPU in whatever
callback happened to allocate the object that triggered it (measured under
``bench/bench_flux_load.py``: every callback over 50 ms of CPU was a full
collection).  Cost grows with the queue, so no budget on the scheduler's own
work can bound it.

:class:`GcPacer` takes full collections off the automatic schedule:

* at :meth:`start` (after the RFC 27 handshake) everything alive is collected
  once and frozen (``gc.freeze()``): imports, the resource graph and the
  engine's tables are never scanned again;
* the automatic threshold of generation 2 is set out of reach; generations 0
  and 1 keep their thresholds, so young cycles (exceptions, closures) are
  collected as before;
* :meth:`tick`, called by the binding after each pass slice and commit,
  runs a full collection only when one is due (``DUE`` young collections of
  generation 1 since the last) and the objects it would scan are few: the
  driver's job count (pending, running and alloc messages held) is at most
  ``limit``.  Each full collection's CPU time adjusts ``limit`` so a
  collection costs about ``budget_ms``: halved after one over the budget,
  grown back after one well under it.

What this costs: a cycle that becomes garbage after it was promoted to
generation 2 stays in memory until the job count falls under ``limit``
(typically the end of a burst).  The scheduler itself makes almost none
(its objects are freed by reference counting); ``gc_full_collected`` in
``flux module stats`` counts what the full collections found.

This module never imports ``flux``; the ``gc`` module is injectable for tests.
"""

from __future__ import annotations

import gc as _gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["GcPacer", "DUE", "LIMIT", "BUDGET_MS"]

#: A full collection is due after this many generation-1 collections
#: (CPython's own automatic rule, without its 25 % growth condition).
DUE = 10
#: Initial (and largest) job count at or under which a full collection may
#: run.  Under Flux a job costs about 4 us of full collection (its Job, its
#: request message, the binding's wrappers): 5,000 jobs about 20 ms.
LIMIT = 5_000
#: CPU ms a full collection should cost; ``limit`` adapts to keep it there.
BUDGET_MS = 30.0
#: generation 2's threshold while paced: never reached.
_NEVER = 2**31 - 1


class GcPacer:
    """Runs full collections only while they are cheap (see the module docstring).

    ``size`` returns the driver's job count (the proxy for what a full
    collection scans); ``stats`` is the dict ``flux module stats`` shows.
    """

    def __init__(
        self,
        size: Callable[[], int],
        stats: dict[str, Any],
        *,
        gc: Any = _gc,
        cpu: Callable[[], float] = time.thread_time,
        limit: int = LIMIT,
        budget_ms: float = BUDGET_MS,
    ) -> None:
        self._size = size
        self._gc = gc
        self._cpu = cpu
        self.limit = limit
        self._max_limit = limit
        self.budget_ms = budget_ms
        self.stats = stats
        self._saved: tuple[int, ...] | None = None
        stats.setdefault("gc_full", 0)
        stats.setdefault("gc_full_max_cpu_ms", 0.0)
        stats.setdefault("gc_full_collected", 0)
        stats["gc_full_limit"] = limit

    @property
    def active(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        """Collect once, freeze what is alive, take generation 2 off the automatic schedule."""
        if self._saved is not None:
            return
        gc = self._gc
        gc.collect()
        gc.freeze()
        self._saved = tuple(gc.get_threshold())
        t0, t1 = self._saved[0], self._saved[1]
        gc.set_threshold(t0, t1, _NEVER)

    def stop(self) -> None:
        """Give the collector its thresholds back, and unfreeze."""
        if self._saved is None:
            return
        self._gc.set_threshold(*self._saved)
        self._gc.unfreeze()
        self._saved = None

    def due(self) -> bool:
        """Enough young collections since the last full one, and few enough objects."""
        return self._gc.get_count()[2] >= DUE and self._size() <= self.limit

    def tick(self) -> bool:
        """Run a full collection if :meth:`due`; True when one ran."""
        if self._saved is None or not self.due():
            return False
        c0 = self._cpu()
        found = self._gc.collect(2)
        ms = 1e3 * (self._cpu() - c0)
        s = self.stats
        s["gc_full"] += 1
        s["gc_full_collected"] += found
        if ms > s["gc_full_max_cpu_ms"]:
            s["gc_full_max_cpu_ms"] = ms
        if ms > self.budget_ms:
            self.limit = max(1, self._size() // 2)
        elif ms < self.budget_ms / 4 and self.limit < self._max_limit:
            self.limit = min(self._max_limit, 2 * self.limit)
        s["gc_full_limit"] = self.limit
        return True
