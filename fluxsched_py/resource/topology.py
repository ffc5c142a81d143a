"""The static shape of a resource graph: containers, leaf pools, ranks.

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

Nothing here changes after :meth:`TopologyBuilder.finish`; the mutable
allocation state lives in :mod:`fluxsched_py.resource.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from ..ids import MAX_ID
from .errors import ResourceError

__all__ = ["Topology", "TopologyBuilder", "RLITE_TYPES"]

#: Leaf types R_lite always carries (others only when an R input carried them).
RLITE_TYPES = ("core", "gpu")

#: Leaf pools are bitmasks indexed by leaf id: the sum of their widths is
#: bounded, so a few sparse ids (``core: "67108863"`` on every rank, a JGF
#: core with id 10**9) are refused instead of taking gigabytes.  2**28 bits
#: is 32 MB of masks: 16K nodes with ids up to 16K each.
MAX_LEAF_BITS = 1 << 28


@dataclass(slots=True)
class _Proto:
    type: str
    name: str
    id: int
    parent: int
    rank: int
    basename: str
    size: int
    unit: str
    properties: dict
    children: list = field(default_factory=list)
    pools: dict = field(default_factory=dict)  # type -> [mask, size, unit, basename]
    pool_pos: dict = field(default_factory=dict)  # type -> number of children added before the pool


class TopologyBuilder:
    """Collects vertices and pools, then freezes them into a :class:`Topology`."""

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        self._leaf_bits = 0
        self._protos: list[_Proto] = []
        self.hostnames: dict[int, str] = {}
        self.properties: dict[int, set[str]] = {}
        self.rlite_types: list[str] = list(RLITE_TYPES)

    def add_vertex(
        self,
        type: str,
        name: str,
        id: int,
        parent: int = -1,
        *,
        rank: int = -1,
        basename: str | None = None,
        size: int = 1,
        unit: str = "",
        properties: dict | None = None,
    ) -> int:
        """Add a container vertex under ``parent`` (-1 for the root); return its handle."""
        if parent == -1 and self._protos:
            raise ResourceError(f"a second root vertex {name!r}", source=self.source, element=name)
        if rank > MAX_ID:  # ranks are bits of a mask: checked before one that wide is made
            raise ResourceError(f"vertex {name!r} has a rank above {MAX_ID}", source=self.source, element=name)
        if parent >= 0 and rank < 0:
            rank = self._protos[parent].rank
        h = len(self._protos)
        self._protos.append(_Proto(type, name, id, parent, rank, basename or type, size, unit, properties or {}))
        if parent >= 0:
            self._protos[parent].children.append(h)
        return h

    def add_leaves(
        self,
        parent: int,
        type: str,
        ids: int,
        *,
        size: int = 1,
        unit: str = "",
        basename: str | None = None,
        element: str | None = None,
    ) -> None:
        """Add leaves of ``type`` with the id bitmask ``ids`` to the pool of ``parent``."""
        self._leaf_bits += ids.bit_length()
        if self._leaf_bits > MAX_LEAF_BITS:
            raise ResourceError(
                f"{type} ids up to {ids.bit_length() - 1}: leaf ids this large or sparse are not supported "
                f"(their pools would exceed {MAX_LEAF_BITS} bits)",
                source=self.source,
                element=element,
            )
        pools = self._protos[parent].pools
        if type in pools:
            pool = pools[type]
            if pool[0] & ids:
                dup = (pool[0] & ids).bit_length() - 1
                raise ResourceError(
                    f"duplicate {type} id {dup} under {self._protos[parent].name!r}",
                    source=self.source,
                    element=element,
                )
            if pool[1] != size:
                raise ResourceError(
                    f"{type} leaves of different sizes ({pool[1]}, {size}) under one parent are not supported",
                    source=self.source,
                    element=element,
                )
            pool[0] |= ids
        else:
            pools[type] = [ids, size, unit, basename or type]
            self._protos[parent].pool_pos[type] = len(self._protos[parent].children)

    def pool_mask(self, parent: int, type: str) -> int:
        """Ids already in ``parent``'s pool of ``type``."""
        pool = self._protos[parent].pools.get(type)
        return pool[0] if pool else 0

    def finish(self) -> Topology:
        if not self._protos:
            raise ResourceError("the resource graph is empty", source=self.source)
        return Topology(self)


