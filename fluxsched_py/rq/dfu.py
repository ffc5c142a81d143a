"""A depth-first matcher that follows Fluxion's DFU traverser step by step.

Why a second matcher: resource-query's outputs name the exact vertices Fluxion
picks and print them in its traversal order, and reservations depend on which
vertices earlier jobs took.  To measure fluxsched-py against Fluxion's corpus
we need Fluxion's choices, so this module reimplements its algorithm (not its
code) on :class:`~fluxsched_py.rq.graph.RGraph`:

* **select** walks the containment tree.  A vertex whose type matches a
  jobspec resource consumes it (its ``with`` list is matched below); a vertex
  that matches nothing passes the request down only while nothing has matched
  yet ("pristine").  A ``slot`` matches at the first vertex whose children have
  every type the slot asks for.
* Every successful vertex offers itself to its parent as an *egroup* (score,
  available count).  A vertex that consumed a resource picks its best ``k``
  children per requested type (``choose_best_k``; high/low id first, node id
  first for ``*node*`` policies) and marks them; other vertices pass their
  descendants' offers up unchanged.
* **update** walks marked edges from the root, emits vertices in post-order
  (the ``simple`` writer's indentation is the depth), and books spans:
  exclusive vertices get ``needs`` units in their planner, every emitted vertex
  gets a job in its exclusivity checker.
* Time: a job occupies ``[at, at + duration)``; ``allocate_orelse_reserve``
  tries the current time, then every time a booked span ends, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .graph import RGraph, Vertex
from .jobspec import RSpec

__all__ = ["Policy", "Traverser", "Meta", "MatchError", "POLICIES"]

MATCH_MET = 0
MATCH_UNMET = -1


class MatchError(Exception):
    """The request is invalid for this graph (Fluxion's EINVAL)."""


@dataclass(frozen=True)
class Policy:
    high: bool = True
    node_centric: bool = False
    node_exclusive: bool = False
    stop_on_1: bool = False


POLICIES: dict[str, str] = {
    "first": "policy=high node_centric=true stop_on_1_matches=true",
    "firstnodex": "policy=high node_centric=true node_exclusive=true stop_on_1_matches=true",
    "high": "policy=high",
    "low": "policy=low",
    "lonode": "policy=low node_centric=true",
    "hinode": "policy=high node_centric=true",
    "lonodex": "policy=low node_centric=true node_exclusive=true",
    "hinodex": "policy=high node_centric=true node_exclusive=true",
    # approximations: these use performance classes / interval scoring in Fluxion
    "locality": "policy=low",
    "variation": "policy=low",
}


def parse_policy(name: str) -> Policy:
    """Turn a policy name or ``key=value`` string into a :class:`Policy`."""
    spec = POLICIES.get(name, name)
    if "=" not in spec:
        raise ValueError(f"unknown match policy '{name}'")
    opts: dict[str, str] = {}
    for tok in spec.split():
        if "=" not in tok:
            raise ValueError(f"invalid policy option: {tok}")
        k, v = tok.split("=", 1)
        if k not in ("policy", "node_centric", "stop_on_1_matches", "node_exclusive"):
            raise ValueError(f"invalid policy option: {k}")
        if k == "policy" and v not in ("high", "low"):
            raise ValueError("policy key within custom policy accepts only low or high")
        if k != "policy" and v not in ("true", "false"):
            raise ValueError(f"Policy option {k} requires true or false, got {v}")
        opts[k] = v
    if "policy" not in opts:
        raise ValueError(f"unknown match policy '{name}'")
    return Policy(high=opts["policy"] == "high", node_centric=opts.get("node_centric") == "true",
                  node_exclusive=opts.get("node_exclusive") == "true",
                  stop_on_1=opts.get("stop_on_1_matches") == "true")


@dataclass
class Meta:
    jobid: int
    at: int
    duration: int
    now: int = 0
    alloc: bool = True  # an allocation "now" (vs a reservation / satisfiability probe)
    sat: bool = False  # satisfiability probe: ignore all bookings and status


@dataclass
class Edge:
    v: Vertex
    count: int
    needs: int
    x: bool


@dataclass
class EGroup:
    score: int
    count: int
    edges: list[Edge]
    x: bool = False
    root: bool = False
    needs: int = 0


@dataclass
class Evals:
    groups: list[EGroup] = field(default_factory=list)
    qual: int = 0
    total: int = 0
    best_k: int = 0
    best_i: int = 0

    def add(self, eg: EGroup) -> None:
        self.total += eg.count
        if eg.score > 0 or eg.root or True:
            self.qual += eg.count
        self.groups.append(eg)


class Scoring:
    def __init__(self) -> None:
        self.types: dict[str, Evals] = {}
        self.hier = False
        self.overall = -1
        self.avail = 0

    def ev(self, t: str) -> Evals:
        e = self.types.get(t)
        if e is None:
            e = self.types[t] = Evals()
        return e

    def qual(self, t: str) -> int:
        e = self.types.get(t)
        return e.qual if e else 0

    def total(self, t: str) -> int:
        e = self.types.get(t)
        return e.total if e else 0

    def merge(self, o: Scoring) -> None:
        for t, e in o.types.items():
            mine = self.ev(t)
            mine.qual += e.qual
            mine.total += e.total
            mine.groups.extend(e.groups)

    def choose_best_k(self, t: str, k: int, high: bool) -> bool:
        e = self.ev(t)
        if k == 0 or k > e.qual:
            return False
        e.groups.sort(key=lambda g: g.score, reverse=high)
        left, i = k, 0
        while left > 0:
            g = e.groups[i]
            g.needs = min(left, g.count)
            left -= g.count
            i += 1
        e.best_k, e.best_i = k, i
        self.hier = True
        return True


def _avail(v: Vertex, meta: Meta) -> int:
    if meta.sat:
        return v.size
    t0, t1 = meta.at, meta.at + meta.duration
    spans = [s for s in v.plans if s[0] < t1 and s[1] > t0]
    if not spans:
        return v.size
    points = {t0} | {s[0] for s in spans if s[0] > t0}
    used = max(sum(s[2] for s in spans if s[0] <= p < s[1]) for p in points)
    return max(v.size - used, 0)


def _x_busy(v: Vertex, meta: Meta) -> bool:
    if meta.sat:
        return False
    if meta.at == meta.now and meta.alloc and any(not s[4] for s in v.plans):
        return True
    t0, t1 = meta.at, meta.at + meta.duration
    return any(s[0] < t1 and s[1] > t0 for s in v.xspans)


class Traverser:
    """Fluxion-style DFU matching and booking on one :class:`RGraph`."""

    def __init__(self, graph: RGraph, policy: Policy) -> None:
        self.g = graph
        self.p = policy
        self.ml_scores = 0
        self.ml_factor: dict[str, int] = {}
        self.weights: dict[int, int] = {}
        self.marks: dict[int | None, list[Edge]] = {}
        self.exclusive_types: set[str] = {"node"} if policy.node_exclusive else set()
        self.err = ""

    # ------------------------------------------------------------ matching
    def _test(self, u: Vertex, resources: list[RSpec], pristine: bool):
        """Fluxion's test(): (kind, next resources, nslots, pristine-for-children)."""
        slot: RSpec | None = None
        match: RSpec | None = None
        matched = False
        nslots = 0
        for r in resources:
            if u.type == r.type:
                if matched:
                    raise MatchError(f"siblings in jobspec request same resource type: {u.type}")
                match = r
                for c in r.with_:
                    if c.type == "slot":
                        slot, nslots = c, c.effective_max
                matched = True
            elif r.type == "slot":
                if matched:
                    raise MatchError(f"siblings in jobspec request same resource type: {u.type}")
                slot, nslots = r, r.effective_max
                matched = True
        if slot is not None and all(any(ch.type == c.type for ch in u.children) for c in slot.with_):
            return "slot", slot.with_, nslots, False
        if match is not None:
            return "resource", match.with_, 0, False
        return ("pristine" if pristine else "none"), resources, 0, pristine

    def _prune(self, u: Vertex, resources: list[RSpec], x_in: bool, meta: Meta) -> bool:
        if not meta.sat and not u.up:
            return True
        if _avail(u, meta) == 0:
            return True
        for r in resources:
            if r.type != u.type:
                continue
            if x_in and r.exclusive is False:
                raise MatchError(f"by_excl: exclusivity conflicts at jobspec={r.label} : vertex={u.name}")
            if (x_in or r.exclusive is True) and _x_busy(u, meta):
                return True
        return False

    def _children(self, u: Vertex) -> list[Vertex]:
        if not self.p.stop_on_1:
            return u.children
        return sorted(u.children, key=lambda c: (self.weights.get(c.uniq_id, 0), c.uniq_id), reverse=True)

    def _explore(self, meta: Meta, u: Vertex, resources: list[RSpec], pristine: bool, x: bool,
                 dfu: Scoring, multiplier: int = 1) -> None:
        shares: dict[str, list[int]] = {}
        if self.p.stop_on_1:
            shares = {r.type: [r.effective_max, 0, 0, 0] for r in resources}  # per, prev_total, cur, n
        for c in self._children(u):
            if self.p.stop_on_1 and c.type in shares and shares[c.type][3] >= multiplier:
                continue
            res = self._dom_dfv(meta, c, resources, pristine, x, dfu)
            if res is None:
                continue
            avail, score, x_out = res
            dfu.ev(c.type).add(EGroup(score, avail, [Edge(c, avail, avail, x_out)], x_out))
            if self.p.stop_on_1:
                for t, tally in shares.items():
                    tot = dfu.total(t)
                    if tot <= tally[1]:
                        continue
                    tally[2] += tot - tally[1]
                    tally[1] = tot
                    while tally[0] > 0 and tally[2] >= tally[0]:
                        tally[2] -= tally[0]
                        tally[3] += 1
                        if tally[0] <= 0:
                            break
                if all(shares[r.type][3] >= multiplier for r in resources):
                    break

    def _dom_slot(self, meta: Meta, u: Vertex, shape: list[RSpec], nslots: int, pristine: bool,
                  dfu: Scoring) -> None:
        ds = Scoring()
        self._explore(meta, u, shape, pristine, True, ds, nslots)
        for e in ds.types.values():
            e.groups.sort(key=lambda g: g.score, reverse=self.p.high)
        qual = 1 << 60
        for el in shape:
            count = el.calc_count(ds.qual(el.type))
            fit = 0
            if count:
                cur = 0
                for g in ds.ev(el.type).groups:
                    cur += g.count
                    if cur >= count:
                        fit += 1
                        cur = 0
            qual = min(qual, fit)
        iters = {el.type: 0 for el in shape}
        slots: list[EGroup] = []
        for _ in range(qual if qual < (1 << 60) else 0):
            edges: list[Edge] = []
            score = MATCH_MET
            for el in shape:
                count = el.calc_count(ds.qual(el.type))
                j = 0
                groups = ds.ev(el.type).groups
                while j < count:
                    i = iters[el.type]
                    if i >= len(groups):
                        return
                    iters[el.type] = i + 1
                    g = groups[i]
                    edges.append(Edge(g.edges[0].v, g.count, g.count, True))
                    score += g.score
                    j += g.count
            slots.append(EGroup(score, 1, edges, True))
        for s in slots:
            dfu.ev("slot").add(s)

    def _dom_dfv(self, meta: Meta, u: Vertex, resources: list[RSpec], pristine: bool, x_parent: bool,
                 to_parent: Scoring) -> tuple[int, int, bool] | None:
        x_in = x_parent or any(r.type == u.type and r.exclusive is True for r in resources)
        kind, nxt, nslots, check_pres = self._test(u, resources, pristine)
        if kind == "none":
            return None
        if self._prune(u, resources, x_in, meta):
            return None
        if u.type in self.ml_factor_types:
            f = (u.id + 2) * 10000 + abs(u.uniq_id % 10000 - 1)
            self.ml_factor[u.type] = f
            self.ml_scores += f
        dfu = Scoring()
        if kind == "slot":
            self._dom_slot(meta, u, nxt, nslots, check_pres, dfu)
        else:
            self._explore(meta, u, nxt, check_pres, x_in, dfu)
        avail = _avail(u, meta)
        # dom_finish_vtx
        score = MATCH_MET
        for r in resources:
            if r.type != u.type:
                continue
            for c in r.with_:
                count = c.calc_count(dfu.qual(c.type))
                if count == 0:
                    score = MATCH_UNMET
                    break
                dfu.choose_best_k(c.type, count, self.p.high)
        if u.type in self.ml_factor_types:
            self.ml_scores -= self.ml_factor[u.type]
        if score != MATCH_MET:
            return None
        overall = score + self.ml_scores + u.id + 1
        # resolve
        if dfu.hier:
            self._enforce(dfu, owner=u.uniq_id)
        else:
            to_parent.merge(dfu)
        return avail, overall, x_in

    def _enforce(self, dfu: Scoring, owner: int | None) -> None:
        out = self.marks.setdefault(owner, [])
        for e in dfu.types.values():
            if not e.best_k:
                continue
            for g in e.groups[: e.best_i]:
                if g.root:
                    continue
                out.extend(g.edges)

    @property
    def ml_factor_types(self) -> tuple[str, ...]:
        return ("node",) if self.p.node_centric else ()

    def select(self, resources: list[RSpec], meta: Meta) -> bool:
        """One matching pass at ``meta.at``; on success ``self.marks`` holds the choice."""
        self.marks = {}
        self.ml_scores = 0
        root = self.g.root
        assert root is not None
        dfu = Scoring()
        res = self._dom_dfv(meta, root, resources, True, False, dfu)
        if res is None:
            return False
        avail, score, x_in = res
        dfu.ev(root.type).add(EGroup(score, avail, [Edge(root, avail, avail, x_in)], x_in, root=True))
        for r in resources:
            count = r.calc_count(dfu.qual(r.type))
            if count == 0:
                return False
            dfu.choose_best_k(r.type, count, self.p.high)
        needs = 1
        for r in resources:
            if r.type == root.type:
                needs = r.calc_count(avail)
        self._enforce(dfu, owner=None)
        self.root_mark = Edge(root, needs, needs, x_in)
        return True

    # --------------------------------------------------------------- update
    def chosen(self) -> dict[int, Edge]:
        """Vertices selected by the last successful :meth:`select` (uniq_id -> edge)."""
        chosen: dict[int, Edge] = {}
        root = self.g.root
        stack = list(self.marks.get(None, [])) + list(self.marks.get(root.uniq_id if root else -1, []))
        while stack:
            e = stack.pop()
            if e.v.uniq_id in chosen:
                continue
            chosen[e.v.uniq_id] = e
            stack.extend(self.marks.get(e.v.uniq_id, []))
        return chosen

    def update(self, meta: Meta, reserved: bool, book: bool = True) -> list[tuple[int, Vertex, int, bool]]:
        """Book the last selection for ``meta.jobid``; return the emitted (level, vertex, needs, x) list."""
        chosen = self.chosen()
        root = self.g.root
        assert root is not None
        chosen[root.uniq_id] = self.root_mark
        # every ancestor of a chosen vertex is on the path (needs = its size, shared)
        onpath: set[int] = set(chosen)
        for uid in list(chosen):
            v = self.g.vertices[uid].parent
            while v is not None and v.uniq_id not in onpath:
                onpath.add(v.uniq_id)
                v = v.parent
        out: list[tuple[int, Vertex, int, bool]] = []
        end = meta.at + meta.duration

        def visit(v: Vertex, level: int, needs: int, x: bool, mod: bool) -> None:
            mod = mod or v.type in self.exclusive_types
            x = x or mod
            for c in v.children:
                if mod:
                    visit(c, level + 1, c.size, True, True)
                elif c.uniq_id in onpath:
                    e = chosen.get(c.uniq_id)
                    if e is not None:
                        visit(c, level + 1, e.needs, e.x, False)
                    else:
                        visit(c, level + 1, c.size, False, False)
            if book:
                if x:
                    v.plans.append((meta.at, end, needs, meta.jobid, reserved))
                v.xspans.append((meta.at, end, meta.jobid))
            out.append((level, v, needs, x))

        visit(root, 1, self.root_mark.needs, self.root_mark.x, False)
        if book and self.p.stop_on_1:
            self._reweight(meta)
        return out

    def _reweight(self, meta: Meta) -> None:
        # Fluxion orders children by available cores "now" once they have been used
        probe = Meta(0, meta.now, 1)
        for v in self.g.vertices:
            if v.children and any(s[2] == meta.jobid for s in v.xspans):
                self.weights[v.uniq_id] = sum(_avail(c, probe) for c in v.walk() if c.type == "core")

    def cancel(self, jobid: int) -> None:
        for v in self.g.vertices:
            if v.plans:
                v.plans = [s for s in v.plans if s[3] != jobid]
            if v.xspans:
                v.xspans = [s for s in v.xspans if s[2] != jobid]

    def span_ends(self, after: int) -> list[int]:
        ends = {s[1] for v in self.g.vertices for s in v.plans if s[1] > after}
        return sorted(ends)
