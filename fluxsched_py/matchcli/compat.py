"""resource-query compatibility: its policy names and its jobspec files.

Jobspecs are read with the project's own parser
(:func:`fluxsched_py.jobspec.parse_jobspec`), unchanged: every jobspec of
Fluxion's corpus that resource-query matches is a valid canonical RFC 14
jobspec (``version: 9999`` included).  The one compatibility step is for
``-T flexible`` jobspecs, which put several slots side by side as
*alternatives* and may reuse a slot label across them; RFC 14 forbids the
reuse, so :func:`read_jobspec` renames repeated labels (``default``,
``default#2``...) before validation when, and only when, the caller asks for
flexible semantics.

Policies: resource-query's names map onto :data:`fluxsched_py.match.POLICIES`;
its custom ``key=value`` policy strings (``policy=high node_centric=true
node_exclusive=true stop_on_1_matches=true``) map onto a
:class:`~fluxsched_py.match.policy.Policy`: ``policy=high`` orders high ids
first, ``stop_on_1_matches=true`` with ``high`` is the ``first`` order,
``node_exclusive=true`` gives whole nodes; ``node_centric`` is what the
project's depth-first walk always does.
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from typing import Any

from ..inputs import read_bytes
from ..jobspec import Request, parse_jobspec
from ..jobspec.loader import load_document
from ..limits import MAX_JOBSPEC_BYTES
from ..match.policy import POLICIES, Policy

__all__ = ["parse_policy", "read_jobspec", "read_jobspecs", "split_xor_slots", "RQ_POLICIES"]

#: resource-query's policy names (all of them are project policies)
RQ_POLICIES = ("first", "firstnodex", "high", "low", "lonode", "hinode", "lonodex", "hinodex", "locality", "variation")

_CUSTOM_KEYS = ("policy", "node_centric", "stop_on_1_matches", "node_exclusive")


def parse_policy(name: str, *, flexible: bool = False) -> Policy:
    """A resource-query policy name or custom ``key=value`` string as a project :class:`Policy`.

    The policy places slots the way resource-query does (``slot_host="children"``,
    and ``flexible`` for ``-T flexible``; see :mod:`fluxsched_py.match.policy`).
    Raises :class:`ValueError` with resource-query's wording when it is invalid.
    """
    return replace(_base_policy(name), slot_host="children", flexible=flexible)


def _base_policy(name: str) -> Policy:
    if name in POLICIES:
        return POLICIES[name]
    if "=" not in name:
        raise ValueError(f"unknown match policy '{name}'")
    opts: dict[str, str] = {}
    for tok in name.split():
        if "=" not in tok:
            raise ValueError(f"invalid policy option: {tok}")
        k, v = tok.split("=", 1)
        if k not in _CUSTOM_KEYS:
            raise ValueError(f"invalid policy option: {k}")
        if k == "policy" and v not in ("high", "low"):
            raise ValueError("policy key within custom policy accepts only low or high")
        if k != "policy" and v not in ("true", "false"):
            raise ValueError(f"Policy option {k} requires true or false, got {v}")
        opts[k] = v
    if "policy" not in opts:
        raise ValueError(f"unknown match policy '{name}'")
    high = opts["policy"] == "high"
    order = ("first" if opts.get("stop_on_1_matches") == "true" else "high") if high else "low"
    return Policy(name, order, node_exclusive=opts.get("node_exclusive") == "true")


def _relabel(doc: Any) -> Any:
    """Give repeated slot labels a ``#n`` suffix (``-T flexible`` alternatives may share one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
        return doc
    seen: dict[str, int] = {}

    def walk(items: list) -> None:
        for r in items:
            if not isinstance(r, dict):
                continue
            if r.get("type") == "slot" and isinstance(r.get("label"), str):
                n = seen.get(r["label"], 0) + 1
                seen[r["label"]] = n
                if n > 1:
                    r["label"] = f"{r['label']}#{n}"
            if isinstance(r.get("with"), list):
                walk(r["with"])

    walk(doc["resources"])
    return doc


def split_xor_slots(resources: list) -> list[list]:
    """Expand ``xor_slot`` alternatives into plain resource lists, in order (``-T flexible``).

    ``xor_slot`` is not an RFC 14 type: it is Fluxion's flexible traverser's
    "exactly one of these" slot.  Siblings of type ``xor_slot`` are
    alternatives: each variant holds the (expanded) other siblings and one of
    them, as a ``slot``.  Nested alternatives multiply out.  The variants are
    tried in this order.
    """
    base: list[list] = [[]]
    options: list[dict] = []
    for r in resources:
        inner = split_xor_slots(r["with"]) if isinstance(r, dict) and isinstance(r.get("with"), list) else None
        variants = [r] if inner is None else [{**r, "with": v} for v in inner]
        if isinstance(r, dict) and r.get("type") == "xor_slot":
            options.extend({**v, "type": "slot"} for v in variants)
        else:
            base = [[*b, v] for b in base for v in variants]
    if not options:
        return base
    return [[*b, o] for b in base for o in options]


def read_jobspecs(path: str | os.PathLike, *, flexible: bool = False) -> list[Request]:
    """Read a jobspec file as the list of alternative requests resource-query tries, in order.

    Without ``flexible`` this is ``[read_jobspec(path)]``; with it, ``xor_slot``
    alternatives are expanded (:func:`split_xor_slots`) and slot labels made
    unique before each variant is validated.
    """
    if not flexible:
        return [read_jobspec(path)]
    data = read_bytes(path, MAX_JOBSPEC_BYTES)
    doc = load_document(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
        return [parse_jobspec(doc)]
    out = []
    for variant in split_xor_slots(doc["resources"]):
        d = copy.deepcopy({**doc, "resources": variant})
        out.append(parse_jobspec(_relabel(d)))
    return out


def read_jobspec(path: str | os.PathLike, *, flexible: bool = False) -> Request:
    """Read and validate a jobspec file; :class:`OSError` if it cannot be read.

    With ``flexible``, repeated slot labels are renamed first (see the module
    docstring); nothing else differs from :func:`fluxsched_py.jobspec.load_jobspec`.
    """
    data = read_bytes(path, MAX_JOBSPEC_BYTES)
    if not flexible:
        return parse_jobspec(data)
    return parse_jobspec(_relabel(load_document(data)))
