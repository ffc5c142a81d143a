"""What a match *names*, for printing it the way resource-query does (``fluxsched-py match``)."""

from __future__ import annotations

from dataclasses import replace

from ..jobspec.request import Request
from ..resource.state import Availability
from ..resource.topology import Topology
from .policy import Policy
from .traverse import MatchResult, _Search

__all__ = ["shown"]


def shown(topo: Topology, policy: Policy, result: MatchResult) -> tuple[set[int], dict[int, dict[str, int]]]:
    """What a match *names*, for printing it the way resource-query does.

    Returns the containers given whole to the job and the leaves it names:
    the leaves matched explicitly, the children matched inside each container
    taken whole (matched again inside it, which the match itself memoizes
    away), and every item of a container taken whole with nothing asked
    inside it (a bare ``node``, or a node under a ``*nodex`` policy).
    """

    xc: set[int] = set()
    leaves: dict[int, dict[str, int]] = {v: dict(d) for v, d in (result.leaves or {}).items()}

    def add_leaves(v: int, t: str, m: int) -> None:
        d = leaves.setdefault(v, {})
        d[t] = d.get(t, 0) | m

    stack = list(result.wholes)
    while stack:
        c, with_ = stack.pop()
        xc.add(c)
        if not with_:
            for u in range(c, topo.end[c]):
                xc.add(u)
                for t, m in topo.pools[u].items():
                    add_leaves(u, t, m)
            continue
        loc: list[dict[str, int]] = [{} for _ in range(topo.n)]
        for u in range(c, topo.end[c]):
            loc[u] = dict(topo.pools[u])
        av = Availability(topo, topo.subtree_mask(c), loc)
        s = _Search(topo, av, replace(policy, node_exclusive=False), Request(with_), {}, {})
        if not s.sat_list(c, with_, True):  # pragma: no cover - the match found it once
            continue
        for (v, t), m in s.tpool.items():
            add_leaves(v, t, m)
        stack.extend(s.dead.items())
    return xc, leaves
