"""Id notations used across Flux: RFC 22 idsets and RFC 29 hostlists.

An :class:`IdSet` is an immutable set of non-negative integers.  It is stored
as a Python ``int`` bitmask, so union, intersection and difference run at C
speed and a 16K-rank set costs 2 KiB.  Its string form is the canonical RFC 22
form: ascending, comma separated, consecutive ids compressed into ``lo-hi``.

A :class:`Hostlist` is an ordered list of host names (duplicates allowed).
Its string form is the RFC 29 compressed form: runs of names that share a
prefix and differ in their trailing number are bracketed, ``node[1-3,7]``.
Parsing also accepts several bracketed lists in one expression, which expand
as a cartesian product, left to right: ``n[1-2]-ib[0-1]`` is
``n1-ib0,n1-ib1,n2-ib0,n2-ib1``.

Both parsers reject malformed input with :class:`IdSetError` /
:class:`HostlistError` (subclasses of ``ValueError``) whose message names the
offending text, and both refuse sizes that would exhaust memory.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator

from .errors import FluxschedError
from .limits import MAX_HOSTS, MAX_ID

__all__ = [
    "IdSet",
    "IdSetError",
    "Hostlist",
    "HostlistError",
    "user_id",
]


_IDSET_CHARS = re.compile(r"^[0-9,\-\s]*$")
_RUN_OF_ONES = re.compile(r"1+")
#: Up to this many runs, :meth:`IdSet.runs` finds them with a few integer
#: operations each rather than one scan of the mask as a string (both cost
#: in proportion to the mask's width; measured at 1,024 and 16,384 bits,
#: peeling is 3-15x faster for 4-8 runs, 2x for 32, even near 64).
_ARITH_RUNS = 32


class IdSetError(FluxschedError, ValueError):
    """An idset string or value that is not valid RFC 22."""


class HostlistError(FluxschedError, ValueError):
    """A hostlist string that is not valid RFC 29."""


def _parse_uint(token: str, text: str) -> int:
    if not token.isdigit() or not token.isascii():
        raise IdSetError(f"invalid idset {text!r}: {token!r} is not a non-negative integer")
    if len(token) > 1 and token[0] == "0":
        raise IdSetError(f"invalid idset {text!r}: {token!r} has a leading zero")
    value = int(token)
    if value > MAX_ID:
        raise IdSetError(f"invalid idset {text!r}: id {value} exceeds the limit {MAX_ID}")
    return value


class IdSet:
    """An immutable set of non-negative integer ids (RFC 22).

    >>> s = IdSet.parse("0-3,7")
    >>> str(s | IdSet([4]))
    '0-4,7'
    >>> len(s), 7 in s, list(s - IdSet.parse("1-2"))
    (5, True, [0, 3, 7])
    """

    __slots__ = ("_mask",)

    def __init__(self, ids: Iterable[int] = ()) -> None:
        mask = 0
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or i < 0 or i > MAX_ID:
                raise IdSetError(f"invalid id {i!r}: ids are integers in 0..{MAX_ID}")
            mask |= 1 << i
        self._mask = mask

    # -- construction -------------------------------------------------
    @classmethod
    def from_mask(cls, mask: int) -> IdSet:
        """Wrap a bitmask whose bit *i* set means id *i* is a member."""
        if mask < 0:
            raise IdSetError("an idset bitmask cannot be negative")
        obj = cls.__new__(cls)
        obj._mask = mask
        return obj

    @classmethod
    def range(cls, lo: int, hi: int) -> IdSet:
        """The ids ``lo..hi`` inclusive (empty when ``hi < lo``)."""
        if lo < 0 or hi > MAX_ID:
            raise IdSetError(f"range {lo}-{hi} is outside 0..{MAX_ID}")
        if hi < lo:
            return cls.from_mask(0)
        return cls.from_mask(((1 << (hi - lo + 1)) - 1) << lo)

    @classmethod
    def of(cls, ids: IdSet | str | int | Iterable[int]) -> IdSet:
        """``ids`` as an IdSet: itself, an RFC 22 string, one id, or ids."""
        if isinstance(ids, IdSet):
            return ids
        if isinstance(ids, str):
            return cls.parse(ids)
        if isinstance(ids, int):
            return cls([ids])
        return cls(ids)

    @classmethod
    def parse(cls, text: str) -> IdSet:
        """Parse an RFC 22 idset string, with or without surrounding brackets."""
        if not isinstance(text, str):
            raise IdSetError(f"an idset must be a string, not {type(text).__name__}")
        body = text.strip()
        if body.startswith("[") and body.endswith("]"):
            body = body[1:-1]
        if not _IDSET_CHARS.match(body):
            raise IdSetError(f"invalid idset {text!r}: unexpected character")
        mask = 0
        if body.strip() == "":
            return cls.from_mask(0)
        for part in body.split(","):
            part = part.strip()
            if not part:
                raise IdSetError(f"invalid idset {text!r}: empty element")
            lo_s, sep, hi_s = part.partition("-")
            lo = _parse_uint(lo_s, text)
            hi = _parse_uint(hi_s, text) if sep else lo
            if hi < lo:
                raise IdSetError(f"invalid idset {text!r}: range {part!r} is descending")
            mask |= ((1 << (hi - lo + 1)) - 1) << lo
        return cls.from_mask(mask)

    # -- inspection ---------------------------------------------------
    @property
    def mask(self) -> int:
        return self._mask

    def __len__(self) -> int:
        return self._mask.bit_count()

    def __bool__(self) -> bool:
        return self._mask != 0

    def __contains__(self, item: object) -> bool:
        return isinstance(item, int) and item >= 0 and bool(self._mask >> item & 1)

    def runs(self) -> Iterator[tuple[int, int]]:
        """Yield ``(lo, hi)`` for each maximal run of consecutive ids."""
        m = self._mask
        if not m:
            return
        low = m & -m
        if not (m + low) & m:  # one run (a single id, or ids lo..hi)
            yield low.bit_length() - 1, m.bit_length() - 1
            return
        if (m ^ (m & (m << 1))).bit_count() <= _ARITH_RUNS:  # few runs: peel them off the low end
            while m:
                low = m & -m
                above = m + low  # the lowest run cleared, the bit above it set
                yield low.bit_length() - 1, (above & -above).bit_length() - 2
                m &= above
            return
        bits = bin(m)[:1:-1]  # least significant bit first
        for m in _RUN_OF_ONES.finditer(bits):
            yield m.start(), m.end() - 1

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.runs():
            yield from range(lo, hi + 1)

    def first(self) -> int:
        """The smallest id; raises ``ValueError`` on an empty set."""
        if not self._mask:
            raise ValueError("empty idset has no first id")
        return (self._mask & -self._mask).bit_length() - 1

    def last(self) -> int:
        """The largest id; raises ``ValueError`` on an empty set."""
        if not self._mask:
            raise ValueError("empty idset has no last id")
        return self._mask.bit_length() - 1

    def lowest(self, n: int) -> IdSet:
        """The ``n`` smallest ids (all of them if there are fewer)."""
        out = 0
        for lo, hi in self.runs():
            if n <= 0:
                break
            take = min(n, hi - lo + 1)
            out |= ((1 << take) - 1) << lo
            n -= take
        return IdSet.from_mask(out)

    def highest(self, n: int) -> IdSet:
        """The ``n`` largest ids (all of them if there are fewer)."""
        out = 0
        for lo, hi in reversed(list(self.runs())):
            if n <= 0:
                break
            take = min(n, hi - lo + 1)
            out |= ((1 << take) - 1) << (hi - take + 1)
            n -= take
        return IdSet.from_mask(out)

    # -- algebra --------------------------------------------------------
    def __or__(self, other: IdSet) -> IdSet:
        return IdSet.from_mask(self._mask | other._mask)

    def __and__(self, other: IdSet) -> IdSet:
        return IdSet.from_mask(self._mask & other._mask)

    def __sub__(self, other: IdSet) -> IdSet:
        return IdSet.from_mask(self._mask & ~other._mask)

    def __xor__(self, other: IdSet) -> IdSet:
        return IdSet.from_mask(self._mask ^ other._mask)

    union = __or__
    intersection = __and__
    difference = __sub__

    def issubset(self, other: IdSet) -> bool:
        return self._mask & ~other._mask == 0

    def isdisjoint(self, other: IdSet) -> bool:
        return self._mask & other._mask == 0

    def __le__(self, other: IdSet) -> bool:
        return self.issubset(other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdSet) and self._mask == other._mask

    def __hash__(self) -> int:
        return hash(("IdSet", self._mask))

    # -- formatting -----------------------------------------------------
    def encode(self, brackets: bool = False) -> str:
        """The canonical RFC 22 string, optionally wrapped in brackets."""
        parts = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.runs()]
        body = ",".join(parts)
        return f"[{body}]" if brackets and len(parts) > 0 else body

    def __str__(self) -> str:
        return self.encode()

    def __repr__(self) -> str:
        return f"IdSet({self.encode()!r})"


# ---------------------------------------------------------------------------
# Hostlists (RFC 29)
# ---------------------------------------------------------------------------

_DIGIT_RUN = re.compile(r"\d+")


def _number_splits(host: str) -> list[tuple[str, str, str]]:
    """Every ``(prefix, digits, suffix)`` split of a name, rightmost number first."""
    return [(host[: m.start()], m.group(), host[m.end() :]) for m in reversed(list(_DIGIT_RUN.finditer(host)))]


def _width(digits: str) -> int:
    """Zero-padded width of a number string, or 0 when it is not padded."""
    return len(digits) if len(digits) > 1 and digits[0] == "0" else 0


class _Group:
    """Names ``prefix<N>suffix`` with N in ascending runs, for compression."""

    __slots__ = ("prefix", "suffix", "width", "runs")

    def __init__(self, prefix: str, digits: str, suffix: str) -> None:
        self.prefix, self.suffix, self.width = prefix, suffix, _width(digits)
        value = int(digits)
        self.runs = [[value, value]]

    def _fits(self, prefix: str, digits: str, suffix: str) -> bool:
        if prefix != self.prefix or suffix != self.suffix:
            return False
        w = _width(digits)
        return w == self.width or (w == 0 and self.width > 0 and len(digits) >= self.width)

    def add(self, host: str) -> bool:
        plen, slen = len(self.prefix), len(self.suffix)
        if len(host) <= plen + slen or not host.startswith(self.prefix) or not host.endswith(self.suffix):
            return False
        digits = host[plen : len(host) - slen]
        if not digits.isdigit() or not digits.isascii() or not self._fits(self.prefix, digits, self.suffix):
            return False
        value = int(digits)
        if value == self.runs[-1][1] + 1:
            self.runs[-1][1] = value
        else:
            self.runs.append([value, value])
        return True

    @classmethod
    def pair(cls, first: str, second: str) -> _Group | None:
        """A group holding both names, split at the rightmost number that differs."""
        for prefix, digits, suffix in _number_splits(first):
            group = cls(prefix, digits, suffix)
            if group.add(second):
                return group
        return None

    def encode(self) -> str:
        w = self.width
        body = ",".join(
            str(lo).zfill(w) if lo == hi else f"{str(lo).zfill(w)}-{str(hi).zfill(w)}" for lo, hi in self.runs
        )
        return f"{self.prefix}[{body}]{self.suffix}"


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets, checking bracket balance."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise HostlistError(f"invalid hostlist {text!r}: nested '[' at offset {i}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"invalid hostlist {text!r}: unmatched ']' at offset {i}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"invalid hostlist {text!r}: missing ']'")
    parts.append(text[start:])
    return parts


def _parse_idlist(body: str, text: str) -> list[str]:
    """Expand the inside of one bracket into zero-padded number strings."""
    if not body:
        raise HostlistError(f"invalid hostlist {text!r}: empty brackets")
    out: list[str] = []
    width = 0
    for n, part in enumerate(body.split(",")):
        lo_s, sep, hi_s = part.partition("-")
        if not lo_s.isdigit() or not lo_s.isascii() or (sep and (not hi_s.isdigit() or not hi_s.isascii())):
            raise HostlistError(f"invalid hostlist {text!r}: bad range {part!r}")
        if n == 0 and len(lo_s) > 1 and lo_s[0] == "0":
            width = len(lo_s)
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
        if hi < lo:
            raise HostlistError(f"invalid hostlist {text!r}: range {part!r} is descending")
        if len(out) + hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"invalid hostlist {text!r}: more than {MAX_HOSTS} hosts")
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_expression(expr: str, text: str) -> list[str]:
    """Expand ``prefix[list]middle[list]suffix`` into host names."""
    names = [""]
    pos = 0
    while pos < len(expr):
        lb = expr.find("[", pos)
        if lb < 0:
            literal, pos = expr[pos:], len(expr)
            names = [n + literal for n in names]
            continue
        rb = expr.find("]", lb)
        literal = expr[pos:lb]
        numbers = _parse_idlist(expr[lb + 1 : rb], text)
        if len(names) * len(numbers) > MAX_HOSTS:
            raise HostlistError(f"invalid hostlist {text!r}: more than {MAX_HOSTS} hosts")
        names = [n + literal + num for n in names for num in numbers]
        pos = rb + 1
    return names


class Hostlist:
    """An immutable, ordered list of host names (RFC 29).

    >>> hl = Hostlist.parse("node[3,0-2],login1")
    >>> list(hl)
    ['node3', 'node0', 'node1', 'node2', 'login1']
    >>> str(hl)
    'node[3,0-2],login1'
    """

    __slots__ = ("_hosts", "_members")

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self._members: frozenset[str] | None = None
        hosts = tuple(hosts)
        for h in hosts:
            if not isinstance(h, str) or not h or any(c in h for c in "[],") or not h.isprintable() or h != h.strip():
                raise HostlistError(f"invalid host name {h!r}")
        self._hosts = hosts

    @classmethod
    def parse(cls, text: str) -> Hostlist:
        """Parse an RFC 29 hostlist string; empty expressions are skipped."""
        if not isinstance(text, str):
            raise HostlistError(f"a hostlist must be a string, not {type(text).__name__}")
        if any(c.isspace() for c in text) or not text.isprintable():
            raise HostlistError(f"invalid hostlist {text!r}: whitespace or unprintable character")
        hosts: list[str] = []
        for expr in _split_top_level(text):
            if expr:
                hosts.extend(_expand_expression(expr, text))
                if len(hosts) > MAX_HOSTS:
                    raise HostlistError(f"invalid hostlist {text!r}: more than {MAX_HOSTS} hosts")
        obj = cls.__new__(cls)
        obj._hosts = tuple(hosts)
        obj._members = None
        return obj

    @classmethod
    def from_strings(cls, items: Iterable[str]) -> Hostlist:
        """Concatenate several hostlist strings (R's ``nodelist`` array)."""
        hosts: list[str] = []
        for item in items:
            hosts.extend(cls.parse(item))
        obj = cls.__new__(cls)
        obj._hosts = tuple(hosts)
        obj._members = None
        return obj

    def __len__(self) -> int:
        return len(self._hosts)

    def __iter__(self) -> Iterator[str]:
        return iter(self._hosts)

    def __getitem__(self, i: int) -> str:
        return self._hosts[i]

    def __contains__(self, host: object) -> bool:
        if self._members is None:
            self._members = frozenset(self._hosts)
        return host in self._members

    def index(self, host: str) -> int:
        return self._hosts.index(host)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hostlist) and self._hosts == other._hosts

    def __hash__(self) -> int:
        return hash(("Hostlist", self._hosts))

    def __add__(self, other: Hostlist) -> Hostlist:
        return Hostlist(self._hosts + other._hosts)

    def encode(self) -> str:
        """The compressed RFC 29 string, preserving order and duplicates.

        Consecutive names that differ only in one number are bracketed.  The
        number may sit in the middle (``foo[0-4]-eth2``); the rightmost
        number that varies is preferred.
        """
        out: list[str] = []
        group: _Group | None = None
        pending: str | None = None
        for host in self._hosts:
            if group is not None:
                if group.add(host):
                    continue
                out.append(group.encode())
                group = None
            if pending is not None:
                group = _Group.pair(pending, host)
                if group is None:
                    out.append(pending)
                    pending = host
                else:
                    pending = None
            else:
                pending = host
        if group is not None:
            out.append(group.encode())
        if pending is not None:
            out.append(pending)
        return ",".join(out)

    def __str__(self) -> str:
        return self.encode()

    def __repr__(self) -> str:
        return f"Hostlist({self.encode()!r})"


def user_id(name: str) -> int:
    """The uid a simulation gives a user named ``name`` (a Batsim job's
    string ``user``, a user named in a ``--config`` file or a reservation):
    the CRC-32 of its UTF-8 bytes, less its top bit, so the same name is
    the same uid in every run and every driver, with no passwd database."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF
