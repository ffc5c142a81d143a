"""The match cache: the matcher, memoized on flat sets, with exact fast paths.

A search over candidate start times asks "does this request fit in that
set?" many times; :class:`MatchCache` answers from counts when that is exact
(:mod:`.fastfit`), remembers matcher answers per (request shape, placement
policy, set), and rejects sets below the request's lower bounds without a
traversal.  Request facts (whole nodes, bounds, slot shape, the interned
key) are the request's own, computed once (:class:`~fluxsched_py.jobspec.Request`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import memo
from ..match.policy import POLICIES as MATCH_POLICIES
from ..resource.flatfree import as_int
from .fastfit import take_slots
from .placement import Placement

__all__ = ["MatchCache", "Matcher", "default_matcher", "highest_bits", "lower_bounds", "lowest_bits"]

Matcher = Callable[..., Any]

_MISS = object()


def default_matcher() -> Matcher:
    from ..match import match

    return match


def lower_bounds(request: Any) -> tuple[tuple[str, int], ...]:
    """Counts any placement of ``request`` needs at least (see
    :attr:`~fluxsched_py.jobspec.Request.lower_bounds`)."""
    return request.lower_bounds


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
    #: network, and slot-host/flexible variants place slots differently: left out.
    SLOT_ORDER = {
        name: (p.order, p.high_ids)
        for name, p in MATCH_POLICIES.items()
        if not (p.node_exclusive or p.locality or p.flexible or p.network) and p.slot_host == "node"
    }

    def __init__(self, matcher: Matcher, maxsize: int = 2048, fast_paths: bool = True) -> None:
        from cachetools import LRUCache

        self.matcher = matcher
        self.fast_paths = fast_paths
        self.fast = 0
        self._cache: LRUCache = memo.store("match", lambda: LRUCache(maxsize=maxsize))
        self.calls = 0
        self.hits = 0
        self.rejects = 0

    @staticmethod
    def _facts(request: Any) -> tuple[Any, tuple[tuple[str, int], ...], int, tuple[int, int] | None]:
        """``(key, lower bounds, whole nodes, slot shape)``: the request's own
        facts, computed when it was made (the key is hashed once)."""
        return request.key, request.lower_bounds, request.whole_nodes, request.slot_shape

    def __call__(self, g: Any, request: Any, *, policy: str = "first", available: Any = None) -> Any:
        """The matcher's own signature, on ResourceSets (no memo)."""
        self.calls += 1
        return self.matcher(g, request, policy=policy, available=available)

    def flat(self, g: Any, codec: Any, request: Any, policy: str, avail: int, live: bool = False) -> Placement | None:
        """Match on a flat available set; a placement or None, memoized.

        ``live`` says ``avail`` is exactly the graph's free set: the matcher
        then reads the graph's own availability instead of rebuilding one."""
        self.calls += 1
        if not avail:
            return None
        key, bounds, nodes, slots = self._facts(request)
        if slots is not None and self.fast_paths and policy in self.SLOT_ORDER:
            fields = codec.unit_fields("core")
            if fields is not None:
                # Exact, so before the bounds (they count the whole set) and
                # not memoized: from the node index the answer costs less
                # than the memo's key (hashing the whole set), and the memo
                # would hold a whole set per entry (issue 15).
                self.fast += 1
                order, high_ids = self.SLOT_ORDER[policy]
                took = take_slots(fields, avail, fields.index(avail), slots[0], slots[1], order, high_ids)
                return None if took is None else Placement(self._resourceset(codec.topo, 0, took[1]), took[0])
        avail = as_int(avail)
        for rtype, n in bounds:
            if codec.count(avail, rtype) < n:
                self.rejects += 1
                return None
        if nodes and self.fast_paths and codec.flat_nodes and policy in self.FAST_ORDER:
            self.fast += 1
            return self._take_nodes(codec, avail, nodes, self.FAST_ORDER[policy])
        key = (key, policy, codec.spread(avail), avail)
        hit = self._cache.get(key, _MISS)
        if hit is not _MISS:
            self.hits += 1
            return hit
        rs = self.matcher(g, request, policy=policy, available=None if live else codec.decode(avail))
        out = None if rs is None else Placement(rs, codec.encode(rs))
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
                return slots[1] == 1 or fields.index(avail).capacity(slots[1]) >= slots[0]
        return None

    def whole_fast(self, codec: Any, request: Any, policy: str) -> int:
        """N when :meth:`flat` places ``request`` by the whole-node fast path
        (it fits a set exactly when N nodes of the set are wholly in it), else 0."""
        n = request.whole_nodes
        return n if n and self.fast_paths and codec.flat_nodes and policy in self.FAST_ORDER else 0

    def whole_nodes(self, request: Any) -> int:
        """N when ``request`` is exactly ``node[N] exclusive > slot[1] > core[1]``
        with no constraint (how the replay models Batsim and SWF jobs), else 0."""
        return request.whole_nodes

    @staticmethod
    def _take_nodes(codec: Any, avail: int, n: int, high_first: bool) -> Placement | None:
        """The ``n`` wholly available nodes the matcher would pick, in one pass
        over the node vertices (the matcher's order: by vertex, ascending for
        ``low``; descending for ``high``, and for ``first`` since all nodes are
        alike and wholly free ones tie on available cores)."""
        whole = codec.whole_nodes(avail)
        if whole.bit_count() < n:
            return None
        return Placement(None, codec.nodes_bits(highest_bits(whole, n) if high_first else lowest_bits(whole, n)))


