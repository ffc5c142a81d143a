"""JSON Graph Format, as Fluxion reads and writes it.

Reading: ``{"graph": {"nodes": [...], "edges": [...]}}``; each node has
``metadata`` with ``type``, ``name``, ``id``, ``rank`` and optionally
``basename``, ``uniq_id``, ``size``, ``unit``, ``properties``, ``paths``.
Every edge keeps its subsystem (``metadata.subsystem``, the older
``metadata.name == {"containment": ...}``; containment when absent).
Vertices without children in any subsystem become leaves pooled on their
parent, except clusters, racks and nodes, which stay vertices.  The
containment relation must be a tree: a second parent, a cycle, or a second
root is an error that names the vertex.  Each other subsystem (``power``,
``ibnet``...) must have one root; its edges link the vertices containment
made (a PDU feeding nodes) and add the vertices only it has.

Writing expands pools back into one vertex per leaf, as Fluxion expects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from ..inputs import read_bytes
from ..limits import MAX_GRAPH_BYTES, MAX_ID, MAX_NODES
from .builder import ModelBuilder
from .errors import ResourceError
from .resourceset import ResourceSet

if TYPE_CHECKING:
    from .graph import ResourceGraph

__all__ = ["model_from_jgf", "builder_from_jgf", "resourceset_to_jgf", "NEVER_POOLED"]

#: Types that stay vertices even when they have no children.
NEVER_POOLED = frozenset({"cluster", "rack", "node"})


def _containment(edge: dict) -> bool:
    md = edge.get("metadata")
    if not md:
        return True
    if "subsystem" in md:
        return md["subsystem"] == "containment"
    name = md.get("name")
    if isinstance(name, dict):
        return "containment" in name
    return True


def builder_from_jgf(obj: Any, *, source: str | None = None, element: str = "") -> ModelBuilder:
    """Check JGF and collect it into a :class:`ModelBuilder` (see the module docstring)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("graph"), dict):
        raise ResourceError("JGF must be an object with a 'graph' object", source=source, element=element or "/")
    graph = obj["graph"]
    nodes, edges = graph.get("nodes"), graph.get("edges", [])
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise ResourceError("JGF 'nodes' and 'edges' must be arrays", source=source, element=f"{element}/graph")
    nnodes = sum(
        1
        for n in nodes
        if isinstance(n, dict) and isinstance(n.get("metadata"), dict) and n["metadata"].get("type") == "node"
    )
    if nnodes > MAX_NODES:
        raise ResourceError(
            f"{nnodes} vertices of type node: over the limit of {MAX_NODES} nodes",
            source=source,
            element=f"{element}/graph/nodes",
        )
    meta: dict[str, dict] = {}
    order: dict[str, tuple] = {}
    members: set[str] = set()  # vertices of the containment subsystem
    for i, n in enumerate(nodes):
        el = f"{element}/graph/nodes/{i}"
        if not isinstance(n, dict) or "id" not in n or not isinstance(n.get("metadata"), dict):
            raise ResourceError("a JGF node needs an 'id' and a 'metadata' object", source=source, element=el)
        md = n["metadata"]
        paths = md.get("paths")
        in_containment = not (isinstance(paths, dict) and paths and "containment" not in paths)
        if not isinstance(md.get("type"), str) or not md["type"]:
            raise ResourceError("metadata 'type' must be a non-empty string", source=source, element=el)
        for key in ("id", "rank", "size", "uniq_id"):
            if key in md and (not isinstance(md[key], int) or isinstance(md[key], bool)):
                raise ResourceError(f"metadata '{key}' must be an integer", source=source, element=el)
        if not isinstance(md.get("name"), str) or not md["name"]:
            md = {**md, "name": f"{md.get('basename') or md['type']}{md.get('id', '')}"}
        nid = str(n["id"])
        if nid in meta:
            raise ResourceError(f"duplicate node id {nid!r}", source=source, element=el)
        meta[nid] = md
        order[nid] = (md.get("uniq_id", i), i)
        if in_containment:
            members.add(nid)
    tree = nx.DiGraph()
    tree.add_nodes_from(members)
    others: dict[str, list[tuple[str, str]]] = {}
    parents: set[str] = set()
    for i, e in enumerate(edges):
        el = f"{element}/graph/edges/{i}"
        if not isinstance(e, dict) or "source" not in e or "target" not in e:
            raise ResourceError("a JGF edge needs 'source' and 'target'", source=source, element=el)
        s, t = str(e["source"]), str(e["target"])
        if e.get("metadata") is not None and not isinstance(e["metadata"], dict):
            raise ResourceError("a JGF edge's 'metadata' must be an object", source=source, element=el)
        for end in (s, t):
            if end not in meta:
                raise ResourceError(f"edge refers to unknown node {end!r}", source=source, element=el)
        parents.add(s)
        if not _containment(e):
            others.setdefault(_subsystem(e), []).append((s, t))
            continue
        for end in (s, t):
            if end not in members:  # its 'paths' name other subsystems only
                raise ResourceError(
                    f"containment edge {s!r} -> {t!r}, but vertex {meta[end]['name']!r} has no containment path",
                    source=source,
                    element=el,
                )
        if tree.in_degree(t) and not tree.has_edge(s, t):
            (p,) = tree.predecessors(t)
            raise ResourceError(
                f"vertex {meta[t]['name']!r} has two containment parents ({meta[p]['name']!r}, {meta[s]['name']!r})",
                source=source,
                element=el,
            )
        tree.add_edge(s, t)
    try:
        cycle = nx.find_cycle(tree)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        names = " -> ".join(meta[a]["name"] for a, _ in cycle) + " -> " + meta[cycle[0][0]]["name"]
        raise ResourceError(f"cycle in the containment graph: {names}", source=source, element=f"{element}/graph/edges")
    roots = [n for n in tree if tree.in_degree(n) == 0]
    if len(roots) != 1:
        names = ", ".join(repr(meta[r]["name"]) for r in roots[:5])
        raise ResourceError(
            f"containment graph must have exactly one root, found {len(roots)}: {names}",
            source=source,
            element=f"{element}/graph",
        )
    b = ModelBuilder(source)
    hostnames: dict[int, str] = {}
    props: dict[int, set[str]] = {}

    handle: dict[str, int] = {}

    def add(nid: str, parent: int) -> None:
        md = meta[nid]
        kids = sorted(tree.successors(nid), key=order.__getitem__)
        rank = md.get("rank", -1)
        h = _add_vertex(b, md, parent)
        handle[nid] = h
        if md["type"] == "node" and rank is not None and rank >= 0:
            hostnames[rank] = md["name"]
            p = md.get("properties")
            if isinstance(p, dict) and p:
                props.setdefault(rank, set()).update(p)
        stack.extend((k, h) for k in reversed(kids))

    stack: list[tuple[str, int]] = []
    add(roots[0], -1)
    while stack:
        nid, parent = stack.pop()
        md = meta[nid]
        if nid not in parents and md["type"] not in NEVER_POOLED:
            i = md.get("id", 0)
            if i < 0:
                raise ResourceError(f"leaf {md['name']!r} has a negative id", source=source, element=nid)
            if i > MAX_ID:  # checked before 1 << i allocates a mask that wide
                raise ResourceError(f"leaf {md['name']!r} has an id above {MAX_ID}", source=source, element=nid)
            taken = b.pool_mask(parent, md["type"])
            if taken >> i & 1:  # duplicate leaf ids under one parent: give it the lowest unused id
                i = (~taken & (taken + 1)).bit_length() - 1
            b.add_leaves(
                parent,
                md["type"],
                1 << i,
                size=md.get("size", 1),
                unit=md.get("unit", "") or "",
                basename=md.get("basename") or md["type"],
                element=f"{element}/graph/nodes (id {nid})",
            )
        else:
            add(nid, parent)
    for sub in sorted(others):
        _add_subsystem(b, sub, others[sub], meta, order, handle, parents, source, element)
    b.hostnames = hostnames
    b.properties = props
    return b


