"""The graph's free set, flat and in chunks, kept in place as jobs come and go.

The planner does its set arithmetic on *flat* sets: one bit per item of the
graph, in the layout :class:`FlatLayout` gives (bit ``v`` for container
vertex ``v``, then each vertex's pools at their own offsets; see
:mod:`fluxsched_py.planner.flat`).  As one Python ``int``, a flat set of a
200,000-node machine of 32 cores is 800 KB, and every new value costs a copy
of it: taking one core out of the free set, or adding one job's core to a
union, cost as much as a pass over the machine (issue 15).

:class:`Bits` holds a flat set as chunks of ``2**CHUNK_SHIFT`` bits
(``{chunk index: int}``, zero chunks left out), so that:

* a job's own set (a few cores on a node or two) is a chunk or two, whatever
  its position in the machine;
* a union or a difference with such a set changes those chunks in place
  (:meth:`Bits.or_`, :meth:`Bits.andnot_`, :meth:`Bits.xor_`), and a test
  for overlap reads only them (:meth:`Bits.intersects`).

Everywhere else a :class:`Bits` behaves as the ``int`` it stands for
(``& | ^ ~ >> <<``, comparison, hashing, ``bit_count``): the whole integer
is built on the first such question and kept until the set changes.

:class:`FreeBits` is the live free set the graph owns: the live
:class:`~fluxsched_py.resource.state.Availability` flips its bits wherever it
changes what is available (allocate, release, up, down, drain, shrink; a grow
lays the set out anew), so nobody derives or patches it from outside.  It
logs the positions it flipped, so an index that follows it (the planner's
per-node counts) catches up by reading only what changed since it last
looked (:meth:`FreeBits.since`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CHUNK_SHIFT", "Bits", "FlatLayout", "FreeBits", "as_int", "chunks_of", "remember_chunks"]

#: Chunks of 2**16 bits (8 KiB): a machine of 1,000 nodes of 32 cores is one
#: chunk (the set is then its one int), 200,000 such nodes about 100.  Read
#: when a set is made (the tests make small ones to cross chunks).
CHUNK_SHIFT = 16


class FlatLayout:
    """Where each item of a topology sits in a flat set: containers at their
    vertex index ``[0, n)``, then each vertex's pools in vertex order, each
    as wide as its largest id + 1."""

    __slots__ = ("n", "offsets", "layout", "width", "starts")

    def __init__(self, topo: Any) -> None:
        n = topo.n
        self.n = n
        #: (vertex, type) -> offset of the pool's id 0
        self.offsets: dict[tuple[int, str], int] = {}
        #: (offset, width, vertex, type) for every pool, by offset
        self.layout: list[tuple[int, int, int, str]] = []
        off = n
        for v in range(n):
            for t, mask in topo.pools[v].items():
                width = max(1, mask.bit_length())
                self.offsets[(v, t)] = off
                self.layout.append((off, width, v, t))
                off += width
        #: bits in a set of this layout
        self.width = off
        #: the pools' offsets, in order (to find the pool of a bit by bisection)
        self.starts = [e[0] for e in self.layout]

    def encode(self, rs: Any) -> int:
        """A :class:`~fluxsched_py.resource.ResourceSet` of this layout's graph, as one int."""
        x = rs.flat_in(self)
        if x is not None:  # decoded from this layout: the int it came from (its leaves unread)
            return x
        x = rs.containers.mask
        offsets = self.offsets
        for v, t, ids in rs.pools():
            x |= ids.mask << offsets[(v, t)]
        return x


def as_int(x: Any) -> int:
    """The int of a flat set, whether an ``int`` or a :class:`Bits`."""
    return x if type(x) is int else x.value()


