"""Exact fit tests and placements for ``slot[k] > core[c]`` on flat sets.

Why this exists: the planner's earliest-start search asks "does this request
fit in that set?" at many candidate times (a binary search over thousands
of distinct end times of running jobs, or a walk over them), and asking the
matcher costs a decode of the set into a
:class:`~fluxsched_py.resource.ResourceSet`, an
:class:`~fluxsched_py.resource.state.Availability` built bottom-up over the
whole graph, and a traversal: about 15 ms on 1000 nodes x 8 cores, for an
answer that for the commonest shape of all (a few 1..N-core slots, what
``flux submit -n N -c C`` asks) depends only on how many cores each node
has free.

For ``slot[k] > core[c]`` (fixed counts, no constraint) on a graph whose
nodes hang directly off the root, each holding its cores as one pool, the
matcher (:mod:`fluxsched_py.match.traverse`) does exactly this: it visits
the nodes with at least ``c`` free cores in policy order (``low``: ascending
vertex; ``high``: descending; ``first``: most free cores first, ties by
descending vertex; ``worst``, the ``worstfit`` policy: most free cores
first, ties by ascending vertex), and packs into each as many slots as fit
(``free // c``) until it has ``k``, each slot taking the ``c`` lowest free
core ids (``low``, ``worst``) or highest (``first``, ``high``).  So it succeeds exactly
when ``sum(free // c) >= k`` (:func:`slot_capacity`), and
:func:`take_slots` reproduces its pick bit for bit.  The equivalence is
checked against the real matcher on random availability in
``t/test_planner_fastfit.py``.

Everything here is a pure function of the codec's static layout
(:class:`UnitFields`) and a flat set.  One thing is remembered across
calls: :meth:`UnitFields.counts` keeps the counts of the last few sets it
was asked about and derives a new set's counts from the nearest of them by
adjusting only the nodes whose bits differ.  A pass asks about the free set
again and again, and between two asks a job took or gave back a few cores:
building every node's count afresh (a 16,384-element list for each one-core
match on 16,384 nodes, issue 15) made a job's cost grow with the machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["UnitFields", "slot_shape", "slot_capacity", "take_slots", "unit_fields"]

#: byte -> number of set bits in it
_POP8 = bytes(bin(i).count("1") for i in range(256))
#: c -> table mapping a per-node count (a byte) to the slots of c it holds
_DIV: dict[int, bytes] = {}
#: c -> table mapping a per-node count to 1 when it is at least c, else 0
_GE: dict[int, bytes] = {}
#: a byte that is not zero (to find the bits that changed between two sets)
_NONZERO = re.compile(rb"[^\x00]")
#: how many earlier sets :meth:`UnitFields.counts` remembers
_KEEP = 4


def slot_shape(request: Any) -> tuple[int, int] | None:
    """``(k, c)`` when ``request`` is exactly ``slot[k] > core[c]`` with fixed
    counts, nothing else and no constraint; else None (computed once, by the
    request: :attr:`~fluxsched_py.jobspec.Request.slot_shape`)."""
    return request.slot_shape


class UnitFields:
    """Where each node's pool of one leaf type sits in a flat set.

    Node ``i`` (``vertices[i]``, in vertex order) holds ids ``0..width-1``;
    its bits are ``base + i * stride + id``.  Built by :func:`unit_fields`
    only for the layout the module docstring describes."""

    __slots__ = ("base", "stride", "width", "vertices", "mask", "_bytes", "_nbytes", "_memo", "_max_delta")

    def __init__(self, base: int, stride: int, width: int, vertices: tuple[int, ...]) -> None:
        self.base, self.stride, self.width, self.vertices = base, stride, width, vertices
        # n copies of a field's mask at the stride, by doubling (OR-ing one
        # field at a time into a growing integer is quadratic in n).
        mask, have = (1 << width) - 1, 1
        while have < len(vertices):
            mask |= mask << (have * stride)
            have *= 2
        mask &= (1 << (len(vertices) * stride)) - 1
        #: every field's bits, after shifting by ``base``
        self.mask = mask
        self._bytes = stride == 8 and width == 8
        n = len(vertices)
        self._nbytes = (n * stride + 7) // 8
        #: ``[(fields of a set, its counts)]``, the latest last
        self._memo: list[tuple[int, bytes | list[int]]] = []
        # Above this many changed bits, counting afresh (C-speed for bytes,
        # a Python loop per node otherwise) is cheaper than adjusting.
        self._max_delta = max(16, n // (32 if self._bytes else 4))

    def counts(self, x: int) -> bytes | list[int]:
        """Free units per node in the flat set ``x`` (indexable by node
        position; a ``bytes`` when every field is below 256 units wide).

        The answer must not be modified: it is remembered, and derived from
        the nearest remembered set when few bits differ (see the module
        docstring)."""
        y = (x >> self.base) & self.mask
        memo = self._memo
        best = None
        for i in range(len(memo) - 1, -1, -1):
            yo, co = memo[i]
            if yo == y:
                if i != len(memo) - 1:
                    memo.append(memo.pop(i))
                return co
            d = (yo ^ y).bit_count()
            if d <= self._max_delta and (best is None or d < best[0]):
                best = (d, yo, co)
        counts = self._count(y) if best is None else self._adjust(best[1], best[2], y)
        memo.append((y, counts))
        if len(memo) > _KEEP:
            del memo[0]
        return counts

    def _adjust(self, yo: int, co: bytes | list[int], y: int) -> bytes | list[int]:
        """The counts of fields ``y`` from those (``co``) of fields ``yo``:
        one step per bit that differs."""
        d = yo ^ y
        out = bytearray(co) if isinstance(co, bytes) else list(co)
        s, nb = self.stride, self._nbytes
        for bits, step in ((y & d, 1), (yo & d, -1)):
            if not bits:
                continue
            if bits.bit_count() <= 32:  # a few bits: peel them off the top
                while bits:
                    top = bits.bit_length() - 1
                    out[top // s] += step
                    bits ^= 1 << top
                continue
            raw = bits.to_bytes(nb, "little")
            for m in _NONZERO.finditer(raw):
                p = m.start()
                byte = raw[p]
                while byte:
                    low = byte & -byte
                    out[(8 * p + low.bit_length() - 1) // s] += step
                    byte ^= low
        return bytes(out) if isinstance(out, bytearray) else out

    def _count(self, y: int) -> bytes | list[int]:
        """Free units per node in the fields ``y``, counted afresh."""
        n = len(self.vertices)
        if self._bytes:
            return y.to_bytes(n, "little").translate(_POP8)
        s, w = self.stride, self.width
        bits = format(y, f"0{n * s}b")[::-1]  # bits[j] is bit j of y
        counts = [bits.count("1", i * s, i * s + w) for i in range(n)]
        return bytes(counts) if w < 256 else counts

    def field(self, x: int, i: int) -> int:
        """Node ``i``'s id mask in ``x``."""
        return (x >> (self.base + i * self.stride)) & ((1 << self.width) - 1)