def _subsystem(edge: dict) -> str:
    md = edge.get("metadata") or {}
    if isinstance(md.get("subsystem"), str):
        return md["subsystem"]
    name = md.get("name")
    if isinstance(name, dict) and name:
        return str(next(iter(name)))
    return "containment"


def _add_subsystem(
    b: ModelBuilder,
    sub: str,
    edges: list[tuple[str, str]],
    meta: dict[str, dict],
    order: dict[str, tuple],
    handle: dict[str, int],
    parents: set[str],
    source: str | None,
    element: str,
) -> None:
    """Add the tree of subsystem ``sub``: vertices already made are linked, new ones added or pooled."""
    g = nx.DiGraph(edges)
    roots = [v for v in g if g.in_degree(v) == 0]
    if len(roots) != 1:
        raise ResourceError(
            f"the {sub} subsystem must have exactly one root, found {len(roots)}",
            source=source,
            element=f"{element}/graph/edges",
        )
    (root,) = roots
    if root not in handle:
        md = meta[root]
        handle[root] = b.add_vertex(
            md["type"], md["name"], md.get("id", 0), basename=md.get("basename") or md["type"], subsystem=sub
        )
    seen = {root}
    stack = [root]
    while stack:
        u = stack.pop()
        hu = handle[u]
        for c in sorted(g.successors(u), key=order.__getitem__):
            md = meta[c]
            if c in handle:
                b.link(hu, handle[c], sub)
            elif c not in parents and md["type"] not in NEVER_POOLED:
                i = md.get("id", 0)
                b.add_leaves(
                    hu,
                    md["type"],
                    1 << i,
                    size=md.get("size", 1),
                    unit=md.get("unit", "") or "",
                    basename=md.get("basename") or md["type"],
                    element=f"{element}/graph/nodes (id {c})",
                    subsystem=sub,
                )
                continue
            else:
                handle[c] = _add_vertex(b, md, hu, subsystem=sub)
            if c not in seen:
                seen.add(c)
                stack.append(c)