class Bits:
    """A flat set in chunks (see the module docstring).  Mutated only through
    :meth:`or_`, :meth:`andnot_`, :meth:`xor_` and :meth:`flip`; the int
    operators return ints and never change it."""

    __slots__ = ("chunks", "shift", "_value")

    def __init__(self, chunks: dict[int, int] | None = None, shift: int | None = None) -> None:
        self.chunks: dict[int, int] = {} if chunks is None else chunks
        self.shift = CHUNK_SHIFT if shift is None else shift
        self._value: int | None = None

    @classmethod
    def of(cls, x: Any, shift: int | None = None) -> Bits:
        """A new :class:`Bits` holding ``x`` (an int or a :class:`Bits`, copied)."""
        shift = CHUNK_SHIFT if shift is None else shift
        if isinstance(x, Bits):
            if x.shift == shift:
                return cls(dict(x.chunks), shift)
            x = x.value()
        return cls(_split(x, shift), shift)

    def copy(self) -> Bits:
        return Bits(dict(self.chunks), self.shift)

    # -- in place ------------------------------------------------------------

    def _chunks_of(self, other: Any) -> Mapping[int, int]:
        if type(other) is int:
            if other.bit_length() <= 1 << self.shift:
                return {0: other} if other else {}
            return _split_memo(other, self.shift)
        if other.shift == self.shift:
            return other.chunks
        return _split(other.value(), self.shift)

    def or_(self, other: Any) -> None:
        """Add ``other`` (an int or a :class:`Bits`) to this set, in place."""
        chunks = self.chunks
        if self._value is not None:  # kept in step: one OR, not a rebuild from the chunks
            self._value |= as_int(other)
        if type(other) is int and other.bit_length() <= 1 << self.shift:  # a small machine's set
            if other:
                chunks[0] = chunks.get(0, 0) | other
            return
        for i, c in self._chunks_of(other).items():
            chunks[i] = chunks.get(i, 0) | c

    def andnot_(self, other: Any) -> None:
        """Take ``other`` out of this set, in place."""
        chunks = self.chunks
        v = self._value
        if v is not None:  # kept in step, as in or_
            self._value = v ^ (v & as_int(other))
        if type(other) is int and other.bit_length() <= 1 << self.shift:  # a small machine's set
            old = chunks.get(0)
            if old and other:
                new = old ^ (old & other)
                if new:
                    chunks[0] = new
                else:
                    del chunks[0]
            return
        for i, c in self._chunks_of(other).items():
            old = chunks.get(i)
            if old:
                new = old ^ (old & c)  # & ~ without a negative int
                if new:
                    chunks[i] = new
                else:
                    del chunks[i]

    def xor_(self, other: Any) -> None:
        """Flip the bits of ``other`` in this set, in place."""
        chunks = self.chunks
        for i, c in self._chunks_of(other).items():
            new = chunks.get(i, 0) ^ c
            if new:
                chunks[i] = new
            else:
                chunks.pop(i, None)
        self._value = None

    def flip(self, off: int, mask: int) -> None:
        """Flip the bits ``mask << off``, in place (the positions are not
        logged here; see :class:`FreeBits`)."""
        if not mask:
            return
        chunks, shift = self.chunks, self.shift
        size = 1 << shift
        i, r = off >> shift, off & (size - 1)
        m = mask << r
        if self._value is not None:  # kept in step: one XOR, not a rebuild from the chunks
            self._value ^= mask << off
        if m.bit_length() <= size:  # within one chunk (a pool never spans many)
            new = chunks.get(i, 0) ^ m
            if new:
                chunks[i] = new
            else:
                chunks.pop(i, None)
            return
        full = (1 << size) - 1
        while m:
            part = m & full
            if part:
                new = chunks.get(i, 0) ^ part
                if new:
                    chunks[i] = new
                else:
                    chunks.pop(i, None)
            m >>= size
            i += 1

    # -- reading -------------------------------------------------------------

    def intersects(self, other: Any) -> bool:
        """True when this set and ``other`` share a bit (reading only the
        chunks of the smaller one when both are :class:`Bits`)."""
        if isinstance(other, Bits) and other.shift == self.shift:
            a, b = self.chunks, other.chunks
            if len(a) > len(b):
                a, b = b, a
            return any(c & b.get(i, 0) for i, c in a.items())
        if self._value is None and type(other) is int:  # its chunks (remembered), not this set as one int
            chunks = self.chunks
            return any(c & chunks.get(i, 0) for i, c in self._chunks_of(other).items())
        return bool(self.value() & as_int(other))

    def field(self, off: int, width: int) -> int:
        """The ``width`` bits from ``off`` on, as a small int."""
        shift = self.shift
        i, r = off >> shift, off & ((1 << shift) - 1)
        x = self.chunks.get(i, 0) >> r
        have = (1 << shift) - r
        while have < width:
            i += 1
            x |= self.chunks.get(i, 0) << have
            have += 1 << shift
        return x & ((1 << width) - 1)

    def bit(self, p: int) -> bool:
        return bool(self.chunks.get(p >> self.shift, 0) >> (p & ((1 << self.shift) - 1)) & 1)

    def value(self) -> int:
        """The whole set as one int (built once, kept until the set changes)."""
        v = self._value
        if v is None:
            chunks = self.chunks
            v = self._value = (
                chunks.get(0, 0) if len(chunks) <= 1 and (not chunks or 0 in chunks) else _join(chunks, self.shift)
            )
        return v

    def __bool__(self) -> bool:
        return any(self.chunks.values())

    def bit_count(self) -> int:
        return sum(c.bit_count() for c in self.chunks.values())

    def bit_length(self) -> int:
        live = [i for i, c in self.chunks.items() if c]
        if not live:
            return 0
        top = max(live)
        return (top << self.shift) + self.chunks[top].bit_length()

    # -- as an int -----------------------------------------------------------

    def __int__(self) -> int:
        return self.value()

    __index__ = __int__

    def __and__(self, other: Any) -> int:
        return self.value() & as_int(other)

    __rand__ = __and__

    def __or__(self, other: Any) -> int:
        return self.value() | as_int(other)

    __ror__ = __or__

    def __xor__(self, other: Any) -> int:
        return self.value() ^ as_int(other)

    __rxor__ = __xor__

    def __invert__(self) -> int:
        return ~self.value()

    def __rshift__(self, k: int) -> int:
        return self.value() >> k

    def __lshift__(self, k: int) -> int:
        return self.value() << k

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Bits | int):
            return self.value() == as_int(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value())

    def to_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        return self.value().to_bytes(*args, **kwargs)

    def __format__(self, spec: str) -> str:
        return format(self.value(), spec)

    def __repr__(self) -> str:
        return f"Bits({len(self.chunks)} chunks, {self.bit_count()} bits)"


