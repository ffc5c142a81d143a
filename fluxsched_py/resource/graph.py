"""The resource graph: topology plus allocation and up/down state.

:class:`ResourceGraph` owns

* the frozen :class:`~fluxsched_py.resource.topology.Topology` (containers as
  vertices, identical leaves as id pools on their parent);
* which job holds what (``jobs``), never two jobs the same item;
* per-rank state: down, drained (with a reason), shrunk (gone for good);
* the live :class:`~fluxsched_py.resource.state.Availability` of free items,
  with per-subtree counts the matcher prunes with.

A graph loaded from a file starts with every rank up.  A Flux driver that
must treat targets as down until ``resource.acquire`` says they are up calls
``set_down(g.ranks)`` first.

Invariant, checked by the property tests: ``free | allocated | down == all``
and the three are pairwise disjoint.  ``down`` is the unallocated part of
down or drained ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import networkx as nx

from ..ids import IdSet
from .builder import CONTAINMENT
from .edit import SHRUNK, add_ranks, check_properties, mark_shrunk, set_rank_properties
from .errors import ResourceError
from .flatfree import FlatLayout, FreeBits
from .readers import GraphReaders
from .resourceset import ResourceSet, with_twins
from .state import Availability
from .topology import Topology

__all__ = ["ResourceGraph"]

#: the leaves handed to ``Availability.take``/``give`` with a job's flat bits, which they do not read
_NO_LEAVES: Mapping[int, Mapping[str, int]] = MappingProxyType({})


class ResourceGraph(GraphReaders):
    """A resource graph with allocation state.  Build one with a ``from_*`` reader or :meth:`load`.

    >>> g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "sockets": 1, "cores_per_socket": 4}})
    >>> str(g.ranks), g.free().count("core")
    ('0-1', 8)
    """

    def __init__(
        self,
        model: nx.DiGraph | Topology,
        *,
        subsystem: str = CONTAINMENT,
        rv1_defaults: dict | None = None,
    ) -> None:
        """Own the networkx ``model`` and compile the matcher's index of its ``subsystem`` tree.

        ``subsystem`` is the tree matching walks (``containment``; ``power``
        for resource-query's ``-S PA``).  Passing a compiled :class:`Topology`
        shares it (and its model) with another graph.
        """
        topo = model if isinstance(model, Topology) else Topology.compile(model, subsystem)
        self.topo = topo
        #: starttime/expiration/nslots of the R this graph was read from (for round trips)
        self.rv1_defaults: dict = dict(
            rv1_defaults or topo.gattr.get("rv1_defaults") or {"starttime": 0.0, "expiration": 0.0}
        )
        self._jobs: dict[int, ResourceSet] = {}
        self._alloc_pools: dict[int, dict[str, int]] = {}
        self._alloc_cont = 0
        #: jobs' allocations not yet in ``_alloc_pools``/``_alloc_cont`` (see :meth:`_fold`)
        self._unfolded: dict[int, ResourceSet] = {}
        self._down = 0  # rank masks
        self._drained = 0
        self._drain_reason: dict[int, str] = {}
        self._shrunk = 0
        self._version = 0
        self._snap: dict[str, tuple[int, ResourceSet]] = {}
        self._layout: FlatLayout | None = None
        n = topo.n
        self._avail = Availability(topo, (1 << n) - 1, [dict(p) for p in topo.pools])
        self._all_static = ResourceSet(topo, (1 << n) - 1, {v: dict(topo.pools[v]) for v in topo.pool_vertices})
        shrunk = IdSet(topo.gattr.get(SHRUNK) or ()).mask & topo.ranks_mask
        if shrunk:  # a model that was shrunk before (see :meth:`update`)
            self._shrunk = shrunk
            self._refresh_ranks(shrunk)

    @classmethod
    def from_networkx(cls, G: nx.DiGraph, *, subsystem: str = CONTAINMENT) -> ResourceGraph:
        """Adopt a user-built networkx model (see :mod:`fluxsched_py.resource.builder` for its shape).

        The graph is checked first (:func:`~fluxsched_py.resource.model.validate`);
        a :class:`ResourceError` names the first vertex or edge that is wrong.
        The graph becomes the model: keep it unchanged afterwards.
        """
        from .model import validate

        return cls(validate(G), subsystem=subsystem)

    # -- identity ------------------------------------------------------------
    @property
    def nx(self) -> nx.DiGraph:
        """The networkx model: containers as vertices, leaf pools on them, subsystem-tagged edges.

        It is the model the matcher's index was compiled from, not a copy
        (see :mod:`fluxsched_py.resource.builder` for its shape).
        """
        return self.topo.model

    @property
    def ranks(self) -> IdSet:
        """Ranks of the instance (shrunk ranks excluded)."""
        return IdSet.from_mask(self.topo.ranks_mask & ~self._shrunk)

    def hostname(self, rank: int) -> str | None:
        """Host name of ``rank``, or None when the input named no hosts."""
        self._check_rank(rank)
        return self.topo.hostnames.get(rank)

    def properties(self, rank: int) -> frozenset[str]:
        """Properties of ``rank`` (instance-local ``+`` properties included)."""
        self._check_rank(rank)
        return self.topo.properties.get(rank, frozenset())

    def rank_vertex(self, rank: int) -> int:
        """The top-most vertex of ``rank`` (usually its node)."""
        self._check_rank(rank)
        return self.topo.rank_root[rank]

    def _check_rank(self, rank: int) -> None:
        if rank not in self.topo.rank_root:
            raise ResourceError(f"rank {rank} is not in the resource graph")

    def down_ranks(self) -> IdSet:
        return IdSet.from_mask(self._down & ~self._shrunk)

    def shrunk_ranks(self) -> IdSet:
        """Ranks removed for good (RFC 28 shrink)."""
        return IdSet.from_mask(self._shrunk)

    def drained_ranks(self) -> dict[int, str]:
        return dict(self._drain_reason)

    # -- state snapshots -----------------------------------------------------
    def _cached(self, key: str, build) -> ResourceSet:
        hit = self._snap.get(key)
        if hit is not None and hit[0] == self._version:
            return hit[1]
        rs = build()
        self._snap[key] = (self._version, rs)
        return rs

    def _ranks_items(self, rank_mask: int) -> ResourceSet:
        topo = self.topo
        cont = 0
        pools = {}
        for r in IdSet.from_mask(rank_mask & topo.ranks_mask):
            v = topo.rank_root[r]
            cont |= topo.subtree_mask(v)
            for u in range(v, topo.end[v]):
                if topo.pools[u]:
                    pools[u] = dict(topo.pools[u])
        return ResourceSet(topo, cont, pools)

    def all(self) -> ResourceSet:
        """Every item of the instance (unallocated items of shrunk ranks excluded)."""

        def build() -> ResourceSet:
            if not self._shrunk:
                return self._all_static
            return self._all_static - (self._ranks_items(self._shrunk) - self.allocated())

        return self._cached("all", build)

    def free(self) -> ResourceSet:
        """Items a new job may get now: unallocated, on ranks up and not drained."""
        return self._cached("free", self._avail.to_resourceset)

    def allocated(self) -> ResourceSet:
        """Items held by some job."""

        def build() -> ResourceSet:
            self._fold()
            pools = {v: dict(tm) for v, tm in self._alloc_pools.items() if tm}
            return ResourceSet(self.topo, self._alloc_cont, pools)

        return self._cached("allocated", build)

    def down(self) -> ResourceSet:
        """Unallocated items of ranks that are down or drained."""
        return self._cached(
            "down", lambda: self._ranks_items((self._down | self._drained) & ~self._shrunk) - self.allocated()
        )

    @property
    def flat_layout(self) -> FlatLayout:
        """Where each item sits in a flat set of this graph (laid out anew by a grow)."""
        layout = self._layout
        if layout is None:
            layout = self._layout = FlatLayout(self.topo)
        return layout

    def free_bits(self) -> FreeBits:
        """:meth:`free` as a flat set (:mod:`~fluxsched_py.resource.flatfree`):
        the live one, changed in place by every allocation, release and rank
        state change from the first time it is asked for; read it, never
        keep its value across a change."""
        av = self._avail
        flat = av.flat
        if flat is None:
            flat = av.flat = FreeBits(self.flat_layout, av.cont, av.loc)
        return flat

    def availability(self, available: ResourceSet | None = None) -> Availability:
        """The :class:`Availability` the matcher uses: live free state, or built for ``available``."""
        if available is None:
            self._avail.sync()  # allocate and release leave the aggregates to the first reader
            return self._avail
        if available.topology is not self.topo:
            raise ResourceError("the available set belongs to another graph")
        return available.availability()

    @property
    def version(self) -> int:
        """Counter bumped by every state change (allocations, up/down...)."""
        return self._version

    # -- jobs ------------------------------------------------------------------
    @property
    def jobs(self) -> Mapping[int, ResourceSet]:
        """Read-only ``{jobid: ResourceSet}`` of current allocations."""
        return MappingProxyType(self._jobs)

    def allocation(self, jobid: int) -> ResourceSet:
        """What job ``jobid`` holds (an empty set for an unknown job)."""
        return self._jobs.get(jobid) or ResourceSet(self.topo)

    def _describe_item(self, v: int, t: str | None, i: int | None) -> str:
        topo = self.topo
        r = topo.rank[v]
        where = f"rank {r} ({topo.name[v]})" if r >= 0 else topo.path(v)
        if t is None:
            return f"{topo.type[v]} {topo.name[v]} on {where}"
        return f"{t} {i} on {where}"

    def allocate(self, jobid: int, rs: ResourceSet, *, running: bool = False) -> None:
        """Give the items of ``rs`` to ``jobid``; raise :class:`ResourceError` unless all are free.

        Allocating again to a job that holds resources adds to its allocation.
        With ``running`` (a job that already runs, learned at hello), the
        items need only be held by no other job: a running job keeps what it
        holds on ranks that went down, were drained or shrunk.
        """
        if rs.topology is not self.topo:
            raise ResourceError(f"job {jobid}: the resource set belongs to another graph")
        rs = with_twins(rs)
        bits = None if running else self._flat_bits(rs)
        if bits is not None and self._avail.flat.holds(bits):  # type: ignore[union-attr]
            pass  # all of it is free: one test on the flat free set, not one per pool
        elif running:
            self._fold()
            self._check_unheld(jobid, rs)
        else:
            bits = None
            self._check_free(jobid, rs)
        if not rs:
            return
        pending = self._unfolded.get(jobid)
        self._unfolded[jobid] = rs if pending is None else pending | rs
        old = self._jobs.get(jobid)
        self._jobs[jobid] = rs if old is None else old | rs
        self._version += 1
        # what was available of rs (all of it unless ``running``); given the
        # flat bits, its leaves are not read (a lazy set's stay unbuilt)
        self._avail.take(rs.container_mask, _NO_LEAVES if bits is not None else rs.leaf_masks, bits)

    def _check_unheld(self, jobid: int, rs: ResourceSet) -> None:
        """Raise ResourceError unless no job holds any item of ``rs`` (folded first)."""
        if bad_cont := rs.container_mask & self._alloc_cont:
            v = IdSet.from_mask(bad_cont).first()
            raise ResourceError(f"job {jobid}: {self._describe_item(v, None, None)} is not free")
        held = self._alloc_pools
        for v, tm in rs.leaf_masks.items():
            taken = held.get(v)
            if taken:
                for t, m in tm.items():
                    if bad := m & taken.get(t, 0):
                        i = IdSet.from_mask(bad).first()
                        raise ResourceError(f"job {jobid}: {self._describe_item(v, t, i)} is not free")

    def _check_free(self, jobid: int, rs: ResourceSet) -> None:
        """Raise ResourceError unless every item of ``rs`` is available."""
        if bad_cont := rs.container_mask & ~self._avail.cont:
            v = IdSet.from_mask(bad_cont).first()
            raise ResourceError(f"job {jobid}: {self._describe_item(v, None, None)} is not free")
        loc = self._avail.loc
        for v, tm in rs.leaf_masks.items():
            lv = loc[v]
            for t, m in tm.items():
                if bad := m & ~lv.get(t, 0):
                    i = IdSet.from_mask(bad).first()
                    raise ResourceError(f"job {jobid}: {self._describe_item(v, t, i)} is not free")

    def _flat_bits(self, rs: ResourceSet) -> int | None:
        """``rs`` as a flat set of the live free set's layout, when it came
        with one (a placement the planner decoded) and that layout is still
        the graph's; else None (then the free set changes pool by pool)."""
        flat = self._avail.flat
        return None if flat is None else rs.flat_in(flat.layout)

    def release(self, jobid: int, rs: ResourceSet | None = None) -> ResourceSet:
        """Free what ``jobid`` holds, or only part of it; return what was freed.

        With ``rs``, the items of ``rs`` are freed, and on each rank of ``rs``
        where the job then keeps no R_lite leaf (core, GPU...), everything else
        the job holds there too (its node, sockets, memory).  This is how
        RFC 27 partial frees by R work.  Raises :class:`ResourceError` if the
        job is unknown or ``rs`` holds items the job does not.
        """
        held = self._jobs.get(jobid)
        if held is None:
            raise ResourceError(f"job {jobid} holds no resources")
        if rs is None:
            part = held
        else:
            if rs.topology is not self.topo:
                raise ResourceError(f"job {jobid}: the resource set belongs to another graph")
            rs = with_twins(rs)
            extra = rs - held
            if extra:
                raise ResourceError(f"job {jobid}: cannot release resources it does not hold: {extra!r}")
            part = rs
            rest = held - part
            leaf_ranks = rest.by_rank(self.topo.rlite_types)
            kept = IdSet(r for r, d in leaf_ranks.items() if d)
            gone = IdSet.from_mask(rs.ranks.mask & ~kept.mask)
            if gone:
                part = part | rest.restrict(gone)
            rest = held - part
            if not rest.ranks:
                part = held  # nothing left on any rank: rank-less items go too
        remaining = None if part is held else held - part
        if remaining:
            self._jobs[jobid] = remaining
        else:
            del self._jobs[jobid]
        if part is held and self._unfolded.get(jobid) is held:
            del self._unfolded[jobid]  # allocated since the last fold: nothing to take out
        else:
            self._fold()
            self._alloc_cont &= ~part.container_mask
            for v, tm in part.leaf_masks.items():
                d = self._alloc_pools[v]
                for t, m in tm.items():
                    d[t] &= ~m
                    if not d[t]:
                        del d[t]
                if not d:
                    del self._alloc_pools[v]
        self._version += 1
        bad = self._down | self._drained | self._shrunk
        if bad:  # what is freed on a down, drained or shrunk rank stays unavailable
            rank = self.topo.rank
            cont = 0
            for v in IdSet.from_mask(part.container_mask):
                r = rank[v]
                if r < 0 or not bad >> r & 1:
                    cont |= 1 << v
            pools = {v: tm for v, tm in part.leaf_masks.items() if (r := rank[v]) < 0 or not bad >> r & 1}
            self._avail.give(cont, pools)
        else:
            bits = self._flat_bits(part)
            self._avail.give(part.container_mask, _NO_LEAVES if bits is not None else part.leaf_masks, bits)
        return part

    # -- rank state ------------------------------------------------------------
    def _rank_mask(self, ranks: IdSet | str | int) -> int:
        ids = IdSet.of(ranks)
        unknown = ids.mask & ~self.topo.ranks_mask
        if unknown:
            raise ResourceError(f"ranks {IdSet.from_mask(unknown)} are not in the resource graph")
        return ids.mask

    def set_up(self, ranks: IdSet | str | int) -> bool:
        """Mark ``ranks`` up; False when every one of them already was."""
        m = self._rank_mask(ranks)
        if not self._down & m:
            return False
        self._down &= ~m
        self._refresh_ranks(m)
        return True

    def set_down(self, ranks: IdSet | str | int) -> bool:
        """Mark ``ranks`` down: no new allocation lands there; running jobs
        keep what they hold.  False when every one of them already was."""
        m = self._rank_mask(ranks)
        if self._down & m == m:
            return False
        self._down |= m
        self._refresh_ranks(m)
        return True

    def drain(self, ranks: IdSet | str | int, reason: str = "") -> None:
        """Drain ``ranks``: like down for scheduling, with a reason kept until :meth:`undrain`."""
        m = self._rank_mask(ranks)
        self._drained |= m
        for r in IdSet.from_mask(m):
            self._drain_reason[r] = reason
        self._refresh_ranks(m)

    def undrain(self, ranks: IdSet | str | int) -> None:
        m = self._rank_mask(ranks)
        self._drained &= ~m
        for r in IdSet.from_mask(m):
            self._drain_reason.pop(r, None)
        self._refresh_ranks(m)

    def shrink(self, ranks: IdSet | str | int) -> None:
        """Remove ``ranks`` from the instance for good (RFC 28 shrink): ``update(shrink=ranks)``."""
        self.update(shrink=ranks)

    # -- model edits -------------------------------------------------------------
    def update(
        self,
        *,
        grow: Mapping[str, Any] | None = None,
        shrink: IdSet | str | int | None = None,
        properties: Mapping[int, Any] | None = None,
    ) -> IdSet:
        """Change the model and its compiled index together; return the ranks grown.

        This is the one way the model changes after it is built (see
        :mod:`fluxsched_py.resource.edit` for what each edit writes):

        * ``grow``: an RFC 20 R fragment of new ranks, added under the
          containment root, up and free.  The index is recompiled in place
          (the same :class:`Topology` object, every existing vertex at its
          index), so resource sets of running jobs stay valid;
        * ``shrink``: ranks removed for good; the index is patched (their
          availability is cleared);
        * ``properties``: ``{rank: names}`` replaces those ranks' properties;
          the index's per-rank properties are patched.

        Edits apply in that order; ``properties`` and ``shrink`` name ranks
        the graph had before the grow (a grown rank's properties come with
        its R).  A bad edit raises :class:`ResourceError` before anything
        changes.  Sets and planners made before a grow
        describe the graph before it (a driver rebuilds its planner).
        """
        added = IdSet()
        if shrink is not None:
            shrink_mask = self._rank_mask(shrink)
        if properties:
            self._rank_mask(IdSet(properties))
            check_properties(properties)
        if grow is not None:
            added = add_ranks(self.topo.model, grow, IdSet.from_mask(self.topo.ranks_mask | self._shrunk))
            self._recompile()
        if properties:
            set_rank_properties(self.topo.model, properties)
            now = self.topo.model.graph["rank_properties"]
            tprops = self.topo.properties
            for r in properties:
                if r in now:
                    tprops[r] = frozenset(now[r])
                else:
                    tprops.pop(r, None)
            self._version += 1
        if shrink is not None:
            mark_shrunk(self.topo.model, IdSet.from_mask(shrink_mask))
            self._shrunk |= shrink_mask
            self._refresh_ranks(shrink_mask)
        return added

    def _recompile(self) -> None:
        """Recompile the index from the model in place, after vertices were added after the old ones."""
        topo = self.topo
        n0 = topo.n
        new = Topology.compile(self.topo.model, topo.subsystem)
        if new.key[:n0] != topo.key:
            raise ResourceError("the model changed in a way that moves existing vertices of the index")
        vars(topo).clear()  # lazy caches too (e.g. Topology.leaf_switches)
        vars(topo).update(vars(new))  # the same object: every ResourceSet of this graph stays valid
        n = topo.n
        av = self._avail
        loc = av.loc + [dict(topo.pools[v]) for v in range(n0, n)]
        fresh = Availability(topo, av.cont | (((1 << n) - 1) & ~((1 << n0) - 1)), loc)
        for slot in Availability.__slots__:
            setattr(av, slot, getattr(fresh, slot))  # the flat free set too: laid out anew when asked
        self._layout = None
        self._all_static = ResourceSet(topo, (1 << n) - 1, {v: dict(topo.pools[v]) for v in topo.pool_vertices})
        self._version += 1

    # -- internals -------------------------------------------------------------
    def _fold(self) -> None:
        """Add the allocations made since the last fold to ``_alloc_pools``
        and ``_alloc_cont``, for a reader of them (:meth:`allocated`, a rank
        changing state, a running job at hello).

        Allocate and release do not update them vertex by vertex: a job that
        ends before anything reads them (every job of a replay) costs nothing
        there, and the release of one allocated since the last fold has
        nothing to take out (issue 15)."""
        unfolded = self._unfolded
        if not unfolded:
            return
        apools = self._alloc_pools
        cont = self._alloc_cont
        for rs in unfolded.values():
            cont |= rs.container_mask
            for v, tm in rs.leaf_masks.items():
                d = apools.get(v)
                if d is None:
                    apools[v] = dict(tm)
                else:
                    for t, m in tm.items():
                        d[t] = d.get(t, 0) | m
        self._alloc_cont = cont
        unfolded.clear()

    def _refresh_vertex(self, v: int, bad: int | None = None) -> None:
        """Recompute what is available at ``v`` itself (``bad``: the down,
        drained and shrunk ranks, when the caller has them)."""
        self._fold()
        topo = self.topo
        r = topo.rank[v]
        if bad is None:
            bad = self._down | self._drained | self._shrunk
        if r >= 0 and bad >> r & 1:
            self._avail.set_local(v, {}, False)
            return
        alloc = self._alloc_pools.get(v)
        if alloc:
            loc = {t: m & ~alloc.get(t, 0) for t, m in topo.pools[v].items()}
        else:
            loc = topo.pools[v]  # set_local copies it
        self._avail.set_local(v, loc, not (self._alloc_cont >> v & 1))

    def _refresh_ranks(self, mask: int) -> None:
        self._version += 1
        topo = self.topo
        for r in IdSet.from_mask(mask):
            v = topo.rank_root[r]
            for u in range(v, topo.end[v]):
                self._refresh_vertex(u)

    # -- output ----------------------------------------------------------------
    def to_rv1(self, with_jgf: bool = False) -> dict:
        """R of the whole instance, with the starttime/expiration/nslots the input R had."""
        d = self.rv1_defaults
        return self.all().to_rv1(
            self,
            starttime=d.get("starttime", 0.0),
            expiration=d.get("expiration", 0.0),
            nslots=d.get("nslots"),
            with_jgf=with_jgf,
        )

    def to_jgf(self, rs: ResourceSet | None = None) -> dict:
        """JGF of ``rs`` (default: the whole graph), one vertex per leaf as Fluxion writes it."""
        from .jgf import resourceset_to_jgf

        return resourceset_to_jgf(self, self.all() if rs is None else rs)

    def status_rv1(self) -> dict:
        """``{"all", "allocated", "down"}`` as R, for ``sched.resource-status``.

        ``down`` is every resource of the down ranks (allocated or not), as
        flux-core reports it; drained ranks are reported by the resource
        module, not here.
        """
        down = self._ranks_items(self._down & ~self._shrunk)
        return {
            "all": self.all().to_rv1(self),
            "allocated": self.allocated().to_rv1(self),
            "down": down.to_rv1(self),
        }

    def __repr__(self) -> str:
        t = self.topo
        return f"<ResourceGraph {t.name[0]}: {len(self.ranks)} ranks, {t.n} vertices, jobs={len(self._jobs)}>"
