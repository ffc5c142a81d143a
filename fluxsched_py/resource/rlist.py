"""R (RFC 20) as flux-core's rlist prints it: ``rank[0-1]/core[0-3],gpu0``.

Shared by the engine (the ``resource_summary`` annotation) and the Flux
driver (its ``ready`` log line).  Pure formatting of R_lite; reads no graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..ids import IdSet

__all__ = ["rlist_ids", "rlist_summary"]


def rlist_ids(ids: IdSet) -> str:
    """An idset as flux-core's rlist prints it: ``0``, ``[0-3]``, ``[0,2]``."""
    text = ids.encode()
    return text if text.isdigit() else f"[{text}]"


def rlist_summary(R_lite: Iterable[Mapping[str, Any]]) -> str:
    """``rank[0-1]/core[0-3],gpu0``: R_lite as flux-core's rlist summarizes
    it (``resource_summary``, ``flux resource list -o {rlist}``)."""
    parts = []
    for item in R_lite:
        kids = ",".join(
            f"{k}{rlist_ids(ids)}"
            for k, v in sorted((item.get("children") or {}).items())
            if (ids := IdSet.parse(str(v)))
        )
        parts.append(f"rank{rlist_ids(IdSet.parse(str(item['rank'])))}" + (f"/{kids}" if kids else ""))
    return " ".join(parts)
