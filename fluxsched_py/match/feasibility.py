"""Could a request ever run on this graph?  Checks with human reasons."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..jobspec.request import Request, ResourceRequest
from ..resource import ResourceSet
from ..resource.state import Availability
from .policy import POLICIES, MatchError
from .traverse import request_needs, search

if TYPE_CHECKING:
    from ..resource import ResourceGraph

__all__ = ["check_request", "feasibility"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _walk(reqs: tuple[ResourceRequest, ...], path: str):
    for i, r in enumerate(reqs):
        p = f"{path}/{i}"
        yield r, p
        yield from _walk(r.with_, p + "/with")


def check_request(g: ResourceGraph, request: Request) -> None:
    """Raise :class:`MatchError` when ``request`` names something ``g`` can never offer.

    The message names the jobspec element (``/resources/0/with/0``) and the
    reason: a type the graph lacks, or a leaf type asked to contain others.
    """
    topo = g.topo
    for r, path in _walk(request.resources, "/resources"):
        if r.type == "slot":
            continue
        if r.type not in topo.types:
            have = ", ".join(sorted(topo.types))
            raise MatchError(f"no resource of type {r.type!r} in the graph (it has: {have})", element=path)
        if r.with_ and r.type not in topo.container_types:
            raise MatchError(
                f"resource type {r.type!r} has nothing inside it in this graph, but the request puts "
                f"{', '.join(repr(c.type) for c in r.with_)} in it",
                element=path,
            )


def _all_up(g: ResourceGraph) -> Availability:
    rs: ResourceSet = g.all()
    return rs.availability()


def feasibility(g: ResourceGraph, request: Request) -> str | None:
    """None when ``request`` could ever run on ``g`` (all of it, up or down); else the reason.

    >>> from fluxsched_py.resource import ResourceGraph
    >>> from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
    >>> g = ResourceGraph.from_recipe({"cluster": {"nodes": 4, "cores_per_socket": 2}})
    >>> node = ResourceRequest("node", Count.fixed(5), (ResourceRequest("core", Count.fixed(1)),))
    >>> feasibility(g, Request((node,)))
    'requested 5 nodes, only 4 exist'
    """
    try:
        check_request(g, request)
    except MatchError as e:
        return e.reason
    topo = g.topo
    ranks = g.ranks
    nnodes = request.nnodes
    if nnodes:
        have = sum(1 for r in ranks if topo.type[topo.rank_root[r]] == "node")
        if nnodes > have:
            return f"requested {_plural(nnodes, 'node')}, only {have} exist"
    needs = request_needs(request.resources, topo)
    for t, n in sorted(needs.items()):
        have = topo.tot_units[0].get(t, 0)
        if n > have:
            return f"requested {_plural(n, t)}, only {have} exist"
    c = request.constraints
    if c is not None and not any(
        c.matches(r, topo.hostnames.get(r), topo.properties.get(r, frozenset())) for r in ranks
    ):
        return f"no node satisfies constraint {c.describe()}"
    if search(topo, _all_up(g), POLICIES["low"], request, topo.hostnames, topo.properties) is None:
        where = f" with constraint {c.describe()}" if c is not None else ""
        return f"the request does not fit the resource graph{where}, even with every resource free"
    return None
