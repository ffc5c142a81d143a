"""A tiny node-only stand-in for fluxsched_py.resource / fluxsched_py.match.

Used only by the engine/planner/policy tests, and only while the real
resource graph and matcher are not importable (they are developed on another
branch).  Nodes are whole and exclusive; a set is a bitmask of ranks; the
matcher takes the lowest-numbered free nodes ("first"/"low").  That is
exactly the textbook machine model, which is what these tests need.
"""

from __future__ import annotations

import math

from fluxsched_py.ids import IdSet


class NodeSet:
    __slots__ = ("mask",)

    def __init__(self, mask: int = 0) -> None:
        self.mask = mask

    def __or__(self, o):
        return NodeSet(self.mask | o.mask)

    def __and__(self, o):
        return NodeSet(self.mask & o.mask)

    def __sub__(self, o):
        return NodeSet(self.mask & ~o.mask)

    def __eq__(self, o):
        return isinstance(o, NodeSet) and o.mask == self.mask

    def __hash__(self):
        return hash(self.mask)

    def __bool__(self):
        return self.mask != 0

    @property
    def ranks(self) -> IdSet:
        return IdSet.from_mask(self.mask)

    def count(self, type: str) -> int:
        return self.mask.bit_count() if type in ("node", "core") else 0

    def restrict(self, ranks: IdSet) -> NodeSet:
        return NodeSet(self.mask & ranks.mask)

    def to_rv1(self, g, starttime=0.0, expiration=0.0, nslots=None):
        return {
            "version": 1,
            "execution": {
                "R_lite": [{"rank": str(self.ranks), "children": {"core": "0"}}],
                "starttime": starttime,
                "expiration": expiration,
                "nodelist": [f"node{r}" for r in self.ranks],
            },
        }

    def __repr__(self):
        return f"NodeSet({self.ranks})"


class NodeGraph:
    def __init__(self, n: int) -> None:
        self.n = n
        self._all = (1 << n) - 1
        self._down = 0
        self.jobs: dict[int, NodeSet] = {}
        self._alloc = 0

    @property
    def ranks(self) -> IdSet:
        return IdSet.from_mask(self._all)

    def hostname(self, rank: int) -> str:
        return f"node{rank}"

    def all(self):
        return NodeSet(self._all)

    def allocated(self):
        return NodeSet(self._alloc)

    def down(self):
        return NodeSet(self._down & ~self._alloc)

    def free(self):
        return NodeSet(self._all & ~self._alloc & ~self._down)

    def allocate(self, jobid, rs):
        if jobid in self.jobs:
            raise ValueError(f"job {jobid} already allocated")
        if rs.mask & self._alloc:
            raise ValueError(f"double allocation of {rs & NodeSet(self._alloc)}")
        if rs.mask & ~self._all:
            raise ValueError("unknown resources")
        self.jobs[jobid] = rs
        self._alloc |= rs.mask

    def release(self, jobid, rs=None):
        held = self.jobs.pop(jobid)
        part = held if rs is None else held & rs
        self._alloc &= ~part.mask
        if rs is not None and (held - part):
            self.jobs[jobid] = held - part
        return part

    def allocation(self, jobid):
        return self.jobs[jobid]

    def set_down(self, ranks):
        self._down |= IdSet(ranks).mask if not isinstance(ranks, IdSet) else ranks.mask

    def set_up(self, ranks):
        self._down &= ~(ranks.mask if isinstance(ranks, IdSet) else IdSet(ranks).mask)

    def shrink(self, ranks):
        self.set_down(ranks)

    def resource_set(self, R):
        mask = 0
        for item in R["execution"]["R_lite"]:
            mask |= IdSet.parse(str(item["rank"])).mask
        return NodeSet(mask)

    def status_rv1(self):
        return {
            "all": self.all().to_rv1(self),
            "allocated": self.allocated().to_rv1(self),
            "down": self.down().to_rv1(self),
        }


def need(request) -> int:
    return request.nnodes or max(1, request.nslots)


def match(g, request, *, policy="first", available=None):
    avail = g.free() if available is None else available
    n = need(request)
    ids = avail.ranks
    if len(ids) < n:
        return None
    pick = ids.highest(n) if policy == "high" else ids.lowest(n)
    return NodeSet(pick.mask)


def feasibility(g, request):
    n = need(request)
    if n > g.n:
        return f"requested {n} nodes but the machine has {g.n}"
    return None


def make_engine(n, options=None, **kw):
    from fluxsched_py.engine import Engine

    return Engine(NodeGraph(n), options, matcher=match, feasibility=feasibility, **kw)


INF = math.inf
