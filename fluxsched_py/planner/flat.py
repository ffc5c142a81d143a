"""Resource sets as flat integers, for the planner's arithmetic.

The planner unions and subtracts sets thousands of times per pass (one per
timeline segment, per candidate start time), where a
:class:`~fluxsched_py.resource.ResourceSet` operation walks a dict of pools.
Here a set of one graph becomes one Python ``int``: bit ``v`` for container
vertex ``v``, then each pool's id mask at its own offset.  ``| & -`` are then
single big-integer operations, and counting a type is a popcount under a
precomputed mask.  Sets are converted back only to call the matcher.

Bit layout, for a topology of ``n`` vertices::

    [0, n)                     containers, by vertex index
    [n, ...)                   pools in vertex order, each as wide as its
                               largest id + 1

The layout is the graph's (:class:`~fluxsched_py.resource.flatfree.FlatLayout`,
``ResourceGraph.flat_layout``), so the graph's own flat free set and the
planner's sets agree bit for bit.  Where a set may be a
:class:`~fluxsched_py.resource.flatfree.Bits` (the live free set, a placement
made on it, the timeline's first segment), the codec's questions take it as
the int it stands for.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Any

from .. import memo
from ..ids import IdSet
from ..resource.flatfree import CHUNK_SHIFT, FlatLayout, as_int, remember_chunks

__all__ = ["FlatCodec"]


class FlatCodec:
    """Encode/decode the resource sets of one graph (see the module docstring)."""

    def __init__(self, graph: Any) -> None:
        from ..resource import ResourceSet

        self._RS = ResourceSet
        topo = graph.all().topology
        self.topo = topo
        n = topo.n
        self.n = n
        self.cont_mask = (1 << n) - 1
        # Masks are merged from (offset, small mask) chunks (_merge): OR-ing
        # each bit into a growing big integer would cost O(width) per bit.
        type_chunks: dict[str, list[tuple[int, int]]] = {}
        for v, t in enumerate(topo.type):
            type_chunks.setdefault(t, []).append((v, 1))
        ranked_chunks = [(v, 1) for v, r in enumerate(topo.rank) if r >= 0]
        flat = getattr(graph, "flat_layout", None)
        self.flat = flat if flat is not None else FlatLayout(topo)
        self.offsets: dict[tuple[int, str], int] = self.flat.offsets
        layout = self.flat.layout
        pools = topo.pools
        for off, _, v, t in layout:
            mask = pools[v][t]
            type_chunks.setdefault(t, []).append((off, mask))
            if topo.rank[v] >= 0:
                ranked_chunks.append((off, mask))
        off = self.flat.width
        self.layout = layout
        self._starts = [e[0] for e in layout]
        self.width = off
        self._nbytes = (off + 7) // 8
        #: Every leaf (pool) bit: a set with none of these holds nothing usable
        #: (containers stay in a free set while their leaves are in use).
        self.leaf_mask = ((1 << off) - 1) & ~self.cont_mask
        self.type_masks = {t: _merge(c) for t, c in type_chunks.items()}
        #: rank -> everything on that rank (computed when asked: a mask per
        #: rank held at once would be quadratic in the machine size)
        self.rank_masks = _RankMasks(self)
        #: Everything that belongs to some rank (not the cluster/rack levels).
        self.ranked_mask = _merge(ranked_chunks)
        self._fields: dict[str, Any] = {}
        self._flat_nodes()

    def rank_mask(self, r: int) -> int:
        """Everything on rank ``r`` (0 for an unknown rank): its subtree's
        vertices, a contiguous range in pre-order, and their pools."""
        topo = self.topo
        v = topo.rank_root.get(r)
        if v is None:
            return 0
        end = topo.end[v]
        out = ((1 << (end - v)) - 1) << v
        if self._pool_vertices is None:
            self._index_pools()
        assert self._pool_vertices is not None and self._pool_layout is not None
        i = bisect.bisect_left(self._pool_vertices, v)
        chunks = []
        pv, layout = self._pool_vertices, self._pool_layout
        while i < len(pv) and pv[i] < end:
            for off, t in layout[i]:
                chunks.append((off, topo.pools[pv[i]][t]))
            i += 1
        return out | _merge(chunks)

    def _index_pools(self) -> None:
        pv: list[int] = []
        pl: list[list[tuple[int, str]]] = []
        last = -1
        for off, _, v, t in self.layout:
            if v != last:
                last = v
                pv.append(v)
                here: list[tuple[int, str]] = []
                pl.append(here)
            here.append((off, t))
        self._pool_vertices, self._pool_layout = pv, pl

    def _flat_nodes(self) -> None:
        """Detect the shape the whole-node fast path needs (see MatchCache):
        every node a child of the root, one per rank, all alike, each with a
        core.  Sets :attr:`node_bits` (node vertex -> its whole subtree)."""
        topo = self.topo
        #: the pools of each vertex with pools, for :meth:`rank_mask` (made when first asked)
        self._pool_vertices: list[int] | None = None
        self._pool_layout: list[list[tuple[int, str]]] | None = None
        nodes = [v for v, t in enumerate(topo.type) if t == "node"]
        self.node_vertex_mask = 0
        self.node_bits: Mapping[int, int] = _NodeBits(self, ())
        self.flat_nodes = False
        self.unit_shift: int | None = None
        self._rank_base: int | None = None
        self._whole_cache: dict[tuple[int, int], int] = memo.store("whole")
        if not nodes or any(topo.parent[v] != 0 for v in nodes):
            return
        ranks = [topo.rank[v] for v in nodes]
        if len(set(ranks)) != len(ranks) or min(ranks) < 0:
            return
        all_types = tuple(sorted(self.type_masks))
        # equal signatures are identical subtrees: count each shape once
        counts: dict[int, tuple[tuple[str, int], ...]] = {}
        sig = topo.sig
        for v in nodes:
            if sig[v] in counts:
                continue
            cnt = dict.fromkeys(all_types, 0)
            for u in range(v, topo.end[v]):
                cnt[topo.type[u]] += 1
                for t, m in topo.pools[u].items():
                    cnt[t] += m.bit_count()
            counts[sig[v]] = tuple(cnt.items())
        shapes = set(counts.values())
        core_count = dict(counts[sig[nodes[-1]]]).get("core", 0)
        v0 = nodes[0]
        consecutive = nodes == list(range(v0, v0 + len(nodes)))
        self.node_vertex_mask = _merge([(v, 1) for v in nodes])
        self.node_bits = _NodeBits(self, range(v0, v0 + len(nodes)) if consecutive else nodes)
        self.flat_nodes = len(shapes) == 1 and core_count > 0
        # Simplest layout (one 1-id pool per node, nodes and pools both in
        # order): a node's pool bit is its vertex bit moved by a fixed shift,
        # so whole-node tests are one integer expression.
        if self.flat_nodes and consecutive:
            pools_of, offsets = topo.pools, self.offsets
            t0 = next(iter(pools_of[v0]), None)
            one = {t0: 1}
            # every node one pool of one id (width 1), of one type, and the
            # pools in vertex order: consecutive offsets when the first and
            # the last are len(nodes) - 1 apart
            last = offsets.get((nodes[-1], t0), -1) if t0 is not None else -1
            if all(pools_of[v] == one for v in nodes) and last - offsets[(v0, t0)] == len(nodes) - 1:
                self.unit_shift = offsets[(v0, t0)] - v0
                self._unit_type = t0
                self._unit_rest = ~(self.cont_mask | (self.node_vertex_mask << self.unit_shift))
                rank = topo.rank
                base = v0 - rank[v0]
                ranked = rank[base:] == list(range(self.n - base)) if 0 <= base <= self.n else False
                if ranked and all(r < 0 for r in rank[:base]):
                    #: every vertex from ``_rank_base`` on is rank ``v - _rank_base``, none
                    #: below it has a rank: a decoded set's ranks are its vertices, shifted
                    self._rank_base = base
        self._strided: tuple[int, int, int, int, int] | None = None
        if self.flat_nodes and self.unit_shift is None and nodes == list(range(v0, v0 + len(nodes))):
            self._strided = self._node_stride(nodes)

    def _node_stride(self, nodes: list[int]) -> tuple[int, int, int, int, int] | None:
        """``(base, stride, nodes, first vertex, low bits)`` when node ``i``
        (vertex ``nodes[0] + i``, no children) owns exactly the bits
        ``[base + i * stride, base + (i + 1) * stride)`` besides its vertex
        bit, all of them ids of its pools: then "node ``i`` is wholly in
        ``x``" is a test on a fixed-width field (see :meth:`whole_nodes`)."""
        topo = self.topo
        base = stride = -1
        for i, v in enumerate(nodes):
            if topo.children[v]:
                return None
            pools = topo.pools[v]
            if not pools:
                return None
            offs = sorted((self.offsets[(v, t)], m) for t, m in pools.items())
            start = offs[0][0]
            width = 0
            for off, m in offs:
                # every pool full from id 0, and the pools back to back
                if off != start + width or m & (m + 1):
                    return None
                width += m.bit_length()
            if i == 0:
                base, stride = start, width
            elif width != stride or start != base + i * stride:
                return None
        low = _merge([(i * stride, 1) for i in range(len(nodes))])
        return base, stride, len(nodes), nodes[0], low

    def _node_fields(self) -> Any:
        """The cores' :class:`~fluxsched_py.planner.fastfit.UnitFields` when
        each node's strided field (see :meth:`_node_stride`) is exactly its
        core pool, so a node is whole when its cores are; else None."""
        if self._strided is None:
            return None
        fields = self.unit_fields("core")
        base, stride = self._strided[:2]
        if fields is None or (fields.base, fields.stride, fields.width) != (base, stride, stride):
            return None
        return fields

    def unit_fields(self, rtype: str) -> Any:
        """Where each node's ``rtype`` pool sits (a
        :class:`~fluxsched_py.planner.fastfit.UnitFields`), or None when the
        layout is not the simple one the slot fast path needs; remembered."""
        cache = self._fields
        if rtype not in cache:
            from .fastfit import unit_fields

            cache[rtype] = unit_fields(self, rtype)
        return cache[rtype]

    def encode(self, rs: Any) -> int:
        return self.flat.encode(rs)

    def decode(self, x: int) -> Any:
        """The :class:`~fluxsched_py.resource.ResourceSet` of the flat set
        ``x``: its containers and ranks at once, its leaves (a dict per
        vertex) built only when something reads them
        (:meth:`ResourceSet.lazily`; starting, running and ending a job on
        a placement of whole one-core nodes never does)."""
        flat = self._flat_of(x)
        x = as_int(x)  # a Bits may change later: the leaves are read from the int
        shift = self.unit_shift
        if shift is not None and not (x & self._unit_rest):
            vertices = (x >> shift) & self.node_vertex_mask
            cont = x & self.cont_mask
            # its ranks at once, not pool by pool (the replay reads them)
            ranks = IdSet.from_mask((vertices | cont) >> self._rank_base) if self._rank_base is not None else None
            return self._RS.lazily(self.topo, cont, lambda: self._unit_leaves(vertices), flat, ranks)
        return self._RS.lazily(self.topo, x & self.cont_mask, lambda: self._leaves(x), flat)

    def _unit_leaves(self, vertices: int) -> dict[int, dict[str, int]]:
        """The leaves of the node vertices ``vertices`` in the simplest
        layout: one pool of one id each."""
        # The vertices from the runs of their mask (one pass over it), not
        # peeled bit by bit (a pass over the whole int per node: issue 21);
        # the pools share one dict, as the uniform topology's do (a
        # ResourceSet never changes its pools in place).
        one = {self._unit_type: 1}
        pools_u: dict[int, dict[str, int]] = {}
        for lo, hi in IdSet.from_mask(vertices).runs():
            pools_u.update(dict.fromkeys(range(lo, hi + 1), one))
        return pools_u

    def _leaves(self, x: int) -> dict[int, dict[str, int]]:
        """The leaves of the flat set ``x``, ``{vertex: {type: ids mask}}``."""
        pools: dict[int, dict[str, int]] = {}
        rest = x >> self.n
        if rest:
            layout, starts, n = self.layout, self._starts, self.n
            i = 0
            # Walk runs of set bits; each run spans one or more pools.
            for lo, hi in IdSet.from_mask(rest).runs():
                lo += n
                hi += n
                i = bisect.bisect_right(starts, lo, i) - 1
                while i < len(layout) and layout[i][0] <= hi:
                    off, width, v, t = layout[i]
                    a = max(lo, off)
                    b = min(hi, off + width - 1)
                    if a <= b:
                        m = ((1 << (b - a + 1)) - 1) << (a - off)
                        d = pools.setdefault(v, {})
                        d[t] = d.get(t, 0) | m
                    if off + width - 1 > hi:
                        break
                    i += 1
        return pools

    def _flat_of(self, x: Any) -> tuple[Any, int] | None:
        """``(layout, x)`` for a decoded set made from the int ``x``: the graph
        flips its free set by it at once."""
        return (self.flat, x) if type(x) is int else None

    def spread(self, x: int) -> int:
        """A well-spread hash of the flat set ``x``, to key a dict with
        ``(spread(x), x)`` rather than ``x`` alone.

        ``hash()`` of an int is its value modulo 2**61 - 1, so sets that
        differ by regular bit patterns collide: the free sets of a machine
        filling up core by core (the lowest k cores taken, for every k) have
        61 distinct hashes between them, and a dict keyed on them degrades
        into chains of big-integer comparisons (30-40 us a lookup with 2,048
        entries of 9,000 bits).  The bytes of ``x`` hash with SipHash."""
        return hash(x.to_bytes(self._nbytes, "little"))

    def whole_nodes(self, x: int) -> int:
        """Node vertices (as a container mask) whose whole subtree is in ``x``.

        Remembered for the last few sets: a pass asks about the same free set
        for many jobs."""
        shift = self.unit_shift
        if shift is not None:
            return x & self.node_vertex_mask & (x >> shift)
        strided = self._strided
        if strided is not None:
            base, stride, n, v0, low = strided
            fields = self._node_fields()
            if fields is not None:
                # Node i is whole when all its cores are in x (the node index
                # keeps the nodes with every unit free: no look at every
                # node) and its vertex bit is set.
                present = x & (self.node_vertex_mask)
                return (fields.index(x).ge(fields.width) << v0) & present
            # Node i is whole when its field is full (_full_fields at bit
            # i * stride) and its vertex bit is set; the field bits are
            # gathered with a stride-S string slice.
            bits = format(_full_fields(x, base, stride) & low, f"0{n * stride}b")[::-1][::stride]
            return (int(bits[::-1], 2) << v0) & x
        cache = self._whole_cache
        key = (self.spread(x), x)
        w = cache.get(key)
        if w is None:
            w = 0
            cands = x & self.node_vertex_mask
            node_bits = self.node_bits
            while cands:
                low = cands & -cands
                v = low.bit_length() - 1
                cands ^= low
                full = node_bits[v]
                if x & full == full:
                    w |= low
            if len(cache) > 256:
                cache.clear()
            cache[key] = w
        return w

    def whole_count(self, x: int) -> int:
        """``whole_nodes(x).bit_count()``, cheaper: with the strided layout
        the count of full fields needs no gathering, and only nodes whose
        vertex bit is missing from ``x`` (usually none or a few: a node's
        vertex leaves a set with its whole rank) are looked at one by one."""
        strided = self._strided
        if strided is None or self._node_fields() is not None:
            return self.whole_nodes(x).bit_count()
        base, stride, n, v0, low = strided
        full = _full_fields(x, base, stride) & low
        missing = self.node_vertex_mask & ~x
        if not missing:
            return full.bit_count()
        nmissing = missing.bit_count()
        if nmissing > 8 and stride == 8:
            # One byte per node: spread the node vertex bits of ``x`` to
            # bit 8 * i (node i's field bit) in C, through their binary
            # string, instead of testing the missing nodes one by one.
            present = format((x >> v0) & ((1 << n) - 1), f"0{n}b")[::-1].encode().translate(_BIT_BYTE)
            return (full & int.from_bytes(present, "little")).bit_count()
        if nmissing > 32:
            return self.whole_nodes(x).bit_count()
        count = full.bit_count()
        while missing:
            bit = missing & -missing
            missing ^= bit
            if full >> ((bit.bit_length() - 1 - v0) * stride) & 1:
                count -= 1
        return count

    def nodes_touched(self, x: int) -> int:
        """How many node vertices have something of theirs in ``x`` (0 unless
        :attr:`flat_nodes`)."""
        shift = self.unit_shift
        if shift is not None:
            return ((x | (x >> shift)) & self.node_vertex_mask).bit_count()
        return sum(1 for full in self.node_bits.values() if x & full)

    def nodes_bits(self, vertices: int) -> int:
        """The whole subtrees of the node vertices in the mask ``vertices``."""
        shift = self.unit_shift
        if shift is not None:
            x = vertices | (vertices << shift)
            if x.bit_length() > 1 << CHUNK_SHIFT and vertices.bit_count() <= 64:
                # a few nodes of a big machine: their chunks, from their positions
                chunks: dict[int, int] = {}
                low = (1 << CHUNK_SHIFT) - 1
                while vertices:
                    v = vertices.bit_length() - 1
                    vertices ^= 1 << v
                    for p in (v, v + shift):
                        chunks[p >> CHUNK_SHIFT] = chunks.get(p >> CHUNK_SHIFT, 0) | 1 << (p & low)
                remember_chunks(x, chunks)
            return x
        out = 0
        node_bits = self.node_bits
        while vertices:
            low = vertices & -vertices
            vertices ^= low
            out |= node_bits[low.bit_length() - 1]
        return out

    def count(self, x: int, type: str) -> int:
        """Items of ``type`` in ``x`` (whole containers, or pool leaves)."""
        return (x & self.type_masks.get(type, 0)).bit_count()

    def ranks_mask(self, ranks: Any) -> int:
        """Everything on ``ranks`` (an IdSet or iterable of ranks)."""
        out = 0
        for r in ranks:
            out |= self.rank_mask(r)
        return out


