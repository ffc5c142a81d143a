"""Future availability of resources, for reservations, estimates and backfill.

The planner answers one question for the queue policies: *when* could this
request run, and *on what*?  One module per job:

:mod:`.timeline`    the step function of future availability: spans of
                    running and reserved jobs, and what is available when
:mod:`.search`      :class:`Planner`: the timeline plus the searches
                    (:meth:`Planner.earliest`)
:mod:`.matchcache`  the matcher memoized on flat sets, with exact fast paths
:mod:`.flat`        the flat (one big integer) encoding of resource sets
:mod:`.fastfit`     exact fit tests for whole nodes and ``slot[k] > core[c]``
:mod:`.nodeindex`   free units per node, kept in place as a set changes

Internally every set is a flat integer, so the timeline's unions and
differences are single big-integer operations; sets become
:class:`~fluxsched_py.resource.ResourceSet` again only at the API and to call
the matcher.

Example::

    p = Planner(g)
    p.add_running(1, rs1, start=0.0, end=100.0)
    t, rs = p.earliest(request, now=10.0, duration=50.0)
    p.reserve(2, rs, t, t + 50.0)
"""

from .matchcache import MatchCache, lower_bounds
from .placement import Placement, Slot, Window
from .search import Planner
from .timeline import PlannerError, Span

__all__ = ["MatchCache", "Placement", "Planner", "PlannerError", "Slot", "Span", "Window", "lower_bounds"]
