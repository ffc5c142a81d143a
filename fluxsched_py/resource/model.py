"""Check a user-built networkx resource model (:meth:`ResourceGraph.from_networkx`).

The shape is the one :mod:`fluxsched_py.resource.builder` documents.  A user
may leave out what has an obvious default: ``name`` (basename + id),
``basename`` (the type), ``id`` (0), ``rank`` (-1, or the parent's),
``size`` (1), ``unit`` (""), ``properties`` ({}), ``pools`` ({}), an edge's
``subsystem`` (containment) and ``G.graph["roots"]`` (found from the edges).
A pool may be given as a :class:`~fluxsched_py.resource.builder.Pool`, an
:class:`~fluxsched_py.ids.IdSet`, an idset string (``"0-31"``), a list of
ids, or a dict with ``ids`` and optional ``size``, ``unit``, ``basename``,
``subsystem``; it becomes a ``Pool``.

Defaults are filled in place, so the graph handed over is the model.  A
``MultiDiGraph`` is converted to a ``DiGraph`` whose edges keep their
``subsystem`` (the edge key when the edge has no ``subsystem`` attribute).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from ..ids import IdSet, IdSetError
from .builder import CONTAINMENT, RLITE_TYPES, Pool
from .errors import ResourceError

__all__ = ["validate"]


def _err(msg: str, where: Any = None) -> ResourceError:
    return ResourceError(msg, source="networkx graph", element=None if where is None else f"vertex {where!r}")


def _ids(spec: Any, v: Any, t: str) -> IdSet:
    try:
        if isinstance(spec, IdSet):
            return spec
        if isinstance(spec, str):
            return IdSet.parse(spec)
        if isinstance(spec, (list, tuple, set, frozenset, range)):
            if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in spec):
                raise _err(f"pool {t!r}: ids must be non-negative integers", v)
            return IdSet(spec)
    except IdSetError as e:
        raise _err(f"pool {t!r}: {e}", v) from None
    raise _err(f"pool {t!r}: ids must be an IdSet, an idset string or a list of integers", v)


def _pool(spec: Any, v: Any, t: str, pos: int) -> Pool:
    if isinstance(spec, Pool):
        ids, size, unit, basename, subsystem, pos = spec
        spec = {"ids": ids, "size": size, "unit": unit, "basename": basename, "subsystem": subsystem, "pos": pos}
    d = spec if isinstance(spec, dict) else {"ids": spec}
    if "ids" not in d:
        raise _err(f"pool {t!r} has no 'ids'", v)
    size = d.get("size", 1)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise _err(f"pool {t!r}: 'size' must be a positive integer", v)
    ids = _ids(d["ids"], v, t)
    if not ids:
        raise _err(f"pool {t!r} is empty", v)
    return Pool(
        ids,
        size,
        str(d.get("unit", "")),
        str(d.get("basename") or t),
        str(d.get("subsystem", CONTAINMENT)),
        int(d.get("pos", pos)),
    )


def _as_digraph(G: Any) -> nx.DiGraph:
    if isinstance(G, nx.MultiDiGraph):
        D = nx.DiGraph(**G.graph)
        D.add_nodes_from(G.nodes(data=True))
        for u, v, k, a in G.edges(keys=True, data=True):
            s = a.get("subsystem", k if isinstance(k, str) else CONTAINMENT)
            if D.has_edge(u, v):
                raise _err(f"two edges {u!r} -> {v!r}: one parent-child pair has one subsystem", v)
            D.add_edge(u, v, **{**a, "subsystem": s})
        return D
    if isinstance(G, nx.DiGraph):
        return G
    raise ResourceError("expected a networkx DiGraph or MultiDiGraph", source="networkx graph")


def validate(G: nx.DiGraph | nx.MultiDiGraph) -> nx.DiGraph:
    """Check ``G`` and fill its defaults; return the model (``G`` itself unless it was a MultiDiGraph)."""
    G = _as_digraph(G)
    if G.number_of_nodes() == 0:
        raise ResourceError("the resource graph is empty", source="networkx graph")
    for u, v, a in G.edges(data=True):
        s = a.setdefault("subsystem", CONTAINMENT)
        if not isinstance(s, str) or not s:
            raise _err(f"edge {u!r} -> {v!r}: 'subsystem' must be a non-empty string", v)
    for v, a in G.nodes(data=True):
        t = a.get("type")
        if not isinstance(t, str) or not t:
            raise _err("every vertex needs a 'type' (a non-empty string)", v)
        for k in ("id", "rank"):
            x = a.get(k, 0 if k == "id" else -1)
            if x is None:
                x = -1
            if not isinstance(x, int) or isinstance(x, bool):
                raise _err(f"'{k}' must be an integer", v)
            a[k] = x
        if a["id"] < 0:
            raise _err("'id' must not be negative", v)
        a.setdefault("basename", t)
        a.setdefault("name", f"{a['basename']}{a['id']}")
        a.setdefault("size", 1)
        a.setdefault("unit", "")
        props = a.setdefault("properties", {})
        if not isinstance(props, dict):
            raise _err("'properties' must be a dict", v)
        pools = a.get("pools") or {}
        if not isinstance(pools, dict):
            raise _err("'pools' must be a dict of type -> ids", v)
        nkids = G.out_degree(v)
        a["pools"] = {str(pt): _pool(spec, v, pt, nkids) for pt, spec in pools.items()}
    roots = dict(G.graph.get("roots") or {})
    by_sub: dict[str, nx.DiGraph] = {}
    for u, v, s in G.edges(data="subsystem"):
        by_sub.setdefault(s, nx.DiGraph()).add_edge(u, v)
    for s, sub in by_sub.items():
        try:
            cycle = nx.find_cycle(sub)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            raise _err(f"cycle in the {s} subsystem: " + " -> ".join(repr(x) for x, _ in cycle), cycle[0][0])
        if s not in roots:
            tops = [v for v in sub if sub.in_degree(v) == 0]
            if len(tops) != 1:
                raise ResourceError(
                    f"the {s} subsystem must have one root, found {len(tops)}: {tops[:5]!r}", source="networkx graph"
                )
            roots[s] = tops[0]
    if CONTAINMENT not in roots:
        if G.number_of_nodes() != 1:
            raise ResourceError("the graph has no containment edges and more than one vertex", source="networkx graph")
        roots[CONTAINMENT] = next(iter(G))
    cont = by_sub.get(CONTAINMENT)
    if cont is not None:
        r = roots[CONTAINMENT]
        if r not in cont:
            raise _err("the containment root has no containment children", r)
        reach = nx.descendants(cont, r) | {r}
        lost = [v for v in cont if v not in reach]
        if lost:
            raise _err("vertex is not reachable from the containment root", lost[0])
    G.graph["roots"] = roots
    G.graph.setdefault("source", "networkx graph")
    hosts = G.graph.setdefault("hostnames", {})
    if not hosts:
        for _, a in G.nodes(data=True):
            if a["type"] == "node" and a["rank"] >= 0:
                hosts[a["rank"]] = a["name"]
    G.graph.setdefault("rank_properties", {})
    G.graph.setdefault("rlite_types", list(RLITE_TYPES))
    return G