def _add_vertex(b: Any, md: dict, parent: int, **kw: Any) -> int:
    """Add the vertex JGF ``metadata`` describes under ``parent`` (a negative rank means none)."""
    rank = md.get("rank", -1)
    return b.add_vertex(
        md["type"],
        md["name"],
        md.get("id", 0),
        parent,
        rank=rank if rank is not None and rank >= 0 else -1,
        basename=md.get("basename") or md["type"],
        size=md.get("size", 1),
        unit=md.get("unit", "") or "",
        properties=md.get("properties") or {},
        **kw,
    )


def model_from_jgf(obj: dict | str | Path, *, source: str | None = None) -> nx.DiGraph:
    """The networkx model of JGF (a dict, or a path to a JSON file)."""
    if isinstance(obj, (str, Path)):
        source = str(obj)
        try:
            obj = json.loads(read_bytes(obj, MAX_GRAPH_BYTES))
        except OSError as e:
            raise ResourceError(f"cannot read: {e.strerror}", source=source) from None
        except json.JSONDecodeError as e:
            raise ResourceError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", source=source) from None
        except (UnicodeDecodeError, RecursionError) as e:
            raise ResourceError(f"invalid JSON: {type(e).__name__}", source=source) from None
    return builder_from_jgf(obj, source=source).finish()


def resourceset_to_jgf(g: ResourceGraph, rs: ResourceSet) -> dict:
    """JGF of the items in ``rs`` and the containers above them.

    Every vertex's metadata (type, name, id, rank, size, unit, properties)
    and every pool's (size, unit, basename) is read from the model
    (``g.nx``); the compiled index says which model vertex each item is
    (``topo.vertex_attrs``: the model's attributes by index) and where it sits in the tree the set was matched on.
    """
    topo = g.topo
    attrs = topo.vertex_attrs
    sub = topo.subsystem
    keep = set()
    for v in rs.containers:
        keep.update(topo.ancestors(v))
    for v, _, _ in rs.pools():
        keep.update(topo.ancestors(v))
    nodes: list[dict] = []
    edges: list[dict] = []
    vid: dict[int, str] = {}
    paths: dict[int, str] = {}
    uniq = 0

    def vertex(type_, basename, name, id_, rank, size, unit, path, props=None) -> str:
        nonlocal uniq
        k = str(uniq)
        md = {
            "type": type_,
            "basename": basename,
            "name": name,
            "id": id_,
            "uniq_id": uniq,
            "rank": rank,
            "exclusive": False,
            "unit": unit,
            "size": size,
            "paths": {"containment": path},
        }
        if props:
            md["properties"] = props
        nodes.append({"id": k, "metadata": md})
        uniq += 1
        return k

    pool_items = {(v, t): m for v, t, m in rs.pools()}
    for v in sorted(keep):  # pre-order: a parent comes before its children
        a = attrs[v]
        p = topo.parent[v]
        path = paths[v] = (paths[p] if p >= 0 else "") + "/" + a["name"]
        rank = a["rank"]
        vid[v] = vertex(
            a["type"], a["basename"], a["name"], a["id"], rank, a["size"], a["unit"], path, a["properties"] or None
        )
        if p >= 0:
            edges.append({"source": vid[p], "target": vid[v], "metadata": {"subsystem": "containment"}})
        for t, pool in a["pools"].items():
            if pool.subsystem != sub:
                continue
            ids = pool_items.get((v, t))
            if not ids:
                continue
            for i in ids:
                name = f"{pool.basename}{i}"
                k = vertex(t, pool.basename, name, i, rank, pool.size, pool.unit, f"{path}/{name}")
                edges.append({"source": vid[v], "target": k, "metadata": {"subsystem": "containment"}})
    return {"graph": {"nodes": nodes, "edges": edges}}
