"""Build the networkx resource model: the one thing every reader produces.

The model is an ``nx.DiGraph``:

* a vertex per *container* (cluster, rack, node, socket, switch, any custom
  type), keyed by an integer, with attributes ``type``, ``name``, ``id``,
  ``rank`` (-1 above the nodes), ``basename``, ``size``, ``unit``,
  ``properties`` (a dict) and ``pools``;
* ``pools`` holds the identical leaves a container owns (cores, GPUs,
  memory...): ``{type: Pool(ids, size, unit, basename, subsystem, pos)}``
  (a :class:`Pool` named tuple; ``ids`` is an :class:`~fluxsched_py.ids.IdSet`,
  ``pos`` how many children came before the pool in the input, for printing
  in input order);
* every edge goes from parent to child and carries ``subsystem``
  (``containment``, ``power``, ``network``, ``ibnet``, or any name the input
  gives).  A vertex may have parents in several subsystems (a node fed by a
  PDU) and, as Fluxion's GRUG ``ASSOCIATE_IN`` makes, several parents in one;
* ``G.graph`` holds ``roots`` (``{subsystem: root vertex}``), ``source``,
  ``hostnames`` (``{rank: host}``), ``rank_properties`` (``{rank: set}``) and
  ``rlite_types`` (leaf types R_lite carries).

Children are kept in input order (networkx keeps edge insertion order).
Readers fill a :class:`ModelBuilder`; nothing here knows the matcher.  The
matcher's index is compiled from the model by
:meth:`fluxsched_py.resource.topology.Topology.compile`.
"""

from __future__ import annotations

from typing import NamedTuple

import networkx as nx

from ..ids import IdSet
from ..limits import MAX_ID, MAX_LEAF_BITS, MAX_NODES
from .errors import ResourceError

__all__ = ["ModelBuilder", "Pool", "CONTAINMENT", "RLITE_TYPES"]

CONTAINMENT = "containment"

#: Leaf types R_lite always carries (others only when an R input carried them).
RLITE_TYPES = ("core", "gpu")


class Pool(NamedTuple):
    """Identical leaves pooled on a container (a tuple: a dict per pool costs
    three times the memory on a machine of 100,000 pools)."""

    ids: IdSet
    size: int = 1
    unit: str = ""
    basename: str = ""
    subsystem: str = CONTAINMENT
    pos: int = 0


class ModelBuilder:
    """Collects vertices, edges and pools, then builds the networkx model in bulk."""

    __slots__ = (
        "source",
        "hostnames",
        "properties",
        "rlite_types",
        "_attrs",
        "_edges",
        "_roots",
        "_nkids",
        "_leaf_bits",
        "_nnodes",
    )

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        self.hostnames: dict[int, str] = {}
        self.properties: dict[int, set[str]] = {}
        self.rlite_types: list[str] = list(RLITE_TYPES)
        self._attrs: list[dict] = []
        self._edges: list[tuple[int, int, str]] = []
        self._roots: dict[str, int] = {}
        self._nkids: list[int] = []
        self._leaf_bits = 0
        self._nnodes = 0

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
        subsystem: str = CONTAINMENT,
    ) -> int:
        """Add a container under ``parent`` (-1: the root of ``subsystem``); return its key.

        A child with no rank of its own inherits its parent's.
        """
        if rank > MAX_ID:  # ranks are bits of a mask: checked before one that wide is made
            raise ResourceError(f"vertex {name!r} has a rank above {MAX_ID}", source=self.source, element=name)
        if type == "node":
            self._nnodes += 1
            if self._nnodes > MAX_NODES:  # each reader counts first; this is every reader's backstop
                raise ResourceError(f"over the limit of {MAX_NODES} nodes", source=self.source, element=name)
        if parent == -1:
            if subsystem in self._roots:
                raise ResourceError(f"a second {subsystem} root vertex {name!r}", source=self.source, element=name)
        elif rank < 0:
            rank = self._attrs[parent]["rank"]
        h = len(self._attrs)
        self._attrs.append(
            {
                "type": type,
                "name": name,
                "id": id,
                "rank": rank,
                "basename": basename or type,
                "size": size,
                "unit": unit,
                "properties": properties or {},
                "pools": {},
            }
        )
        self._nkids.append(0)
        if parent == -1:
            self._roots[subsystem] = h
        else:
            self._edges.append((parent, h, subsystem))
            self._nkids[parent] += 1
        return h

    def link(self, parent: int, child: int, subsystem: str = CONTAINMENT) -> None:
        """Add an edge between existing vertices (a second parent, or another subsystem's parent)."""
        self._edges.append((parent, child, subsystem))
        self._nkids[parent] += 1

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
        subsystem: str = CONTAINMENT,
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
        pools = self._attrs[parent]["pools"]
        pool = pools.get(type)
        if pool is not None:
            have = pool.ids.mask
            if have & ids:
                dup = (have & ids).bit_length() - 1
                raise ResourceError(
                    f"duplicate {type} id {dup} under {self._attrs[parent]['name']!r}",
                    source=self.source,
                    element=element,
                )
            if pool.size != size:
                raise ResourceError(
                    f"{type} leaves of different sizes ({pool.size}, {size}) under one parent are not supported",
                    source=self.source,
                    element=element,
                )
            pools[type] = Pool(
                IdSet.from_mask(have | ids), pool.size, pool.unit, pool.basename, pool.subsystem, pool.pos
            )
        else:
            pools[type] = Pool(IdSet.from_mask(ids), size, unit, basename or type, subsystem, self._nkids[parent])

    def pool_mask(self, parent: int, type: str) -> int:
        """Ids already in ``parent``'s pool of ``type``."""
        pool = self._attrs[parent]["pools"].get(type)
        return pool.ids.mask if pool else 0

    def vertex(self, h: int) -> dict:
        """The attributes of vertex ``h`` so far (live; readers may read them)."""
        return self._attrs[h]

    def finish(self) -> nx.DiGraph:
        """The networkx model (see the module docstring)."""
        if not self._attrs:
            raise ResourceError("the resource graph is empty", source=self.source)
        if CONTAINMENT not in self._roots:
            raise ResourceError("the resource graph has no containment root", source=self.source)
        G = nx.DiGraph(
            source=self.source,
            roots=dict(self._roots),
            hostnames=dict(self.hostnames),
            rank_properties={r: set(p) for r, p in self.properties.items()},
            rlite_types=list(dict.fromkeys(self.rlite_types)),
        )
        G.add_nodes_from(enumerate(self._attrs))
        G.add_edges_from((p, c, {"subsystem": s}) for p, c, s in self._edges)
        if G.number_of_edges() < len(self._edges):  # an edge given twice: name it
            seen: set[tuple[int, int]] = set()
            for p, c, _ in self._edges:
                if (p, c) in seen:
                    raise ResourceError(
                        f"two edges {self._attrs[p]['name']!r} -> {self._attrs[c]['name']!r}",
                        source=self.source,
                        element=self._attrs[c]["name"],
                    )
                seen.add((p, c))
        return G
