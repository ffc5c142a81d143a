"""``policy=network``: keep a job's nodes under as few leaf switches as possible.

The model's ``network`` subsystem (switches as vertices, ``network`` edges
from a switch to the nodes it links, e.g. a recipe's ``nodes_per_switch``)
gives each leaf switch its set of ranks (:attr:`Topology.leaf_switches
<fluxsched_py.resource.topology.Topology.leaf_switches>`, read once from
the model: matching itself never reads networkx).  A request is first matched inside
one leaf switch, best fit first (the switch with the fewest available ranks
that still fits it, so big free switches stay whole for big jobs); when no
single switch fits, within the fewest switches, the emptiest first; then
anywhere.  Inside a switch the order is ``low``'s.  Switches with fewer
available nodes than the request's node count are not tried.

This runs through :func:`fluxsched_py.match.match` (and everything that
calls it); it costs one match per leaf switch tried.  A graph with no
``network`` subsystem matches as ``low``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..ids import IdSet

if TYPE_CHECKING:
    from ..resource import ResourceGraph, ResourceSet

__all__ = ["switch_count"]


def switch_count(g: ResourceGraph, rs: ResourceSet) -> int:
    """How many leaf switches the ranks of ``rs`` sit under."""
    ranks = rs.ranks.mask
    return sum(1 for _, sw in g.topo.leaf_switches if sw.mask & ranks)


def _nodes(reqs: Any) -> int:
    """The fewest nodes ``reqs`` take (nodes named at any depth, times the counts above them)."""
    total = 0
    for r in reqs:
        total += r.count.min if r.type == "node" else r.count.min * _nodes(r.with_)
    return total


def search_network(g: ResourceGraph, av_set: ResourceSet, request: Any, low: Any, run: Any) -> Any:
    """Match ``request`` within one leaf switch if one fits (best fit), else
    within the fewest switches, largest first; ``run(available)`` matches with
    the ``low`` order on an available set."""
    switches = g.topo.leaf_switches
    if not switches:
        return run(av_set)
    need = max(_nodes(request.resources), 1)
    avail_ranks = av_set.ranks.mask
    free = [((sw.mask & avail_ranks).bit_count(), name, sw.mask & avail_ranks) for name, sw in switches]
    for k, _, m in sorted(free):
        if k >= need:
            res = run(av_set.restrict(IdSet.from_mask(m)))
            if res is not None:
                return res
    union = have = 0
    for k, _, m in sorted(free, key=lambda f: (-f[0], f[1])):
        if not k:
            break
        union |= m
        have += k
        if have >= need:
            res = run(av_set.restrict(IdSet.from_mask(union)))
            if res is not None:
                return res
    return run(av_set)