#: Up to this many bits, peel them one by one (each peel is one pass over the
#: int); above it, the cut is found by :func:`_cut`.
_PEEL = 8


def lowest_bits(m: int, n: int) -> int:
    """The ``n`` lowest set bits of ``m`` (``m`` has at least ``n``).

    Peeling ``n`` bits off one at a time costs ``n`` passes over ``m``: for a
    1,000-node placement on a 93,312-node machine, a thousand passes over a
    186,624-bit int (issue 21).  Above a few bits, the cut below which ``m``
    has ``n`` set bits is found by :func:`_cut`."""
    if n <= _PEEL:
        out = 0
        for _ in range(n):
            bit = m & -m
            m ^= bit
            out |= bit
        return out
    return m & ((1 << _cut(m, n, False)) - 1)


def highest_bits(m: int, n: int) -> int:
    """The ``n`` highest set bits of ``m`` (``m`` has at least ``n``): see :func:`lowest_bits`."""
    if n <= _PEEL:
        out = 0
        for _ in range(n):
            bit = 1 << (m.bit_length() - 1)
            m ^= bit
            out |= bit
        return out
    k = _cut(m, n, True)
    return (m >> k) << k


def _cut(m: int, n: int, high: bool) -> int:
    """Where the ``n`` set bits of ``m`` taken from one end stop: with
    ``high``, the largest ``k`` with ``n`` set bits from bit ``k`` up; else
    the smallest ``k`` with ``n`` set bits below bit ``k`` (``m`` has at
    least ``n``).

    First a window that holds the cut, galloping from that end (2n, 4n, ...
    bits), then a binary search by popcounts in a window that halves, whose
    bits are kept apart from those outside it (counted once): each step
    reads only the window.  The cost grows with the distance from the end
    to the cut, about four passes over it, not with the width of ``m`` (a
    popcount of ``m`` at each step of a plain binary search costs about
    2 log2(width) passes over ``m``)."""
    w = m.bit_length()
    d = max(2 * n, 64)
    if high:  # invariant: popcount(m >> lo) >= n > popcount(m >> (hi + 1)) == above
        lo, hi = 0, w - n
        above = (m >> (hi + 1)).bit_count()
        while d < w:
            c = (m >> (w - d)).bit_count()
            if c >= n:
                lo = w - d
                break
            hi, above = w - d - 1, c
            d *= 2
        seg = (m >> lo) & ((1 << (hi + 1 - lo)) - 1)  # the bits of [lo, hi], from bit lo
        while lo < hi:
            mid = (lo + hi + 1) // 2
            top = seg >> (mid - lo)  # the bits of [mid, hi], from bit mid
            c = above + top.bit_count()
            if c >= n:
                lo, seg = mid, top
            else:
                hi, above = mid - 1, c
                seg &= (1 << (mid - lo)) - 1
        return lo
    # invariant: popcount(m & (1 << lo) - 1) == below < n <= popcount(m & (1 << hi) - 1)
    lo, hi = n - 1, w
    below = (m & ((1 << lo) - 1)).bit_count()
    while d < w:
        c = (m & ((1 << d) - 1)).bit_count()
        if c >= n:
            hi = d
            break
        lo, below = d, c
        d *= 2
    seg = (m & ((1 << hi) - 1)) >> lo  # the bits of [lo, hi), from bit lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        low = seg & ((1 << (mid - lo)) - 1)  # the bits of [lo, mid), from bit lo
        c = below + low.bit_count()
        if c >= n:
            hi, seg = mid, low
        else:
            lo, below, seg = mid, c, seg >> (mid - lo)
    return hi