def unit_fields(codec: Any, rtype: str) -> UnitFields | None:
    """The :class:`UnitFields` of ``rtype`` in ``codec``'s layout, or None
    unless: the root's children are exactly the node vertices (in order),
    nodes have no children, each node's ``rtype`` pool is ids ``0..W-1`` of
    size 1 (the same W everywhere), and the pools sit at a constant stride."""
    topo = codec.topo
    if not codec.flat_nodes or topo.n < 2 or (0, rtype) in codec.offsets:
        return None
    nodes = tuple(v for v in range(topo.n) if topo.type[v] == "node")
    if tuple(topo.children[0]) != nodes:
        return None
    width = topo.pools[nodes[0]].get(rtype, 0).bit_length()
    if not width:
        return None
    offs = []
    for v in nodes:
        if topo.children[v] or topo.pools[v].get(rtype) != (1 << width) - 1:
            return None
        if topo.pool_info[(v, rtype)][0] != 1:
            return None
        offs.append(codec.offsets[(v, rtype)])
    base = offs[0]
    stride = offs[1] - offs[0] if len(offs) > 1 else width
    if stride < width or any(o != base + i * stride for i, o in enumerate(offs)):
        return None
    return UnitFields(base, stride, width, nodes)


def slot_capacity(counts: bytes | list[int], c: int) -> int:
    """How many slots of ``c`` units the nodes hold: ``sum(n // c)``."""
    if c == 1:
        return sum(counts)
    if isinstance(counts, bytes):
        tab = _DIV.get(c)
        if tab is None:
            tab = _DIV[c] = bytes(i // c for i in range(256))
        slots = counts.translate(tab)
        # Few distinct values (at most width // c): count each in C rather
        # than summing a thousand bytes one by one.
        left = len(slots) - slots.count(0)
        total = 0
        v = 1
        while left:
            m = slots.count(v)
            total += v * m
            left -= m
            v += 1
        return total
    return sum(n // c for n in counts)


def _in_order(counts: bytes | list[int], c: int, order: str) -> Iterator[int]:
    """Positions of the nodes with at least ``c`` free units, in the
    matcher's order for ``order``; lazily, with C-speed searches of the
    counts when they are bytes (a job usually needs the first few)."""
    n = len(counts)
    if not isinstance(counts, bytes):
        if order == "low":
            yield from (i for i in range(n) if counts[i] >= c)
        elif order == "high":
            yield from (i for i in range(n - 1, -1, -1) if counts[i] >= c)
        elif order == "worst":
            yield from sorted((i for i in range(n) if counts[i] >= c), key=lambda i: (-counts[i], i))
        else:
            yield from sorted((i for i in range(n) if counts[i] >= c), key=lambda i: (counts[i], i), reverse=True)
        return
    if order == "worst":  # most free units first, ties by ascending vertex
        for v in range(max(counts), c - 1, -1):
            i = counts.find(v)
            while i >= 0:
                yield i
                i = counts.find(v, i + 1)
        return
    if order == "first":  # most free units first, ties by descending vertex
        for v in range(max(counts), c - 1, -1):
            end = n
            while (i := counts.rfind(v, 0, end)) >= 0:
                yield i
                end = i
        return
    tab = _GE.get(c)
    if tab is None:
        tab = _GE[c] = bytes(int(i >= c) for i in range(256))
    ok = counts.translate(tab)
    if order == "low":
        i = ok.find(1)
        while i >= 0:
            yield i
            i = ok.find(1, i + 1)
    else:
        end = n
        while (i := ok.rfind(1, 0, end)) >= 0:
            yield i
            end = i


def take_slots(
    fields: UnitFields, x: int, counts: bytes | list[int], k: int, c: int, order: str, high_ids: bool
) -> tuple[int, dict[int, dict[str, int]]] | None:
    """The cores the matcher picks for ``slot[k] > core[c]`` in ``x`` under
    a policy of node ``order`` (``low``, ``high``, ``first``, ``worst``) taking
    ``high_ids`` first, or None when it does not fit (see the module
    docstring for the matcher's rules this follows).

    Returns ``(bits, pools)``: the flat set, and ``{node vertex: {"core":
    id mask}}`` as a :class:`~fluxsched_py.resource.ResourceSet` holds it
    (so the caller need not decode the flat set)."""
    # For one-unit slots the walk below finds out by itself (it runs out of
    # nodes), without summing every node's count first.
    if c > 1 and slot_capacity(counts, c) < k:
        return None
    nodes = _in_order(counts, c, order)
    out = 0
    pools: dict[int, dict[str, int]] = {}
    vertices = fields.vertices
    left = k
    for i in nodes:
        m = min(counts[i] // c, left)
        free = fields.field(x, i)
        want = m * c
        picked = 0
        for _ in range(want):
            bit = 1 << (free.bit_length() - 1) if high_ids else free & -free
            free ^= bit
            picked |= bit
        out |= picked << (fields.base + i * fields.stride)
        pools[vertices[i]] = {"core": picked}
        left -= m
        if not left:
            break
    if left:
        return None
    return out, pools
