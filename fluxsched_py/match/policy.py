"""Placement policies: the order in which the matcher tries resources.

The matcher walks the containment tree depth first and, at every vertex,
tries the children in the policy's order, taking the first ones that can
satisfy the request (greedy, no backtracking across siblings once a request
is satisfied).  Within a pool, it takes the ids in the policy's order.  The
orders are total, so every policy is deterministic.

``low``, ``lonode``
    children by ascending id (graph order), lowest pool ids first.
    Fluxion: ``policy=low`` (``lonode`` adds node-centric scoring, which a
    depth-first greedy walk already has).
``high``, ``hinode``
    children by descending id, highest pool ids first (Fluxion ``high``).
``first``
    children by most available cores in their subtree first, ties to the
    higher vertex; highest pool ids first.  This is what Fluxion's ``first``
    does: it stops at the first match, exploring out-edges ordered by the
    available amount of the last pruning type (cores by default), then by
    descending ``uniq_id``.
``worstfit``
    children by most available cores in their subtree first, ties to the
    lower vertex; lowest pool ids first.  This spreads jobs over the least
    loaded nodes, as flux-core's sched-simple/sched-fifo do (their pool
    sorts candidate nodes by free cores, descending, and takes the lowest
    free core ids): successive 1-core jobs on two idle nodes land on
    ``rank0/core0``, ``rank1/core0``, ``rank0/core1``, ...
``lonodex``, ``hinodex``, ``firstnodex``
    as ``low``/``high``/``first``, and node-exclusive: every node the job
    touches is given to it whole, and only wholly free nodes are used.
``locality``
    as ``low``, and each slot is first tried within a single child of its
    node (a socket), so a slot's cores and GPUs come from one socket when
    they can; otherwise it spans the node.
``variation``
    accepted for resource-query compatibility; behaves as ``low``.
``network``
    as ``low``, within one leaf switch of the graph's ``network`` subsystem
    when the job fits under one (best fit), so a job's nodes sit under as
    few switches as possible (:mod:`fluxsched_py.match.network`).

Two switches change how slots are placed; every named policy leaves them
off, and ``fluxsched-py match`` (the resource-query command line) turns them
on, because they are what Fluxion does:

``slot_host="children"``
    each slot lies within one *slot host*: the top-most vertex, at or below
    the scope, that directly holds (as children or pooled leaves) every type
    the slot asks for at its top level.  On ``node -> socket -> core`` a slot
    of cores is then placed inside one socket, and a slot holding nodes
    inside one rack (or the cluster, when nodes hang off it).  Slots are
    gathered across hosts in policy order.  The default, ``"node"``, places a
    slot within one node (or within the scope when the slot holds nodes),
    so a slot may span the sockets of a node.
``flexible=True``
    sibling slots in one ``with`` list (or at the top level) are
    *alternatives*, not a conjunction: the job gets as many slots as the last
    alternative's count, each of any one alternative's shape.  At each slot
    host the matcher picks, slot by slot, the first alternative on a choice
    that fits the most slots in the host's free leaves (Fluxion's ``-T
    flexible`` traverser).  A slot alternative next to a non-slot sibling
    never matches.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..resource import ResourceError

__all__ = ["Policy", "POLICIES", "get_policy", "MatchError"]


class MatchError(ResourceError):
    """A request that can never match this graph, or an unknown policy."""


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    order: str  # "low", "high", "first" or "worst"
    node_exclusive: bool = False
    locality: bool = False
    #: "node" or "children" (see the module docstring)
    slot_host: str = "node"
    #: sibling slots are alternatives (see the module docstring)
    flexible: bool = False
    #: pack a job under as few leaf switches as possible (:mod:`.network`)
    network: bool = False

    @property
    def high_ids(self) -> bool:
        """True when pool ids are taken highest first."""
        return self.order not in ("low", "worst")


POLICIES: dict[str, Policy] = {
    "low": Policy("low", "low"),
    "lonode": Policy("lonode", "low"),
    "high": Policy("high", "high"),
    "hinode": Policy("hinode", "high"),
    "first": Policy("first", "first"),
    "worstfit": Policy("worstfit", "worst"),
    "lonodex": Policy("lonodex", "low", node_exclusive=True),
    "hinodex": Policy("hinodex", "high", node_exclusive=True),
    "firstnodex": Policy("firstnodex", "first", node_exclusive=True),
    "locality": Policy("locality", "low", locality=True),
    "variation": Policy("variation", "low"),
    "network": Policy("network", "low", network=True),
}


def get_policy(name: str | Policy) -> Policy:
    """The :class:`Policy` called ``name``; :class:`MatchError` if there is none."""
    if isinstance(name, Policy):
        return name
    try:
        return POLICIES[name]
    except KeyError:
        raise MatchError(f"unknown match policy {name!r} (expected one of {', '.join(POLICIES)})") from None
