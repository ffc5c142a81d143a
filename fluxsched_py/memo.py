"""The memos that only save work, and the one switch that turns them off.

A memo here remembers an answer the code would compute the same way
without it: a parsed jobspec, a match on a flat set, a count of whole
nodes.  Each is named in :data:`MEMOS`, and each site asks :func:`on` (once,
when its owner is made) whether to keep what it computes.  The environment
variable ``FLUXSCHED_PY_MEMOS`` turns them off: ``off`` (or ``none``) for
all of them, or a comma list of names to turn off only those
(``-match,-pool`` and ``match,pool`` mean the same).  So every answer can be
compared with the memos on and off (``t/test_memos.py``), and each memo's
worth is measured by turning it alone off (``bench/bench_memos.py``).

Not here: what the planner's searches remember across passes to skip work
whose result they know (``Timeline.unchanged_for`` and its log of gains,
``earliest_bits(since=)``, ``Pass.settle``, fcfs's ``forecasts_stand``).
Those are part of the algorithms, not a store of answers; the textbook
simulators of ``bench/textbook.py`` are their oracle.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ENV", "MEMOS", "Forgetful", "on", "store"]

#: The environment variable that turns memos off.
ENV = "FLUXSCHED_PY_MEMOS"

#: Each memo by name, and what it remembers.
MEMOS: dict[str, str] = {
    "jobspec": "Engine: the parsed request of each jobspec (by its JSON)",
    "feasible": "Engine: whether a request shape can ever run, and the most whole nodes known to fit",
    "match": "MatchCache: the placement of a request shape under a policy on a flat available set",
    "limits": "RunLimits: each user's and queue's resolved limits, and a check's answer until the usage changes",
    "reserved": "Timeline.reserved_during: the reservations over a window, until one comes or goes",
    "pool": "Timeline.pool_bits: the up resources, per graph version and time",
    "whole": "FlatCodec.whole_count: the whole nodes of a flat set",
    "vertices": "the planner's search: the node vertices of a segment's set",
    "held": "Pass.jobs: the stretches of a queue that run limits held at its last pass, and its stale ones",
    "constraint": "Pass.constraint_blocks: whether a shape waits only for its constraint, for one pass",
}


def _off() -> frozenset[str]:
    text = os.environ.get(ENV, "").strip().lower()
    if not text:
        return frozenset()
    if text in ("off", "none", "0"):
        return frozenset(MEMOS)
    names = frozenset(n.strip().lstrip("-") for n in text.split(",") if n.strip())
    unknown = sorted(names - MEMOS.keys())
    if unknown:
        raise ValueError(f"{ENV}: unknown memo {', '.join(unknown)} (known: {', '.join(MEMOS)})")
    return names


def on(name: str) -> bool:
    """Whether the memo ``name`` keeps what it computes (read when its owner is made)."""
    assert name in MEMOS, name
    return name not in _off()


class Forgetful(dict):
    """A dict that keeps nothing: the store of a memo that is off."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def store(name: str, make: Any = dict) -> Any:
    """A new store for the memo ``name``: ``make()``, or a :class:`Forgetful` one when it is off."""
    return make() if on(name) else Forgetful()
