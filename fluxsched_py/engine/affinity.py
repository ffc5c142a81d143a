"""User/site affinity (``affinity=alice:lyon,bob:grenoble``): a soft placement preference.

From CiGri's scheduler notes (seed 003, "Priorities"): when Lyon users and
Grenoble users both run campaigns, Lyon users' jobs should run on the Lyon
clusters and Grenoble users' on the Grenoble clusters; "Grenoble jobs may be
submitted on Lyon clusters if some Lyon resources are free".

A job whose campaign (``attributes.user.campaign``) or user is named in the
option prefers the nodes carrying that RFC 20 property (R's
``execution.properties``).  When it can start *now* on preferred nodes
alone, it starts there; otherwise it starts as it would without the option,
on whatever is free.  The preference changes only *where* a job starts,
never *whether* or *when*: every fit test falls back to the same question
without it, so the queue policies decide exactly as before.  A campaign
name is looked up before the user; a user is named by user name or by
decimal uid.  A name means the uid the driver gives it: the local passwd
database's under Flux, :func:`~fluxsched_py.ids.user_id` in the replay and
under Batsim, as their limits and reservations name users.

Not supported: a job split between preferred and other nodes when the
preferred ones are too few (it is placed as without affinity), preferences
for reservations in the future, and weights between several properties.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..planner.flat import FlatCodec
    from ..resource import ResourceGraph
    from .jobs import Job

__all__ = ["Affinity", "job_campaign", "passwd_uid"]


def passwd_uid(name: str) -> int | None:
    """The local uid of user ``name``, or None (the default resolver)."""
    try:
        return pwd.getpwnam(name).pw_uid
    except (KeyError, UnicodeEncodeError, ValueError):
        return None


def job_campaign(request: Request) -> str | None:
    """``attributes.user.campaign`` of a request, as a string, or None."""
    attrs = getattr(request, "attributes", None)
    user = attrs.get("user") if isinstance(attrs, Mapping) else None
    name = user.get("campaign") if isinstance(user, Mapping) else None
    return None if name is None else str(name)


class Affinity:
    """The ``affinity`` option applied to a graph: which ranks each job avoids.

    ``excluded(job)`` is the flat mask of ranks *without* the job's
    preferred property (or None when the job has no preference); a
    placement on ``avail & ~excluded`` uses preferred nodes only.  Masks
    are computed once per property and codec."""

    def __init__(self, pairs: tuple[tuple[str, str], ...], user_id: Callable[[str], int | None] = passwd_uid) -> None:
        self.map = dict(pairs)
        self._user_id = user_id
        self._by_uid: dict[int, str] | None = None  # uid -> property, from the names that are users
        self._masks: dict[str, int] = {}
        self._codec: Any = None

    def preference(self, job: Job) -> str | None:
        """The property ``job`` prefers: its campaign's, else its user's."""
        m = self.map
        campaign = job_campaign(job.request)
        if campaign is not None and campaign in m:
            return m[campaign]
        uid = job.userid
        if str(uid) in m:
            return m[str(uid)]
        if self._by_uid is None:
            self._by_uid = {}
            for name, prop in m.items():
                if not name.isdigit() and (named := self._user_id(name)) is not None:
                    self._by_uid.setdefault(named, prop)
        return self._by_uid.get(uid)

    def excluded(self, job: Job, graph: ResourceGraph, codec: FlatCodec) -> int | None:
        prop = self.preference(job)
        if prop is None:
            return None
        if codec is not self._codec:
            self._codec, self._masks = codec, {}
        mask = self._masks.get(prop)
        if mask is None:
            other = [r for r in graph.ranks if prop not in graph.properties(r)]
            mask = self._masks[prop] = codec.ranks_mask(other)
        return mask
