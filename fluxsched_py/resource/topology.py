"""The matcher's fast index, compiled from one subsystem of the networkx model.

The model (:mod:`fluxsched_py.resource.builder`) is what readers build and
users hand over; :meth:`Topology.compile` turns the tree of one subsystem
(containment unless a caller asks for another, e.g. ``power``) into arrays.
Rules this module keeps:

* Every *container* (cluster, rack, node, socket, any resource with children)
  is a vertex, numbered ``0..V-1`` in depth-first pre-order, so the subtree of
  vertex ``v`` is exactly the index range ``v .. end[v]-1``.  Children are kept
  in the order the reader gave them (ascending id for every reader here).
* Identical *leaves* (cores, GPUs, memory units...) are not vertices: they are
  a *pool* on their parent, an id bitmask per type (``pools[v][type]``), with
  a per-item ``size`` (1 for cores, e.g. 2 for "memory, 2 GB each").
* Each vertex has a rank (``-1`` above the nodes); a node's descendants inherit
  its rank.  Host names and properties are per rank.

Nothing here changes after :meth:`Topology.compile`; the mutable
allocation state lives in :mod:`fluxsched_py.resource.state`.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import networkx as nx

from ..ids import Hostlist, IdSet
from .builder import CONTAINMENT, RLITE_TYPES
from .errors import ResourceError

__all__ = ["Topology", "RLITE_TYPES"]


class Topology:
    """The matcher's compiled index of one subsystem of the model (see the module docstring).

    Build one with :meth:`compile`.  ``key[v]`` is the model vertex behind
    index ``v``; a model vertex reached through a second parent (GRUG
    ``ASSOCIATE_IN``) is compiled once per path, and ``alias_of[v]`` names
    the first copy (``v`` itself otherwise).  The graph keeps all copies of
    an item allocated together (:attr:`twins`).
    """

    @classmethod
    def compile(cls, G: nx.DiGraph, subsystem: str = CONTAINMENT) -> Topology:
        """Compile the tree of ``subsystem`` in the model ``G``, from its root, in pre-order.

        Only edges and pools of ``subsystem`` are walked.  Raises
        :class:`ResourceError` for a cycle or a missing root.
        """
        gattr = G.graph
        source = gattr.get("source")
        root = (gattr.get("roots") or {}).get(subsystem)
        if root is None or root not in G:
            raise ResourceError(f"the resource graph has no {subsystem} root", source=source)
        # The model's own dicts, copied into plain dicts at C speed: a
        # lookup through G.nodes[k] / G.succ[k] costs a view per vertex.
        nodes = dict(G.nodes(data=True))
        succ = dict(G.adjacency())
        protos: list[tuple[Any, int, int, dict]] = []  # (key, parent index, rank, attrs)
        first: dict[Any, int] = {}
        alias_of: list[int] = []
        checked = False
        stack: list[tuple[Any, int]] = [(root, -1)]
        pop, push, append = stack.pop, stack.append, protos.append
        while stack:
            k, p = pop()
            a = nodes[k]
            r = a["rank"]
            if r < 0:
                r = protos[p][2] if p >= 0 else -1
            i = len(protos)
            f = first.setdefault(k, i)
            if f != i and not checked:
                _check_acyclic(G, subsystem, source)
                checked = True
            alias_of.append(f)
            append((k, p, r, a))
            kids = [c for c, e in succ[k].items() if e["subsystem"] == subsystem]
            for c in reversed(kids):
                push((c, i))
        topo = cls(protos, alias_of, gattr, subsystem)
        topo._model = G
        return topo

    @classmethod
    def uniform(cls, hostnames: list[str], cores: int) -> Topology:
        """The index :meth:`compile` makes of the model of :meth:`uniform_rv1`
        (one rank per host of ``hostnames``, in order, ``cores`` cores
        each), built as whole arrays rather than vertex by vertex: a cluster
        vertex and ``len(hostnames)`` node vertices.  The networkx model is
        read from that R when first asked for (:attr:`model`), so a replay
        on 200,000 nodes never builds it.  Identical nodes share their
        (never changed) per-vertex dicts."""
        N = len(hostnames)
        if not N:
            raise ResourceError("a machine needs at least one node")
        n = N + 1
        gattr = {
            "source": None,
            "roots": {CONTAINMENT: 0},
            "hostnames": dict(enumerate(hostnames)),
            "rank_properties": {},
            "rlite_types": list(RLITE_TYPES),
            "rv1_defaults": {"starttime": 0.0, "expiration": 0.0},
        }
        topo = cls.__new__(cls)
        topo._model = None
        topo._vertex_attrs = None
        topo._leaf_switches = None
        topo._cores = cores
        topo.gattr = gattr
        topo.source = None
        topo.subsystem = CONTAINMENT
        topo.n = n
        nodes = range(1, n)
        ranks = range(N)
        topo.key = list(range(n))
        topo.alias_of = list(range(n))
        topo.type = ["cluster"] + ["node"] * N
        topo.name = ["cluster0", *hostnames]
        topo.id = [0, *ranks]
        topo.basename = ["cluster"] + ["node"] * N
        topo.size = [1] * n
        topo.unit = [""] * n
        topo.vprops = [{} for _ in range(n)]
        topo.rank = [-1, *ranks]
        topo.parent = [-1] + [0] * N
        topo.children = [tuple(nodes)] + [()] * N
        topo.child_pos = [0, *ranks]
        empty: dict = {}
        cmask = (1 << cores) - 1
        topo.pools = [empty] + [{"core": cmask}] * N
        topo.pool_pos = [empty] + [{"core": 0}] * N
        info = (1, "", "core")
        topo.pool_info = dict.fromkeys(zip(nodes, ["core"] * N, strict=True), info)
        topo.twins = {}
        topo.twin_mask = 0
        topo.rlite_types = tuple(RLITE_TYPES)
        topo.end = [n, *range(2, n + 1)]
        topo.rank_root = dict(zip(ranks, nodes, strict=True))
        topo.ranks_mask = (1 << N) - 1
        topo.hostnames = dict(gattr["hostnames"])
        topo.properties = {}
        topo.node_of = [-1, *nodes]
        topo.has_nodes = True
        topo.upper_types = topo.container_types = frozenset(("cluster", "node"))
        topo.pool_types = frozenset(("core",))
        topo.types = topo.container_types | topo.pool_types
        topo.child_types = [frozenset(("node",))] + [topo.pool_types] * N
        topo.pool_vertices = list(nodes)
        topo.tot_units = [{"core": N * cores}] + [{"core": cores}] * N
        topo.tot_conts = [{"cluster": 1, "node": N}] + [{"node": 1}] * N
        topo.sig = [1] + [0] * N
        return topo

    @staticmethod
    def uniform_rv1(hostnames: list[str], cores: int) -> dict:
        """RFC 20 R with one rank per host of ``hostnames``, ``cores`` cores each."""
        if not hostnames:
            raise ResourceError("a machine needs at least one node")
        return {
            "version": 1,
            "execution": {
                "R_lite": [
                    {
                        "rank": str(IdSet.range(0, len(hostnames) - 1)),
                        "children": {"core": str(IdSet.range(0, cores - 1))},
                    }
                ],
                "nodelist": [Hostlist(hostnames).encode()],
                "starttime": 0.0,
                "expiration": 0.0,
            },
        }

    @property
    def model(self) -> nx.DiGraph:
        """The networkx model this index was compiled from (for
        :meth:`uniform`, read from its R when first asked for)."""
        if self._model is None:
            from .rv1 import model_from_rv1

            hosts = [self.hostnames[r] for r in range(self.n - 1)]
            G = model_from_rv1(self.uniform_rv1(hosts, self._cores))
            G.graph = self.gattr  # the same attributes, one dict
            self._model = G
        return self._model

    @property
    def vertex_attrs(self) -> list[dict]:
        """``vertex_attrs[v]``: the model's attributes of ``key[v]``, the
        vertex behind index ``v`` (the model's own dicts: read them, never
        change them), for the writers of R and JGF; listed when first asked for."""
        attrs = self._vertex_attrs
        if attrs is None:
            nodes = dict(self.model.nodes(data=True))
            attrs = self._vertex_attrs = [nodes[k] for k in self.key]
        return attrs

    @property
    def leaf_switches(self) -> list[tuple[str, IdSet]]:
        """``(switch name, ranks under it)`` for every vertex with ``network``
        edges to nodes of a rank, in the model's vertex order (``policy=network``,
        :mod:`fluxsched_py.match.network`), read from the model when first asked for."""
        if self._leaf_switches is not None:
            return self._leaf_switches
        G = self.model
        succ = dict(G.adjacency())
        nodes = G.nodes
        out: list[tuple[str, IdSet]] = []
        for v, a in G.nodes(data=True):
            ranks = [
                nodes[c]["rank"]
                for c, e in succ[v].items()
                if e["subsystem"] == "network" and nodes[c]["type"] == "node" and nodes[c]["rank"] >= 0
            ]
            if ranks:
                out.append((a["name"], IdSet(ranks)))
        self._leaf_switches = out
        return out

    def __init__(
        self, protos: list[tuple[Any, int, int, dict]], alias_of: list[int], gattr: dict, subsystem: str
    ) -> None:
        n = len(protos)
        self._model: nx.DiGraph | None = None
        #: the model's graph attributes (``G.graph``: hostnames, roots, rv1_defaults...)
        self.gattr = gattr
        self.source = gattr.get("source")
        self.subsystem = subsystem
        self.n = n
        self.key: list[Any] = [p[0] for p in protos]
        self.alias_of = alias_of
        attrs = [p[3] for p in protos]
        self._vertex_attrs: list[dict] | None = None
        self._leaf_switches: list[tuple[str, IdSet]] | None = None
        # every key is there: the builder and model.validate fill them all
        self.type: list[str] = list(map(itemgetter("type"), attrs))
        self.name: list[str] = list(map(itemgetter("name"), attrs))
        self.id: list[int] = list(map(itemgetter("id"), attrs))
        self.basename: list[str] = list(map(itemgetter("basename"), attrs))
        self.size: list[int] = list(map(itemgetter("size"), attrs))
        self.unit: list[str] = list(map(itemgetter("unit"), attrs))
        self.vprops: list[dict] = list(map(itemgetter("properties"), attrs))
        self.rank: list[int] = [p[2] for p in protos]
        self.parent: list[int] = [p[1] for p in protos]
        children: list[list[int]] = [[] for _ in range(n)]
        for v in range(1, n):
            children[self.parent[v]].append(v)
        self.children: list[tuple[int, ...]] = [tuple(c) for c in children]
        #: child_pos[v]: the index of ``v`` in its parent's ``children`` (0 for the root)
        self.child_pos: list[int] = [0] * n
        for ch in self.children:
            for i, c in enumerate(ch):
                self.child_pos[c] = i
        #: pools[v] = {type: all-ids mask}
        self.pools: list[dict[str, int]] = []
        #: pool_pos[v][type]: how many of v's children came before that pool in the input (for printing)
        self.pool_pos: list[dict[str, int]] = []
        #: (v, type) -> (size, unit, basename) for every pool
        self.pool_info: dict[tuple[int, str], tuple[int, str, str]] = {}
        info = self.pool_info
        empty: dict = {}
        for v, a in enumerate(attrs):
            pools = a["pools"]
            if not pools:
                self.pools.append(empty)
                self.pool_pos.append(empty)
                continue
            pm: dict[str, int] = {}
            pp: dict[str, int] = {}
            for t, pool in pools.items():
                if pool.subsystem != subsystem:
                    continue
                pm[t] = pool.ids.mask
                pp[t] = pool.pos
                info[(v, t)] = (pool.size, pool.unit, pool.basename)
            self.pools.append(pm)
            self.pool_pos.append(pp)
        #: vertex -> its other copies, for vertices with more than one parent
        twins: dict[int, list[int]] = {}
        for v, f in enumerate(alias_of):
            if f != v:
                twins.setdefault(f, [f]).append(v)
        self.twins: dict[int, tuple[int, ...]] = {}
        for group in twins.values():
            for v in group:
                self.twins[v] = tuple(u for u in group if u != v)
        self.twin_mask = 0
        for v in self.twins:
            self.twin_mask |= 1 << v
        self.rlite_types = tuple(dict.fromkeys(gattr.get("rlite_types") or RLITE_TYPES))
        self._check_no_nested_ranks()
        self._index(gattr)
        self._totals()
        self._signatures()

    # -- derived indexes -------------------------------------------------
    def _check_no_nested_ranks(self) -> None:
        for v in range(self.n):
            p = self.parent[v]
            if p >= 0 and self.rank[p] >= 0 and self.rank[v] != self.rank[p]:
                raise ResourceError(
                    f"vertex {self.name[v]!r} has rank {self.rank[v]} inside rank {self.rank[p]}",
                    source=self.source,
                    element=self.name[v],
                )

    def _index(self, gattr: dict) -> None:
        n = self.n
        end = [0] * n
        for v in range(n - 1, -1, -1):
            ch = self.children[v]
            end[v] = end[ch[-1]] if ch else v + 1
        self.end = end
        #: rank -> top-most vertex of that rank
        self.rank_root: dict[int, int] = {}
        for v in range(n):
            r = self.rank[v]
            if r >= 0 and self.alias_of[v] == v and (self.parent[v] < 0 or self.rank[self.parent[v]] != r):
                if r in self.rank_root:
                    raise ResourceError(
                        f"rank {r} appears in two places ({self.name[self.rank_root[r]]!r}, {self.name[v]!r})",
                        source=self.source,
                        element=self.name[v],
                    )
                self.rank_root[r] = v
        self.ranks_mask = 0
        for r in self.rank_root:
            self.ranks_mask |= 1 << r
        self.hostnames: dict[int, str] = dict(gattr.get("hostnames") or {})
        self.properties: dict[int, frozenset[str]] = {
            r: frozenset(p) for r, p in (gattr.get("rank_properties") or {}).items()
        }
        node_of = [-1] * n
        for v in range(n):
            if self.type[v] == "node":
                node_of[v] = v
            elif self.parent[v] >= 0:
                node_of[v] = node_of[self.parent[v]]
        self.node_of = node_of
        self.has_nodes = any(t == "node" for t in self.type)
        #: types found at node level or above it (a slot holding these spans nodes)
        self.upper_types = frozenset(self.type[v] for v in range(n) if node_of[v] in (-1, v))
        self.container_types = frozenset(self.type)
        self.pool_types = frozenset(t for p in self.pools for t in p)
        self.types = self.container_types | self.pool_types
        #: types a vertex holds directly: its pools and its children's types
        interned: dict[tuple, frozenset[str]] = {}
        child_types: list[frozenset[str]] = []
        for v in range(n):
            key = (tuple(self.pools[v]), tuple(self.type[c] for c in self.children[v]))
            ct = interned.get(key)
            if ct is None:
                ct = interned[key] = frozenset(key[0]) | frozenset(key[1])
            child_types.append(ct)
        self.child_types = child_types
        #: vertices that own at least one pool
        self.pool_vertices = [v for v in range(n) if self.pools[v]]

    def _totals(self) -> None:
        """Subtree totals: leaf units per type, containers per type."""
        n = self.n
        units: list[dict[str, int]] = [{} for _ in range(n)]
        conts: list[dict[str, int]] = [{} for _ in range(n)]
        for v in range(n - 1, -1, -1):
            u = units[v]
            for t, m in self.pools[v].items():
                u[t] = u.get(t, 0) + m.bit_count() * self.pool_info[(v, t)][0]
            ct = conts[v]
            ct[self.type[v]] = ct.get(self.type[v], 0) + 1
            for c in self.children[v]:
                for t, x in units[c].items():
                    u[t] = u.get(t, 0) + x
                for t, x in conts[c].items():
                    ct[t] = ct.get(t, 0) + x
        self.tot_units = units
        self.tot_conts = conts

    def _signatures(self) -> None:
        """An integer per vertex; equal integers mean identical subtrees (shape only)."""
        table: dict[tuple, int] = {}
        sig = [0] * self.n
        for v in range(self.n - 1, -1, -1):
            key = (
                self.type[v],
                tuple(sorted((t, m.bit_count(), self.pool_info[(v, t)][0]) for t, m in self.pools[v].items())),
                tuple(sig[c] for c in self.children[v]),
            )
            sig[v] = table.setdefault(key, len(table))
        self.sig = sig

    # -- queries -----------------------------------------------------------
    def subtree_mask(self, v: int) -> int:
        """Bitmask of the vertices in the subtree of ``v``."""
        return ((1 << (self.end[v] - v)) - 1) << v

    def ancestors(self, v: int) -> list[int]:
        """``v`` and its ancestors, bottom-up."""
        out = []
        while v >= 0:
            out.append(v)
            v = self.parent[v]
        return out

    def path(self, v: int) -> str:
        """The containment path, e.g. ``/tiny0/rack0/node1``."""
        return "/" + "/".join(self.name[a] for a in reversed(self.ancestors(v)))


def _check_acyclic(G: nx.DiGraph, subsystem: str, source: str | None) -> None:
    """Raise :class:`ResourceError` naming a cycle of ``subsystem`` edges, if there is one."""
    sub = nx.DiGraph((u, v) for u, v, s in G.edges(data="subsystem", default=CONTAINMENT) if s == subsystem)
    try:
        cycle = nx.find_cycle(sub)
    except nx.NetworkXNoCycle:
        return
    names = " -> ".join(str(G.nodes[u].get("name", u)) for u, _ in cycle)
    raise ResourceError(
        f"cycle in the {subsystem} graph: {names} -> {G.nodes[cycle[0][0]].get('name', cycle[0][0])}", source=source
    )
