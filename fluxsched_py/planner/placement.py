"""Placements: where a job runs, as the planner hands it out.

A :class:`Placement` is the flat set a match took (``bits``) and, when the
matcher built it anyway, its :class:`~fluxsched_py.resource.ResourceSet`
(``resources``; None when only the flat set is known, as the whole-node
fast path and the timeline's spans leave it).  Decoding is the planner's
(:meth:`Timeline.resolve <.timeline.Timeline.resolve>`, from its codec):
a placement that is never started is never decoded.

A :class:`Slot` is a start time with the placement a job would get then:
what a search (:meth:`Planner.earliest_bits <.search.Planner.earliest_bits>`)
finds and what a reservation holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..resource import ResourceSet
    from ..resource.flatfree import Bits

__all__ = ["Placement", "Slot", "Window"]

#: An advance reservation's window for one of its jobs: ``(start, end,
#: bits, avoid)``, ``avoid`` the ``(start, end, bits)`` of the other windows
#: the job keeps off (empty unless a ``MAINT`` window overlaps it).
Window = tuple[float, float, int, tuple[tuple[float, float, int], ...]]


@dataclass(frozen=True, slots=True)
class Placement:
    """The resources a match took: ``bits`` (flat, see :mod:`.flat`; a
    :class:`~fluxsched_py.resource.flatfree.Bits` of the job's chunks when
    matched on the live free set), and ``resources`` when already decoded."""

    resources: ResourceSet | None
    bits: Bits | int


@dataclass(frozen=True, slots=True)
class Slot:
    """A start time and the placement a job gets there."""

    start: float
    placement: Placement