class Topology:
    """Frozen structure of a resource graph (see the module docstring)."""

    def __init__(self, b: TopologyBuilder) -> None:
        protos = b._protos
        # depth-first pre-order renumbering
        order: list[int] = []
        stack = [0]
        while stack:
            h = stack.pop()
            order.append(h)
            stack.extend(reversed(protos[h].children))
        if len(order) != len(protos):
            raise ResourceError("some vertices are not reachable from the root", source=b.source)
        new = [0] * len(protos)
        for i, h in enumerate(order):
            new[h] = i
        n = len(order)
        self.source = b.source
        self.n = n
        self.type: list[str] = [protos[h].type for h in order]
        self.name: list[str] = [protos[h].name for h in order]
        self.id: list[int] = [protos[h].id for h in order]
        self.basename: list[str] = [protos[h].basename for h in order]
        self.size: list[int] = [protos[h].size for h in order]
        self.unit: list[str] = [protos[h].unit for h in order]
        self.vprops: list[dict] = [protos[h].properties for h in order]
        self.rank: list[int] = [protos[h].rank for h in order]
        self.parent: list[int] = [new[protos[h].parent] if protos[h].parent >= 0 else -1 for h in order]
        self.children: list[tuple[int, ...]] = [tuple(new[c] for c in protos[h].children) for h in order]
        #: child_pos[v]: the index of ``v`` in its parent's ``children`` (0 for the root)
        self.child_pos: list[int] = [0] * n
        for ch in self.children:
            for i, c in enumerate(ch):
                self.child_pos[c] = i
        #: pools[v] = {type: all-ids mask}
        self.pools: list[dict[str, int]] = [{t: p[0] for t, p in protos[h].pools.items()} for h in order]
        #: pool_pos[v][type]: how many of v's children came before that pool in the input (for printing)
        self.pool_pos: list[dict[str, int]] = [protos[h].pool_pos for h in order]
        #: (v, type) -> (size, unit, basename) for every pool
        self.pool_info: dict[tuple[int, str], tuple[int, str, str]] = {}
        for v, h in enumerate(order):
            for t, p in protos[h].pools.items():
                self.pool_info[(v, t)] = (p[1], p[2], p[3])
        self.rlite_types = tuple(dict.fromkeys(b.rlite_types))
        self._check_no_nested_ranks(b)
        self._index(b)
        self._totals()
        self._signatures()
        self._nx: nx.DiGraph | None = None

    # -- derived indexes -------------------------------------------------
    def _check_no_nested_ranks(self, b: TopologyBuilder) -> None:
        for v in range(self.n):
            p = self.parent[v]
            if p >= 0 and self.rank[p] >= 0 and self.rank[v] != self.rank[p]:
                raise ResourceError(
                    f"vertex {self.name[v]!r} has rank {self.rank[v]} inside rank {self.rank[p]}",
                    source=b.source,
                    element=self.name[v],
                )

    def _index(self, b: TopologyBuilder) -> None:
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
            if r >= 0 and (self.parent[v] < 0 or self.rank[self.parent[v]] != r):
                if r in self.rank_root:
                    raise ResourceError(
                        f"rank {r} appears in two places ({self.name[self.rank_root[r]]!r}, {self.name[v]!r})",
                        source=b.source,
                        element=self.name[v],
                    )
                self.rank_root[r] = v
        self.ranks_mask = 0
        for r in self.rank_root:
            self.ranks_mask |= 1 << r
        self.hostnames = dict(b.hostnames)
        self.properties: dict[int, frozenset[str]] = {r: frozenset(p) for r, p in b.properties.items()}
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
        self.child_types: list[frozenset[str]] = [
            frozenset(self.pools[v]) | frozenset(self.type[c] for c in self.children[v]) for v in range(n)
        ]
        #: vertices that own at least one pool
        self.pool_vertices = [v for v in range(n) if self.pools[v]]

    def _totals(self) -> None:
        """Subtree totals: leaf units per type, item count, containers per type."""
        n = self.n
        units: list[dict[str, int]] = [{} for _ in range(n)]
        items = [0] * n
        conts: list[dict[str, int]] = [{} for _ in range(n)]
        for v in range(n - 1, -1, -1):
            u = units[v]
            k = 1
            for t, m in self.pools[v].items():
                c = m.bit_count()
                u[t] = u.get(t, 0) + c * self.pool_info[(v, t)][0]
                k += c
            ct = conts[v]
            ct[self.type[v]] = ct.get(self.type[v], 0) + 1
            for c in self.children[v]:
                for t, x in units[c].items():
                    u[t] = u.get(t, 0) + x
                for t, x in conts[c].items():
                    ct[t] = ct.get(t, 0) + x
                k += items[c]
            items[v] = k
        self.tot_units = units
        self.tot_items = items
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

    def pool_size(self, v: int, t: str) -> int:
        return self.pool_info[(v, t)][0]

    def to_networkx(self) -> nx.DiGraph:
        """The containers as a networkx DiGraph (built once, then cached).

        Node keys are vertex indices; attributes ``type``, ``name``, ``id``,
        ``rank``, ``size``, ``unit`` and ``pools`` (``{type: IdSet}``).
        """
        if self._nx is None:
            from ..ids import IdSet

            g = nx.DiGraph()
            for v in range(self.n):
                g.add_node(
                    v,
                    type=self.type[v],
                    name=self.name[v],
                    id=self.id[v],
                    rank=self.rank[v],
                    size=self.size[v],
                    unit=self.unit[v],
                    pools={t: IdSet.from_mask(m) for t, m in self.pools[v].items()},
                )
            g.add_edges_from((self.parent[v], v) for v in range(1, self.n))
            self._nx = g
        return self._nx
