"""How long each reactor callback of the module keeps the reactor, and why.

:class:`CallbackClock` wraps every callback the broker binding registers.  It
keeps, in the driver's stats, the longest callback in wall and CPU ms, how
many took more than 100 ms of CPU, and for the slowest callbacks (above
``SLOW_CPU_MS`` of CPU) a short record: which callback, its wall and CPU
time, how long the cyclic garbage collector ran inside it, and what the
driver says it did (``Driver.last_work``: a pass slice, a commit batch).
``flux module stats sched-py`` shows them as ``slow_callbacks``; the load
benchmark (``bench/bench_flux_load.py``) reports them.

It also measures every collection of the cyclic garbage collector
(``gc.callbacks``): ``gc_max_ms`` (wall), ``gc_max_cpu_ms`` and
``gc_over_50ms_cpu``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CallbackClock", "SLOW_CPU_MS", "SLOW_KEEP"]

#: A callback using this much CPU (ms) gets a record in ``slow_callbacks``.
SLOW_CPU_MS = 50.0
#: How many records ``slow_callbacks`` keeps (the slowest ones).
SLOW_KEEP = 12


class CallbackClock:
    """Times callbacks into ``stats`` (a dict the driver reports)."""

    def __init__(
        self,
        stats: dict[str, Any],
        work: Callable[[], str] = lambda: "",
        *,
        wall: Callable[[], float] = time.perf_counter,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.stats = stats
        self._work = work
        self._wall, self._cpu = wall, cpu
        stats.setdefault("callback_max_ms", 0.0)
        stats.setdefault("callback_max_cpu_ms", 0.0)
        stats.setdefault("callbacks_over_100ms_cpu", 0)
        stats.setdefault("slow_callbacks", [])
        stats.setdefault("gc_max_ms", 0.0)
        stats.setdefault("gc_max_cpu_ms", 0.0)
        stats.setdefault("gc_over_50ms_cpu", 0)
        self._gc_t0 = self._gc_c0 = 0.0
        self._gc_ms = 0.0  # collector time inside the current callback

    def install_gc_probe(self) -> None:
        """Measure the cyclic collector's runs (until :meth:`remove_gc_probe`)."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def remove_gc_probe(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0, self._gc_c0 = self._wall(), self._cpu()
            return
        ms = 1e3 * (self._wall() - self._gc_t0)
        cpu_ms = 1e3 * (self._cpu() - self._gc_c0)
        self._gc_ms += ms
        s = self.stats
        if ms > s["gc_max_ms"]:
            s["gc_max_ms"] = ms
        if cpu_ms > s["gc_max_cpu_ms"]:
            s["gc_max_cpu_ms"] = cpu_ms
        if cpu_ms > 50.0:
            s["gc_over_50ms_cpu"] += 1

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` timed as the callback ``name``."""
        stats = self.stats
        perf, cpu = self._wall, self._cpu

        def timed(*args: Any) -> Any:
            self._gc_ms = 0.0
            t0, c0 = perf(), cpu()
            try:
                return fn(*args)
            finally:
                wall, used = 1e3 * (perf() - t0), 1e3 * (cpu() - c0)
                if wall > stats["callback_max_ms"]:
                    stats["callback_max_ms"] = wall
                if used > stats["callback_max_cpu_ms"]:
                    stats["callback_max_cpu_ms"] = used
                if used > 100.0:
                    stats["callbacks_over_100ms_cpu"] += 1
                if used > SLOW_CPU_MS:
                    self._record(name, wall, used)

        return timed

    def _record(self, name: str, wall: float, used: float) -> None:
        slow = self.stats["slow_callbacks"]
        try:
            work = self._work()
        except Exception as exc:  # a report must never break a callback
            work = f"? ({exc!r})"
        entry = {
            "callback": name,
            "wall_ms": round(wall, 1),
            "cpu_ms": round(used, 1),
            "gc_ms": round(self._gc_ms, 1),
            "work": work,
        }
        slow.append(entry)
        slow.sort(key=lambda e: -e["cpu_ms"])
        del slow[SLOW_KEEP:]
