"""Fluxion GRUG (GraphML resource generation recipe) reader.

A GRUG is a small graph of resource *kinds*; each containment edge says
"each ``source`` contains ``multi_scale`` ``target``s".  Expanding it follows
Fluxion's generator (``resource_reader_grug.cpp``), so vertex names, ids and
ranks are the ones ``resource-query`` prints:

* the recipe is walked depth first from the ``root=1`` vertex, out-edges in
  file order; every instance of the source kind gets ``multi_scale`` children;
* child ids come from the edge's ``id_scope``/``id_start``/``id_stride``:
  scope 0 numbers children within their parent, scope ``k`` numbers them
  within the ancestor ``k`` levels further up (so ``socket2core`` with scope
  1 numbers cores per node); a negative scope gives no id;
* names are ``basename`` + id; the root's id is 0;
* nodes get ranks 0, 1, 2... in generation order; their descendants inherit.

Recipe kinds with no children (cores, GPUs, memory, power capacity...) are
pooled on their parent, in the subsystem of the edge that made them.

Edges carry their subsystem (``e_subsystem``, containment by default) into
the model.  Every ``root=1`` kind starts the tree of its ``subsystem`` (a
``powerpanel`` roots ``power``).  Two generation methods link vertices that
already exist instead of making new ones:

* ``ASSOCIATE_IN``: every vertex of the target kind's type in
  ``as_tgt_subsystem`` becomes a child of each source instance;
* ``ASSOCIATE_BY_PATH_IN``: only those whose ancestor ``as_tgt_uplvl``
  levels up is the source's ancestor ``as_src_uplvl`` levels up (a rack's
  PDU feeds the rack's nodes).

A vertex linked into its own subsystem gets a second parent (Fluxion's
``mtl2unit`` storage units); the matcher compiles such a vertex once per
path and keeps the copies allocated together.
"""

from __future__ import annotations

import io
from pathlib import Path
from xml.etree.ElementTree import ParseError

import networkx as nx

from ..inputs import read_bytes
from ..limits import MAX_GRAPH_BYTES, MAX_NODES, MAX_PER_NODE, MAX_VERTICES
from .builder import ModelBuilder
from .errors import ResourceError
from .jgf import NEVER_POOLED

__all__ = ["model_from_grug"]

_EDGE_INTS = ("id_scope", "id_start", "id_stride", "multi_scale")
_METHODS = ("MULTIPLY", "ASSOCIATE_IN", "ASSOCIATE_BY_PATH_IN")


