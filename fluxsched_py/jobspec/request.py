"""The normalized, immutable request tree a validated jobspec becomes.

Everything downstream (matcher, planner, policies, drivers) reads jobs through
these types, never through raw jobspec dictionaries.  They are frozen
dataclasses, so a whole request is hashable and :attr:`Request.key` can key a
cache: a million pending jobs of one shape share one key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .constraints import Constraint

__all__ = ["Count", "ResourceRequest", "TaskRequest", "Request"]


@dataclass(frozen=True, slots=True)
class Count:
    """An RFC 14 count: ``min..max`` stepping by ``operator``/``operand``.

    ``max`` is ``None`` when unbounded (``"4+"`` or ``{min: 4}``).  The
    operators are ``+`` (add), ``*`` (multiply) and ``^`` (power).  A fixed
    count ``N`` is ``Count(N, N)``.  An idset string like ``"1,4-5"`` gives the
    explicit set of allowed values in :attr:`values`.
    """

    min: int
    max: int | None = None
    operator: str = "+"
    operand: int = 1
    values: tuple[int, ...] | None = None

    @classmethod
    def fixed(cls, n: int) -> Count:
        return cls(n, n)

    @property
    def is_fixed(self) -> bool:
        return self.max == self.min and self.values is None

    def candidates(self, limit: int) -> Iterator[int]:
        """Allowed counts that are ``<= limit``, largest first.

        The matcher tries them in this order, so the largest count that fits
        wins (RFC 14: the scheduler allocates as many as it can, within range).
        """
        if self.values is not None:
            yield from (v for v in sorted(self.values, reverse=True) if v <= limit)
            return
        hi = limit if self.max is None else min(self.max, limit)
        if hi < self.min:
            return
        seq = []
        v = self.min
        while v <= hi:
            seq.append(v)
            if self.operator == "+":
                v += self.operand
            elif self.operator == "*":
                if self.operand <= 1:
                    break
                v *= self.operand
            else:  # "^"
                if v <= 1:
                    break
                v = v**self.operand
        yield from reversed(seq)

    def __str__(self) -> str:
        if self.values is not None:
            return ",".join(map(str, self.values))
        if self.is_fixed:
            return str(self.min)
        if self.max is None:
            return f"{self.min}+"
        return f"{self.min}-{self.max}:{self.operand}:{self.operator}"


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """One resource vertex of a jobspec: ``type``, ``count``, children.

    ``exclusive`` is the jobspec's explicit value, or ``None`` when absent;
    :attr:`Request.exclusive` and the matcher apply RFC 14's defaults.
    """

    type: str
    count: Count
    with_: tuple[ResourceRequest, ...] = ()
    label: str | None = None
    exclusive: bool | None = None
    unit: str | None = None
    id: str | None = None

    @property
    def is_slot(self) -> bool:
        return self.type == "slot"

    def walk(self) -> Iterator[ResourceRequest]:
        """This vertex and all below it, depth first."""
        yield self
        for child in self.with_:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """One entry of ``tasks``: command, slot label and task count."""

    command: tuple[str, ...]
    slot: str
    count: tuple[tuple[str, Any], ...]  # (("per_slot", 1),) or (("total", 8),)


@dataclass(frozen=True, slots=True)
class Request:
    """A validated jobspec, normalized for scheduling.

    The figures every scheduler needs are precomputed: see :attr:`nnodes`,
    :attr:`nslots`, :attr:`slot_size`, :attr:`slot_gpus`, :attr:`exclusive`.
    """

    resources: tuple[ResourceRequest, ...]
    tasks: tuple[TaskRequest, ...] = ()
    duration: float = 0.0
    queue: str | None = None
    constraints: Constraint | None = None
    version: int = 1
    attributes: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple:
        """A hashable key identifying the request's shape (for caches)."""
        return (self.resources, self.constraints)

    def _slot_path(self) -> tuple[list[ResourceRequest], ResourceRequest | None]:
        """The vertices above the first slot, and the slot itself."""

        def find(vertices: tuple[ResourceRequest, ...], above: list[ResourceRequest]):
            for v in vertices:
                if v.is_slot:
                    return above, v
                found = find(v.with_, above + [v])
                if found[1] is not None:
                    return found
            return above, None

        return find(self.resources, [])

    @property
    def nslots(self) -> int:
        """Minimum number of slots: the slot count times the counts above it."""
        above, slot = self._slot_path()
        if slot is None:
            return 0
        n = slot.count.min
        for v in above:
            n *= v.count.min
        return n

    def _per_slot(self, rtype: str) -> int:
        _, slot = self._slot_path()
        if slot is None:
            return 0

        def total(vertices: tuple[ResourceRequest, ...]) -> int:
            n = 0
            for v in vertices:
                if v.type == rtype:
                    n += v.count.min
                else:
                    n += v.count.min * total(v.with_)
            return n

        return total(slot.with_)

    @property
    def slot_size(self) -> int:
        """Cores per slot (minimum)."""
        return self._per_slot("core")

    @property
    def slot_gpus(self) -> int:
        """GPUs per slot (minimum)."""
        return self._per_slot("gpu")

    @property
    def nnodes(self) -> int:
        """Minimum node count, or 0 when the jobspec names no node."""

        def count(vertices: tuple[ResourceRequest, ...], mult: int) -> int:
            n = 0
            for v in vertices:
                if v.type == "node":
                    n += mult * v.count.min
                else:
                    n += count(v.with_, mult * v.count.min)
            return n

        return count(self.resources, 1)

    @property
    def exclusive(self) -> bool:
        """True when whole nodes are requested exclusively.

        That is the case when a ``node`` vertex is marked exclusive, or when a
        slot contains nodes (everything under a slot defaults to exclusive).
        """
        above, slot = self._slot_path()
        if any(v.type == "node" and v.exclusive for v in above):
            return True
        if slot is not None:
            return any(v.type == "node" and v.exclusive is not False for v in slot.walk())
        return False