class FreeBits(Bits):
    """The graph's live free set: a :class:`Bits` that logs the positions it
    flips (:meth:`since`), owned and changed by the live
    :class:`~fluxsched_py.resource.state.Availability` only."""

    __slots__ = ("layout", "_log", "_base")

    #: flips kept in the log; a follower further behind counts afresh
    LOG = 8192

    def __init__(
        self, layout: FlatLayout, cont: int, loc: Iterable[Mapping[str, int]], shift: int | None = None
    ) -> None:
        shift = CHUNK_SHIFT if shift is None else shift
        super().__init__(_split(cont, shift), shift)
        # pool by pool into its chunk (an OR into one machine-wide int would
        # copy the whole int per pool)
        chunks, offsets = self.chunks, layout.offsets
        size = 1 << shift
        full = (1 << size) - 1
        for v, pools in enumerate(loc):
            for t, m in pools.items():
                if m:
                    off = offsets[(v, t)]
                    i = off >> shift
                    m <<= off & (size - 1)
                    while m:  # a pool may run on past the end of its chunk
                        if part := m & full:
                            chunks[i] = chunks.get(i, 0) | part
                        m >>= size
                        i += 1
        self.layout = layout
        self._log: list[int] = []
        self._base = 0  # the change number of _log[0]

    @property
    def seq(self) -> int:
        """How many flips were made since the set was made."""
        return self._base + len(self._log)

    def since(self, seq: int) -> list[tuple[int, int]] | None:
        """What was flipped since change number ``seq``, as ``(offset,
        mask)`` pairs in order (a bit flipped twice was flipped back), or
        None when the log no longer reaches back that far."""
        if seq < self._base:
            return None
        return self._log[seq - self._base :]

    def flip(self, off: int, mask: int) -> None:
        if not mask:
            return
        super().flip(off, mask)
        log = self._log
        log.append((off, mask))  # the bits are read out only if a follower asks
        if len(log) > self.LOG:
            half = len(log) // 2
            del log[:half]
            self._base += half

    def flip_chunks(self, acc: Mapping[int, int]) -> None:
        """Flip ``mask << (i << shift)`` for each ``{i: mask}`` of ``acc``
        (a job's changes gathered per chunk, so a chunk changes once)."""
        chunks, shift, log = self.chunks, self.shift, self._log
        size = 1 << shift
        for i, m in acc.items():
            if not m:
                continue
            if m.bit_length() <= size:
                new = chunks.get(i, 0) ^ m
                if new:
                    chunks[i] = new
                else:
                    chunks.pop(i, None)
                if self._value is not None:  # kept in step: one XOR, not a rebuild from the chunks
                    self._value ^= m << (i << shift)
            else:  # spills into the next chunks (the containers of a big machine)
                Bits.flip(self, i << shift, m)
            log.append((i << shift, m))
        if len(log) > self.LOG:
            half = len(log) // 2
            del log[:half]
            self._base += half

    def holds(self, bits: int) -> bool:
        """Whether every bit of the flat set ``bits`` (an int) is in this set;
        reads only the chunks ``bits`` touches."""
        chunks = self.chunks
        for i, m in self._chunks_of(bits).items():
            if m & ~chunks.get(i, 0):
                return False
        return True

    def remove(self, bits: int) -> dict[int, int]:
        """Take the bits of ``bits`` (an int) out, those of them that are in
        (a job's allocation, when its flat set is known: one flip per chunk
        instead of one per pool); returns the flips, ``{chunk: mask}``."""
        chunks = self.chunks
        flips = {i: m & chunks.get(i, 0) for i, m in self._chunks_of(bits).items()}
        self.flip_chunks(flips)
        return flips

    def add(self, bits: int) -> dict[int, int]:
        """Put the bits of ``bits`` (an int) in, those of them that are out
        (a job's release; the inverse of :meth:`remove`); returns the flips."""
        chunks = self.chunks
        flips = {i: m ^ (m & chunks.get(i, 0)) for i, m in self._chunks_of(bits).items()}
        self.flip_chunks(flips)
        return flips

    def pool(self, v: int, t: str, old: int, new: int) -> None:
        """Vertex ``v``'s available ``t`` ids went from ``old`` to ``new``."""
        if old != new:
            self.flip(self.layout.offsets[(v, t)], old ^ new)

    def or_(self, other: Any) -> None:
        raise TypeError("the free set changes only with the graph")

    andnot_ = xor_ = or_


