"""Free units per node of one flat set, kept in place as the set changes.

Why this exists (issue 15): matching a one-core job on 16,384 nodes must not
look at 16,384 nodes.  A :class:`NodeIndex` follows one flat set (the free
set, or the free set less the reservations a job must avoid) and keeps, for
the nodes of a :class:`~.fastfit.UnitFields` layout:

* ``cnt[i]``, node ``i``'s free units (a ``bytearray`` below 256 units);
* ``hist[v]``, how many nodes have exactly ``v`` free, and ``total``;
* ``vmax``, the largest ``v`` any node has;
* ``eq[v]``, the nodes with exactly ``v`` free as a bitmask over node
  positions (bit ``i`` for node ``i``), and ``ge1``, those with any free;
  built on the first question that needs them.

When the set it follows changes by a few bits (a job took or gave back a
few cores, a node went down), :meth:`NodeIndex.move` adjusts only the nodes
whose bits differ: per node, a count, two histogram cells and two bitmask
updates.  Every placement order then reads the index directly:

* ``low`` / ``high``: the lowest / highest bit of the nodes with at least
  ``c`` free (``ge1``, or the union of ``eq[c..vmax]``);
* ``first`` / ``worst``: for ``v`` from ``vmax`` down to ``c``, the nodes of
  ``eq[v]`` from the highest / lowest bit;
* "are there ``k`` slots of ``c``": ``total`` for ``c == 1``, else
  ``sum(hist[v] * (v // c))`` over at most ``width`` values.

A bitmask over node positions is ``n / 8`` bytes (2 KiB for 16,384 nodes),
so its bit tricks are a few C word operations, not a Python step per node.
The index is checked against counts made afresh, and its answers against
the matcher, by ``t/test_planner_nodeindex.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["NodeIndex"]

#: a byte that is not zero (to find the bits that changed between two sets)
_NONZERO = re.compile(rb"[^\x00]")
#: :func:`_positions` reads the top ``_CHUNK`` bits off at most ``_PEELS`` times
_CHUNK, _PEELS = 256, 4
#: v -> table mapping a count byte to b"1" when it equals v, else b"0"
_EQ: dict[int, bytes] = {}


def _eq_table(v: int) -> bytes:
    tab = _EQ.get(v)
    if tab is None:
        tab = _EQ[v] = bytes(0x31 if i == v else 0x30 for i in range(256))
    return tab


class NodeIndex:
    """Per-node free units of the flat set ``x`` (see the module docstring),
    in the :class:`~.fastfit.UnitFields` layout ``fields``."""

    __slots__ = ("fields", "x", "cnt", "hist", "total", "vmax", "eq", "ge1", "seq")

    def __init__(self, fields: Any, x: int) -> None:
        self.fields = fields
        self.reset(x)

    # -- building and following ----------------------------------------------

    def reset(self, x: int) -> None:
        """Count ``x`` afresh (C-speed for byte fields; the bitmasks wait
        until a placement order asks for them)."""
        fields = self.fields
        counts = fields.unit_counts(x)
        width = fields.width
        self.x = x
        #: the change number of the live set followed (:meth:`follow`)
        self.seq = -1
        if isinstance(counts, bytes):
            self.cnt: bytearray | list[int] = bytearray(counts)
            hist = [counts.count(v) for v in range(width + 1)]
        else:
            self.cnt = list(counts)
            hist = [0] * (width + 1)
            for v in counts:
                hist[v] += 1
        self.hist = hist
        self.total = sum(v * h for v, h in enumerate(hist))
        self.vmax = max((v for v in range(width + 1) if hist[v]), default=0)
        self.eq: list[int] | None = None
        self.ge1 = 0

    def _build_masks(self) -> None:
        width, cnt = self.fields.width, self.cnt
        eq = [0] * (width + 1)
        if isinstance(cnt, bytearray):
            raw = bytes(cnt)
            for v in range(1, width + 1):
                if self.hist[v]:
                    eq[v] = int(raw.translate(_eq_table(v))[::-1], 2)
        else:
            for i, v in enumerate(cnt):
                if v:
                    eq[v] |= 1 << i
        ge1 = 0
        for v in range(1, width + 1):
            ge1 |= eq[v]
        self.eq, self.ge1 = eq, ge1

    def move(self, x: int, changed: list[int] | None = None) -> None:
        """Follow the set to ``x``: one update per node whose bits differ
        (``changed``: the positions of those bits, when the caller has them;
        bits outside the fields, such as container vertices, count for
        nothing)."""
        if changed is None:
            d = self.x ^ x
            steps = [(p, 1) for p in _positions(x & d)] + [(p, -1) for p in _positions(self.x & d)]
        else:
            # bit p differs between x and the old set: a unit gained when it
            # is in x (tested from whichever end of x is nearer)
            half = x.bit_length() // 2
            steps = [(p, 1 if ((x >> p) & 1 if p >= half else x & (1 << p)) else -1) for p in changed]
        self.x = x
        self._apply(steps)

    def follow(self, live: Any) -> None:
        """Catch up with the graph's live free set ``live`` (a
        :class:`~fluxsched_py.resource.flatfree.FreeBits`): one update per
        node whose bits it flipped since the last call, read from its log;
        counted afresh when the log no longer reaches back."""
        changed = live.since(self.seq)
        if changed is None:
            self.reset(live.value())
        elif changed:
            odd: set[int] = set()
            for off, mask in changed:
                while mask:
                    low = mask & -mask
                    mask ^= low
                    p = off + low.bit_length() - 1
                    if p in odd:  # a bit flipped twice is back as it was
                        odd.remove(p)
                    else:
                        odd.add(p)
            bit = live.bit
            self._apply([(p, 1 if bit(p) else -1) for p in odd])
        self.x = None
        self.seq = live.seq

    def _apply(self, steps: list[tuple[int, int]]) -> None:
        """Add each ``(position, +1 or -1)`` of ``steps`` to its node's count."""
        fields = self.fields
        base, stride, width, n = fields.base, fields.stride, fields.width, len(fields.vertices)
        delta: dict[int, int] = {}
        for p, step in steps:
            i, r = divmod(p - base, stride)
            if p >= base and r < width and i < n:
                delta[i] = delta.get(i, 0) + step
        cnt, hist, eq = self.cnt, self.hist, self.eq
        vmax = self.vmax
        total = self.total
        for i, dd in delta.items():
            if not dd:
                continue
            old = cnt[i]
            new = old + dd
            cnt[i] = new
            hist[old] -= 1
            hist[new] += 1
            total += dd
            if new > vmax:
                vmax = new
            if eq is not None:
                bit = 1 << i
                if old:
                    eq[old] ^= bit
                if new:
                    eq[new] |= bit
                    if not old:
                        self.ge1 |= bit
                else:
                    self.ge1 ^= bit
        while vmax and not hist[vmax]:
            vmax -= 1
        self.vmax, self.total = vmax, total

    # -- questions -------------------------------------------------------------

    def capacity(self, c: int) -> int:
        """How many slots of ``c`` units the nodes hold: ``sum(cnt[i] // c)``."""
        if c == 1:
            return self.total
        hist = self.hist
        return sum(hist[v] * (v // c) for v in range(c, self.vmax + 1))

    def ge(self, c: int) -> int:
        """The nodes with at least ``c`` free units, as a bitmask."""
        if self.eq is None:
            self._build_masks()
        if c <= 1:
            return self.ge1
        eq, hist = self.eq, self.hist
        assert eq is not None
        m = 0
        for v in range(c, self.vmax + 1):
            if hist[v]:
                m |= eq[v]
        return m

    def in_order(self, c: int, order: str) -> Iterator[int]:
        """Positions of the nodes with at least ``c`` free units, in the
        matcher's order for ``order`` (``low``, ``high``, ``first``,
        ``worst``: see :mod:`.fastfit`); lazily, a job usually needs the
        first few.  The index must not move while this is iterated."""
        if c > self.vmax:
            return
        if order == "low" or order == "high":
            yield from (_ascending if order == "low" else _descending)(self.ge(c))
            return
        if self.eq is None:
            self._build_masks()
        eq, hist = self.eq, self.hist
        assert eq is not None
        walk = _descending if order == "first" else _ascending
        for v in range(self.vmax, c - 1, -1):
            if hist[v]:
                yield from walk(eq[v])


def _ascending(m: int) -> Iterator[int]:
    while m:
        low = m & -m
        yield low.bit_length() - 1
        m ^= low


def _descending(m: int) -> Iterator[int]:
    while m:
        top = m.bit_length() - 1
        yield top
        m ^= 1 << top


def _positions(bits: int) -> list[int]:
    """The positions of the set bits of ``bits``.

    Changed bits come in clusters (a job's cores on a node, a node and its
    vertex): the top 256 bits are read off as a small int and cleared, a
    few times; whatever is left is found by scanning its bytes.  Each step
    is one pass over ``bits`` in C, never one per bit."""
    out: list[int] = []
    for _ in range(_PEELS):
        if not bits:
            return out
        lo = max(0, bits.bit_length() - _CHUNK)
        chunk = bits >> lo
        bits ^= chunk << lo
        while chunk:
            low = chunk & -chunk
            out.append(lo + low.bit_length() - 1)
            chunk ^= low
    if not bits:
        return out
    raw = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
    for m in _NONZERO.finditer(raw):
        p = m.start()
        byte = raw[p]
        while byte:
            low = byte & -byte
            out.append(8 * p + low.bit_length() - 1)
            byte ^= low
    return out
