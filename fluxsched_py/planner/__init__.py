"""Future availability of resources, for reservations, estimates and backfill.

The planner answers one question for the queue policies: *when* could this
request run, and *on what*?  It keeps a timeline of **spans**, one per job,
each a :class:`~fluxsched_py.resource.ResourceSet` held over ``[start, end)``:

* a *running* span belongs to a job that holds its resources in the graph now
  (``end`` is its expiration, ``math.inf`` when unlimited);
* a *reserved* span is a promise made to a pending job.

Spans of different jobs that overlap in time must use disjoint resources; the
planner trusts its callers on that, exactly as the graph refuses double
allocation.

The timeline is a step function: sorted boundary times, and for each segment
between two boundaries the union of the resources used during it.  Adding or
removing a span touches only the segments it covers.  :meth:`Planner.available`
intersects over a window; :meth:`Planner.earliest` slides that window over the
boundaries with a two-stack aggregate, so finding a start time costs one union
per boundary plus one match per distinct candidate set (binary search when
only running jobs are planned, since availability then only grows with time).
A candidate only needs a yes or no: for whole-node and ``slot[k] > core[c]``
requests :meth:`MatchCache.fit` answers it exactly from counts
(:mod:`.fastfit`), and the matcher runs once, at the time the search settles
on (about 15 ms a match on 1000 nodes x 8 cores, against microseconds).

Conservative backfilling re-plans every reservation on every pass after a
job ends early, and most of those searches find nothing.  A failed whole-node
search leaves a :class:`NoEarlier` proof; the planner logs what becomes
available, and :meth:`Planner.prove_none_before` shows from that log alone
when the same search would fail again, so it is not made (counting the nodes
the log touches, and when that is not enough, looking at each of the few
nodes touched in the plan as it is now).

Internally every set is a flat integer (:mod:`.flat`), so the timeline's
unions and differences are single big-integer operations; sets become
:class:`~fluxsched_py.resource.ResourceSet` again only at the API and to call
the matcher.

What "up" means comes from the graph: a resource is in the planner's pool at
time ``t0`` if it is free in the graph now, or held by a running job that is
expected to end after ``t0``.  A running job past its expected end (still
holding its resources, end unknown) keeps them out of the pool until it is
removed.  Down or drained resources are never in the pool.

Example::

    p = Planner(g)
    p.add_running(1, rs1, start=0.0, end=100.0)
    t, rs = p.earliest(request, now=10.0, duration=50.0)
    p.reserve(2, rs, t, t + 50.0)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

from ..ids import IdSet
from ..match.policy import POLICIES as MATCH_POLICIES
from .fastfit import slot_capacity, slot_shape, take_slots

__all__ = ["MatchCache", "NoEarlier", "Planner", "PlannerError", "Span", "lower_bounds"]

Matcher = Callable[..., Any]


class PlannerError(ValueError):
    """A span that makes no sense (empty interval, unknown or duplicate job)."""


class Span:
    """A job's hold on ``resources`` over ``[start, end)``.

    ``bits`` is the same set, flat (see :mod:`.flat`); ``resources`` is
    decoded from it on first use when the span was made from bits alone.
    """

    __slots__ = ("jobid", "start", "end", "running", "bits", "_rs", "_codec")

    def __init__(self, jobid: int, rs: Any, start: float, end: float, running: bool, bits: int, codec: Any) -> None:
        self.jobid, self.start, self.end, self.running, self.bits = jobid, start, end, running, bits
        self._rs = rs
        self._codec = codec

    @property
    def resources(self) -> Any:
        if self._rs is None:
            self._rs = self._codec.decode(self.bits)
        return self._rs

    def __repr__(self) -> str:
        kind = "running" if self.running else "reserved"
        return f"Span({self.jobid}, {kind}, [{self.start}, {self.end}))"


class NoEarlier:
    """Proof that a whole-node request cannot start anywhere in ``[now, t)``.

    A search for ``n`` whole nodes over ``duration`` that failed at every
    candidate time before ``t`` leaves its trace here: for each candidate
    ``times[i]``, ``whole[i]`` is at most the number of whole nodes that were
    available for ``duration`` from any time in ``[times[i], times[i+1])``
    (the last piece ends at ``t``); every ``whole[i] < n``.  ``pool`` is the
    pool then, and ``seq`` the planner's log position (:meth:`Planner.certify`).
    :meth:`Planner.prove_none_before` carries the proof forward to a later
    state of the plan without searching again.
    """

    __slots__ = ("n", "now", "t", "times", "whole", "pool", "seq")

    def __init__(self, n: int, now: float) -> None:
        self.n = n
        self.now = now
        self.t = math.inf
        self.times: list[float] = []
        self.whole: list[int] = []
        self.pool = 0
        self.seq = -1


def _default_matcher() -> Matcher:
    from ..match import match

    return match


def lower_bounds(request: Any) -> tuple[tuple[str, int], ...]:
    """Counts any placement of ``request`` needs at least: whole nodes when it
    asks for exclusive nodes, else cores and GPUs.  A cheap necessary test
    (``avail.count(type) >= n``) that spares the matcher hopeless calls."""
    nnodes = request.nnodes
    if nnodes and request.exclusive:
        return (("node", nnodes),)
    out = []
    cores = request.nslots * request.slot_size
    gpus = request.nslots * request.slot_gpus
    if cores:
        out.append(("core", cores))
    if gpus:
        out.append(("gpu", gpus))
    return tuple(out)


class MatchCache:
    """Memoize a pure matcher on ``(request shape, policy, available set)``.

    ``match`` only reads the set it is given (and the graph's static topology),
    so equal inputs give equal answers.  Lower bounds per request shape reject
    sets that are obviously too small without a traversal.
    """

    #: Policies the whole-node fast path reproduces, and their node order.
    FAST_ORDER = {"low": False, "lonode": False, "high": True, "hinode": True, "first": True}
    #: Policies the slot fast path reproduces: (node order, high ids first),
    #: read from the matcher's own policy table.  Node-exclusive, locality
    #: and slot-host/flexible variants place slots differently: left out.
    SLOT_ORDER = {
        name: (p.order, p.high_ids)
        for name, p in MATCH_POLICIES.items()
        if not (p.node_exclusive or p.locality or p.flexible or p.network) and p.slot_host == "node"
    }

    def __init__(self, matcher: Matcher, maxsize: int = 2048, fast_paths: bool = True) -> None:
        from cachetools import LRUCache

        self.matcher = matcher
        self.fast_paths = fast_paths
        self._node_spec: LRUCache = LRUCache(maxsize=maxsize)
        self.fast = 0
        self._by_id: dict[int, tuple] = {}
        # request key -> a small int standing for it in _cache keys (hashing a
        # request tree per call costs more than the match); never reused
        self._key_ids: dict[Any, int] = {}
        self._next_key_id = 0
        self._cache: LRUCache = LRUCache(maxsize=maxsize)
        self._bounds: LRUCache = LRUCache(maxsize=maxsize)
        self.calls = 0
        self.hits = 0
        self.rejects = 0

    def _facts(self, request: Any) -> tuple[int, tuple[tuple[str, int], ...], int, tuple[int, int] | None]:
        """``(key id, lower bounds, whole nodes, slot shape)`` of a request
        (see :func:`.fastfit.slot_shape`), remembered by
        identity (hashing a request tree is the expensive part; the entry
        holds the request, so its id cannot be reused while cached).  Equal
        keys get the same key id while it is remembered."""
        f = self._by_id.get(id(request))
        if f is None or f[0] is not request:
            if len(self._by_id) > 65536:
                self._by_id.clear()
            key = request.key
            kid = self._key_ids.get(key)
            if kid is None:
                if len(self._key_ids) > 65536:
                    self._key_ids.clear()  # ids are never reused: forgotten keys only miss
                kid = self._key_ids[key] = self._next_key_id
                self._next_key_id += 1
            f = (request, kid, self.bounds_of(request), self._whole_nodes_of(key, request), slot_shape(request))
            self._by_id[id(request)] = f
        return f[1], f[2], f[3], f[4]

    def bounds_of(self, request: Any) -> tuple[tuple[str, int], ...]:
        key = request.key
        b = self._bounds.get(key)
        if b is None:
            b = self._bounds[key] = lower_bounds(request)
        return b

    def __call__(self, g: Any, request: Any, *, policy: str = "first", available: Any = None) -> Any:
        """The matcher's own signature, on ResourceSets (no memo)."""
        self.calls += 1
        return self.matcher(g, request, policy=policy, available=available)

    def flat(
        self, g: Any, codec: Any, request: Any, policy: str, avail: int, live: bool = False
    ) -> tuple[Any, int] | None:
        """Match on a flat available set; ``(rs, rs_bits)`` or None, memoized.

        ``live`` says ``avail`` is exactly the graph's free set: the matcher
        then reads the graph's own availability instead of rebuilding one."""
        self.calls += 1
        if not avail:
            return None
        kid, bounds, nodes, slots = self._facts(request)
        for rtype, n in bounds:
            if codec.count(avail, rtype) < n:
                self.rejects += 1
                return None
        if nodes and self.fast_paths and codec.flat_nodes and policy in self.FAST_ORDER:
            self.fast += 1
            return self._take_nodes(codec, avail, nodes, self.FAST_ORDER[policy])
        key = (kid, policy, codec.spread(avail), avail)
        hit = self._cache.get(key, _MISS)
        if hit is not _MISS:
            self.hits += 1
            return hit
        fields = codec.unit_fields("core") if slots is not None and self.fast_paths else None
        if fields is not None and policy in self.SLOT_ORDER:
            self.fast += 1
            order, high_ids = self.SLOT_ORDER[policy]
            took = take_slots(fields, avail, fields.counts(avail), slots[0], slots[1], order, high_ids)
            out = None if took is None else (self._resourceset(codec.topo, 0, took[1]), took[0])
        else:
            rs = self.matcher(g, request, policy=policy, available=None if live else codec.decode(avail))
            out = None if rs is None else (rs, codec.encode(rs))
        self._cache[key] = out
        return out

    @staticmethod
    def _resourceset(topo: Any, cont: int, pools: dict[int, dict[str, int]]) -> Any:
        from ..resource import ResourceSet

        return ResourceSet(topo, cont, pools)

    def fit(self, codec: Any, request: Any, policy: str, avail: int) -> bool | None:
        """Whether :meth:`flat` would find a placement for ``request`` in
        ``avail``, when that can be told exactly without matching (a lower
        bound not met, or a whole-node or slot fast path: a count of whole
        nodes or of slots); None when only the matcher can tell.

        Why: a search over candidate start times needs the placement only at
        the time it settles on; everywhere else a yes or no will do."""
        if not avail:
            return False
        _, bounds, nodes, slots = self._facts(request)
        for rtype, n in bounds:
            if codec.count(avail, rtype) < n:
                return False
        if not self.fast_paths:
            return None
        if nodes and codec.flat_nodes and policy in self.FAST_ORDER:
            return codec.whole_count(avail) >= nodes
        if slots is not None and policy in self.SLOT_ORDER:
            fields = codec.unit_fields("core")
            if fields is not None:
                # Slots of one core: every core is in some node's field, and
                # the bounds above already counted k of them.
                return slots[1] == 1 or slot_capacity(fields.counts(avail), slots[1]) >= slots[0]
        return None

    def whole_nodes(self, request: Any) -> int:
        """N when ``request`` is exactly ``node[N] exclusive > slot[1] > core[1]``
        with no constraint (how the replay models Batsim and SWF jobs), else 0."""
        return self._facts(request)[2]

    def _whole_nodes_of(self, key: Any, request: Any) -> int:
        n = self._node_spec.get(key)
        if n is None:
            n = 0
            res = request.resources
            if len(res) == 1 and request.constraints is None:
                node = res[0]
                if node.type == "node" and node.exclusive and node.count.is_fixed and len(node.with_) == 1:
                    slot = node.with_[0]
                    if slot.type == "slot" and slot.count.is_fixed and slot.count.min == 1 and len(slot.with_) == 1:
                        core = slot.with_[0]
                        if core.type == "core" and core.count.is_fixed and core.count.min == 1 and not core.with_:
                            n = node.count.min
            self._node_spec[key] = n
        return n

    @staticmethod
    def _take_nodes(codec: Any, avail: int, n: int, high_first: bool) -> tuple[Any, int] | None:
        """The ``n`` wholly available nodes the matcher would pick, in one pass
        over the node vertices (the matcher's order: by vertex, ascending for
        ``low``; descending for ``high``, and for ``first`` since all nodes are
        alike and wholly free ones tie on available cores)."""
        whole = codec.whole_nodes(avail)
        if whole.bit_count() < n:
            return None
        picked = 0
        for _ in range(n):
            if high_first:
                bit = 1 << (whole.bit_length() - 1)
            else:
                bit = whole & -whole
            whole ^= bit
            picked |= bit
        return None, codec.nodes_bits(picked)


_MISS = object()


def _unusable_ranks(g: Any) -> Any:
    """Ranks that are down or drained (graph API permitting), else None."""
    down = getattr(g, "down_ranks", None)
    if down is None:
        return None
    bad = down()
    drained = getattr(g, "drained_ranks", None)
    if drained is not None:
        d = drained()
        if d:
            bad = bad | IdSet(d)
    return bad


class _WindowUnion:
    """Union over a sliding window of flat sets (two-stack queue aggregation).

    ``push`` adds at the back, ``pop`` drops the front, ``value`` is the union
    of what is inside; every operation is amortized O(1) set unions.
    """

    __slots__ = ("_back", "_back_agg", "_front_aggs")

    def __init__(self) -> None:
        self._back: list[int] = []
        self._back_agg = 0
        self._front_aggs: list[int] = []  # suffix unions, front of the window last

    def push(self, item: int) -> None:
        self._back.append(item)
        self._back_agg = self._back_agg | item

    def pop(self) -> None:
        if not self._front_aggs:
            agg = 0
            for item in reversed(self._back):
                agg = agg | item
                self._front_aggs.append(agg)
            self._back.clear()
            self._back_agg = 0
        self._front_aggs.pop()

    def value(self) -> int:
        if self._front_aggs:
            return self._front_aggs[-1] | self._back_agg
        return self._back_agg


class Planner:
    """Spans of running and reserved jobs over a resource graph.

    Parameters
    ----------
    graph:
        a :class:`~fluxsched_py.resource.ResourceGraph`; the planner reads its
        ``free()`` and down/drained ranks and never modifies it.
    matcher:
        ``match(graph, request, *, policy, available)`` or a
        :class:`MatchCache`; defaults to :func:`fluxsched_py.match.match`.
    """

    def __init__(self, graph: Any, *, matcher: Matcher | None = None) -> None:
        from .flat import FlatCodec

        self.graph = graph
        m = matcher if matcher is not None else _default_matcher()
        self.matcher = m if isinstance(m, MatchCache) else MatchCache(m)
        self.codec = FlatCodec(graph)
        self._spans: dict[int, Span] = {}
        self._reserved: dict[int, Span] = {}  # the reserved spans, in _spans' order
        # The step function: _used[k] is busy during [_times[k], _times[k+1]).
        self._times: list[float] = [-math.inf]
        self._used: list[int] = [0]
        self._refs: list[int] = [1]  # spans starting or ending at _times[k]
        # Boundaries at or before _floor are folded into the first segment
        # (see _forget_past): it stands for [_floor, _times[1]).
        self._floor = -math.inf
        self._running_ends: list[tuple[float, int]] = []  # sorted (end, jobid)
        self._nreserved = 0
        self._free_cache: tuple[Any, int] | None = None
        self._mutations = 0  # bumped by every span change
        self._running_union = 0  # every running span's bits
        self._max_running_start = -math.inf  # an upper bound (never lowered)
        # Everything that became available, in order: (start, end, bits,
        # nodes touched or -1 until a proof asks, jobid) for a removed span
        # (or a timeline merge, jobid -2); _gains[0] is entry number _gains_base.  A span removed
        # and added again for the same job (re-planned) leaves only the net
        # difference.  See prove_none_before().
        self._gains: list[tuple[float, float, int, int, int]] = []
        self._gains_base = 0
        self._gains_mark = 0  # entries before it were seen by a proof: never rewritten
        #: Searches :meth:`prove_none_before` made unnecessary (statistics).
        self.proofs = 0
        self._running_version = 0  # bumped when a running span comes or goes
        # Set for good once two spans overlapped on a resource (sched.expiration
        # can do that): the step function no longer mirrors the spans exactly.
        self._overlapped = False
        self._reserved_version = 0  # bumped when a reservation comes or goes
        self._reserved_cache: tuple[int, dict] = (-1, {})
        self._last_reserved_start: tuple[int, float] = (-1, -math.inf)
        self._pool_cache: tuple[tuple, int] | None = None
        #: The latest time the planner was told about (``earliest(now=...)``
        #: or :meth:`set_now`): running jobs expected to end before it are
        #: overdue and keep their resources until removed.
        self.now = -math.inf

    # -- spans -------------------------------------------------------------

    def add_running(self, jobid: int, rs: Any, start: float, end: float = math.inf, bits: int | None = None) -> None:
        """Record that ``jobid`` holds ``rs`` from ``start`` until ``end``."""
        b = self.codec.encode(rs) if bits is None else bits
        self._add(Span(jobid, rs, float(start), float(end), True, b, self.codec))
        self._running_version += 1
        bisect.insort(self._running_ends, (float(end), jobid))
        self._running_union |= b
        self._max_running_start = max(self._max_running_start, float(start))

    def reserve(self, jobid: int, rs: Any, start: float, end: float = math.inf, bits: int | None = None) -> None:
        """Promise ``rs`` to the pending job ``jobid`` over ``[start, end)``."""
        b = self.codec.encode(rs) if bits is None else bits
        self._add(Span(jobid, rs, float(start), float(end), False, b, self.codec))
        self._nreserved += 1
        self._reserved_version += 1

    def remove(self, jobid: int) -> Span | None:
        """Forget ``jobid``'s span (it ended, was cancelled or is re-planned)."""
        span = self._spans.pop(jobid, None)
        if span is None:
            return None
        self._mutations += 1
        if span.running:
            self._running_version += 1
            i = bisect.bisect_left(self._running_ends, (span.end, jobid))
            del self._running_ends[i]
            self._running_union &= ~span.bits  # spans of running jobs are disjoint
        else:
            self._nreserved -= 1
            self._reserved_version += 1
            del self._reserved[jobid]
        self._log_gain(span.start, span.end, span.bits, jobid)
        lo = self._index(span.start)
        hi = self._index(span.end) if span.end != math.inf else len(self._times)
        keep = ~span.bits
        used = self._used
        for k in range(lo, hi):
            used[k] &= keep
        floor = self._floor
        if span.end > floor:  # else its boundary was folded away
            self._unref(hi)
        if span.start > floor:
            self._unref(lo)
        return span

    # -- proofs that a search would fail ---------------------------------------

    def certify(self) -> int:
        """The current position in the log of removed spans (what a
        :class:`NoEarlier` proof was made against); entries before it stay
        logged."""
        seq = self._gains_base + len(self._gains)
        self._gains_mark = seq
        return seq

    def whole_node_request(self, request: Any, policy: str) -> int:
        """N when ``request`` fits a set exactly when N whole nodes of it are
        available (the matcher's whole-node fast path), else 0.  Such a fit
        is monotone: a set that fits keeps fitting when it grows."""
        m = self.matcher
        if not (m.fast_paths and self.codec.flat_nodes and policy in m.FAST_ORDER):
            return 0
        return m.whole_nodes(request)

    def keep_if_none_before(self, jobid: int, proof: NoEarlier, duration: float, now: float) -> bool | None:
        """Re-plan ``jobid``'s reservation without touching the plan, when that
        is provably what re-planning would do.

        Re-planning takes the span out, checks that its place is still free,
        searches for an earlier place, and puts the span back when there is
        none.  While no two spans ever overlapped on a resource the step
        function is exactly the union of the spans, so: the place is still
        free exactly when the pool holds it; taking a span out and putting
        the same one back leaves everything as it was but its position in
        :meth:`spans`' order (it goes last); and ``proof`` carried forward
        (:meth:`prove_none_before`, with the job's own span discounted)
        shows the search would find nothing.  Returns True when all of that
        held and the span was moved last, else False (then re-plan for real),
        or None when the proof no longer holds.
        """
        span = self._spans.get(jobid)
        if self._overlapped or span is None or span.running or span.start != proof.t or not span.start > now:
            return False
        bits = span.bits
        if self.pool_bits() & bits != bits:
            return False
        if self.prove_none_before(proof, jobid, duration, now, own=bits) is None:
            return None
        self._spans[jobid] = self._spans.pop(jobid)
        self._reserved[jobid] = self._reserved.pop(jobid)
        self._mutations += 2
        proof.seq = self.certify()
        return True

    def prove_none_before(
        self, proof: NoEarlier, jobid: int, duration: float, now: float, own: int = 0
    ) -> NoEarlier | None:
        """Carry ``proof`` (made for ``jobid``) forward to the plan as it is
        now: return it updated if the request still cannot start anywhere in
        ``[now, proof.t)``, else None (then search).

        Why it holds: whatever is available over ``[t, t + duration)`` now
        was available then, or joined the pool since, or belonged to a span
        removed since that overlapped ``[t, t + duration)`` (spans that were
        added only take resources away; the job's own span never counts).  A
        node wholly available now was wholly available then or has something
        of it in one of those sets; so at most ``whole[i]`` plus the nodes
        those sets touch are available from any ``t`` in piece ``i``.  If that
        stays below ``n`` everywhere, every candidate the search would try
        fails, and a whole-node fit is exactly "n whole nodes available".

        ``own``: the job's own span is still in the plan, on these resources
        (they never count as in use).
        """
        if now < proof.now or proof.seq < self._gains_base:
            return None
        if not duration or duration <= 0:
            duration = math.inf
        pool = self.pool_bits()
        joined = pool & ~proof.pool
        end = proof.t
        horizon = end + duration
        limit = now + duration
        gains = self._gains
        found: list[tuple[float, float, int]] = []  # (a, b, nodes) that may help
        gained = joined  # everything that may have made a node whole since
        for g in range(proof.seq - self._gains_base, len(gains)):
            a, b, bits, nodes, jid = gains[g]
            if b <= now or a >= horizon or jid == jobid:
                continue
            gained |= bits
            if nodes < 0:
                nodes = self.codec.nodes_touched(bits)
                gains[g] = (a, b, bits, nodes, jid)
            if not nodes:
                continue
            if limit > b:
                # Every window [t, t + duration) that overlaps [a, b) from
                # t >= now also covers [b, now + duration): what is in use
                # there now is no gain to any of them.
                ptimes, used = self._times, self._used
                k = bisect.bisect_right(ptimes, b) - 1
                nseg = len(ptimes)
                useful = bits
                while useful and k < nseg and ptimes[k] < limit:
                    useful &= ~used[k] | own
                    k += 1
                if useful != bits:
                    nodes = self.codec.nodes_touched(useful) if useful else 0
                    if not nodes:
                        continue
            found.append((a, b, nodes))
        times, whole = proof.times, proof.whole
        k = bisect.bisect_right(times, now) - 1
        if k > 0:
            times, whole = times[k:], whole[k:]
        if found or joined:
            add = [self.codec.nodes_touched(joined) if joined else 0] * len(times)
            for a, b, nodes in found:
                # The windows that overlap [a, b): a - duration < t < b.
                first = bisect.bisect_right(times, a - duration) - 1
                for i in range(first if first > 0 else 0, bisect.bisect_left(times, b)):
                    add[i] += nodes
            bound = [w + x for w, x in zip(whole, add, strict=True)]
            if bound and max(bound) >= proof.n:
                add = self._whole_again(gained, pool, times, proof.t, duration, now, own)
                if add is None:
                    return None
                bound = [w + x for w, x in zip(whole, add, strict=True)]
                if max(bound) >= proof.n:
                    return None
            whole = bound
        proof.now, proof.times, proof.whole, proof.pool = now, times, whole, pool
        return proof

    #: :meth:`_whole_again` gives up beyond this many nodes (its cost is
    #: one pass over the timeline per node).
    WHOLE_AGAIN_NODES = 16

    def _whole_again(
        self, gained: int, pool: int, times: list[float], t: float, duration: float, now: float, own: int
    ) -> list[int] | None:
        """For each piece ``[times[i], times[i+1])`` of a proof (the last
        ends at ``t``), how many of the nodes that ``gained`` touches are
        wholly available, in the plan as it is now, over ``[s, s +
        duration)`` for some start ``s`` in that piece (from ``now`` on); or
        None when too many nodes are touched to look at each.

        Why it bounds what :meth:`prove_none_before` needs: a node wholly
        available now but not when the proof was made has something of it
        in ``gained``, and it counts only where it is wholly available now.
        A node is, over ``[s, s + duration)``, exactly when it is in the pool
        and no segment of the step function that the window overlaps uses
        any of it (``own``, the job's own span still in the plan, aside)."""
        codec = self.codec
        nodes = [full for full in codec.node_bits.values() if gained & full and pool & full == full]
        if len(nodes) > self.WHOLE_AGAIN_NODES:
            return None
        add = [0] * len(times)
        if not nodes:
            return add
        ptimes = self._times
        k0 = bisect.bisect_right(ptimes, now) - 1
        # a window starting before t ends by t + duration: later segments never matter
        kend = max(bisect.bisect_left(ptimes, t + duration), k0 + 1)
        starts = ptimes[k0:kend]
        starts[0] = now
        keep = ~own
        fulls = [full & keep for full in nodes]
        mask = 0
        for full in fulls:
            mask |= full
        busy = [u & mask for u in self._used[k0:kend]]
        last = len(times) - 1
        for full in fulls:
            # 1 where the node is unused, per segment; runs of 1s are the
            # maximal [u, v) it is unused (to the horizon at least at the end)
            free = bytes([not (x & full) for x in busy])
            done = -1  # pieces already counted for this node
            j = free.find(1)
            while j >= 0:
                e = free.find(0, j)
                u = starts[j]
                v = math.inf if e < 0 else starts[e]
                if v - u >= duration:
                    first = max(bisect.bisect_right(times, u) - 1, 0, done + 1)
                    stop = last if v == math.inf else min(bisect.bisect_right(times, v - duration) - 1, last)
                    for i in range(first, stop + 1):
                        add[i] += 1
                    done = max(done, stop)
                if e < 0:
                    break
                j = free.find(1, e)
        return add

    def span(self, jobid: int) -> Span | None:
        return self._spans.get(jobid)

    def __contains__(self, jobid: object) -> bool:
        return jobid in self._spans

    def __len__(self) -> int:
        return len(self._spans)

    def spans(self) -> list[Span]:
        return list(self._spans.values())

    def reserved(self) -> list[Span]:
        return list(self._reserved.values())

    @property
    def nreserved(self) -> int:
        return self._nreserved

    def reserved_during(self, t0: float, t1: float, exclude: int | None = None) -> int:
        """Flat union of the reservations that overlap ``[t0, t1)`` (but ``exclude``'s).

        Remembered until a reservation changes: a pass asks it for every job
        beyond the reservation depth, with a few distinct walltimes."""
        key = (t0, t1, exclude)
        c = self._reserved_cache
        if c[0] == self._reserved_version:
            hit = c[1].get(key)
            if hit is not None:
                return hit
        else:
            c = self._reserved_cache = (self._reserved_version, {})
        out = 0
        if self._nreserved:
            for s in self._reserved.values():
                if s.start < t1 and s.end > t0 and s.jobid != exclude:
                    out |= s.bits
        if len(c[1]) < 64:
            c[1][key] = out
        return out

    def _latest_reserved_start(self) -> float:
        """The latest start of a reservation (remembered until one changes)."""
        c = self._last_reserved_start
        if c[0] != self._reserved_version:
            latest = -math.inf
            for s in self._reserved.values():
                if s.start > latest:
                    latest = s.start
            c = self._last_reserved_start = (self._reserved_version, latest)
        return c[1]

    def clear_reservations(self) -> None:
        """Drop every reserved span (a pass re-plans them from scratch)."""
        if self._nreserved:
            for s in list(self._reserved.values()):
                self.remove(s.jobid)

    def set_end(self, jobid: int, end: float) -> None:
        """Move a span's end (``sched.expiration``)."""
        span = self._spans.get(jobid)
        if span is None:
            raise PlannerError(f"job {jobid} has no span")
        self.remove(jobid)
        if span.running:
            self.add_running(jobid, span._rs, span.start, end, span.bits)
        else:
            self.reserve(jobid, span._rs, span.start, end, span.bits)

    # -- queries -----------------------------------------------------------

    def set_now(self, now: float) -> None:
        """Tell the planner the current time (see :attr:`now`)."""
        self.now = max(self.now, float(now))
        times = self._times
        if len(times) > 1 and times[1] <= self.now:
            self._forget_past()

    def _forget_past(self) -> None:
        """Fold every boundary at or before :attr:`now` into the first segment.

        Nothing asks about the plan before now (every question is about a
        window from now on), and a running job's start boundary is in the
        past for as long as it runs: without this, thousands of running jobs
        started at distinct times make thousands of segments that every
        span change walks.  The first segment takes the value of the one
        that holds now, so every window from now on sees what it saw.  A
        span that starts (or ends) at or before the floor takes no boundary
        there, and gives none back when it is removed.
        """
        times, used, refs = self._times, self._used, self._refs
        k = bisect.bisect_right(times, self.now) - 1  # the segment holding now
        used[0] = used[k]
        del times[1 : k + 1], used[1 : k + 1], refs[1 : k + 1]
        self._floor = self.now

    def free_bits(self) -> int:
        """``graph.free()``, flat (cached on the graph's version counter)."""
        g = self.graph
        version = getattr(g, "version", None)
        c = self._free_cache
        if c is not None and version is not None and c[0] == version:
            return c[1]
        bits = self.codec.encode(g.free())
        self._free_cache = (version, bits)
        return bits

    def graph_changed(self, version_before: Any, taken: int = 0, given: int | None = 0) -> None:
        """The caller just allocated ``taken`` or released ``given`` in the graph.

        Keeps the cached free set in step without re-reading the graph, when
        the cache was current before the change and nothing is down or
        drained (a release on a down rank does not make anything free).
        ``given=None`` means "unknown": the cache is dropped.
        """
        c = self._free_cache
        g = self.graph
        if c is None or version_before is None or c[0] != version_before or given is None:
            self._free_cache = None
            return
        if given and _unusable_ranks(g):
            self._free_cache = None
            return
        self._free_cache = (g.version, (c[1] & ~taken) | given)

    def pool_bits(self) -> int:
        """Up resources, free now or held by a running job that is not overdue."""
        version = getattr(self.graph, "version", None)
        key = (version, self._running_version, self.now)
        c = self._pool_cache
        if version is not None and c is not None and c[0] == key:
            return c[1]
        pool = self._pool_bits()
        self._pool_cache = (key, pool)
        return pool

    def _pool_bits(self) -> int:
        free = self.free_bits()
        held = self._running_union
        i = bisect.bisect_right(self._running_ends, (self.now, math.inf))
        if i:  # overdue jobs (few): their end is unknown, keep them out
            spans = self._spans
            for _, jobid in self._running_ends[:i]:
                held &= ~spans[jobid].bits
        if held:
            bad = _unusable_ranks(self.graph)
            if bad:
                held &= ~self.codec.ranks_mask(bad)
            free |= held
        return free

    def pool(self) -> Any:
        return self.codec.decode(self.pool_bits())

    def available_bits(self, t0: float, t1: float) -> int:
        if t1 <= t0:
            t1 = t0 + 1e-9
        lo = self._index(t0)
        hi = bisect.bisect_left(self._times, t1)
        busy = 0
        used = self._used
        for k in range(lo, hi):
            busy |= used[k]
        return self.pool_bits() & ~busy

    def available(self, t0: float, t1: float) -> Any:
        """Up resources free throughout ``[t0, t1)``."""
        return self.codec.decode(self.available_bits(t0, t1))

    def match_bits(self, request: Any, avail: int, policy: str = "first") -> tuple[Any, int] | None:
        """Match ``request`` on a flat available set: ``(rs, bits)`` or None.

        ``rs`` may be None (not decoded yet): see :meth:`resolve`."""
        live = (
            self._free_cache is not None
            and avail == self._free_cache[1]
            and self._free_cache[0] == getattr(self.graph, "version", None)
        )
        return self.matcher.flat(self.graph, self.codec, request, policy, avail, live)

    def resolve(self, placement: tuple[Any, int]) -> Any:
        """The ResourceSet of a ``(rs or None, bits)`` placement."""
        rs, bits = placement
        return rs if rs is not None else self.codec.decode(bits)

    def earliest(self, request: Any, now: float, duration: float, policy: str = "first") -> tuple[float, Any] | None:
        """The earliest ``t >= now`` at which ``request`` fits for ``duration``.

        Returns ``(t, resources)``, or ``None`` when it does not fit even after
        every planned span has ended (too big for the resources that are up).
        ``duration`` of 0 or ``math.inf`` means unlimited.
        """
        found = self.earliest_bits(request, now, duration, policy)
        if found is None:
            return None
        t, rs, bits = found
        return t, rs if rs is not None else self.codec.decode(bits)

    def earliest_bits(
        self,
        request: Any,
        now: float,
        duration: float,
        policy: str = "first",
        before: float = math.inf,
        trace: NoEarlier | None = None,
        not_before: float = -math.inf,
    ) -> tuple[float, Any, int] | None:
        """Like :meth:`earliest`, with the flat set: ``(t, rs, bits)``.

        With ``before``, only start times earlier than it are tried (the
        caller already holds a place at ``before``).  With ``not_before``,
        only start times from it on are (a job that cannot start before the
        one ahead of it); ``now`` stays the present, for overdue jobs.  With
        ``trace`` (for a :meth:`whole_node_request` of ``trace.n`` nodes,
        searched from ``now``), the failed candidates are recorded in it: it
        becomes the proof that nothing fits before the answer (or
        ``before``), once ``trace.t`` and ``trace.seq`` are set."""
        if not duration or duration <= 0:
            duration = math.inf
        self.set_now(now)
        if trace is not None and not_before > now:
            raise PlannerError("a proof (trace) is only made for a search from now")
        start = max(now, not_before)
        pool = self.pool_bits()
        if trace is not None:
            trace.pool = pool
        times = self._times
        cands = [start] + times[bisect.bisect_right(times, start) : bisect.bisect_left(times, before)]
        if before <= start:
            return None
        if self._nreserved == 0 and self._max_running_start <= now:
            # Only running jobs: availability grows with t, binary search it.
            if trace is not None:  # not measured: at most n - 1 anywhere
                trace.times.append(now)
                trace.whole.append(trace.n - 1)
            return self._earliest_monotone(request, cands, pool, policy)
        if start > now and self._max_running_start <= start and self._latest_reserved_start() <= start:
            # Every span has started by ``start`` (a queue planned in order):
            # from there on, too, availability only grows.
            return self._earliest_monotone(request, cands, pool, policy)
        if trace is not None:
            return self._earliest_whole(request, now, duration, policy, cands, pool, trace)

        match = self.match_bits
        fit, codec = self.matcher.fit, self.codec
        window = _WindowUnion()
        used = self._used
        n = len(times)
        lo = self._index(start)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = -1
        for t in cands:
            while lo < n - 1 and times[lo + 1] <= t:
                if lo < hi:
                    window.pop()
                else:
                    hi += 1
                lo += 1
            end = t + duration
            while hi < n and times[hi] < end:
                window.push(used[hi])
                hi += 1
            avail = pool & ~window.value()
            if not avail or avail == last_failed:
                continue
            if fit(codec, request, policy, avail) is False:  # the matcher would say None
                last_failed = avail
                continue
            found = match(request, avail, policy)
            if found is not None:
                return t, found[0], found[1]
            last_failed = avail
        return None

    def _earliest_whole(
        self, request: Any, now: float, duration: float, policy: str, cands: list[float], pool: int, trace: NoEarlier
    ) -> tuple[float, Any, int] | None:
        """:meth:`earliest_bits` for a :meth:`whole_node_request`: the same
        candidates in the same order, and the same answer, but a candidate
        that has fewer than ``n`` whole nodes is rejected without calling
        the matcher (which would reject it), and recorded in ``trace``.
        The window union is :class:`_WindowUnion`, inlined."""
        n = trace.n
        whole_count = self.codec.whole_count
        ttimes, twhole = trace.times, trace.whole
        times, used = self._times, self._used
        nseg = len(times)
        back: list[int] = []
        back_agg = 0
        front: list[int] = []  # suffix unions, front of the window last
        lo = self._index(now)  # first segment in the window
        hi = lo  # first segment not yet pushed
        last_failed = -1
        w = 0
        for t in cands:
            while lo < nseg - 1 and times[lo + 1] <= t:
                if lo < hi:
                    if not front:
                        agg = 0
                        for item in reversed(back):
                            agg |= item
                            front.append(agg)
                        back.clear()
                        back_agg = 0
                    front.pop()
                else:
                    hi += 1
                lo += 1
            end = t + duration
            while hi < nseg and times[hi] < end:
                x = used[hi]
                back.append(x)
                back_agg |= x
                hi += 1
            avail = pool & ~((front[-1] | back_agg) if front else back_agg)
            ttimes.append(t)
            if not avail:
                twhole.append(0)
                continue
            if avail != last_failed:
                w = whole_count(avail)
                if w >= n:
                    found = self.match_bits(request, avail, policy)
                    if found is not None:
                        ttimes.pop()
                        return t, found[0], found[1]
                last_failed = avail
            twhole.append(w)
        return None

    def _earliest_monotone(
        self, request: Any, cands: list[float], pool: int, policy: str, exact: bool = True
    ) -> tuple[float, Any, int] | None:
        """Binary search of ``cands`` for the first time ``request`` fits.

        Only running jobs, all started by now: a span covering a later
        segment covers every earlier one from now on, so what is busy
        during [t, t + d) is just the segment containing t.

        A probe only needs a yes or no: where :meth:`MatchCache.fit` tells
        it exactly (``exact``), the matcher is called once, at the time the
        search settles on, instead of at every probe that fits.  The probes
        and their outcomes are the same, so is the answer."""
        used, index, match = self._used, self._index, self.match_bits
        fit = self.matcher.fit if exact else None
        codec = self.codec

        def attempt(t: float) -> tuple[Any, int] | bool | None:
            avail = pool & ~used[index(t)]
            if fit is not None:
                ok = fit(codec, request, policy, avail)
                if ok is not None:
                    return ok
            return match(request, avail, policy)

        lo, hi = 0, len(cands) - 1
        best = attempt(cands[hi])
        if best is None or best is False:
            return None
        found = hi
        while lo < hi:
            mid = (lo + hi) // 2
            got = attempt(cands[mid])
            if got is not None and got is not False:
                best, found, hi = got, mid, mid
            else:
                lo = mid + 1
        if best is True:
            best = match(request, pool & ~used[index(cands[found])], policy)
            if best is None:  # pragma: no cover - fit() promised a placement
                return self._earliest_monotone(request, cands, pool, policy, exact=False)
        return cands[found], best[0], best[1]

    # -- the step function ---------------------------------------------------

    def _index(self, t: float) -> int:
        """Index of the segment containing ``t``."""
        return bisect.bisect_right(self._times, t) - 1

    def _split(self, t: float) -> int:
        """Make ``t`` a boundary; return its index and take a reference on it
        (none at or before the floor: the first segment stands for it)."""
        if t <= self._floor:
            return 0
        k = self._index(t)
        if self._times[k] != t:
            k += 1
            self._times.insert(k, t)
            self._used.insert(k, self._used[k - 1])
            self._refs.insert(k, 0)
        self._refs[k] += 1
        return k

    def _unref(self, k: int) -> None:
        if k >= len(self._times):
            return
        self._refs[k] -= 1
        if self._refs[k] == 0 and k > 0:
            used = self._used
            freed = used[k] & ~used[k - 1]
            if freed:  # only when spans overlapped: the merge frees something
                end = self._times[k + 1] if k + 1 < len(self._times) else math.inf
                self._log_gain(self._times[k], end, freed, -2)
            del self._times[k], used[k], self._refs[k]

    def _log_gain(self, start: float, end: float, bits: int, jobid: int) -> None:
        if start < end and bits:
            gains = self._gains
            gains.append((start, end, bits, -1, jobid))
            if len(gains) > 8192:
                del gains[:4096]
                self._gains_base += 4096

    def _net_gain(self, span: Span) -> None:
        """``span``'s job gave back a span just before (re-planned): keep only
        what the old span held that the new one does not."""
        gains = self._gains
        if not gains or self._gains_base + len(gains) <= self._gains_mark:
            return
        a, b, old, _, jobid = gains[-1]
        if jobid != span.jobid:
            return
        gains.pop()
        c, d, new = span.start, span.end, span.bits
        if c >= b or d <= a:  # no overlap in time
            self._log_gain(a, b, old, jobid)
            return
        self._log_gain(a, c, old, jobid)
        self._log_gain(max(a, c), min(b, d), old & ~new, jobid)
        self._log_gain(d, b, old, jobid)

    def _add(self, span: Span) -> None:
        if span.jobid in self._spans:
            raise PlannerError(f"job {span.jobid} already has a span")
        self._mutations += 1
        if not span.end > span.start:
            raise PlannerError(f"job {span.jobid}: empty span [{span.start}, {span.end})")
        lo = self._split(span.start)
        hi = self._split(span.end) if span.end != math.inf else len(self._times)
        b = span.bits
        used = self._used
        for k in range(lo, hi):
            if used[k] & b:
                self._overlapped = True
            used[k] |= b
        self._spans[span.jobid] = span
        if not span.running:
            self._reserved[span.jobid] = span
        self._net_gain(span)
