"""Resource changes an engine learns from its driver (``resource.acquire``).

Up, down and shrink change which items are available; the planner's flat
sets keep their meaning.  Grow and property changes edit the model
(:meth:`ResourceGraph.update <fluxsched_py.resource.ResourceGraph.update>`):
a grow lays the planner's flat sets out anew and a property change alters
what constrained requests match, so the planner and its match cache are
rebuilt from the running jobs, and every reservation is re-planned by the
next pass.  Both are rare; a pass costs more than the rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..ids import IdSet
from ..planner import MatchCache

if TYPE_CHECKING:
    from .core import Engine

__all__ = ["apply_resource_update", "rebuild_planner"]


def apply_resource_update(
    engine: Engine,
    up: Any = None,
    down: Any = None,
    shrink: Any = None,
    expiration: float | None = None,
    grow: Mapping[str, Any] | None = None,
    properties: Mapping[int, Any] | None = None,
) -> tuple[bool, bool]:
    """See :meth:`Engine.resource_update`.  Whether the planner was rebuilt
    (a pass in progress planned on the old one), and whether anything
    changed at all: ranks marked up that were up, or down that were down,
    change nothing, and the plan stands."""
    g = engine.graph
    rebuilt = grow is not None or bool(properties)
    if rebuilt:
        g.update(grow=grow, properties=properties)
        rebuild_planner(engine)
    changed = rebuilt
    if up:
        changed |= g.set_up(IdSet.of(up))
    if down:
        changed |= g.set_down(IdSet.of(down))
    if shrink:
        g.shrink(IdSet.of(shrink))
        changed = True
    if expiration is not None:
        engine.instance_expiration = float(expiration)
        changed = True
    return rebuilt, changed


def rebuild_planner(engine: Engine) -> None:
    """A new planner and match cache for the engine's graph, holding the spans
    of its running jobs and of the jobs waiting for their victims."""
    old = engine.planner
    engine.table.rebuild(engine.make_planner(MatchCache(old.matcher.matcher, fast_paths=old.matcher.fast_paths)))
    engine.reservations.encode()  # the windows, in the new planner's layout
