"""Windows and load of a workload (``--skip``, ``--jobs``, ``--load-factor``).

:func:`take_window` keeps jobs ``skip+1 .. skip+jobs`` of the trace as it
is replayed: in submit order, after the jobs the reader skipped (no run
time or no processors), so ``--jobs 1000`` is 1,000 jobs that run.
:func:`scale_load` then divides every inter-arrival time by the factor,
from the first (kept) job's submit time, which stays; sizes, run times and
walltimes are unchanged.  Both change the :class:`~.workload.Workload` in
place and add a note to it.
"""

from __future__ import annotations

import math

from .workload import Workload

__all__ = ["MAX_LOAD_FACTOR", "parse_load_factor", "scale_load", "take_window"]

#: The largest ``--load-factor``: a day of arrivals squeezed into 86 s.
MAX_LOAD_FACTOR = 1000.0


def parse_load_factor(text: str) -> float:
    """A load factor: a finite number, 0 < F <= MAX_LOAD_FACTOR; :class:`ValueError` otherwise."""
    try:
        f = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not (math.isfinite(f) and 0 < f <= MAX_LOAD_FACTOR):
        raise ValueError(f"must be a number above 0 and at most {MAX_LOAD_FACTOR:g}, got {text}")
    return f


def take_window(workload: Workload, skip: int = 0, jobs: int | None = None) -> Workload:
    """Keep jobs ``skip+1 .. skip+jobs`` (all after ``skip`` when ``jobs``
    is None), in submit order; changes ``workload`` in place and returns it."""
    ordered = sorted(workload.jobs, key=lambda j: (j.submit, j.id))
    total = len(ordered)
    kept = ordered[skip:] if jobs is None else ordered[skip : skip + jobs]
    workload.jobs = kept
    if skip or (jobs is not None and jobs < total - skip):
        first = min(skip, total)
        workload.notes.append(
            f"jobs {first + 1}-{first + len(kept)} of {total} (--skip {skip}, --jobs {jobs or 'all'})"
        )
    return workload


def scale_load(workload: Workload, factor: float) -> Workload:
    """Divide every inter-arrival time by ``factor`` (the first job's submit
    time stays); changes ``workload`` in place and returns it."""
    if factor == 1 or not workload.jobs:
        return workload
    t0 = min(j.submit for j in workload.jobs)
    for j in workload.jobs:
        j.submit = t0 + (j.submit - t0) / factor
    workload.notes.append(f"load factor {factor:g}: inter-arrival times divided by {factor:g}")
    return workload
