"""Edits of the networkx model after it was built: grow, shrink, rank properties.

These functions change only the model (``G``, see
:mod:`fluxsched_py.resource.builder`); :meth:`ResourceGraph.update
<fluxsched_py.resource.graph.ResourceGraph.update>` calls them and then
patches or recompiles the matcher's index, so a graph's model and its index
never disagree.  What each edit leaves in the model:

* **grow**: the new ranks' vertices (from an RFC 20 R fragment: one node per
  rank with its R_lite leaves) are added as the last children of the
  containment root, so the compiled pre-order keeps every existing vertex
  at its index; their host names, properties and R_lite types join
  ``G.graph``.
* **shrink**: ``G.graph["shrunk_ranks"]`` (a set of ranks) records the
  ranks removed for good.  Their vertices stay in the model: a running job
  may still hold them, and its R names them.
* **properties**: ``G.graph["rank_properties"][rank]`` is replaced (a rank
  with no properties left is dropped).  Vertex ``properties`` attributes
  (JGF metadata) are not touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from ..ids import IdSet
from .builder import CONTAINMENT
from .errors import ResourceError

__all__ = ["add_ranks", "check_properties", "mark_shrunk", "set_rank_properties", "SHRUNK"]

#: ``G.graph`` key of the ranks removed for good.
SHRUNK = "shrunk_ranks"


def add_ranks(G: nx.DiGraph, R: Mapping[str, Any], known: IdSet) -> IdSet:
    """Add the ranks of the R fragment ``R`` to ``G`` under its containment root; return them.

    Only ``R_lite``, ``nodelist`` and ``properties`` are read (a
    ``scheduling`` key is ignored).  Raises :class:`ResourceError`, leaving
    ``G`` unchanged, when R is invalid or names a rank in ``known`` (the
    ranks the graph has or had: a shrunk rank does not come back).
    """
    from .rv1 import model_from_rv1

    if not isinstance(R, Mapping):
        raise ResourceError("grow: R must be a JSON object")
    frag = model_from_rv1({k: v for k, v in R.items() if k != "scheduling"}, source="grow")
    froot = frag.graph["roots"][CONTAINMENT]
    nodes = list(frag.successors(froot))
    ranks = IdSet(frag.nodes[v]["rank"] for v in nodes)
    again = ranks & known
    if again:
        raise ResourceError(f"grow: ranks {again} are already in the resource graph")
    root = G.graph["roots"][CONTAINMENT]
    fresh = len(G)
    keys: dict[Any, Any] = {}
    for v in nx.dfs_preorder_nodes(frag, froot):
        if v == froot:
            continue
        while fresh in G:
            fresh += 1
        keys[v] = fresh
        fresh += 1
    G.add_nodes_from((k, frag.nodes[v]) for v, k in keys.items())
    for v in nodes:
        G.add_edge(root, keys[v], subsystem=CONTAINMENT)
    for u, v, s in frag.edges(data="subsystem"):
        if u != froot:
            G.add_edge(keys[u], keys[v], subsystem=s)
    gattr, fattr = G.graph, frag.graph
    if fattr.get("hostnames"):
        gattr.setdefault("hostnames", {}).update(fattr["hostnames"])
    for r, p in (fattr.get("rank_properties") or {}).items():
        if p:
            gattr.setdefault("rank_properties", {})[r] = set(p)
    types = list(gattr.get("rlite_types") or [])
    gattr["rlite_types"] = list(dict.fromkeys(types + list(fattr.get("rlite_types") or [])))
    return ranks


def mark_shrunk(G: nx.DiGraph, ranks: IdSet) -> None:
    """Record ``ranks`` as removed for good (``G.graph["shrunk_ranks"]``)."""
    G.graph.setdefault(SHRUNK, set()).update(ranks)


def check_properties(properties: Mapping[int, Iterable[str]]) -> dict[int, set[str]]:
    """``properties`` as sets of names; :class:`ResourceError` for a name that is not a non-empty string."""
    new = {r: set(p) for r, p in properties.items()}
    for r, names in new.items():
        for name in names:
            if not isinstance(name, str) or not name:
                raise ResourceError(f"rank {r}: a property must be a non-empty string, got {name!r}")
    return new


def set_rank_properties(G: nx.DiGraph, properties: Mapping[int, Iterable[str]]) -> None:
    """Replace the properties of each rank in ``properties`` (checked first: an error changes nothing)."""
    new = check_properties(properties)
    props = G.graph.setdefault("rank_properties", {})
    for r, names in new.items():
        if names:
            props[r] = names
        else:
            props.pop(r, None)