def _recipe(path: str) -> tuple[nx.DiGraph, str]:
    try:
        raw = nx.read_graphml(io.BytesIO(read_bytes(path, MAX_GRAPH_BYTES)))
    except OSError as e:
        raise ResourceError(f"cannot read: {e.strerror or e}", source=path) from None
    except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, LookupError) as e:
        raise ResourceError(f"malformed GraphML: {e}", source=path) from None
    nd = raw.graph.get("node_default", {})
    ed = raw.graph.get("edge_default", {})
    g = nx.DiGraph()
    for n, attrs in raw.nodes(data=True):
        a = {**nd, **attrs}
        if not a.get("type"):
            raise ResourceError("recipe vertex has no 'type'", source=path, element=f"node {n!r}")
        a.setdefault("basename", a["type"])
        a.setdefault("unit", "")
        try:
            a["size"] = int(a.get("size", 1))
            a["root"] = int(a.get("root", 0))
        except (TypeError, ValueError):
            raise ResourceError("'size' and 'root' must be integers", source=path, element=f"node {n!r}") from None
        g.add_node(n, **a)
    for s, t, attrs in raw.edges(data=True):
        a = {**ed, **attrs}
        el = f"edge {a.get('id', f'{s}->{t}')!r}"
        a["e_subsystem"] = str(a.get("e_subsystem") or "containment")
        a["gen_method"] = str(a.get("gen_method") or "MULTIPLY")
        if a["gen_method"] not in _METHODS:
            raise ResourceError(f"unknown gen_method {a['gen_method']!r}", source=path, element=el)
        a["as_tgt_subsystem"] = str(a.get("as_tgt_subsystem") or "containment")
        for k in ("as_tgt_uplvl", "as_src_uplvl"):
            try:
                a[k] = int(a.get(k, 1))
            except (TypeError, ValueError):
                raise ResourceError(f"'{k}' must be an integer", source=path, element=el) from None
        for k in _EDGE_INTS:
            try:
                a[k] = int(a.get(k, 1 if k in ("id_stride", "multi_scale") else 0))
            except (TypeError, ValueError):
                raise ResourceError(f"'{k}' must be an integer", source=path, element=el) from None
        if a["multi_scale"] < 0:
            raise ResourceError("'multi_scale' must not be negative", source=path, element=el)
        if g.has_edge(s, t):
            raise ResourceError(f"two recipe edges {s} -> {t}", source=path, element=el)
        g.add_edge(s, t, **a)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        names = " -> ".join(str(a) for a, _ in cycle) + f" -> {cycle[0][0]}"
        raise ResourceError(f"cycle in the recipe: {names}", source=path, element=f"edge {cycle[0]}")
    # a vertex with no ``subsystem`` is in containment (Fluxion's GRUG default)
    roots = [n for n, a in g.nodes(data=True) if a.get("root") == 1]
    subs = [g.nodes[n].get("subsystem") or "containment" for n in roots]
    if subs.count("containment") != 1:
        raise ResourceError(
            f"recipe must have exactly one containment root vertex, found {subs.count('containment')}", source=path
        )
    if len(set(subs)) != len(subs):
        raise ResourceError("recipe has two root vertices in one subsystem", source=path)
    roots.sort(key=lambda n: (g.nodes[n].get("subsystem") or "containment") != "containment")
    return g, roots


def model_from_grug(path: str | Path) -> nx.DiGraph:
    """Expand a GRUG recipe into the networkx model (see the module docstring)."""
    path = str(path)
    recipe, roots = _recipe(path)
    x = _Expander(path, recipe)
    for root in roots:
        x.expand(root)
    x.b.hostnames = x.hostnames
    return x.b.finish()


