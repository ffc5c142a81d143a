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
when ``sum(free // c) >= k`` (:meth:`~.nodeindex.NodeIndex.capacity`), and
:func:`take_slots` reproduces its pick bit for bit.  The equivalence is
checked against the real matcher on random availability in
``t/test_planner_fastfit.py``.

Everything here is a pure function of the codec's static layout
(:class:`UnitFields`) and a flat set.  The per-node counts are not: they are
kept in :class:`~.nodeindex.NodeIndex` es that :meth:`UnitFields.index`
moves, node by node, to the set asked about.  A pass asks about the free set
again and again, and between two asks a job took or gave back a few cores:
building every node's count afresh (a 16,384-element list for each one-core
match on 16,384 nodes, issue 15) made a job's cost grow with the machine.
"""

from __future__ import annotations

from typing import Any

from ..resource.flatfree import Bits, FreeBits
from .nodeindex import NodeIndex

__all__ = ["UnitFields", "slot_shape", "take_slots", "unit_fields"]

#: byte -> number of set bits in it
_POP8 = bytes(bin(i).count("1") for i in range(256))
#: how many indexes :meth:`UnitFields.index` keeps
_KEEP = 4


def _few_bits(d: int, limit: int) -> list[int] | None:
    """The positions of the bits of ``d``, or None when it has more than
    ``limit`` (found by peeling them off the top: each step is one pass over
    ``d``, no popcount of the whole)."""
    out = []
    while d:
        if len(out) == limit:
            return None
        top = d.bit_length() - 1
        out.append(top)
        d ^= 1 << top
    return out


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

    __slots__ = (
        "base",
        "stride",
        "width",
        "vertices",
        "mask",
        "_bytes",
        "_nbytes",
        "_followers",
        "_max_delta",
        "_live",
    )

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
        #: the :class:`NodeIndex` es kept (:meth:`index`), the latest last
        self._followers: list[NodeIndex] = []
        # Above this many changed bits, counting afresh (C-speed for bytes,
        # a Python loop per node otherwise) is cheaper than moving an index.
        self._max_delta = max(16, n // (32 if self._bytes else 4))
        #: the index that follows the graph's live free set, and that set
        self._live: tuple[Any, NodeIndex] | None = None

    def index(self, x: int) -> NodeIndex:
        """A :class:`~.nodeindex.NodeIndex` of the flat set ``x``.

        The last few indexes are kept, each following the set it was last
        asked about: the one nearest ``x`` (fewest differing bits) moves to
        it in place, node by node; only when none is near is one counted
        afresh.  A pass asks about the free set again and again, and between
        two asks a job took or gave back a few cores (issue 15).

        The graph's live free set (a
        :class:`~fluxsched_py.resource.flatfree.FreeBits`) has an index of
        its own, which reads from the set's log what changed since it last
        looked (:meth:`NodeIndex.follow`): no whole-set operation at all."""
        if isinstance(x, FreeBits):
            live = self._live
            if live is None or live[0] is not x:
                f = NodeIndex(self, x.value())
                f.seq = x.seq
                self._live = (x, f)
            else:
                f = live[1]
                f.follow(x)
            return f
        if isinstance(x, Bits):
            x = x.value()
        followers = self._followers
        if followers:
            last = followers[-1]
            d = last.x ^ x
            if not d:
                return last
            # Usually the latest one is a job or two away: take it without
            # measuring the others (a popcount reads the whole set, and so
            # does each bit peeled off).
            bits = _few_bits(d, 2)
            if bits is not None:
                last.move(x, bits)
                return last
            best, best_d = None, 0
            for f in reversed(followers):
                dist = (f.x ^ x).bit_count() if f is not last else d.bit_count()
                if dist <= self._max_delta and (best is None or dist < best_d):
                    best, best_d = f, dist
                    if dist <= 64:
                        break
            if best is not None:
                followers.remove(best)
                followers.append(best)
                best.move(x)
                return best
        if len(followers) >= _KEEP:
            f = followers.pop(0)
            f.reset(x)
        else:
            f = NodeIndex(self, x)
        followers.append(f)
        return f

    def counts(self, x: int) -> bytes | list[int]:
        """Free units per node in the flat set ``x`` (indexable by node
        position; a ``bytes`` when every field is below 256 units wide): a
        copy of :meth:`index`'s counts."""
        cnt = self.index(x).cnt
        return bytes(cnt) if isinstance(cnt, bytearray) else list(cnt)

    def unit_counts(self, x: int) -> bytes | list[int]:
        """Free units per node in the flat set ``x``, counted afresh (what a
        :class:`NodeIndex` starts from)."""
        y = (x >> self.base) & self.mask
        n = len(self.vertices)
        if self._bytes:
            return y.to_bytes(n, "little").translate(_POP8)
        s, w = self.stride, self.width
        if s % 8 == 0 and s < 256:
            # Whole bytes per field: popcount each byte in C, then add each
            # field's k bytes into its first one (k - 1 shifted adds of the
            # whole set; no byte passes 255, so nothing carries).
            k = s // 8
            pop = int.from_bytes(y.to_bytes(n * k, "little").translate(_POP8), "little")
            acc = pop
            for j in range(1, k):
                acc += pop >> (8 * j)
            return acc.to_bytes(n * k + 1, "little")[: n * k : k]
        bits = format(y, f"0{n * s}b")[::-1]  # bits[j] is bit j of y
        counts = [bits.count("1", i * s, i * s + w) for i in range(n)]
        return bytes(counts) if w < 256 else counts

    def field(self, x: int, i: int) -> int:
        """Node ``i``'s id mask in ``x``.

        A right shift copies everything above the field, an AND with a mask
        everything below it: whichever is shorter (on 16,384 nodes, a shift
        of the whole set to read node 0 costs as much as a match)."""
        off = self.base + i * self.stride
        if isinstance(x, Bits):
            return x.field(off, self.width)
        w = (1 << self.width) - 1
        if 2 * off < x.bit_length():
            return (x & (w << off)) >> off
        return (x >> off) & w


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


def take_slots(
    fields: UnitFields, x: int, index: NodeIndex, k: int, c: int, order: str, high_ids: bool
) -> tuple[int, dict[int, dict[str, int]]] | None:
    """The cores the matcher picks for ``slot[k] > core[c]`` in ``x`` under
    a policy of node ``order`` (``low``, ``high``, ``first``, ``worst``) taking
    ``high_ids`` first, or None when it does not fit (see the module
    docstring for the matcher's rules this follows).

    Returns ``(bits, pools)``: the flat set, and ``{node vertex: {"core":
    id mask}}`` as a :class:`~fluxsched_py.resource.ResourceSet` holds it
    (so the caller need not decode the flat set).  On a :class:`Bits` (the
    live free set), ``bits`` is a :class:`Bits` of the job's chunks only."""
    if index.capacity(c) < k:
        return None
    counts = index.cnt
    nodes = index.in_order(c, order)
    sparse = isinstance(x, Bits)
    out: Any = Bits(shift=x.shift) if sparse else 0
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
        if sparse:
            out.flip(fields.base + i * fields.stride, picked)
        else:
            out |= picked << (fields.base + i * fields.stride)
        pools[vertices[i]] = {"core": picked}
        left -= m
        if not left:
            break
    if left:
        return None
    return out, pools