class _RankMasks(Mapping):
    """``rank -> mask``, each computed when asked (:meth:`FlatCodec.rank_mask`)."""

    def __init__(self, codec: FlatCodec) -> None:
        self._codec = codec

    def __getitem__(self, r: int) -> int:
        if r not in self._codec.topo.rank_root:
            raise KeyError(r)
        return self._codec.rank_mask(r)

    def __iter__(self) -> Iterator[int]:
        return iter(self._codec.topo.rank_root)

    def __len__(self) -> int:
        return len(self._codec.topo.rank_root)


class _NodeBits(Mapping):
    """``node vertex -> its whole subtree``, each computed when asked and the
    last few remembered (one mask per node held at once would be quadratic)."""

    def __init__(self, codec: FlatCodec, nodes: Any) -> None:
        self._codec = codec
        self._nodes = nodes if isinstance(nodes, range) else dict.fromkeys(nodes)
        self._recent: dict[int, int] = {}

    def __getitem__(self, v: int) -> int:
        hit = self._recent.get(v)
        if hit is not None:
            return hit
        if v not in self._nodes:
            raise KeyError(v)
        m = self._codec.rank_mask(self._codec.topo.rank[v])
        if len(self._recent) >= 4096:
            self._recent.clear()
        self._recent[v] = m
        return m

    def __iter__(self) -> Iterator[int]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def _merge(chunks: list[tuple[int, int]]) -> int:
    """OR of ``mask << offset`` over ``chunks`` (sorted by offset, not
    overlapping), merged pairwise so the cost is O(total width * log chunks)
    rather than O(width) per chunk."""
    if not chunks:
        return 0
    if all(m == 1 for _, m in chunks):  # single bits: one run, else set them in a byte array
        lo, hi = min(off for off, _ in chunks), max(off for off, _ in chunks)
        if hi - lo == len(chunks) - 1:  # distinct offsets (not overlapping): every one of lo..hi
            return ((1 << len(chunks)) - 1) << lo
        arr = bytearray(hi // 8 + 1)
        for off, _ in chunks:
            arr[off >> 3] |= 1 << (off & 7)
        return int.from_bytes(arr, "little")
    items = [(off, m) for off, m in chunks if m]
    if not items:
        return 0
    while len(items) > 1:
        merged = []
        for i in range(0, len(items) - 1, 2):
            (o1, m1), (o2, m2) = items[i], items[i + 1]
            if o2 < o1:
                (o1, m1), (o2, m2) = (o2, m2), (o1, m1)
            merged.append((o1, m1 | (m2 << (o2 - o1))))
        if len(items) % 2:
            merged.append(items[-1])
        items = merged
    off, m = items[0]
    return m << off


#: ``b"0"`` -> 0, ``b"1"`` -> 1 (the rest unchanged), for binary strings
_BIT_BYTE = bytes(range(0x30)) + b"\x00\x01" + bytes(range(0x32, 256))


def _full_fields(x: int, base: int, stride: int) -> int:
    """Bit j set when every bit of ``[j, j + stride)`` of ``x >> base`` is:
    AND-ing doubling windows (overlapping them is harmless for an AND)."""
    t = x >> base
    w = 1
    while w < stride:
        step = min(w, stride - w)
        t &= t >> step
        w += step
    return t
