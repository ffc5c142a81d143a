"""The resource graph as regular jobs see it: best-effort jobs' resources free.

Regular jobs plan as if the resources of a preemptible job were free from
the moment it becomes preemptible (``start + preemptible-after``).  The
planner reads what is free from its graph (``free()``, ``version``,
``availability()``); :class:`RegularView` is the graph it is given: every
call goes to the real graph, except that ``free()`` adds what best-effort
jobs hold and may lose (a :class:`~.lent.Lent`, kept by :mod:`.besteffort`), on
ranks that are up and not drained.  With nothing lent it is the graph
itself, answer for answer and version for version, so an engine with no
best-effort job plans exactly as before.

Until a job's protected window has passed, the planner holds its resources
with a running span ending at ``start + preemptible-after``, like a job that
ends then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lent import Lent

if TYPE_CHECKING:
    from ..resource import ResourceGraph

__all__ = ["RegularView"]


class RegularView:
    """A read-only view of ``graph`` for the planner (see the module docstring)."""

    def __init__(self, graph: ResourceGraph, lent: Lent) -> None:
        self._g = graph
        self._lent = lent

    @property
    def version(self) -> Any:
        v = self._g.version
        return v if self._lent.resources is None else (v, self._lent.epoch)

    def free(self) -> Any:
        g = self._g
        if self._lent.resources is None:
            return g.free()
        return g.free() | self._lent_up()

    def free_bits(self) -> Any:
        """:meth:`free` as a flat set: the graph's live one while nothing is
        lent, else an int."""
        g = self._g
        live = g.free_bits()
        if self._lent.resources is None:
            return live
        return live.value() | g.flat_layout.encode(self._lent_up())

    def _lent_up(self) -> Any:
        """What is lent, on ranks that are up and not drained."""
        g = self._g
        lent = self._lent.resources
        bad = g.down_ranks()
        drained = g.drained_ranks()
        if drained:
            bad = bad | type(bad)(drained)
        return lent - lent.restrict(bad) if bad else lent

    def availability(self, available: Any = None) -> Any:
        if available is None and self._lent.resources is not None:
            available = self.free()
        return self._g.availability(available)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._g, name)
        if callable(value):
            setattr(self, name, value)  # bound methods of the graph: look up once
        return value
