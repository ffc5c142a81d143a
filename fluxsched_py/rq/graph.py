"""A per-vertex resource graph shaped the way Fluxion's resource-query sees it.

``fluxsched_py.resource`` pools identical leaves for speed; resource-query's
text formats, however, name every vertex (``core35[1:x]``) and print them in
the order the graph was generated.  This module keeps one :class:`Vertex` per
resource, with children in generation order, so :mod:`fluxsched_py.rq.dfu` can
reproduce resource-query's choices and output byte for byte.  The graphs in
Fluxion's corpus are small (at most a few thousand vertices).

Readers: GRUG GraphML recipes (expanded like Fluxion's generator does:
breadth of each recipe edge at once, ids by ``id_scope``/``id_start``/
``id_stride``), JGF, and RFC 20 R (``rv1exec``).  Only the containment
subsystem is loaded.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from ..ids import Hostlist, IdSet

__all__ = ["Vertex", "RGraph", "GraphError", "load_graph"]

CONTAINMENT = "containment"


class GraphError(Exception):
    """A resource graph file cannot be read; the message names file and element."""


@dataclass(eq=False)
class Vertex:
    uniq_id: int
    type: str
    basename: str
    name: str
    id: int
    size: int = 1
    rank: int = -1
    unit: str = ""
    path: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    parent: Vertex | None = None
    children: list[Vertex] = field(default_factory=list)
    up: bool = True
    # scheduling state: spans are (start, end, amount, jobid, reserved)
    plans: list[tuple[int, int, int, int, bool]] = field(default_factory=list)
    # x_checker: (start, end, jobid, amount); amount = X_ALL for exclusive users
    xspans: list[tuple[int, int, int]] = field(default_factory=list)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<{self.name} #{self.uniq_id}>"

    @property
    def depth(self) -> int:
        d, v = 0, self.parent
        while v is not None:
            d, v = d + 1, v.parent
        return d

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


class RGraph:
    """Vertices in creation order, plus the containment root."""

    def __init__(self) -> None:
        self.vertices: list[Vertex] = []
        self.root: Vertex | None = None
        self.by_path: dict[str, Vertex] = {}

    def add(self, **kw: Any) -> Vertex:
        v = Vertex(uniq_id=len(self.vertices), **kw)
        self.vertices.append(v)
        return v

    def link(self, parent: Vertex, child: Vertex) -> None:
        if child.parent is not None:
            raise GraphError(f"vertex {child.name} has two containment parents")
        child.parent = parent
        parent.children.append(child)

    def finish(self) -> None:
        roots = [v for v in self.vertices if v.parent is None]
        if len(roots) != 1:
            raise GraphError(f"expected one containment root, found {len(roots)}")
        self.root = roots[0]
        seen = 0
        for v in self.root.walk():
            seen += 1
            if not v.path:
                v.path = (v.parent.path if v.parent else "") + "/" + v.name
            self.by_path[v.path] = v
        if seen != len(self.vertices):
            raise GraphError("containment graph has a cycle or unreachable vertices")

    def nodes(self) -> list[Vertex]:
        return [v for v in self.vertices if v.type == "node"]


# --------------------------------------------------------------------- GRUG
_GML = "{http://graphml.graphdrawing.org/xmlns}"


def _grug(path: str) -> RGraph:
    try:
        tree = ET.parse(path)
    except (ET.ParseError, OSError) as e:
        raise GraphError(f"{path}: cannot parse GRUG GraphML: {e}") from None
    root = tree.getroot()
    keys: dict[str, tuple[str, str, Any]] = {}
    for k in root.iter(f"{_GML}key"):
        d = k.find(f"{_GML}default")
        keys[k.get("id", "")] = (k.get("attr.name", k.get("id", "")), k.get("attr.type", "string"),
                                 d.text if d is not None else None)

    def attrs(elem: ET.Element, kind: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, _typ, default in keys.values():
            if default is not None:
                out[name] = default
        for d in elem.findall(f"{_GML}data"):
            name = keys.get(d.get("key", ""), (d.get("key", ""), "string", None))[0]
            out[name] = (d.text or "").strip()
        return out

    graph = root.find(f"{_GML}graph")
    if graph is None:
        raise GraphError(f"{path}: no <graph> element")
    rnodes: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for n in graph.findall(f"{_GML}node"):
        nid = n.get("id", "")
        rnodes[nid] = attrs(n, "node")
        order.append(nid)
    redges: dict[str, list[dict[str, Any]]] = {nid: [] for nid in order}
    for e in graph.findall(f"{_GML}edge"):
        a = attrs(e, "edge")
        s, t = e.get("source", ""), e.get("target", "")
        if s not in rnodes or t not in rnodes:
            raise GraphError(f"{path}: edge {e.get('id')} names an unknown recipe vertex")
        a["_target"] = t
        redges[s].append(a)

    g = RGraph()
    node_rank = [-1]
    gen: dict[str, list[Vertex]] = {}
    scales: list[int] = []  # front = most recent

    def emit(rid: str, parent: Vertex | None, vid: int) -> Vertex:
        a = rnodes[rid]
        vtype = a.get("type", rid)
        rank = -1
        if vtype == "node":
            node_rank[0] += 1
            rank = node_rank[0]
        basename = a.get("basename", vtype)
        v = g.add(type=vtype, basename=basename, name=f"{basename}{vid}", id=vid,
                  size=int(a.get("size", 1) or 1), rank=rank, unit=a.get("unit", "") or "")
        if parent is not None:
            g.link(parent, v)
        return v

    visited: set[str] = set()

    def dfs(rid: str) -> None:
        visited.add(rid)
        for e in redges[rid]:
            if e.get("e_subsystem", CONTAINMENT) != CONTAINMENT:
                continue
            t = e["_target"]
            if t in visited:
                raise GraphError(f"{path}: recipe has a cycle through {t}")
            method = str(e.get("gen_method", "MULTIPLY")).upper()
            if method != "MULTIPLY":
                continue
            scale = int(e.get("multi_scale", 1))
            scope = int(e.get("id_scope", 0))
            start = int(e.get("id_start", 0))
            stride = int(e.get("id_stride", 1))
            gen[t] = []
            for j, src in enumerate(gen.get(rid, [])):
                for i in range(scale):
                    if scope == 0:
                        vid = start + i
                    else:
                        wrap = 1
                        for h in range(min(scope, len(scales))):
                            wrap *= scales[h]
                        vid = start + (j % wrap) * scale * stride + i * stride
                    gen[t].append(emit(t, src, vid))
            scales.insert(0, scale)
            dfs(t)
            if scales:
                scales.pop(0)

    roots = [r for r in order if str(rnodes[r].get("root", "0")) == "1"
             and rnodes[r].get("subsystem", CONTAINMENT) == CONTAINMENT]
    if not roots:
        raise GraphError(f"{path}: no recipe vertex has root=1")
    for r in roots:
        gen[r] = [emit(r, None, 0)]
        dfs(r)
    g.finish()
    return g


# ---------------------------------------------------------------------- JGF
def _jgf(data: Any, path: str) -> RGraph:
    try:
        nodes = data["graph"]["nodes"]
        edges = data["graph"]["edges"]
    except (KeyError, TypeError):
        raise GraphError(f"{path}: JGF needs graph.nodes and graph.edges") from None
    g = RGraph()
    byid: dict[str, Vertex] = {}
    for i, n in enumerate(nodes):
        m = n.get("metadata", {}) if isinstance(n, dict) else {}
        try:
            vtype = m["type"]
            basename = m.get("basename", vtype)
            vid = int(m.get("id", -1))
            name = m.get("name", f"{basename}{vid}")
        except (KeyError, TypeError, ValueError):
            raise GraphError(f"{path}: graph.nodes[{i}] lacks metadata.type/id") from None
        paths = m.get("paths", {}) or {}
        v = g.add(type=vtype, basename=basename, name=name, id=vid, size=int(m.get("size", 1)),
                  rank=int(m.get("rank", -1)), unit=m.get("unit", "") or "",
                  path=paths.get(CONTAINMENT, ""),
                  properties=dict(m.get("properties", {}) or {}))
        if m.get("status", "up") == "down":
            v.up = False
        byid[str(n.get("id"))] = v
    for i, e in enumerate(edges):
        sub = (e.get("metadata") or {}).get("subsystem", CONTAINMENT)
        if sub != CONTAINMENT:
            continue
        try:
            s, t = byid[str(e["source"])], byid[str(e["target"])]
        except KeyError:
            raise GraphError(f"{path}: graph.edges[{i}] names an unknown vertex") from None
        g.link(s, t)
    g.finish()
    return g


# ------------------------------------------------------------------- rv1exec
def _rv1exec(data: Any, path: str) -> RGraph:
    try:
        ex = data["execution"]
        rlite = ex["R_lite"]
        hosts = []
        for h in ex.get("nodelist", []):
            hosts.extend(Hostlist.parse(h))
    except (KeyError, TypeError, ValueError) as e:
        raise GraphError(f"{path}: not an RFC 20 R object: {e}") from None
    g = RGraph()
    root = g.add(type="cluster", basename="cluster", name="cluster0", id=0)
    ranks: list[tuple[int, dict[str, str]]] = []
    for i, ent in enumerate(rlite):
        try:
            for r in IdSet.parse(ent["rank"]):
                ranks.append((r, ent.get("children", {})))
        except (KeyError, ValueError) as e:
            raise GraphError(f"{path}: execution.R_lite[{i}]: {e}") from None
    ranks.sort()
    for idx, (r, children) in enumerate(ranks):
        host = hosts[idx] if idx < len(hosts) else f"node{r}"
        base = host.rstrip("0123456789") or "node"
        digits = host[len(base):]
        node = g.add(type="node", basename=base, name=host, id=int(digits) if digits else r, rank=r)
        g.link(root, node)
        for ctype, ids in children.items():
            for cid in IdSet.parse(ids):
                c = g.add(type=ctype, basename=ctype, name=f"{ctype}{cid}", id=cid, rank=r)
                g.link(node, c)
    g.finish()
    return g


def load_graph(path: str, fmt: str = "grug") -> RGraph:
    """Load ``path`` as ``fmt`` (grug, jgf, rv1exec); raises :class:`GraphError`."""
    if fmt == "grug":
        return _grug(path)
    if fmt in ("jgf", "rv1exec", "rv1exec_force"):
        try:
            with open(path) as f:
                data = json.load(f)
        except OSError as e:
            raise GraphError(f"{path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise GraphError(f"{path}: invalid JSON: {e}") from None
        if fmt == "jgf":
            if isinstance(data, dict) and "graph" not in data and "scheduling" in data:
                data = data["scheduling"]
            return _jgf(data, path)
        return _rv1exec(data, path)
    if fmt == "hwloc":
        raise GraphError(f"{path}: load format 'hwloc' is not supported")
    raise GraphError(f"unknown load format '{fmt}'")