class _Expander:
    """One pass of the generator over the recipe (see the module docstring)."""

    def __init__(self, path: str, recipe: nx.DiGraph) -> None:
        self.path = path
        self.recipe = recipe
        self.b = ModelBuilder(path)
        self.next_rank = 0
        self.hostnames: dict[int, str] = {}
        self.total = 0
        #: (subsystem, type) -> vertices made in that subsystem, in order
        self.made: dict[tuple[str, str], list[int]] = {}
        #: vertex -> its parent in the subsystem that made it
        self.up: dict[int, int] = {}
        #: (subsystem, type) that some ASSOCIATE edge links: never pooled
        self.linked = {
            (a["as_tgt_subsystem"], recipe.nodes[w]["type"])
            for _, w, a in recipe.edges(data=True)
            if a["gen_method"] != "MULTIPLY"
        }

    def _ancestor(self, h: int, levels: int) -> int:
        for _ in range(levels):
            h = self.up.get(h, -1)
            if h < 0:
                break
        return h

    def expand(self, root: str) -> None:
        recipe, b = self.recipe, self.b
        ra = recipe.nodes[root]
        sub = ra.get("subsystem") or "containment"
        h = b.add_vertex(ra["type"], f"{ra['basename']}0", 0, basename=ra["basename"], subsystem=sub)
        self.made.setdefault((sub, ra["type"]), []).append(h)
        instances: dict[str, list[int]] = {root: [h]}
        self.total += 1
        visited = {root}
        # explicit DFS stack of (recipe vertex, scales on the path, out-edge iterator)
        stack = [(root, [], iter(list(recipe.out_edges(root, data=True))))]
        while stack:
            u, scales, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                continue
            _, w, e = nxt
            if w in visited:
                continue
            visited.add(w)
            if e["gen_method"] == "MULTIPLY":
                instances[w] = self._multiply(instances[u], w, e, scales)
                scale = e["multi_scale"]
            else:
                instances[w] = self._associate(instances[u], w, e)
                scale = 1
            stack.append((w, [scale, *scales], iter(list(recipe.out_edges(w, data=True)))))

    def _associate(self, sources: list[int], w: str, e: dict) -> list[int]:
        """Link existing vertices of ``w``'s type under each source; return them."""
        b, sub = self.b, e["e_subsystem"]
        targets = self.made.get((e["as_tgt_subsystem"], self.recipe.nodes[w]["type"]), [])
        out: list[int] = []
        by_path = e["gen_method"] == "ASSOCIATE_BY_PATH_IN"
        for src in sources:
            key = self._ancestor(src, e["as_src_uplvl"]) if by_path else None
            for t in targets:
                if by_path and self._ancestor(t, e["as_tgt_uplvl"]) != key:
                    continue
                b.link(src, t, sub)
                out.append(t)
        return out

    def _multiply(self, sources: list[int], w: str, e: dict, scales: list[int]) -> list[int]:
        b, path, wa = self.b, self.path, self.recipe.nodes[w]
        sub = e["e_subsystem"]
        scale, scope, start, stride = e["multi_scale"], e["id_scope"], e["id_start"], e["id_stride"]
        wrap = 1
        if scope > 0:
            for s in scales[: min(scope, len(scales))]:
                wrap *= s
        leaf = (
            self.recipe.out_degree(w) == 0 and wa["type"] not in NEVER_POOLED and (sub, wa["type"]) not in self.linked
        )
        out: list[int] = []
        self.total += len(sources) * scale
        if self.total > MAX_VERTICES:
            raise ResourceError(
                f"the recipe expands to more than the limit of {MAX_VERTICES} resources", source=path, element=str(w)
            )
        if wa["type"] == "node" and self.next_rank + len(sources) * scale > MAX_NODES:
            raise ResourceError(
                f"the recipe makes {self.next_rank + len(sources) * scale} nodes: over the limit of {MAX_NODES} nodes",
                source=path,
                element=str(w),
            )
        if leaf and scale > MAX_PER_NODE:
            raise ResourceError(
                f"{scale} {wa['type']} in one vertex: over the limit of {MAX_PER_NODE} per node",
                source=path,
                element=str(w),
            )
        made = self.made.setdefault((sub, wa["type"]), [])
        for j, src in enumerate(sources):
            base = start + (j % wrap) * scale * stride if scope > 0 else start
            if scope < 0:
                ids = list(range(scale))
            elif scope == 0:
                ids = [start + i for i in range(scale)]
            else:
                ids = [base + i * stride for i in range(scale)]
            if leaf:
                if scale == 0:
                    continue
                if stride == 1 and scope >= 0:
                    mask = ((1 << scale) - 1) << ids[0]
                else:
                    mask = 0
                    for i in ids:
                        mask |= 1 << i
                b.add_leaves(
                    src,
                    wa["type"],
                    mask,
                    size=wa["size"],
                    unit=wa["unit"],
                    basename=wa["basename"],
                    element=str(w),
                    subsystem=sub,
                )
                continue
            for i in ids:
                name = wa["basename"] + ("" if scope < 0 else str(i))
                rank = -1
                if wa["type"] == "node":
                    rank = self.next_rank
                    self.next_rank += 1
                    self.hostnames[rank] = name
                h = b.add_vertex(
                    wa["type"],
                    name,
                    i,
                    src,
                    rank=rank,
                    basename=wa["basename"],
                    size=wa["size"],
                    unit=wa["unit"],
                    subsystem=sub,
                )
                self.up[h] = src
                made.append(h)
                out.append(h)
        return out
