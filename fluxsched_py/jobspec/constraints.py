"""RFC 31 job constraints: parse, check and evaluate per node.

A constraint is a JSON object whose keys are operators:

``properties``
    a list of property names the node must have; ``^name`` means it must
    *not* have ``name``;
``hostlist``
    a list of RFC 29 hostlists; the node's host name must be in one of them;
``ranks``
    a list of RFC 22 idsets; the node's rank must be in one of them;
``and`` / ``or``
    a list of constraint objects, all / any of which must hold;
``not``
    a list of constraint objects whose conjunction must *not* hold.

Several keys in one object are combined with AND; the empty object matches
every node.  Parsing turns the object into a frozen :class:`Constraint` tree
(hashable, so it can take part in cache keys); :meth:`Constraint.matches`
evaluates it for one node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import FluxschedError
from ..ids import Hostlist, HostlistError, IdSet, IdSetError
from ..limits import MAX_DEPTH

__all__ = ["Constraint", "ConstraintError", "parse_constraint", "OPERATORS"]

OPERATORS = ("properties", "hostlist", "ranks", "and", "or", "not")
#: Characters a property name may not contain: flux-core's (RFC 20, and
#: ``librlist/match.c``, which takes a leading ``^`` as "not"), so a
#: constraint flux-core accepts is accepted here, ``role=compute`` included.
_BAD_PROPERTY_CHARS = set("!&'\"`|()^")


class ConstraintError(FluxschedError, ValueError):
    """An ill-formed constraint; :attr:`path` is a JSON pointer to it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Constraint:
    """One operator applied to its arguments (see the module docstring)."""

    op: str
    args: tuple  # of str, Hostlist, IdSet or Constraint, depending on op

    def matches(self, rank: int, hostname: str | None, properties: frozenset[str] | set[str]) -> bool:
        """True when a node with this rank, name and properties satisfies it."""
        op = self.op
        if op == "properties":
            for p in self.args:
                if p[0] == "^":
                    if p[1:] in properties:
                        return False
                elif p not in properties:
                    return False
            return True
        if op == "hostlist":
            return hostname is not None and any(hostname in hl for hl in self.args)
        if op == "ranks":
            return any(rank in ids for ids in self.args)
        if op == "and":
            return all(c.matches(rank, hostname, properties) for c in self.args)
        if op == "or":
            return any(c.matches(rank, hostname, properties) for c in self.args)
        if op == "not":
            return not all(c.matches(rank, hostname, properties) for c in self.args)
        raise AssertionError(op)

    def describe(self) -> str:
        """A short human form, e.g. ``properties=^login`` or ``ranks=0-3``."""
        if self.op == "properties":
            return "properties=" + ",".join(self.args)
        if self.op in ("hostlist", "ranks"):
            return f"{self.op}=" + ",".join(str(a) for a in self.args)
        inner = [c.describe() for c in self.args]
        if self.op == "not":
            return "not(" + " and ".join(inner) + ")"
        return "(" + f" {self.op} ".join(inner) + ")" if len(inner) > 1 else inner[0] if inner else "true"

    def to_json(self) -> dict[str, Any]:
        """The RFC 31 object of this constraint: :func:`parse_constraint` of
        it is an equal one (so a reservation keeps its ``requires`` in the KVS
        and compares it at a config reload).  Several keys of one object come
        back as one ``and``."""
        if self.op == "properties":
            return {"properties": list(self.args)}
        if self.op in ("hostlist", "ranks"):
            return {self.op: [a.encode() for a in self.args]}
        return {self.op: [c.to_json() for c in self.args]}

    def __str__(self) -> str:
        return self.describe()


def _hostlist_arg(value: Any, path: str) -> Hostlist:
    if not isinstance(value, str):
        raise ConstraintError(path, "hostlist entries must be strings")
    try:
        return Hostlist.parse(value)
    except HostlistError as e:
        raise ConstraintError(path, str(e)) from None


def _ranks_arg(value: Any, path: str) -> IdSet:
    if not isinstance(value, str):
        raise ConstraintError(path, "ranks entries must be idset strings")
    try:
        return IdSet.parse(value)
    except IdSetError as e:
        raise ConstraintError(path, str(e)) from None


def _property_arg(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConstraintError(path, "property names must be strings")
    name = value[1:] if value.startswith("^") else value
    if not name:
        raise ConstraintError(path, f"empty property name {value!r}")
    bad = sorted(set(name) & _BAD_PROPERTY_CHARS)
    if bad or not name.isprintable():
        raise ConstraintError(path, f"invalid character {''.join(bad)!r} in property {value!r}")
    return value


def parse_constraint(obj: Any, path: str = "/attributes/system/constraints", depth: int = 0) -> Constraint:
    """Check an RFC 31 constraint object and return its :class:`Constraint` tree.

    Raises :class:`ConstraintError` naming the JSON path of the first problem.

    >>> parse_constraint({"properties": ["^login"]}).matches(0, "n0", {"login"})
    False
    """
    if depth > MAX_DEPTH:
        raise ConstraintError(path, f"constraints nested deeper than {MAX_DEPTH} levels")
    if not isinstance(obj, dict):
        raise ConstraintError(path, "a constraint must be an object")
    terms: list[Constraint] = []
    for op, value in obj.items():
        sub = f"{path}/{op}"
        if op not in OPERATORS:
            raise ConstraintError(sub, f"unknown constraint operator {op!r} (expected one of {', '.join(OPERATORS)})")
        if not isinstance(value, list):
            raise ConstraintError(sub, f"the value of {op!r} must be an array")
        if op == "properties":
            args: tuple = tuple(_property_arg(v, f"{sub}/{i}") for i, v in enumerate(value))
        elif op == "hostlist":
            args = tuple(_hostlist_arg(v, f"{sub}/{i}") for i, v in enumerate(value))
        elif op == "ranks":
            args = tuple(_ranks_arg(v, f"{sub}/{i}") for i, v in enumerate(value))
        else:
            args = tuple(parse_constraint(v, f"{sub}/{i}", depth + 1) for i, v in enumerate(value))
        terms.append(Constraint(op, args))
    if len(terms) == 1:
        return terms[0]
    return Constraint("and", tuple(terms))