#: The chunks of the last few machine-wide ints split (:func:`_split_memo`),
#: by identity: ``{id(x): (x, shift, chunks)}``, oldest first.
_SPLITS: dict[int, tuple[int, int, dict[int, int]]] = {}
#: How many :data:`_SPLITS` keeps: a placement is split when its job starts
#: (fit test, allocation, the timeline's span) and again when it ends.
SPLITS_KEPT = 512


def chunks_of(x: Any) -> Mapping[int, int]:
    """``{chunk index: chunk}`` (:data:`CHUNK_SHIFT` bits each, zero chunks
    left out) of a flat set, an int or a :class:`Bits`; read only."""
    if type(x) is int:
        return _split_memo(x, CHUNK_SHIFT) if x.bit_length() > 1 << CHUNK_SHIFT else ({0: x} if x else {})
    if x.shift == CHUNK_SHIFT:
        return x.chunks
    return _split(x.value(), CHUNK_SHIFT)


def remember_chunks(x: int, chunks: dict[int, int]) -> int:
    """Note that ``chunks`` (:data:`CHUNK_SHIFT` bits each, zero chunks left
    out) are the chunks of ``x``, for :func:`chunks_of`, when the maker of
    ``x`` knows them; returns ``x``."""
    if len(_SPLITS) >= SPLITS_KEPT:
        del _SPLITS[next(iter(_SPLITS))]
    _SPLITS[id(x)] = (x, CHUNK_SHIFT, chunks)
    return x


def _split_memo(x: int, shift: int) -> Mapping[int, int]:
    """:func:`_split`, remembered for the same int object: one placement on
    a big machine is split once, not at each of its uses (each split reads
    the whole int).  The chunks returned are shared: read them only."""
    hit = _SPLITS.get(id(x))
    if hit is not None and hit[0] is x and hit[1] == shift:
        return hit[2]
    chunks = _split(x, shift)
    if len(_SPLITS) >= SPLITS_KEPT:
        del _SPLITS[next(iter(_SPLITS))]
    _SPLITS[id(x)] = (x, shift, chunks)
    return chunks


def _split(x: int, shift: int) -> dict[int, int]:
    """``{chunk index: chunk}`` of the int ``x`` (zero chunks left out)."""
    if not x:
        return {}
    size = 1 << shift
    if x.bit_length() <= size:
        return {0: x}
    if size < 8:  # chunks narrower than a byte (tests)
        full = (1 << size) - 1
        return {i: c for i in range((x.bit_length() + size - 1) // size) if (c := (x >> (i * size)) & full)}
    nbytes = size >> 3
    raw = x.to_bytes((x.bit_length() + size - 1) // size * nbytes, "little")
    zero = bytes(nbytes)
    out = {}
    for i in range(len(raw) // nbytes):
        part = raw[i * nbytes : (i + 1) * nbytes]
        if part != zero:  # a job's set is a few chunks of a machine-wide int
            out[i] = int.from_bytes(part, "little")
    return out


def _join(chunks: Mapping[int, int], shift: int) -> int:
    """The int of ``{chunk index: chunk}``."""
    if not chunks:
        return 0
    if len(chunks) == 1:
        ((i, c),) = chunks.items()
        return c << (i << shift)
    if shift < 3:  # chunks narrower than a byte (tests)
        return sum(c << (i << shift) for i, c in chunks.items())
    nbytes = (1 << shift) >> 3
    zero = bytes(nbytes)
    top = max(chunks)
    get = chunks.get
    return int.from_bytes(
        b"".join(c.to_bytes(nbytes, "little") if (c := get(i)) else zero for i in range(top + 1)), "little"
    )
