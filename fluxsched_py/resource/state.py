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

The live graph keeps one and updates it incrementally (:meth:`set_local`
walks the ancestors only).  A snapshot ``ResourceSet`` handed to the matcher
gets one built bottom-up in one pass (:meth:`from_resourceset`).
"""

from __future__ import annotations

from .resourceset import ResourceSet
from .topology import Topology

__all__ = ["Availability"]


class Availability:
    __slots__ = ("topo", "loc", "cont", "units", "busy", "whole", "have")

    def __init__(self, topo: Topology, cont: int, loc: list[dict[str, int]]) -> None:
        """Build from a container mask and per-vertex available pool masks (adopted)."""
        self.topo = topo
        self.cont = cont
        self.loc = loc
        n = topo.n
        units: list[dict[str, int]] = [None] * n  # type: ignore[list-item]
        busy = [0] * n
        whole: list[dict[str, int]] = [None] * n  # type: ignore[list-item]
        have: list[dict[str, int]] = [None] * n  # type: ignore[list-item]
        info = topo.pool_info
        tpools = topo.pools
        children = topo.children
        vtype = topo.type
        # one pass over the bytes of ``cont``: testing ``cont >> v & 1`` per
        # vertex would cost O(n) each on a big machine
        cbytes = cont.to_bytes((n + 8) // 8, "little")
        for v in range(n - 1, -1, -1):
            u: dict[str, int] = {}
            b = 0 if cbytes[v >> 3] >> (v & 7) & 1 else 1
            for t, m in loc[v].items():
                c = m.bit_count()
                u[t] = c * info[(v, t)][0]
                b += tpools[v][t].bit_count() - c
            for t, m in tpools[v].items():
                if t not in loc[v]:
                    b += m.bit_count()
            w: dict[str, int] = {}
            h: dict[str, int] = {}
            kids = children[v]
            if len(kids) <= 64:
                for i, c in enumerate(kids):
                    for t, x in units[c].items():
                        u[t] = u.get(t, 0) + x
                        if x > 0:
                            h[t] = h.get(t, 0) | 1 << i
                    for t, x in whole[c].items():
                        w[t] = w.get(t, 0) + x
                    b += busy[c]
            else:  # many children: set ``have`` bits through a byte array, not a growing integer
                hb: dict[str, bytearray] = {}
                for i, c in enumerate(kids):
                    for t, x in units[c].items():
                        u[t] = u.get(t, 0) + x
                        if x > 0:
                            arr = hb.get(t)
                            if arr is None:
                                arr = hb[t] = bytearray((len(kids) + 7) // 8)
                            arr[i >> 3] |= 1 << (i & 7)
                    for t, x in whole[c].items():
                        w[t] = w.get(t, 0) + x
                    b += busy[c]
                h = {t: int.from_bytes(arr, "little") for t, arr in hb.items()}
            if b == 0:
                w[vtype[v]] = w.get(vtype[v], 0) + 1
            units[v] = u
            busy[v] = b
            whole[v] = w
            have[v] = h
        self.units = units
        self.busy = busy
        self.whole = whole
        self.have = have

    @classmethod
    def from_resourceset(cls, rs: ResourceSet) -> Availability:
        topo = rs.topology
        loc: list[dict[str, int]] = [{} for _ in range(topo.n)]
        for v, tm in rs._pools.items():
            loc[v] = dict(tm)
        return cls(topo, rs._cont, loc)

    @classmethod
    def for_resourceset(cls, rs: ResourceSet) -> Availability:
        """Like :meth:`from_resourceset`, cached on the (immutable) set."""
        cached = rs._cache
        if cached is None or len(cached.busy) != rs._topo.n:  # none yet, or made before the graph grew
            cached = rs._cache = cls.from_resourceset(rs)
        return cached

    def to_resourceset(self) -> ResourceSet:
        pools = {v: dict(d) for v in self.topo.pool_vertices if (d := {t: m for t, m in self.loc[v].items() if m})}
        return ResourceSet(self.topo, self.cont, pools)

    def set_local(self, v: int, loc: dict[str, int], cont_bit: bool) -> None:
        """Replace vertex ``v``'s own availability and update the aggregates above it
        (``loc`` is copied, never kept)."""
        topo = self.topo
        old = self.loc[v]
        new = {t: m for t, m in loc.items() if m}
        self.loc[v] = new
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
        if not ditems and not dunits:
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
