"""The per-subtree aggregates of an availability, built from scratch.

:class:`~fluxsched_py.resource.state.Availability` builds them when first
read and keeps them up to date from then on (``sync``, ``set_local``);
this module is the build: ``units``, ``busy``, ``whole`` and ``have`` per
vertex (their meaning is in :mod:`.state`), bottom-up in one pass over the
vertices, or from the topology's totals when everything is available.
"""

from __future__ import annotations

from .topology import Topology

__all__ = ["Aggregates", "build_aggregates", "full_aggregates"]

#: (units, busy, whole, have), each a list indexed by vertex
Aggregates = tuple[list[dict[str, int]], list[int], list[dict[str, int]], list[dict[str, int]]]


def build_aggregates(topo: Topology, cont: int, loc: list[dict[str, int]]) -> Aggregates:
    """The aggregates of the containers ``cont`` (a mask) and the per-vertex
    available pool masks ``loc``, bottom-up in one pass."""
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
    return units, busy, whole, have


def full_aggregates(topo: Topology, shared: bool = False) -> Aggregates:
    """The aggregates with everything available: the topology's totals
    (what :func:`build_aggregates` adds up); ``shared``: the totals
    themselves, for a set that is never changed."""
    if shared:  # read only: the totals themselves
        units, whole = topo.tot_units, topo.tot_conts
    else:
        units = [dict(u) for u in topo.tot_units]
        whole = [dict(c) for c in topo.tot_conts]
    have: list[dict[str, int]] = []
    for kids in topo.children:
        h: dict[str, int] = {}
        if kids:
            hb: dict[str, bytearray] = {}
            for i, c in enumerate(kids):
                for t, x in units[c].items():
                    if x > 0:
                        arr = hb.get(t)
                        if arr is None:
                            arr = hb[t] = bytearray((len(kids) + 7) // 8)
                        arr[i >> 3] |= 1 << (i & 7)
            h = {t: int.from_bytes(arr, "little") for t, arr in hb.items()}
        have.append(h)
    return units, [0] * topo.n, whole, have
