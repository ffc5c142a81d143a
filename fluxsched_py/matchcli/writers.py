"""resource-query's match writers over the project's resource model.

resource-query prints every vertex a match names, one per line, in post-order
with the depth as indentation (``simple``), or reversed with the modes spelled
out (``pretty_simple``).  The project's graph pools identical leaves on their
parent, so a leaf is printed as ``<basename><id>`` under its parent's path,
exactly the name Fluxion gives that vertex.  What a match names (as opposed to
everything it holds) comes from :func:`fluxsched_py.match.shown.shown`.

``jgf`` and ``rv1``/``rv1_nosched``/``rlite`` are written from the job's
:class:`~fluxsched_py.resource.ResourceSet` with the project's own writers.
"""

from __future__ import annotations

import json

from ..ids import IdSet
from ..match import MatchResult
from ..match.policy import Policy
from ..match.shown import shown
from ..resource import ResourceGraph, ResourceSet
from ..resource.topology import Topology

__all__ = ["FORMATS", "VertexIndex", "render", "render_set", "simple_lines"]

FORMATS = ("simple", "pretty_simple", "jgf", "rlite", "rv1", "rv1_nosched")


class VertexIndex:
    """Containment paths of containers and pooled leaves, and per-vertex properties."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.paths: dict[str, int] = {topo.path(v): v for v in range(topo.n)}
        self.props: dict[str, dict[str, str]] = {}

    def vertex(self, path: str) -> int | None:
        """The container at ``path``, or None."""
        return self.paths.get(path)

    def lookup(self, path: str) -> ResourceSet | None:
        """Every item at or below ``path`` (a container or a pooled leaf), or None."""
        topo = self.topo
        v = self.paths.get(path)
        if v is not None:
            pools = {u: dict(topo.pools[u]) for u in range(v, topo.end[v]) if topo.pools[u]}
            return ResourceSet(topo, topo.subtree_mask(v), pools)
        parent, _, leaf = path.rpartition("/")
        p = self.paths.get(parent)
        if p is None:
            return None
        for t, m in topo.pools[p].items():
            base = topo.pool_info[(p, t)][2]
            rest = leaf[len(base) :]
            if leaf.startswith(base) and rest.isdigit() and m >> int(rest) & 1:
                return ResourceSet(topo, 0, {p: {t: 1 << int(rest)}})
        return None

    def properties(self, path: str, v: int | None) -> dict[str, str]:
        """Properties of the container ``v`` (None for a pooled leaf) and those set at ``path``."""
        out = {k: str(val) for k, val in (self.topo.vprops[v] or {}).items()} if v is not None else {}
        out.update(self.props.get(path, {}))
        return out


def simple_lines(topo: Topology, xc: set[int], leaves: dict[int, dict[str, int]]) -> list[tuple[int, str, int, bool]]:
    """``(depth, name, amount, exclusive)`` in post-order for the named items."""
    keep: set[int] = set()
    for v in list(xc) + list(leaves):
        while v >= 0 and v not in keep:
            keep.add(v)
            v = topo.parent[v]
    out: list[tuple[int, str, int, bool]] = []
    if 0 not in keep:
        return out
    info = topo.pool_info
    lines: list[tuple[int, str, int]] = []  # pooled leaves waiting on the stack (referenced by -index)
    stack: list[tuple[int, int, bool]] = [(0, 1, False)]
    while stack:
        v, depth, done = stack.pop()
        if v < 0:
            d, name, size = lines[-v - 1]
            out.append((d, name, size, True))
            continue
        if done:
            out.append((depth, topo.name[v], 1, v in xc))
            continue
        stack.append((v, depth, True))
        # children and pools in input order: a pool comes before the child at its position
        pos = topo.pool_pos[v]
        items: list[tuple[int, int, int, str]] = [(k, 1, c, "") for k, c in enumerate(topo.children[v]) if c in keep]
        items += [(pos.get(t, 0), 0, 0, t) for t in (leaves.get(v) or {})]
        items.sort()
        for _, kind, c, t in reversed(items):
            if kind:
                stack.append((c, depth + 1, False))
            else:
                size, _, base = info[(v, t)]
                ids = list(IdSet.from_mask(leaves[v][t]))
                for i in reversed(ids):
                    lines.append((depth + 1, f"{base}{i}", size))
                    stack.append((-len(lines), depth + 1, True))
    return out


def _simple(lines: list[tuple[int, str, int, bool]], pretty: bool) -> str:
    if pretty:
        return "".join(
            f"      {'---' * d}{n}[{a}:{'exclusive' if x else 'shared'}]\n" for d, n, a, x in reversed(lines)
        )
    return "".join(f"      {'---' * d}{n}[{a}:{'x' if x else 's'}]\n" for d, n, a, x in lines)


def _set_items(topo: Topology, rs: ResourceSet) -> tuple[set[int], dict[int, dict[str, int]]]:
    xc = set(rs.containers)
    leaves: dict[int, dict[str, int]] = {}
    for v, t, ids in rs.pools():
        leaves.setdefault(v, {})[t] = ids.mask
    return xc, leaves


def render(
    fmt: str, g: ResourceGraph, index: VertexIndex, policy: Policy, result: MatchResult, at: int, dur: int
) -> str:
    """The match output resource-query writes for one job."""
    topo = g.topo
    if fmt in ("simple", "pretty_simple"):
        xc, leaves = shown(topo, policy, result)
        return _simple(simple_lines(topo, xc, leaves), fmt == "pretty_simple")
    rs = result.resources
    if fmt == "jgf":
        return json.dumps(g.to_jgf(rs)) + "\n"
    R = rs.to_rv1(g, starttime=float(at), expiration=float(at + dur), nslots=result.nslots)
    if fmt == "rlite":
        return json.dumps(R["execution"]["R_lite"]) + "\n"
    if fmt == "rv1_nosched":
        R.pop("scheduling", None)
    return json.dumps(R) + "\n"


def render_set(fmt: str, g: ResourceGraph, index: VertexIndex, rs: ResourceSet) -> str:
    """A resource set (``find`` results) in ``fmt``."""
    topo = g.topo
    if fmt in ("simple", "pretty_simple"):
        xc, leaves = _set_items(topo, rs)
        return _simple(simple_lines(topo, xc, leaves), fmt == "pretty_simple")
    if fmt == "jgf":
        return json.dumps(g.to_jgf(rs)) + "\n"
    return json.dumps(rs.to_rv1(g)) + "\n"
