"""Availability of a graph's items, with per-subtree aggregates for pruning.

An :class:`Availability` says which containers and leaves are available (free
and up, or whatever a caller's snapshot says) and keeps, for every vertex:

``units[v][type]``
    available leaf units of ``type`` in the subtree of ``v``;
``busy[v]``
    number of *unavailable* items (containers and leaves) in the subtree;
    ``busy[v] == 0`` means the whole subtree is available;
``whole[v][type]``
    number of containers of ``type`` in the subtree whose own subtree is
    wholly available;
``have[v][type]``
    which children of ``v`` still have units of ``type``: bit ``i`` stands
    for ``children[v][i]`` and is set when its ``units`` of ``type`` are
    positive.  The matcher walks only those children, so on a machine that
    is mostly full, finding the free ones does not cost a visit per full one.

The live graph keeps one and updates it incrementally.  A job's allocation
or release (:meth:`take`, :meth:`give`) changes ``cont``, ``loc`` and the
graph's flat free set (``flat``, :mod:`.flatfree`: always exact, the planner
reads it directly) and notes the vertices it changed; the aggregates catch up at the next
:meth:`sync`, which ``ResourceGraph.availability`` calls for the matcher:
each vertex changed since the last sync once, with its net change, then each
ancestor once with the sum of the changes below it.  A replay whose matches
all take the planner's flat fast paths never reads them, and never pays for
them.  Given the job's set as flat bits as well (a placement the planner
decoded), take and give change only the flat free set and note its flips;
``cont`` and ``loc`` catch up with their net change when first read
(:meth:`_settle`).  An up/down change goes vertex by vertex (:meth:`set_local` syncs,
then walks the ancestors only).  A snapshot ``ResourceSet`` handed to the
matcher gets one built bottom-up in one pass (:meth:`from_resourceset`,
kept on the set: :meth:`ResourceSet.availability`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from ..ids import IdSet
from .aggregates import Aggregates, build_aggregates, full_aggregates
from .flatfree import FreeBits
from .resourceset import ResourceSet
from .topology import Topology

__all__ = ["Availability"]


def _members(mask: int) -> set[int]:
    """The set bits of ``mask``.  A job's containers are a few bits of a
    machine-wide mask, often not one run: peel them off the low end (each
    step on a shorter integer) rather than scan the whole mask as a string
    (:meth:`IdSet.runs`), which is kept for masks with many bits."""
    if mask.bit_count() > 64:
        return set(IdSet.from_mask(mask))
    out = set()
    base = 0
    while mask:
        b = (mask & -mask).bit_length()
        base += b
        out.add(base - 1)
        mask >>= b
    return out


class Availability:
    __slots__ = ("topo", "_loc", "_cont", "_agg", "_stale", "_cont0", "flat", "_lazy", "_snapshot")

    def __init__(self, topo: Topology, cont: int, loc: list[dict[str, int]], snapshot: bool = False) -> None:
        """Build from a container mask and per-vertex available pool masks
        (adopted).  A ``snapshot`` is never changed: its aggregates may
        share the topology's totals."""
        self.topo = topo
        self._snapshot = snapshot
        self._cont = cont
        self._loc = loc
        #: flips made by :meth:`take` and :meth:`give` on the flat free set
        #: alone, ``{chunk: mask}`` XORed: ``cont`` and ``loc`` catch up when
        #: first read (:meth:`_settle`), so a job that comes and goes before
        #: anyone reads them costs nothing there (issue 15)
        self._lazy: dict[int, int] = {}
        #: vertices whose ``loc`` changed since the aggregates were last right,
        #: with their ``loc`` then; ``_cont0`` is ``cont`` then (see :meth:`sync`)
        self._stale: dict[int, dict[str, int]] = {}
        self._cont0 = cont
        #: The flat free set (:class:`~.flatfree.FreeBits`) this availability
        #: keeps in step, or None (snapshots; the graph attaches it when first asked).
        self.flat: FreeBits | None = None
        #: the aggregates (``units``, ``busy``, ``whole``, ``have``), built
        #: when first read (:meth:`_build`): a replay whose matches all take
        #: the flat fast paths never reads them
        self._agg: Aggregates | None = None

    def _build(self) -> Aggregates:
        """The aggregates from ``cont`` and ``loc`` (:mod:`.aggregates`)."""
        if self._lazy:
            self._settle()
        self._stale = {}
        self._cont0 = self._cont
        topo = self.topo
        if self._cont == (1 << topo.n) - 1 and self._loc == topo.pools:  # everything available
            self._agg = full_aggregates(topo, shared=self._snapshot)
        else:
            self._agg = build_aggregates(topo, self._cont, self._loc)
        return self._agg

    @property
    def units(self) -> list[dict[str, int]]:
        """Per vertex, available leaf units of each type in its subtree."""
        return (self._agg or self._build())[0]

    @property
    def busy(self) -> list[int]:
        """Per vertex, unavailable items in its subtree (0: all available)."""
        return (self._agg or self._build())[1]

    @property
    def whole(self) -> list[dict[str, int]]:
        """Per vertex, containers of each type in its subtree wholly available."""
        return (self._agg or self._build())[2]

    @property
    def have(self) -> list[dict[str, int]]:
        """Per vertex and type, a bit per child that still has units of it."""
        return (self._agg or self._build())[3]

    @property
    def cont(self) -> int:
        """Mask of the available containers."""
        if self._lazy:
            self._settle()
        return self._cont

    @cont.setter
    def cont(self, value: int) -> None:
        if self._lazy:
            self._settle()
        self._cont = value

    @property
    def loc(self) -> list[dict[str, int]]:
        """Per vertex, ``{type: available ids mask}`` of its own pools (no empty masks)."""
        if self._lazy:
            self._settle()
        return self._loc

    def _settle(self) -> None:
        """Apply to ``cont`` and ``loc`` what :meth:`take` and :meth:`give`
        flipped on the flat free set alone (noting the vertices for
        :meth:`sync`): only the net change, read as runs of bits, laid out
        as the flat set is (:class:`~.flatfree.FlatLayout`)."""
        lazy, self._lazy = self._lazy, {}
        flat = self.flat
        assert flat is not None
        layout = flat.layout
        entries, starts, n, shift = layout.layout, layout.starts, layout.n, flat.shift
        flips: dict[int, dict[str, int]] = {}
        cflip = 0
        for ci, m in lazy.items():
            if not m:
                continue
            base = ci << shift
            i = 0
            for lo, hi in IdSet.from_mask(m).runs():
                lo += base
                hi += base
                if lo < n:  # containers
                    top = min(hi, n - 1)
                    cflip |= ((1 << (top - lo + 1)) - 1) << lo
                    lo = top + 1
                    if lo > hi:
                        continue
                i = bisect.bisect_right(starts, lo, i) - 1
                while i < len(entries) and entries[i][0] <= hi:
                    off, width, v, t = entries[i]
                    a = max(lo, off)
                    b = min(hi, off + width - 1)
                    if a <= b:
                        d = flips.setdefault(v, {})
                        d[t] = d.get(t, 0) ^ (((1 << (b - a + 1)) - 1) << (a - off))
                    if off + width - 1 > hi:
                        break
                    i += 1
        self._cont ^= cflip
        lock, stale, tpools = self._loc, self._stale, self.topo.pools
        for v, tm in flips.items():
            old = lock[v]
            if v not in stale:
                stale[v] = old
            lock[v] = {t: r for t in tpools[v] if (r := old.get(t, 0) ^ tm.get(t, 0))}

    @classmethod
    def from_resourceset(cls, rs: ResourceSet) -> Availability:
        """A snapshot in which the items of ``rs`` are available (the set
        keeps one: :meth:`ResourceSet.availability`)."""
        topo = rs.topology
        empty: dict[str, int] = {}
        loc: list[dict[str, int]] = [empty] * topo.n
        for v, tm in rs.leaf_masks.items():
            loc[v] = tm  # type: ignore[assignment]  # shared: neither the set nor a snapshot changes
        return cls(topo, rs.container_mask, loc, snapshot=True)

    def to_resourceset(self) -> ResourceSet:
        pools = {v: dict(d) for v in self.topo.pool_vertices if (d := {t: m for t, m in self.loc[v].items() if m})}
        return ResourceSet(self.topo, self.cont, pools)

    def take(self, cont: int, pools: Mapping[int, Mapping[str, int]], bits: int | None = None) -> None:
        """Make the containers of the mask ``cont`` and the pool items of
        ``pools`` (``{vertex: {type: ids mask}}``) unavailable, those of them
        that are available (a job's allocation).  The flat free set changes
        here (the job's flips gathered per chunk, each chunk changed once,
        or, given ``bits``, the same items as a flat set of the free set's
        layout, at once); the aggregates follow at the next :meth:`sync`."""
        flat = self.flat
        if flat is not None and bits is not None:  # cont and loc follow when read
            self._defer(flat.remove(bits))
            return
        c = self.cont & cont
        self.cont ^= c  # & ~ without a negative int
        lock, stale = self.loc, self._stale
        if flat is not None:  # its flips, per chunk, applied once below
            offsets, shift = flat.layout.offsets, flat.shift
            low = (1 << shift) - 1
            acc: dict[int, int] = {0: c} if c else {}  # containers sit at offset 0
            one = flat.layout.width <= low  # the whole set is one chunk: one int
            fd = c
        for v, tm in pools.items():
            old = lock[v]
            if v not in stale:
                stale[v] = old
            new = {}
            for t, m in old.items():
                x = m & tm.get(t, 0)  # what this takes of the pool
                if x:
                    m ^= x
                    if flat is not None:
                        off = offsets[(v, t)]
                        if one:
                            fd ^= x << off
                        else:
                            ci = off >> shift
                            acc[ci] = acc.get(ci, 0) ^ (x << (off & low))
                if m:
                    new[t] = m
            lock[v] = new
        if flat is not None:
            flat.flip_chunks({0: fd} if one else acc)

    def give(self, cont: int, pools: Mapping[int, Mapping[str, int]], bits: int | None = None) -> None:
        """Make the containers of ``cont`` and the pool items of ``pools``
        available (a job's release); the inverse of :meth:`take` (``bits``
        as there).  A vertex's own pool masks stay in the order of the
        topology's pools."""
        flat = self.flat
        if flat is not None and bits is not None:  # cont and loc follow when read
            self._defer(flat.add(bits))
            return
        c = cont & ~self.cont
        self.cont |= c
        lock, stale, tpools = self.loc, self._stale, self.topo.pools
        if flat is not None:  # its flips, per chunk, applied once below
            offsets, shift = flat.layout.offsets, flat.shift
            low = (1 << shift) - 1
            acc: dict[int, int] = {0: c} if c else {}  # containers sit at offset 0
            one = flat.layout.width <= low  # the whole set is one chunk: one int
            fd = c
        for v, tm in pools.items():
            old = lock[v]
            if v not in stale:
                stale[v] = old
            new = {}
            for t in tpools[v]:  # a loop, not a comprehension: no call per vertex
                m = old.get(t, 0)
                x = tm.get(t, 0)
                if x:
                    if flat is not None and x & ~m:
                        off = offsets[(v, t)]
                        if one:
                            fd ^= (x & ~m) << off
                        else:
                            ci = off >> shift
                            acc[ci] = acc.get(ci, 0) ^ ((x & ~m) << (off & low))
                    m |= x
                if m:
                    new[t] = m
            lock[v] = new
        if flat is not None:
            flat.flip_chunks({0: fd} if one else acc)

    def _defer(self, flips: Mapping[int, int]) -> None:
        """Note flips made on the flat free set for :meth:`_settle`."""
        lazy = self._lazy
        for i, m in flips.items():
            x = lazy.get(i, 0) ^ m
            if x:
                lazy[i] = x
            else:
                lazy.pop(i, None)

    def sync(self) -> None:
        """Bring the aggregates up to date with what :meth:`take` and
        :meth:`give` changed since the last sync.

        The aggregates are a function of ``cont`` and ``loc`` alone, so only
        the net change of each vertex counts: a vertex taken and given back
        in between costs nothing here.  Each changed vertex is visited once
        (a vertex with no container below it also updates its own
        aggregates here); then each ancestor once, with the sum of the
        changes below it (:meth:`_spread`).  Only readers of the aggregates
        (the matcher, through ``ResourceGraph.availability``, and
        :meth:`set_local`) need them, so a replay whose matches all take the
        flat fast paths never pays for them (issue 15).  The result is what
        :meth:`set_local` would leave vertex by vertex
        (``t/test_resource_batch.py`` checks it).
        """
        if self._lazy:
            self._settle()
        if self._agg is None:  # built from cont and loc as they are when first read
            self._stale = {}
            self._cont0 = self._cont
            return
        stale = self._stale
        flipped = self._cont0 ^ self.cont
        if not stale and not flipped:
            return
        self._stale = {}
        self._cont0 = self.cont
        topo = self.topo
        info, end, cont = topo.pool_info, topo.end, self.cont
        lock = self.loc
        deep: dict[int, tuple[int, dict[str, int]]] = {}  # vertices with containers below them
        pend: dict[int, list] = {}  # what each ancestor gets from below (see _spread)
        parent, pos, vtype = topo.parent, topo.child_pos, topo.type
        units, busy, whole = self.units, self.busy, self.whole
        lastp = -2
        pp: list | None = None
        conts = _members(flipped) if flipped else set()
        for v, old in stale.items():
            new = lock[v]
            du: dict[str, int] = {}
            di = 0
            if new != old:
                for t, m in new.items():
                    k = m.bit_count() - old.get(t, 0).bit_count()
                    if k:
                        di += k
                        du[t] = k * info[(v, t)][0]
                for t, m in old.items():
                    if t not in new:
                        k = m.bit_count()
                        di -= k
                        du[t] = -k * info[(v, t)][0]
            if v in conts:
                conts.discard(v)
                di += 1 if cont >> v & 1 else -1
            if not di and not du:
                continue
            if end[v] != v + 1:
                deep[v] = (di, du)
                continue
            # no container below v, so nothing else below it changes: apply here
            p = parent[v]
            if p != lastp:
                lastp = p
                if p >= 0:
                    pp = pend.get(p)
                    if pp is None:
                        pp = pend[p] = [0, {}, {}, {}]
                    pdu, pdw, pf = pp[1], pp[2], pp[3]
                else:
                    pp = None
            ua = units[v]
            if pp is None:
                for t, d in du.items():
                    ua[t] = ua.get(t, 0) + d
            else:
                pp[0] += di
                for t, d in du.items():
                    o = ua.get(t, 0)
                    ua[t] = o + d
                    pdu[t] = pdu.get(t, 0) + d
                    if (o > 0) != (o + d > 0):
                        pf[t] = pf.get(t, 0) ^ 1 << pos[v]
            ob = busy[v]
            nb = ob - di
            busy[v] = nb
            if (ob == 0) != (nb == 0):
                t = vtype[v]
                x = 1 if nb == 0 else -1
                wv = whole[v]
                wv[t] = wv.get(t, 0) + x
                if pp is not None:
                    pdw[t] = pdw.get(t, 0) + x
        for v in conts:  # containers without pools of their own that changed
            deep[v] = (1 if cont >> v & 1 else -1, {})
        self._spread(deep, pend)

    def _spread(self, deep: Mapping[int, tuple[int, dict[str, int]]], pend: dict[int, list]) -> None:
        """Carry changes up to the aggregates, visiting each ancestor once,
        children before parents (in pre-order a parent's index is below its
        children's).

        ``deep`` holds the own changes of vertices with containers below them,
        ``{v: (available items, {type: available units})}``; ``pend`` what
        vertices already get from their children, ``[items, units, whole
        containers, have flips]``.  Per vertex ``a`` visited: its ``units``
        and ``busy`` move by its own change plus the sum of the changes below
        it; its ``whole`` by the containers below it, and itself, whose
        subtree became (or stopped being) wholly available; and a child whose
        ``units`` of a type crossed zero flips its bit in ``have[a]``.
        """
        topo = self.topo
        parent, vtype, pos = topo.parent, topo.type, topo.child_pos
        units, busy, whole, have = self.units, self.busy, self.whole, self.have
        for v in [*deep, *pend]:
            a = parent[v]
            while a >= 0 and a not in pend:
                pend[a] = [0, {}, {}, {}]
                a = parent[a]
        for a in sorted(deep.keys() | pend.keys(), reverse=True):
            acc = pend.get(a)
            own = deep.get(a)
            if acc is None:
                di, du = own  # type: ignore[misc]
                dw = flips = None
            else:
                di, du, dw, flips = acc
                if own is not None:
                    di += own[0]
                    for t, d in own[1].items():
                        du[t] = du.get(t, 0) + d
            p = parent[a]
            pp = pend[p] if p >= 0 else None
            if du:
                ua = units[a]
                if pp is None:
                    for t, d in du.items():
                        ua[t] = ua.get(t, 0) + d
                else:
                    pdu, pf, bit = pp[1], pp[3], 1 << pos[a]
                    for t, d in du.items():
                        old = ua.get(t, 0)
                        new = old + d
                        ua[t] = new
                        pdu[t] = pdu.get(t, 0) + d
                        if (old > 0) != (new > 0):
                            pf[t] = pf.get(t, 0) ^ bit
            if di:
                ob = busy[a]
                nb = ob - di
                busy[a] = nb
                if pp is not None:
                    pp[0] += di
                if (ob == 0) != (nb == 0):
                    t = vtype[a]
                    x = 1 if nb == 0 else -1
                    if dw is None:
                        dw = {t: x}
                    else:
                        dw[t] = dw.get(t, 0) + x
            if dw:
                wa = whole[a]
                for t, d in dw.items():
                    wa[t] = wa.get(t, 0) + d
                if pp is not None:
                    pdw = pp[2]
                    for t, d in dw.items():
                        pdw[t] = pdw.get(t, 0) + d
            if flips:
                ha = have[a]
                for t, m in flips.items():
                    ha[t] = ha.get(t, 0) ^ m

    def set_local(self, v: int, loc: dict[str, int], cont_bit: bool) -> None:
        """Replace vertex ``v``'s own availability and update the aggregates above it
        (``loc`` is copied, never kept)."""
        self.sync()
        topo = self.topo
        old = self.loc[v]
        new = {t: m for t, m in loc.items() if m}
        self.loc[v] = new
        flat = self.flat
        if flat is not None:
            for t in new.keys() | old.keys():
                flat.pool(v, t, old.get(t, 0), new.get(t, 0))
        dunits: dict[str, int] = {}
        ditems = 0
        if new != old:
            info = topo.pool_info
            for t, m in new.items():
                d = m.bit_count() - old.get(t, 0).bit_count()
                if d:
                    dunits[t] = d * info[(v, t)][0]
                    ditems += d
            for t, m in old.items():
                if t not in new:
                    d = m.bit_count()
                    dunits[t] = -d * info[(v, t)][0]
                    ditems -= d
        was = self.cont >> v & 1
        if cont_bit and not was:
            self.cont |= 1 << v
            ditems += 1
        elif was and not cont_bit:
            self.cont &= ~(1 << v)
            ditems -= 1
        if flat is not None and bool(was) != bool(cont_bit):
            flat.flip(v, 1)
        self._cont0 = self.cont  # the aggregates follow below
        if self._agg is None or (not ditems and not dunits):  # none yet: built from loc and cont when read
            return
        dwhole: dict[str, int] = {}
        units, busy, whole, parent, vtype = self.units, self.busy, self.whole, topo.parent, topo.type
        a = v
        while a >= 0:
            if dunits:
                ua = units[a]
                for t, d in dunits.items():
                    ua[t] = ua.get(t, 0) + d
            ob = busy[a]
            nb = ob - ditems
            busy[a] = nb
            if (ob == 0) != (nb == 0):
                t = vtype[a]
                dwhole[t] = dwhole.get(t, 0) + (1 if nb == 0 else -1)
            if dwhole:
                wa = whole[a]
                for t, d in dwhole.items():
                    wa[t] = wa.get(t, 0) + d
            a = parent[a]
        # A child that gained its first units of a type, or lost its last ones,
        # flips its bit in its parent's ``have``.  Only a chain from v up can
        # cross zero (above a vertex that stays positive, every count does),
        # so stop at the first vertex that does not.
        have, pos = self.have, topo.child_pos
        for t, d in dunits.items():
            a = v
            p = parent[a]
            while p >= 0:
                u = units[a][t]
                if (u > 0) == (u > d):  # the new count and the old one (u - d)
                    break
                hp = have[p]
                hp[t] = hp.get(t, 0) ^ 1 << pos[a]
                a = p
                p = parent[a]
