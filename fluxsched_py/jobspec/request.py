"""The normalized, immutable request tree a validated jobspec becomes.

Everything downstream (matcher, planner, policies, drivers) reads jobs through
these types, never through raw jobspec dictionaries.  They are frozen
dataclasses, so a whole request is hashable, and :attr:`Request.key` (interned,
hashed once) keys caches: a million pending jobs of one shape share one key.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .constraints import Constraint

__all__ = ["Count", "ResourceRequest", "TaskRequest", "Request", "RequestKey", "node_request"]


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


#: Equal request shapes (``resources``, ``constraints``) share one key
#: object; bounded, since interning only saves memory and time.
_KEYS: dict[tuple, RequestKey] = {}
_KEYS_MAX = 65536


class RequestKey:
    """The shape of a request, for caches: its resources and constraints.

    Interned (equal shapes are usually the same object) and hashed once, so
    keying a cache on it costs no walk of the request tree."""

    __slots__ = ("resources", "constraints", "_hash")

    def __init__(self, resources: tuple[ResourceRequest, ...], constraints: Constraint | None) -> None:
        self.resources = resources
        self.constraints = constraints
        self._hash = hash((resources, constraints))

    @classmethod
    def of(cls, resources: tuple[ResourceRequest, ...], constraints: Constraint | None) -> RequestKey:
        k = (resources, constraints)
        key = _KEYS.get(k)
        if key is None:
            if len(_KEYS) >= _KEYS_MAX:
                _KEYS.clear()
            key = _KEYS[k] = cls(resources, constraints)
        return key

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, RequestKey):
            return NotImplemented
        return self._hash == other._hash and self.resources == other.resources and self.constraints == other.constraints

    def __repr__(self) -> str:
        return f"RequestKey({self.resources!r}, {self.constraints!r})"


#: (resources, constraints) -> the values of :data:`_FACTS` (bounded as :data:`_KEYS`)
_SHAPE_FACTS: dict[tuple, tuple] = {}

_FACTS = ("key", "nslots", "slot_size", "slot_gpus", "nnodes", "exclusive", "whole_nodes", "lower_bounds", "slot_shape")


@dataclass(frozen=True, slots=True)
class Request:
    """A validated jobspec, normalized for scheduling.

    The figures every scheduler needs are computed once, when the request is
    made (it is immutable): :attr:`key`, :attr:`nnodes`, :attr:`nslots`,
    :attr:`slot_size`, :attr:`slot_gpus`, :attr:`exclusive`,
    :attr:`whole_nodes`, :attr:`lower_bounds`, :attr:`slot_shape`.  Those
    are the only caches of request facts: nothing downstream keeps its own.
    """

    resources: tuple[ResourceRequest, ...]
    tasks: tuple[TaskRequest, ...] = ()
    duration: float = 0.0
    queue: str | None = None
    constraints: Constraint | None = None
    version: int = 1
    attributes: Any = field(default=None, compare=False, hash=False, repr=False)
    #: ``attributes.system.preemptible-after`` in seconds: the job is
    #: best-effort and may be preempted that long after it starts.  None
    #: for a regular job.  Not part of :attr:`key` (it does not change
    #: where the job fits).
    preemptible_after: float | None = None
    #: ``attributes.system.reservation``: the advance reservation the job
    #: runs in (:mod:`fluxsched_py.engine.reservations`), None for none.
    #: Not part of :attr:`key`.
    reservation: str | None = None
    #: ``attributes.system.preempt-grace`` in seconds: the notice a
    #: best-effort job asks for before it is preempted (capped by the
    #: scheduler's ``preempt-grace``).  None when not given.  Not part of :attr:`key`.
    preempt_grace: float | None = None
    #: False for a job that computes nothing, whose nodes draw their idle
    #: watts while it runs (a Batsim ``delay`` profile: SimGrid's host energy
    #: model draws idle watts for a host that only sleeps).  Set by the
    #: drivers that know it (the replay, the Batsim driver), never read from
    #: a jobspec: a user who could claim it would escape ``power-cap``.  Not
    #: part of :attr:`key`.
    computes: bool = True
    #: A hashable key identifying the request's shape (for caches).
    key: RequestKey = field(init=False, compare=False, hash=False, repr=False)
    #: Minimum number of slots: the slot count times the counts above it.
    nslots: int = field(init=False, compare=False, hash=False, repr=False)
    #: Cores per slot (minimum).
    slot_size: int = field(init=False, compare=False, hash=False, repr=False)
    #: GPUs per slot (minimum).
    slot_gpus: int = field(init=False, compare=False, hash=False, repr=False)
    #: Minimum node count, or 0 when the jobspec names no node.
    nnodes: int = field(init=False, compare=False, hash=False, repr=False)
    #: True when whole nodes are requested exclusively: a ``node`` vertex is
    #: marked exclusive, or a slot contains nodes (everything under a slot
    #: defaults to exclusive).
    exclusive: bool = field(init=False, compare=False, hash=False, repr=False)
    #: N when the request is exactly ``node[N] exclusive > slot[1] > core[1]``
    #: with no constraint (how the replay models Batsim and SWF jobs), else 0.
    whole_nodes: int = field(init=False, compare=False, hash=False, repr=False)
    #: Counts any placement needs at least: ``(("node", N),)`` for exclusive
    #: nodes, else cores and GPUs.  A cheap necessary test
    #: (``avail.count(type) >= n``) that spares the matcher hopeless calls.
    lower_bounds: tuple[tuple[str, int], ...] = field(init=False, compare=False, hash=False, repr=False)
    #: ``(k, c)`` when the request is exactly ``slot[k] > core[c]`` with fixed
    #: counts, nothing else and no constraint; else None.
    slot_shape: tuple[int, int] | None = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        # Remembered per shape: an archive trace has a request per (size,
        # walltime), hundreds of thousands of them, and a few hundred shapes.
        shape = (self.resources, self.constraints)
        facts = _SHAPE_FACTS.get(shape)
        if facts is None:
            if len(_SHAPE_FACTS) >= _KEYS_MAX:
                _SHAPE_FACTS.clear()
            facts = _SHAPE_FACTS[shape] = _facts(self.resources, self.constraints)
        for name, value in zip(_FACTS, facts, strict=True):
            object.__setattr__(self, name, value)


def _slot_path(
    resources: tuple[ResourceRequest, ...],
) -> tuple[list[ResourceRequest], ResourceRequest | None]:
    """The vertices above the first slot, and the slot itself."""

    def find(vertices: tuple[ResourceRequest, ...], above: list[ResourceRequest]):
        for v in vertices:
            if v.is_slot:
                return above, v
            found = find(v.with_, above + [v])
            if found[1] is not None:
                return found
        return above, None

    return find(resources, [])


def _facts(resources: tuple[ResourceRequest, ...], constraints: Constraint | None) -> tuple:
    """The values of :data:`_FACTS`, in order (one walk of the tree each)."""
    above, slot = _slot_path(resources)
    nslots = 0
    if slot is not None:
        nslots = slot.count.min
        for v in above:
            nslots *= v.count.min

    def per_slot(rtype: str) -> int:
        def total(vertices: tuple[ResourceRequest, ...]) -> int:
            n = 0
            for v in vertices:
                if v.type == rtype:
                    n += v.count.min
                else:
                    n += v.count.min * total(v.with_)
            return n

        return total(slot.with_) if slot is not None else 0

    def count_nodes(vertices: tuple[ResourceRequest, ...], mult: int) -> int:
        n = 0
        for v in vertices:
            if v.type == "node":
                n += mult * v.count.min
            else:
                n += count_nodes(v.with_, mult * v.count.min)
        return n

    slot_size, slot_gpus, nnodes = per_slot("core"), per_slot("gpu"), count_nodes(resources, 1)
    if any(v.type == "node" and v.exclusive for v in above):
        exclusive = True
    elif slot is not None:
        exclusive = any(v.type == "node" and v.exclusive is not False for v in slot.walk())
    else:
        exclusive = False
    whole = 0
    if len(resources) == 1 and constraints is None:
        node = resources[0]
        if node.type == "node" and node.exclusive and node.count.is_fixed and len(node.with_) == 1:
            sl = node.with_[0]
            if sl.type == "slot" and sl.count.is_fixed and sl.count.min == 1 and len(sl.with_) == 1:
                core = sl.with_[0]
                if core.type == "core" and core.count.is_fixed and core.count.min == 1 and not core.with_:
                    whole = node.count.min
    if nnodes and exclusive:
        bounds: tuple[tuple[str, int], ...] = (("node", nnodes),)
    else:
        b = []
        if nslots * slot_size:
            b.append(("core", nslots * slot_size))
        if nslots * slot_gpus:
            b.append(("gpu", nslots * slot_gpus))
        bounds = tuple(b)
    return (
        RequestKey.of(resources, constraints),
        nslots,
        slot_size,
        slot_gpus,
        nnodes,
        exclusive,
        whole,
        bounds,
        _slot_shape(resources, constraints),
    )


def _slot_shape(resources: tuple[ResourceRequest, ...], constraints: Constraint | None) -> tuple[int, int] | None:
    if constraints is not None or len(resources) != 1:
        return None
    slot = resources[0]
    if slot.type != "slot" or not slot.count.is_fixed or len(slot.with_) != 1:
        return None
    core = slot.with_[0]
    if core.type != "core" or not core.count.is_fixed or core.with_:
        return None
    k, c = slot.count.min, core.count.min
    if k < 1 or c < 1:
        return None
    return k, c


_NODE_REQUESTS: dict[tuple[int, float], Request] = {}
#: nnodes -> the (resources, tasks) of :func:`node_request` (one per size, not per walltime)
_NODE_SHAPES: dict[int, tuple[tuple[ResourceRequest, ...], tuple[TaskRequest, ...]]] = {}


def node_request(nnodes: int, walltime: float) -> Request:
    """``nnodes`` whole nodes, exclusive, for ``walltime`` seconds (inf = unlimited).

    The jobspec equivalent is ``node[N] exclusive > slot[1] > core[1]`` with
    ``attributes.system.duration = walltime``.  Requests are interned, so a
    trace with a few shapes holds a few objects.
    """
    key = (nnodes, walltime)
    req = _NODE_REQUESTS.get(key)
    if req is None:
        shape = _NODE_SHAPES.get(nnodes)
        if shape is None:
            core = ResourceRequest("core", Count.fixed(1))
            slot = ResourceRequest("slot", Count.fixed(1), (core,), label="task")
            node = ResourceRequest("node", Count.fixed(nnodes), (slot,), exclusive=True)
            task = TaskRequest(("true",), "task", (("per_slot", 1),))
            shape = _NODE_SHAPES[nnodes] = ((node,), (task,))
        req = Request(*shape, duration=0.0 if walltime == math.inf else float(walltime))
        _NODE_REQUESTS[key] = req
    return req
