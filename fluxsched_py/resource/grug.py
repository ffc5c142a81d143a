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

Recipe kinds with no containment children (cores, GPUs, memory...) are
pooled on their parent (see :mod:`fluxsched_py.resource.topology`).  Edges of
other subsystems (power, network...) are ignored.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import ParseError

import networkx as nx

from .builder import ModelBuilder
from .errors import ResourceError
from .jgf import NEVER_POOLED

__all__ = ["model_from_grug"]

_EDGE_INTS = ("id_scope", "id_start", "id_stride", "multi_scale")


def _recipe(path: str) -> tuple[nx.DiGraph, str]:
    try:
        raw = nx.read_graphml(path)
    except FileNotFoundError:
        raise ResourceError("cannot read: no such file", source=path) from None
    except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as e:
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
        if a.get("e_subsystem", "containment") != "containment":
            continue
        if a.get("gen_method", "MULTIPLY") != "MULTIPLY":
            continue  # ASSOCIATE_IN links existing vertices into other hierarchies: not modelled
        for k in _EDGE_INTS:
            try:
                a[k] = int(a.get(k, 1 if k in ("id_stride", "multi_scale") else 0))
            except (TypeError, ValueError):
                raise ResourceError(f"'{k}' must be an integer", source=path, element=el) from None
        if a["multi_scale"] < 0:
            raise ResourceError("'multi_scale' must not be negative", source=path, element=el)
        if g.has_edge(s, t):
            raise ResourceError(f"two containment edges {s} -> {t}", source=path, element=el)
        g.add_edge(s, t, **a)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        names = " -> ".join(str(a) for a, _ in cycle) + f" -> {cycle[0][0]}"
        raise ResourceError(f"cycle in the containment recipe: {names}", source=path, element=f"edge {cycle[0]}")
    # a vertex with no ``subsystem`` is in containment (Fluxion's GRUG default)
    roots = [
        n for n, a in g.nodes(data=True) if a.get("root") == 1 and a.get("subsystem", "containment") == "containment"
    ]
    if len(roots) != 1:
        raise ResourceError(f"recipe must have exactly one containment root vertex, found {len(roots)}", source=path)
    return g, roots[0]


def model_from_grug(path: str | Path) -> nx.DiGraph:
    """Expand a GRUG recipe into the networkx model (see the module docstring)."""
    path = str(path)
    recipe, root = _recipe(path)
    b = ModelBuilder(path)
    ra = recipe.nodes[root]
    instances: dict[str, list[int]] = {
        root: [b.add_vertex(ra["type"], f"{ra['basename']}0", 0, basename=ra["basename"])]
    }
    next_rank = 0
    hostnames: dict[int, str] = {}
    visited = {root}
    # explicit DFS stack of (recipe vertex, scales on the path, out-edge iterator)
    stack = [(root, [], iter(list(recipe.out_edges(root, data=True))))]
    total = 1
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
        wa = recipe.nodes[w]
        scale, scope, start, stride = e["multi_scale"], e["id_scope"], e["id_start"], e["id_stride"]
        wrap = 1
        if scope > 0:
            for s in scales[: min(scope, len(scales))]:
                wrap *= s
        leaf = recipe.out_degree(w) == 0 and wa["type"] not in NEVER_POOLED
        out: list[int] = []
        total += len(instances[u]) * scale
        if total > 50_000_000:
            raise ResourceError("the recipe expands to more than 50 million resources", source=path, element=str(w))
        for j, src in enumerate(instances[u]):
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
                    src, wa["type"], mask, size=wa["size"], unit=wa["unit"], basename=wa["basename"], element=str(w)
                )
                continue
            for i in ids:
                name = wa["basename"] + ("" if scope < 0 else str(i))
                rank = -1
                if wa["type"] == "node":
                    rank = next_rank
                    next_rank += 1
                    hostnames[rank] = name
                out.append(
                    b.add_vertex(
                        wa["type"], name, i, src, rank=rank, basename=wa["basename"], size=wa["size"], unit=wa["unit"]
                    )
                )
        instances[w] = out
        stack.append((w, [scale, *scales], iter(list(recipe.out_edges(w, data=True)))))
    b.hostnames = hostnames
    return b.finish()
