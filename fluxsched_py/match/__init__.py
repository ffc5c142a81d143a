"""The matcher: turn a request into concrete resources of a graph.

``match`` is pure: it reads the graph's availability (or a snapshot the
caller passes) and returns a :class:`~fluxsched_py.resource.ResourceSet`,
never allocating anything.  Placement policies are described in
:mod:`fluxsched_py.match.policy`, matching semantics in
:mod:`fluxsched_py.match.traverse`.

>>> from fluxsched_py.resource import ResourceGraph
>>> from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
>>> g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "sockets": 2, "cores_per_socket": 4}})
>>> slot = ResourceRequest("slot", Count.fixed(1), (ResourceRequest("core", Count.fixed(2)),), label="task")
>>> rs = match(g, Request((slot,)), policy="low")
>>> str(rs.ranks), rs.count("core")
('0', 2)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..jobspec.request import Request
from ..resource import ResourceSet
from .feasibility import check_request, feasibility
from .policy import POLICIES, MatchError, Policy, get_policy
from .traverse import MatchResult, search

if TYPE_CHECKING:
    from ..resource import ResourceGraph

__all__ = [
    "match",
    "match_result",
    "feasibility",
    "check_request",
    "MatchError",
    "MatchResult",
    "Policy",
    "POLICIES",
    "get_policy",
]


def match_result(
    g: ResourceGraph, request: Request, *, policy: str | Policy = "first", available: ResourceSet | None = None
) -> MatchResult | None:
    """Like :func:`match`, also returning the number of slots placed."""
    pol = get_policy(policy)
    topo = g.topo
    if pol.network:
        from .network import search_network

        def run(av_set: ResourceSet) -> MatchResult | None:
            return search(topo, g.availability(av_set), pol, request, topo.hostnames, topo.properties)

        return search_network(g, g.free() if available is None else available, request, pol, run)
    av = g.availability(available)
    return search(topo, av, pol, request, topo.hostnames, topo.properties)


def match(
    g: ResourceGraph, request: Request, *, policy: str | Policy = "first", available: ResourceSet | None = None
) -> ResourceSet | None:
    """Resources of ``g`` that satisfy ``request`` now, or None.

    Parameters
    ----------
    g : ResourceGraph
    request : Request
        the normalized jobspec (``fluxsched_py.jobspec``).
    policy : str
        a placement policy name (see :data:`POLICIES`); :class:`MatchError`
        if unknown.
    available : ResourceSet, optional
        what may be used; defaults to ``g.free()`` (the live state, with no
        copy).  The planner passes a future-availability snapshot.

    Returns
    -------
    ResourceSet or None
        None when the request does not fit, including when it names types
        the graph lacks (see :func:`feasibility` and :func:`check_request`
        for why).  ``g`` is never changed.
    """
    res = match_result(g, request, policy=policy, available=available)
    return None if res is None else res.resources
