"""Depth-first matching of a request tree against an availability view.

One :class:`_Search` serves one ``match`` call.  It never changes the graph:
what it tentatively takes goes into an overlay (taken pool ids, wholly taken
containers, per-subtree taken units) with an undo log, so a candidate that
fails half-way is rolled back exactly.

Semantics, per jobspec vertex:

``slot``
    a group placed within one node (or within the scope when the scope is
    already at or below a node, or when the graph has no nodes).  Slots are
    packed: the matcher fills a node with as many slots as it can before it
    moves to the next one.  Everything under a slot is exclusive unless the
    jobspec says ``exclusive: false``.
container types (node, socket, rack, any type the graph has as a vertex)
    *exclusive* (explicitly, under a slot, or a bare container with nothing
    under it, or a node under a ``*nodex`` policy) means the container and
    its whole subtree go to the job, and it must be wholly free;
    *shared* means the container is only a place: its children requests are
    matched inside it, and other jobs may use the rest.
leaf types (core, gpu, memory, any pooled type)
    taken by id from the pools below the scope.  A leaf of size ``s`` (e.g.
    2 GB of memory) counts ``s`` units; a count of ``n`` units takes whole
    leaves until ``n`` is reached.
counts
    every count is a range; the largest allowed count that fits wins
    (``Count.candidates``).  For containers and slots the matcher gathers up
    to the maximum and then keeps the largest allowed number.
constraints (RFC 31)
    evaluated at each rank's top vertex (the node) on rank, host name and
    properties; a failing node's subtree is skipped.
slot hosts and alternatives
    with ``Policy.slot_host="children"`` a slot lies within the top-most
    vertex holding its types directly (:meth:`_Search.slot_hosts`); with
    ``Policy.flexible`` sibling slots are alternatives
    (:meth:`_Search.sat_or_slots`); top-level slots above the nodes are
    ranked across hosts (:mod:`.slotrank`).  These are Fluxion's semantics,
    used by ``fluxsched-py match`` (which prints what :mod:`.shown` names).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

from ..ids import IdSet
from ..jobspec.request import Request, ResourceRequest
from ..resource.resourceset import ResourceSet, with_twins
from ..resource.state import Availability
from ..resource.topology import Topology
from .policy import Policy
from .slotrank import rerank

__all__ = ["search", "MatchResult", "request_needs"]

INDEX_FANOUT = 8  #: children counts from which :attr:`Availability.have` is walked (:meth:`_Search.kids`)


@dataclass(frozen=True, slots=True)
class MatchResult:
    """A match: the resources and the number of slots placed."""

    resources: ResourceSet
    nslots: int
    #: containers taken whole, each with the requests that were matched inside it (``()`` for a bare
    #: container, one the jobspec marks ``exclusive: true``, or a whole node under a ``*nodex`` policy)
    wholes: tuple[tuple[int, tuple[ResourceRequest, ...]], ...] = ()
    #: leaves the request named explicitly: ``{vertex: {type: id mask}}``
    leaves: dict[int, dict[str, int]] | None = None


def request_needs(reqs: tuple[ResourceRequest, ...], topo: Topology, flexible: bool = False) -> dict[str, int]:
    """Minimum leaf units of each pooled type one instance of ``reqs`` needs (for pruning).

    With ``flexible``, sibling slots are alternatives: what they need is the
    least any one of them needs.
    """
    if flexible and len(reqs) > 1 and all(r.type == "slot" for r in reqs):
        per = [request_needs((r,), topo, True) for r in reqs]
        return {t: m for t in set().union(*per) if (m := min(p.get(t, 0) for p in per))}
    out: dict[str, int] = {}
    for r in reqs:
        n = r.count.min if r.count.values is None else min(r.count.values)
        if r.type in topo.pool_types and not r.with_:
            out[r.type] = out.get(r.type, 0) + n
        else:
            for t, x in request_needs(r.with_, topo, flexible).items():
                out[t] = out.get(t, 0) + n * x
    return out


class _Search:
    def __init__(self, topo: Topology, av: Availability, policy: Policy, request: Request, hostnames, properties):
        self.topo = topo
        self.av = av
        self.policy = policy
        self.constraint = request.constraints
        self.top_requests = request.resources
        self.hostnames = hostnames
        self.properties = properties
        self.tpool: dict[tuple[int, str], int] = {}
        self.tunits: dict[int, dict[str, int]] = {}
        self.touched: dict[int, int] = {}
        self.dead: dict[int, tuple[ResourceRequest, ...]] = {}
        self.log: list[tuple] = []
        self.node_ok_cache: dict[int, bool] = {}
        self.needs_cache: dict[int, dict[str, int]] = {}
        self.fit_memo: dict[tuple[int, int], int] = {}  # slots placed, or -1: no fit
        self.nslots = 0
        self.high = policy.high_ids

    # -- overlay ---------------------------------------------------------------
    def units(self, v: int, t: str) -> int:
        x = self.av.units[v].get(t, 0)
        d = self.tunits.get(v)
        return x - d.get(t, 0) if d else x

    def whole_free(self, v: int) -> bool:
        return self.av.busy[v] == 0 and v not in self.touched

    def _bump(self, v: int, units: dict[str, int], sign: int) -> None:
        parent = self.topo.parent
        tunits, touched = self.tunits, self.touched
        a = v
        while a >= 0:
            d = tunits.get(a)
            if d is None:
                d = tunits[a] = {}
            for t, x in units.items():
                d[t] = d.get(t, 0) + sign * x
            c = touched.get(a, 0) + sign
            if c:
                touched[a] = c
            else:
                del touched[a]
            a = parent[a]

    def take_pool(self, v: int, t: str, mask: int) -> None:
        units = mask.bit_count() * self.topo.pool_info[(v, t)][0]
        key = (v, t)
        self.tpool[key] = self.tpool.get(key, 0) | mask
        self._bump(v, {t: units}, 1)
        self.log.append((0, v, t, mask, units))

    def take_whole(self, c: int, with_: tuple[ResourceRequest, ...] = ()) -> None:
        self.dead[c] = with_
        self._bump(c, self.av.units[c], 1)
        self.log.append((1, c))

    def rollback(self, mark: int) -> None:
        log = self.log
        while len(log) > mark:
            op = log.pop()
            if op[0] == 0:
                _, v, t, mask, units = op
                key = (v, t)
                m = self.tpool[key] & ~mask
                if m:
                    self.tpool[key] = m
                else:
                    del self.tpool[key]
                self._bump(v, {t: units}, -1)
            elif op[0] == 1:
                c = op[1]
                del self.dead[c]
                self._bump(c, self.av.units[c], -1)
            else:
                self.nslots -= op[1]

    def add_slots(self, k: int) -> None:
        if k:
            self.nslots += k
            self.log.append((2, k))

    # -- traversal helpers -----------------------------------------------------
    def ordered(self, children: tuple[int, ...]) -> Iterator[int] | tuple[int, ...]:
        order = self.policy.order
        if order == "low":
            return children
        if order == "high":
            return reversed(children)
        units = self.units
        if order == "worst":
            return sorted(children, key=lambda c: (-units(c, "core"), c))
        return sorted(children, key=lambda c: (units(c, "core"), c), reverse=True)

    def kids(self, v: int, needs: dict[str, int]) -> Iterator[int]:
        """The children of ``v`` in policy order, but those that have none of a
        type ``needs`` asks for (:attr:`Availability.have`): they cannot fit,
        and on a machine that is mostly full most nodes are such children."""
        ch = self.topo.children[v]
        if len(ch) < INDEX_FANOUT or not needs:
            return iter(self.ordered(ch))
        have = self.av.have[v]
        every = (1 << len(ch)) - 1
        m = every
        for t, x in needs.items():
            if x > 0:
                m &= have.get(t, 0)
        if m == every:
            return iter(self.ordered(ch))
        order = self.policy.order
        if order == "low":
            return _ascending(ch, m)
        if order == "high":
            return _descending(ch, m)
        return iter(self.ordered(tuple(_ascending(ch, m))))

    def node_ok(self, v: int) -> bool:
        """Constraint and node-exclusivity checks at a rank's top vertex (True elsewhere)."""
        topo = self.topo
        r = topo.rank[v]
        if r < 0 or (topo.parent[v] >= 0 and topo.rank[topo.parent[v]] == r):
            return True
        if self.constraint is not None:
            ok = self.node_ok_cache.get(v)
            if ok is None:
                ok = self.node_ok_cache[v] = self.constraint.matches(
                    r, self.hostnames.get(r), self.properties.get(r, frozenset())
                )
            if not ok:
                return False
        if self.policy.node_exclusive and v not in self.touched and self.av.busy[v] != 0:
            return False
        return True

    def fits(self, v: int, needs: dict[str, int]) -> bool:
        if v in self.dead:
            return False
        for t, x in needs.items():
            if self.units(v, t) < x:
                return False
        return True

    def spans_nodes(self, reqs: tuple[ResourceRequest, ...]) -> bool:
        """True when ``reqs`` ask for nodes or bigger containers (a slot of nodes is not within a node)."""
        upper = self.topo.upper_types
        return any(x.type in upper for r in reqs for x in r.walk())

    def needs(self, reqs: tuple[ResourceRequest, ...]) -> dict[str, int]:
        k = id(reqs)
        n = self.needs_cache.get(k)
        if n is None:
            n = self.needs_cache[k] = request_needs(reqs, self.topo, self.policy.flexible)
        return n

    def containers(self, scope: int, T: str, excl: bool, needs: dict[str, int], include_self: bool) -> Iterator[int]:
        """Candidate containers of type ``T`` under ``scope``, in policy order, pruned."""
        topo = self.topo
        vtype, children = topo.type, topo.children
        whole = self.av.whole
        if include_self and vtype[scope] == T:
            if self.node_ok(scope) and self.fits(scope, needs):
                yield scope
            return
        stack = [self.kids(scope, needs)]
        while stack:
            c = next(stack[-1], None)
            if c is None:
                stack.pop()
                continue
            if c in self.dead or not self.fits(c, needs):
                continue
            if excl and not whole[c].get(T):
                continue
            if not self.node_ok(c):
                continue
            if vtype[c] == T:
                yield c
                continue
            if children[c]:
                stack.append(self.kids(c, needs))

    # -- requests ----------------------------------------------------------------
    def sat_list(self, scope: int, reqs: tuple[ResourceRequest, ...], in_slot: bool, top: bool = False) -> bool:
        if self.policy.flexible and len(reqs) > 1 and any(r.type == "slot" for r in reqs):
            if not all(r.type == "slot" for r in reqs):
                return False  # slot alternatives next to a non-slot sibling
            return self.sat_or_slots(scope, reqs)
        mark = len(self.log)
        for r in reqs:
            if not self.sat_one(scope, r, in_slot, top):
                self.rollback(mark)
                return False
        return True

    def sat_one(self, scope: int, r: ResourceRequest, in_slot: bool, top: bool = False) -> bool:
        t = r.type
        topo = self.topo
        if t == "slot":
            return self.sat_slot(scope, r, top)
        if t in topo.pool_types and (t not in topo.container_types or self.units(scope, t) > 0):
            return self.sat_pool(scope, r)
        if t in topo.container_types:
            return self.sat_container(scope, r, in_slot, top)
        return False

    def _choose(self, r: ResourceRequest, marks: list[int], start: int) -> bool:
        """Keep the largest allowed count of the gathered instances; roll back the rest."""
        k = next(r.count.candidates(len(marks)), None)
        if k is None:
            self.rollback(start)
            return False
        if k < len(marks):
            self.rollback(marks[k])
        return True

    def slot_hosts(self, scope: int, types: tuple[frozenset[str], ...], needs: dict[str, int]) -> Iterator[int]:
        """Top-most vertices at or below ``scope`` directly holding every type of one of ``types``, pruned."""
        topo = self.topo
        ctypes, children = topo.child_types, topo.children
        stack = [iter((scope,))]
        while stack:
            c = next(stack[-1], None)
            if c is None:
                stack.pop()
                continue
            if c in self.dead or not self.fits(c, needs) or not self.node_ok(c):
                continue
            if any(t <= ctypes[c] for t in types):
                yield c
                continue
            if children[c]:
                stack.append(self.kids(c, needs))

    def hosts_for(self, scope: int, slots: tuple[ResourceRequest, ...], needs: dict[str, int]) -> Iterator[int]:
        topo = self.topo
        if self.policy.slot_host == "children":
            return self.slot_hosts(scope, tuple(frozenset(x.type for x in r.with_) for r in slots), needs)
        if topo.node_of[scope] >= 0 or not topo.has_nodes or any(self.spans_nodes(r.with_) for r in slots):
            return iter((scope,))
        return self.containers(scope, "node", False, needs, True)

    def sat_slot(self, scope: int, r: ResourceRequest, top: bool = False) -> bool:
        start = len(self.log)
        maxn = r.count.max if r.count.values is None else max(r.count.values)
        needs = self.needs(r.with_)
        marks: list[int] = []
        ranked = (
            top
            and maxn is not None
            and self.policy.slot_host == "children"
            and self.policy.order in ("high", "low")
            and any(r is x for x in self.top_requests)
        )
        per_host: list[tuple[int, list[int], int]] = []
        for h in self.hosts_for(scope, (r,), needs):
            mine: list[int] = []
            while maxn is None or len(mine) < maxn and (ranked or len(marks) < maxn):
                mark = len(self.log)
                if not self.place_slot(h, r.with_):
                    break
                mine.append(mark)
            marks.extend(mine)
            if mine and self.topo.node_of[h] < 0:
                per_host.append((h, mine, len(self.log)))
            elif mine:
                ranked = False  # hosts at or inside nodes: filled one by one, as Fluxion's node-level slots are
            if maxn is not None and len(marks) >= maxn and not ranked:
                break
        if ranked and len(per_host) > 1:
            marks = rerank(self, start, per_host, maxn, r.with_)
        if not self._choose(r, marks, start):
            return False
        self.add_slots(next(r.count.candidates(len(marks))))
        return True

    def sat_or_slots(self, scope: int, alts: tuple[ResourceRequest, ...]) -> bool:
        """Slots of any of the shapes ``alts`` (``Policy.flexible``), as many as the last one's count."""
        want = alts[-1].count
        start = len(self.log)
        maxn = want.max if want.values is None else max(want.values)
        per = [self.needs(a.with_) for a in alts]
        needs = {t: min(p.get(t, 0) for p in per) for t in set().union(*per)}
        marks: list[int] = []
        for h in self.hosts_for(scope, alts, needs):
            while maxn is None or len(marks) < maxn:
                mark = len(self.log)
                placed = False
                for i in self.or_order(h, alts):
                    if self.place_slot(h, alts[i].with_):
                        placed = True
                        break
                if not placed:
                    break
                marks.append(mark)
            if maxn is not None and len(marks) >= maxn:
                break
        k = next(want.candidates(len(marks)), None)
        if k is None:
            self.rollback(start)
            return False
        if k < len(marks):
            self.rollback(marks[k])
        self.add_slots(k)
        return True

    def or_order(self, h: int, alts: tuple[ResourceRequest, ...]) -> list[int]:
        """Alternatives to try at host ``h``: first the one that starts a choice fitting the most slots."""
        counts = {}
        for a in alts:
            for x in a.with_:
                if x.type not in counts:
                    counts[x.type] = (
                        self.units(h, x.type) if x.type in self.topo.pool_types else self.av.whole[h].get(x.type, 0)
                    )
        types = tuple(sorted(counts))
        memo: dict[tuple[int, ...], tuple[int, int]] = {}

        def best(state: tuple[int, ...]) -> tuple[int, int]:
            hit = memo.get(state)
            if hit is not None:
                return hit
            if len(memo) > 100_000:
                return (0, -1)
            out = (0, -1)
            for i, a in enumerate(alts):
                nxt = list(state)
                ok = True
                for x in a.with_:
                    j = types.index(x.type)
                    n = next(x.count.candidates(nxt[j]), None)
                    if not n:
                        ok = False
                        break
                    nxt[j] -= n
                if ok:
                    score = best(tuple(nxt))[0] + 1
                    if score > out[0]:
                        out = (score, i)
            memo[state] = out
            return out

        first = best(tuple(counts[t] for t in types))[1]
        rest = [i for i in range(len(alts)) if i != first]
        return [first, *rest] if first >= 0 else rest

    def place_slot(self, h: int, reqs: tuple[ResourceRequest, ...]) -> bool:
        if self.policy.locality:
            needs = self.needs(reqs)
            for c in self.kids(h, needs):
                if self.fits(c, needs) and self.sat_list(c, reqs, True):
                    return True
        return self.sat_list(h, reqs, True)

    def sat_container(self, scope: int, r: ResourceRequest, in_slot: bool, top: bool) -> bool:
        T = r.type
        excl = r.exclusive if r.exclusive is not None else in_slot
        if not r.with_ or (self.policy.node_exclusive and T == "node"):
            excl = True
        start = len(self.log)
        maxn = r.count.max if r.count.values is None else max(r.count.values)
        needs = self.needs(r.with_)
        marks: list[int] = []
        memo_ok = self.constraint is None
        for c in self.containers(scope, T, excl, needs, top):
            mark = len(self.log)
            if excl:
                if not self.whole_free(c):
                    continue
                slots = 0
                if r.with_:
                    # a wholly free container fits or not by its shape alone: memoize per shape
                    memo = memo_ok or self.topo.node_of[c] >= 0
                    key = (self.topo.sig[c], id(r.with_))
                    fit = self.fit_memo.get(key) if memo else None
                    if fit is None:
                        before = self.nslots
                        fit = self.nslots - before if self.sat_list(c, r.with_, True) else -1
                        self.rollback(mark)
                        if memo:
                            self.fit_memo[key] = fit
                    if fit < 0:
                        continue
                    slots = fit
                # a container the jobspec marks exclusive names its whole subtree (what resource-query prints)
                self.take_whole(c, () if r.exclusive else r.with_)
                self.add_slots(slots)
            else:
                if not self.sat_list(c, r.with_, in_slot):
                    continue
            marks.append(mark)
            if maxn is not None and len(marks) >= maxn:
                break
        return self._choose(r, marks, start)

    def sat_pool(self, scope: int, r: ResourceRequest) -> bool:
        if r.with_:
            return False
        t = r.type
        avail = self.units(scope, t)
        for n in r.count.candidates(avail):
            if n == 0:
                return True
            if self.take_units(scope, t, n):
                return True
        return False

    def take_units(self, scope: int, t: str, n: int) -> bool:
        """Take ``n`` units of leaf type ``t`` below ``scope`` in policy order, or nothing."""
        topo = self.topo
        mark = len(self.log)
        av_loc = self.av.loc
        remaining = n
        need = {t: 1}
        stack = [iter((scope,))]
        while stack and remaining > 0:
            v = next(stack[-1], None)
            if v is None:
                stack.pop()
                continue
            if v in self.dead or self.units(v, t) <= 0:
                continue
            if v != scope and not self.node_ok(v):
                continue
            pm = av_loc[v].get(t)
            if pm:
                free = pm & ~self.tpool.get((v, t), 0)
                if free:
                    size = topo.pool_info[(v, t)][0]
                    want = -(-remaining // size)
                    ids = IdSet.from_mask(free)
                    pick = ids.highest(want) if self.high else ids.lowest(want)
                    self.take_pool(v, t, pick.mask)
                    remaining -= len(pick) * size
                    if remaining <= 0:
                        break
            if topo.children[v]:
                stack.append(self.kids(v, need))
        if remaining > 0:
            self.rollback(mark)
            return False
        return True

    # -- result ------------------------------------------------------------------
    def result(self) -> ResourceSet:
        topo = self.topo
        pools: dict[int, dict[str, int]] = {}
        for (v, t), m in self.tpool.items():
            pools.setdefault(v, {})[t] = m
        cont = 0
        wholes = dict(self.dead)
        if self.policy.node_exclusive:
            for v in self.touched:
                if topo.type[v] == "node" or (topo.rank[v] >= 0 and topo.rank_root.get(topo.rank[v]) == v):
                    wholes[v] = ()
        pv = topo.pool_vertices
        for c in wholes:
            cont |= topo.subtree_mask(c)
            i = bisect_left(pv, c)
            end = topo.end[c]
            while i < len(pv) and pv[i] < end:
                u = pv[i]
                pools[u] = dict(self.av.loc[u])
                i += 1
        return with_twins(ResourceSet(topo, cont & self.av.cont, {v: d for v, d in pools.items() if d}))

    def wholes(self) -> tuple[tuple[int, tuple[ResourceRequest, ...]], ...]:
        out = dict(self.dead)
        if self.policy.node_exclusive:
            topo = self.topo
            for v in self.touched:
                if topo.type[v] == "node" or (topo.rank[v] >= 0 and topo.rank_root.get(topo.rank[v]) == v):
                    out[v] = ()
        return tuple(sorted(out.items()))

    def explicit_leaves(self) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for (v, t), m in self.tpool.items():
            out.setdefault(v, {})[t] = m
        return out


def _ascending(ch: tuple[int, ...], m: int) -> Iterator[int]:
    """``ch[i]`` for each set bit ``i`` of ``m``, lowest first."""
    while m:
        low = m & -m
        yield ch[low.bit_length() - 1]
        m ^= low


def _descending(ch: tuple[int, ...], m: int) -> Iterator[int]:
    while m:
        i = m.bit_length() - 1
        yield ch[i]
        m ^= 1 << i


def search(
    topo: Topology, av: Availability, policy: Policy, request: Request, hostnames: dict, properties: dict
) -> MatchResult | None:
    """Match ``request`` against ``av``; None when it does not fit."""
    s = _Search(topo, av, policy, request, hostnames, properties)
    if not request.resources:
        return None
    if not s.sat_list(0, request.resources, False, top=True):
        return None
    return MatchResult(s.result(), s.nslots, s.wholes(), s.explicit_leaves())
