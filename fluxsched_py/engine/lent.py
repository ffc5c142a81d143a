"""What is lent: the resources of best-effort jobs that regular jobs may take.

A best-effort job is *lent* once its protected window (``preemptible-after``)
has passed: regular jobs plan as if its resources were free, and one that
starts on them preempts it (:mod:`.besteffort`).  :class:`Lent` is the one
record of what is lent.  It keeps, for each lent job, its flat bits in the
planner's layout, and the two unions the engine reads (``bits`` for the
pass and the victim choice, ``resources`` for :class:`~.regularview.RegularView`);
only :meth:`Lent.lend`, :meth:`Lent.unlend` and :meth:`Lent.reencode` change
them, each keeping the unions in step, and ``epoch`` counts the changes so
that what is derived from them can be cached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .jobs import Job

__all__ = ["Lent"]


class Lent:
    """See the module docstring."""

    __slots__ = ("_jobs", "_bits", "_resources", "_epoch")

    def __init__(self) -> None:
        self._jobs: dict[int, tuple[Job, int]] = {}
        self._bits = 0
        self._resources: Any = None
        self._epoch = 0

    def __contains__(self, jobid: int) -> bool:
        return jobid in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def bits(self) -> int:
        """The flat union of what is lent, in the planner's layout."""
        return self._bits

    @property
    def resources(self) -> Any:
        """The ResourceSet union of what is lent, or None when nothing is."""
        return self._resources

    @property
    def epoch(self) -> int:
        """How many times what is lent changed."""
        return self._epoch

    def items(self) -> Iterable[tuple[Job, int]]:
        """Each lent job with its flat bits."""
        return self._jobs.values()

    def bits_of(self, jobid: int) -> int:
        """The flat bits lent by ``jobid``."""
        return self._jobs[jobid][1]

    def lend(self, job: Job, bits: int) -> None:
        """Lend what ``job`` holds (``bits``: the same, flat)."""
        self._jobs[job.id] = (job, bits)
        self._bits |= bits
        rs = job.resources
        self._resources = (rs if self._resources is None else self._resources | rs) or None
        self._epoch += 1

    def unlend(self, jobid: int, held: Any = None) -> None:
        """Stop lending ``jobid``.  ``held`` is what it lent when its
        resources shrank since (a partial free); else what it holds now."""
        job, bits = self._jobs.pop(jobid)
        self._bits &= ~bits
        if self._jobs and self._resources is not None:
            self._resources = (self._resources - (job.resources if held is None else held)) or None
        else:
            self._resources = None
        self._epoch += 1

    def reencode(self, encode: Callable[[Any], int]) -> None:
        """Encode every lent job's resources anew with ``encode`` (a new
        planner's layout: after a grow, old bits name other items)."""
        self._jobs = {jid: (job, encode(job.resources)) for jid, (job, _) in self._jobs.items()}
        self._bits = 0
        for _, bits in self._jobs.values():
            self._bits |= bits
        self._epoch += 1
