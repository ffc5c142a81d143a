"""An immutable set of concrete resources of one graph.

A :class:`ResourceSet` holds two kinds of items:

* *containers*: vertex indices (a node, a socket...), as one bitmask.  A
  container is in a job's set when the job holds it exclusively;
* *leaves*: for each pool (a vertex and a leaf type) the ids taken from it,
  as a bitmask.

Sets from the same graph combine with ``| & - ^``, compare with ``== <=``, are
hashable and false when empty.  Reading and writing RFC 20 R lives in
:mod:`fluxsched_py.resource.rv1`; ``from_rv1``/``to_rv1`` here delegate to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..ids import IdSet
from .errors import ResourceError
from .topology import Topology

if TYPE_CHECKING:
    from .flatfree import FlatLayout
    from .graph import ResourceGraph
    from .state import Availability

__all__ = ["ResourceSet", "with_twins"]


def with_twins(rs: ResourceSet) -> ResourceSet:
    """``rs`` plus every other copy of its items (a vertex with two parents is
    compiled once per path, see :class:`Topology`); ``rs`` itself when it has none."""
    twins = rs._topo.twins
    if not twins:
        return rs
    cont = rs._cont
    leaves = rs.leaf_masks
    pools = {v: dict(tm) for v, tm in leaves.items()}
    for v in IdSet.from_mask(cont & rs._topo.twin_mask):
        for u in twins[v]:
            cont |= 1 << u
    for v, tm in leaves.items():
        for u in twins.get(v, ()):
            d = pools.setdefault(u, {})
            for t, m in tm.items():
                d[t] = d.get(t, 0) | m
    return ResourceSet(rs._topo, cont, pools)


class ResourceSet:
    """Immutable set of containers and leaves of one :class:`ResourceGraph`."""

    __slots__ = ("_topo", "_cont", "_leaves", "_make_leaves", "_hash", "_ranks", "__weakref__", "_cache", "_flat")

    def __init__(self, topo: Topology, cont: int = 0, pools: dict[int, dict[str, int]] | None = None) -> None:
        # ``pools`` is adopted, not copied: callers hand over a fresh dict with no empty masks.
        self._topo = topo
        self._cont = cont
        #: the leaves, ``{vertex: {type: ids mask}}``; None until
        #: ``_make_leaves`` has built them (a set decoded :meth:`lazily`)
        self._leaves: dict[int, dict[str, int]] | None = pools if pools is not None else {}
        self._make_leaves: Callable[[], dict[int, dict[str, int]]] | None = None
        self._hash: int | None = None
        self._ranks: IdSet | None = None
        #: ``(vertex count, Availability)``: this set as the matcher sees it (:meth:`availability`)
        self._cache: tuple[int, Availability] | None = None
        #: ``(layout, int)``: this set as a flat set of that
        #: :class:`~.flatfree.FlatLayout`, when whoever made it had it (the
        #: planner's decode); the graph then flips the free set by it whole
        #: instead of pool by pool (issue 15).
        self._flat: tuple[Any, int] | None = None

    # -- construction ----------------------------------------------------
    @classmethod
    def decoded(
        cls,
        topo: Topology,
        cont: int,
        pools: dict[int, dict[str, int]],
        flat: tuple[Any, int] | None = None,
        ranks: IdSet | None = None,
    ) -> ResourceSet:
        """A set decoded from a flat set by a planner, which knows already
        ``flat`` (``(layout, int)``: the graph flips its free set by it whole)
        and, for a whole-node layout, ``ranks``: neither is worked out again."""
        rs = cls(topo, cont, pools)
        rs._flat = flat
        rs._ranks = ranks
        return rs

    @classmethod
    def lazily(
        cls,
        topo: Topology,
        cont: int,
        leaves: Callable[[], dict[int, dict[str, int]]],
        flat: tuple[Any, int] | None = None,
        ranks: IdSet | None = None,
    ) -> ResourceSet:
        """:meth:`decoded`, with the leaves built by ``leaves()`` only when
        something reads them (its items, its algebra, R; not its containers,
        ``ranks`` when given, nor ``flat``): a placement of thousands of
        whole nodes starts, runs and ends without a dict per node."""
        rs = cls(topo, cont, None)
        rs._leaves = None
        rs._make_leaves = leaves
        rs._flat = flat
        rs._ranks = ranks
        return rs

    @property
    def _pools(self) -> dict[int, dict[str, int]]:
        leaves = self._leaves
        if leaves is None:
            make = self._make_leaves
            assert make is not None
            leaves = self._leaves = make()
            self._make_leaves = None
        return leaves

    @classmethod
    def from_rv1(cls, g: ResourceGraph, R: dict, *, source: str | None = None) -> ResourceSet:
        """The leaves of ``g`` named by R's ``R_lite`` (see :func:`rv1.resourceset_from_rv1`)."""
        from .rv1 import resourceset_from_rv1

        return resourceset_from_rv1(g, R, source=source)

    def to_rv1(
        self,
        g: ResourceGraph,
        starttime: float = 0.0,
        expiration: float = 0.0,
        nslots: int | None = None,
        with_jgf: bool = False,
    ) -> dict:
        """RFC 20 R version 1 for this set (see :func:`rv1.resourceset_to_rv1`)."""
        from .rv1 import resourceset_to_rv1

        return resourceset_to_rv1(g, self, starttime=starttime, expiration=expiration, nslots=nslots, with_jgf=with_jgf)

    # -- inspection ----------------------------------------------------------
    @property
    def topology(self) -> Topology:
        return self._topo

    @property
    def containers(self) -> IdSet:
        """Vertex indices of the containers in the set."""
        return IdSet.from_mask(self._cont)

    @property
    def container_mask(self) -> int:
        """:attr:`containers` as a bitmask (bit ``v``: vertex ``v``)."""
        return self._cont

    @property
    def leaf_masks(self) -> Mapping[int, Mapping[str, int]]:
        """The leaves as ``{vertex: {type: ids mask}}`` (no empty masks): the
        set's own table, read without a copy; never change it."""
        return self._pools

    def flat_in(self, layout: FlatLayout) -> int | None:
        """This set as a flat set of ``layout`` when it was decoded from one
        of that layout (:meth:`decoded`: a planner's placement), else None."""
        f = self._flat
        return f[1] if f is not None and f[0] is layout else None

    def availability(self) -> Availability:
        """This set as the matcher reads an available set: every item of it
        available (:meth:`Availability.from_resourceset`), built once per set
        and again after its graph grew."""
        cached = self._cache
        n = self._topo.n
        if cached is None or cached[0] != n:
            from .state import Availability  # state.py builds on this module

            cached = self._cache = (n, Availability.from_resourceset(self))
        return cached[1]

    def pools(self) -> Iterator[tuple[int, str, IdSet]]:
        """``(vertex, type, ids)`` for every pool with leaves in the set, by vertex."""
        for v in sorted(self._pools):
            for t, m in self._pools[v].items():
                yield v, t, IdSet.from_mask(m)

    @property
    def ranks(self) -> IdSet:
        """Ranks with at least one container or leaf in the set."""
        if self._ranks is None:
            rank = self._topo.rank
            mask = 0
            for v in self._pools:
                r = rank[v]
                if r >= 0:
                    mask |= 1 << r
            c = self._cont
            if c.bit_count() <= 64:  # a job's few containers: peel them off (no scan of the whole mask)
                while c:
                    low = c & -c
                    c ^= low
                    r = rank[low.bit_length() - 1]
                    if r >= 0:
                        mask |= 1 << r
            else:
                for lo, hi in IdSet.from_mask(c).runs():
                    for r in rank[lo : hi + 1]:
                        if r >= 0:
                            mask |= 1 << r
            self._ranks = IdSet.from_mask(mask)
        return self._ranks

    def count(self, type: str) -> int:
        """Number of items of ``type``: containers of that type, or leaves in pools."""
        n = 0
        for tm in self._pools.values():
            m = tm.get(type)
            if m:
                n += m.bit_count()
        if type in self._topo.container_types and self._cont:
            vtype = self._topo.type
            for lo, hi in IdSet.from_mask(self._cont).runs():
                n += sum(1 for v in range(lo, hi + 1) if vtype[v] == type)
        return n

    def amount(self, type: str) -> int:
        """Leaf units of ``type``: leaves times their size (e.g. GB of memory)."""
        info = self._topo.pool_info
        return sum(m.bit_count() * info[(v, type)][0] for v, tm in self._pools.items() if (m := tm.get(type)))

    def by_rank(self, types: tuple[str, ...] | None = None) -> dict[int, dict[str, IdSet]]:
        """``{rank: {type: ids}}`` of the leaves (optionally only ``types``), rank-less pools omitted."""
        rank = self._topo.rank
        acc: dict[int, dict[str, int]] = {}
        for v, tm in self._pools.items():
            r = rank[v]
            if r < 0:
                continue
            d = acc.setdefault(r, {})
            for t, m in tm.items():
                if types is None or t in types:
                    d[t] = d.get(t, 0) | m
        return {r: {t: IdSet.from_mask(m) for t, m in d.items()} for r, d in sorted(acc.items())}

    def restrict(self, ranks: IdSet) -> ResourceSet:
        """The part of the set on ``ranks``."""
        rank = self._topo.rank
        cont = 0
        for r in ranks:
            v = self._topo.rank_root.get(r)
            if v is not None:
                cont |= self._topo.subtree_mask(v)
        pools = {v: dict(tm) for v, tm in self._pools.items() if rank[v] >= 0 and rank[v] in ranks}
        return ResourceSet(self._topo, self._cont & cont, pools)

    # -- algebra -------------------------------------------------------------
    def _same(self, other: object) -> ResourceSet:
        if not isinstance(other, ResourceSet):
            return NotImplemented  # type: ignore[return-value]
        if other._topo is not self._topo:
            raise ResourceError("cannot combine resource sets of different graphs")
        return other

    def __or__(self, other: ResourceSet) -> ResourceSet:
        o = self._same(other)
        if o is NotImplemented:
            return NotImplemented
        pools = {v: dict(tm) for v, tm in self._pools.items()}
        for v, tm in o._pools.items():
            d = pools.get(v)
            if d is None:
                pools[v] = dict(tm)
            else:
                for t, m in tm.items():
                    d[t] = d.get(t, 0) | m
        return ResourceSet(self._topo, self._cont | o._cont, pools)

    def __and__(self, other: ResourceSet) -> ResourceSet:
        o = self._same(other)
        if o is NotImplemented:
            return NotImplemented
        a, b = (self, o) if len(self._pools) <= len(o._pools) else (o, self)
        pools = {}
        for v, tm in a._pools.items():
            tm2 = b._pools.get(v)
            if tm2:
                d = {t: m & tm2[t] for t, m in tm.items() if t in tm2 and m & tm2[t]}
                if d:
                    pools[v] = d
        return ResourceSet(self._topo, self._cont & o._cont, pools)

    def __sub__(self, other: ResourceSet) -> ResourceSet:
        o = self._same(other)
        if o is NotImplemented:
            return NotImplemented
        pools = {}
        for v, tm in self._pools.items():
            tm2 = o._pools.get(v)
            if not tm2:
                pools[v] = dict(tm)
                continue
            d = {t: m & ~tm2.get(t, 0) for t, m in tm.items() if m & ~tm2.get(t, 0)}
            if d:
                pools[v] = d
        return ResourceSet(self._topo, self._cont & ~o._cont, pools)

    def __xor__(self, other: ResourceSet) -> ResourceSet:
        return (self - other) | (other - self)

    def isdisjoint(self, other: ResourceSet) -> bool:
        return not (self & other)

    def issubset(self, other: ResourceSet) -> bool:
        return not (self - other)

    def __le__(self, other: ResourceSet) -> bool:
        return self.issubset(other)

    def __bool__(self) -> bool:
        return bool(self._cont) or bool(self._pools)  # containers first: a lazy set's leaves stay unbuilt

    def _key(self) -> tuple:
        return (self._cont, frozenset((v, t, m) for v, tm in self._pools.items() for t, m in tm.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResourceSet):
            return NotImplemented
        return self._topo is other._topo and self._cont == other._cont and self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def __repr__(self) -> str:
        parts = [f"ranks={self.ranks}"]
        for t in sorted({t for tm in self._pools.values() for t in tm}):
            parts.append(f"{t}={self.count(t)}")
        return f"ResourceSet({', '.join(parts)}, containers={self._cont.bit_count()})"
