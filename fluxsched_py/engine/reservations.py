"""Advance reservations: windows of time on fixed ranks, for named users.

The one owner of reservations (:class:`Reservations`, ``Engine.reservations``),
as a site admin coming from Slurm's ``scontrol create reservation`` expects
them (docs/rfcs/reservations.md):

- A :class:`Reservation` holds whole ranks over ``[start, end)``.  Named by
  ranks (``--ranks IDSET``), or by a count (``--nodes N``, optionally with an
  RFC 31 constraint), in which case the N nodes are picked when it is added
  (those free over the window in the current plan first, then those free
  when it opens, then any up node) and stay fixed from then on, unless a
  config reload declares it with another count or another constraint
  (:meth:`Reservations.declare`: it keeps the constraint they were picked
  under to compare).
- Two reservations may not share a rank over overlapping times: the second
  is refused, as Slurm refuses it without ``OVERLAP``, unless one of them
  has Slurm's flag ``MAINT``; nor may one take a rank whose running job
  runs past its start, unless it has ``IGNORE_JOBS`` (:data:`FLAGS`).
- Jobs that do not name it are planned around it: the planner holds the
  window as a blocked mask (:meth:`Timeline.block
  <fluxsched_py.planner.timeline.Timeline.block>`), so nothing is started
  that would still run on its ranks when it opens, and ``t_estimate`` and
  the forecast come from the same plan.  A job already running there when
  it is added is not touched: its ranks join the window when it ends.
- A job with ``attributes.system.reservation=NAME`` runs only inside the
  window, on its ranks, and only when Slurm's access fields given admit
  it: its user among the users or the groups' members, and its bank
  (``attributes.system.bank``) among the accounts (none given: only the
  instance owner); its walltime must end by the window's end (no walltime:
  it is killed at the end).  With ``FLEX`` it is planned as any job that
  may also use the window.  A job naming a reservation that does not
  exist, or that it may not use, is denied at alloc (Slurm rejects it at
  submit); one whose reservation is removed or ends while it waits is
  denied then.
- Adding, removing or changing a reservation drops every pending job's
  reservation, and the next pass plans them anew; an ended reservation is
  forgotten at the first pass after its end.

Nothing here talks to Flux: the module keeps them in the KVS and reads them
from the TOML config (:mod:`fluxsched_py.flux.reservestore`), the replay
from ``--reservations FILE``, both through :func:`parse_spec`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import FluxschedError
from ..ids import IdSet, IdSetError
from ..jobspec.constraints import Constraint, ConstraintError, parse_constraint
from ..jobspec.fsd import parse_fsd
from ..jobspec.request import node_request
from .states import JobState

if TYPE_CHECKING:
    from ..jobspec import Request
    from ..planner import Window
    from ..resource import ResourceGraph
    from .jobs import Job
    from .jobtable import JobTable
    from .options import EngineOptions

__all__ = [
    "FLAGS",
    "Calendar",
    "GroupResolver",
    "Reservation",
    "ReservationError",
    "Reservations",
    "add_entries",
    "declare_entries",
    "job_bank",
    "on_clock",
    "parse_duration",
    "parse_spec",
    "parse_time",
    "read_entries",
    "read_groups",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Slurm's reservation flags that this engine implements, named as Slurm
#: names them (``scontrol create reservation Flags=``; docs/rfcs/reservations.md).
FLAGS = ("FLEX", "IGNORE_JOBS", "MAINT")


class ReservationError(FluxschedError, ValueError):
    """A reservation refused: :attr:`field` names what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Reservation:
    """Whole ``ranks`` held over ``[start, end)`` for ``users`` (uids) or the
    members of ``groups`` (``members``: their uids, resolved when it was
    added), and for jobs of ``accounts`` (banks); none of them: the instance
    owner only.  ``flags`` are Slurm's (:data:`FLAGS`).  ``requires``: the
    RFC 31 constraint its ranks were picked under (``--nodes N --requires``;
    None for named ranks or none given), kept so that a config reload that
    changes it picks them again."""

    name: str
    ranks: IdSet
    start: float
    end: float
    users: tuple[int, ...] = ()
    flags: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    members: tuple[int, ...] = ()
    requires: Constraint | None = None

    def refusal(self, userid: int, bank: str | None, owner: int | None) -> str | None:
        """Why a job of ``userid`` charged to ``bank`` may not run in it, or
        None.  As Slurm's access control fields: each one given must admit
        the job (its user among the users or the groups' members, and its
        bank among the accounts)."""
        if not (self.users or self.groups or self.accounts):
            return None if owner is not None and userid == owner else f"user {userid} may not use it"
        if (self.users or self.groups) and userid not in self.users and userid not in self.members:
            return f"user {userid} may not use it"
        if self.accounts and bank not in self.accounts:
            return "a job of no bank may not use it" if bank is None else f"bank {bank} may not use it"
        return None

    def admits(self, userid: int, owner: int | None, bank: str | None = None) -> bool:
        """True when a job of ``userid`` (charged to ``bank``) may run in it."""
        return self.refusal(userid, bank, owner) is None

    def as_dict(self) -> dict[str, Any]:
        """Its wire and KVS form: ``{name, ranks, start, end, users, flags,
        accounts, groups, members, requires?}`` (``requires``, an RFC 31
        object, only when its ranks were picked under one)."""
        out = {
            "name": self.name,
            "ranks": str(self.ranks),
            "start": self.start,
            "end": self.end,
            "users": list(self.users),
            "flags": list(self.flags),
            "accounts": list(self.accounts),
            "groups": list(self.groups),
            "members": list(self.members),
        }
        if self.requires is not None:
            out["requires"] = self.requires.to_json()
        return out

    @classmethod
    def from_dict(cls, x: Mapping[str, Any]) -> Reservation:
        """Back from :meth:`as_dict` (a KVS value; what it lacks is empty)."""
        return cls(
            str(x["name"]),
            IdSet.parse(str(x["ranks"])),
            float(x["start"]),
            float(x["end"]),
            tuple(int(u) for u in x.get("users") or ()),
            tuple(str(f) for f in x.get("flags") or ()),
            tuple(str(a) for a in x.get("accounts") or ()),
            tuple(str(g) for g in x.get("groups") or ()),
            tuple(int(u) for u in x.get("members") or ()),
            None if x.get("requires") is None else parse_constraint(x["requires"], "requires"),
        )


@dataclasses.dataclass(frozen=True)
class Calendar:
    """Where a clock that is not the epoch's puts a date: the replay's clock
    counts seconds from a trace's start, so a date in its reservations file
    means the seconds since that start (``origin``, epoch seconds), in the
    trace's zone when the date names none (``zone``, an IANA name; None:
    UTC).  ``origin`` None: the trace has no start date, and ``missing``
    says so in the error."""

    origin: float | None
    zone: str | None = None
    missing: str = "the workload has no start date"

    def seconds(self, date: datetime.datetime, field: str, text: str) -> float:
        """``date`` on this clock; :class:`ReservationError` naming ``field`` when it cannot be placed."""
        if self.origin is None:
            raise ReservationError(field, f"{text!r:.40}: an absolute date needs a start date, and {self.missing}")
        if date.tzinfo is None:
            tz: datetime.tzinfo = datetime.UTC
            if self.zone is not None:
                import zoneinfo

                try:
                    tz = zoneinfo.ZoneInfo(self.zone)
                except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                    why = f"the trace's TimeZoneString {self.zone!r:.40} is no known time zone: give a UTC offset"
                    raise ReservationError(field, f"{text!r:.40}: {why}") from None
            date = date.replace(tzinfo=tz)
        return date.timestamp() - self.origin


def parse_time(value: Any, now: float, field: str, calendar: Calendar | None = None) -> float:
    """A time: epoch seconds (a number), ``+FSD`` from ``now``, or an ISO 8601
    date (local time when it names no zone; with ``calendar``, on its clock)."""
    if isinstance(value, bool):
        raise ReservationError(field, f"expected a time, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ReservationError(field, f"expected a finite time, got {value!r}")
        return float(value)
    if not isinstance(value, str) or not value:
        raise ReservationError(field, f"expected a time (ISO 8601 date, +FSD or seconds), got {value!r:.40}")
    if value.startswith("+"):
        try:
            return now + parse_fsd(value[1:])
        except ValueError as exc:
            raise ReservationError(field, f"{value!r:.40}: {exc}") from None
    try:
        date = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ReservationError(field, f"{value!r:.40}: not an ISO 8601 date or +FSD") from None
    return date.timestamp() if calendar is None else calendar.seconds(date, field, value)


def parse_duration(value: Any, field: str) -> float:
    """A positive finite duration: seconds, or an FSD string (``4h``)."""
    if isinstance(value, bool):
        raise ReservationError(field, f"expected a duration, got {value!r}")
    try:
        d = float(value) if isinstance(value, int | float) else parse_fsd(str(value))
    except ValueError as exc:
        raise ReservationError(field, f"{value!r:.40}: {exc}") from None
    if not 0 < d < math.inf:
        raise ReservationError(field, f"expected a positive finite duration, got {value!r:.40}")
    return d


#: Resolves a group (a name, or a gid as digits) to its name and its
#: members' uids; KeyError when there is no such group.
GroupResolver = Callable[[str], tuple[str, tuple[int, ...]]]


def _names(value: Any, field: str) -> list[Any]:
    """A list, or a comma-separated string, as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [u.strip() for u in value.split(",") if u.strip()]
    if not isinstance(value, Sequence):
        raise ReservationError(field, f"expected a list of {field}, got {type(value).__name__}")
    return list(value)


def parse_flags(value: Any) -> tuple[str, ...]:
    """Slurm's flags (a list, or ``MAINT,IGNORE_JOBS``), case as Slurm
    takes them (any), sorted; :class:`ReservationError` for one this engine
    does not implement."""
    out = set()
    for f in _names(value, "flags"):
        name = f.upper() if isinstance(f, str) else None
        if name not in FLAGS:
            known = ", ".join(FLAGS)
            raise ReservationError("flags", f"{f!r:.40} is not a flag this scheduler implements ({known})")
        out.add(name)
    return tuple(sorted(out))


def parse_spec(
    obj: Any,
    now: float,
    user_id: Callable[[str], int] | None = None,
    group: GroupResolver | None = None,
) -> dict[str, Any]:
    """The arguments of :meth:`Reservations.add` from a mapping
    ``{name, ranks | nodes [requires], start, end | duration, users?,
    groups?, accounts?, flags?}`` (an RPC payload, a KVS entry, a TOML
    table, an entry of the replay's file).  Times as :func:`parse_time`;
    ``users`` a list (or a comma-separated string) of uids or user names
    (``user_id`` resolves a name); ``groups`` of group names or gids, each
    resolved to its members by ``group`` (none: groups are refused);
    ``accounts`` of bank names; ``flags`` as :func:`parse_flags`.  Raises
    :class:`ReservationError` naming the field."""
    if not isinstance(obj, Mapping):
        raise ReservationError("reservation", f"expected an object, got {type(obj).__name__}")
    known = {"name", "ranks", "nodes", "requires", "start", "end", "duration", "users", "groups", "accounts", "flags"}
    for key in obj:
        if key not in known:
            raise ReservationError(str(key), "unknown field")
    name = obj.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ReservationError("name", f"expected letters, digits, '_', '.' or '-' (at most 64), got {name!r:.40}")
    out: dict[str, Any] = {"name": name}
    if ("ranks" in obj) == ("nodes" in obj):
        raise ReservationError("ranks", "give ranks or nodes (one of them)")
    if "ranks" in obj:
        try:
            out["ranks"] = IdSet.parse(str(obj["ranks"]))
        except IdSetError as exc:
            raise ReservationError("ranks", str(exc)) from None
        if not out["ranks"]:
            raise ReservationError("ranks", "empty")
        if "requires" in obj:
            raise ReservationError("requires", "only with nodes")
    else:
        n = obj["nodes"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ReservationError("nodes", f"expected a positive integer, got {n!r:.40}")
        out["nodes"] = n
        if obj.get("requires") is not None:
            try:
                out["requires"] = parse_constraint(obj["requires"], "requires")
            except ConstraintError as exc:
                raise ReservationError("requires", exc.reason) from None
    if "start" not in obj:
        raise ReservationError("start", "missing")
    out["start"] = start = parse_time(obj["start"], now, "start")
    if ("end" in obj) == ("duration" in obj):
        raise ReservationError("end", "give end or duration (one of them)")
    if "end" in obj:
        out["end"] = parse_time(obj["end"], now, "end")
    else:
        out["end"] = start + parse_duration(obj["duration"], "duration")
    users = _names(obj.get("users"), "users")
    uids = []
    for u in users:
        if isinstance(u, int) and not isinstance(u, bool) and u >= 0:
            uids.append(u)
        elif isinstance(u, str) and u.isdigit():
            uids.append(int(u))
        elif isinstance(u, str) and u and user_id is not None:
            try:
                uids.append(user_id(u))
            except KeyError:
                raise ReservationError("users", f"no such user: {u!r:.40}") from None
        else:
            what = "a uid or user name" if user_id is not None else "a uid"
            raise ReservationError("users", f"expected {what}, got {u!r:.40}")
    out["users"] = tuple(sorted(set(uids)))
    groups = _names(obj.get("groups"), "groups")
    if groups and users:
        raise ReservationError("groups", "give users or groups, not both (as Slurm)")
    names, members = set(), set()
    for g in groups:
        if isinstance(g, bool) or not isinstance(g, str | int) or (isinstance(g, int) and g < 0) or g == "":
            raise ReservationError("groups", f"expected a group name or gid, got {g!r:.40}")
        if group is None:
            raise ReservationError("groups", "groups are not supported here")
        try:
            name, uids_of = group(str(g))
        except KeyError:
            raise ReservationError("groups", f"no such group: {str(g)!r:.40}") from None
        names.add(name)
        members.update(uids_of)
    if groups:
        out["groups"], out["members"] = tuple(sorted(names)), tuple(sorted(members))
    accounts = _names(obj.get("accounts"), "accounts")
    for a in accounts:
        if not isinstance(a, str) or not a:
            raise ReservationError("accounts", f"expected a bank name, got {a!r:.40}")
    if accounts:
        out["accounts"] = tuple(sorted(set(accounts)))
    if obj.get("flags"):
        out["flags"] = parse_flags(obj["flags"])
    return out


class Reservations:
    """The advance reservations of one engine (see the module docstring)."""

    def __init__(
        self,
        table: JobTable,
        graph: ResourceGraph,
        options: Callable[[], EngineOptions],
        replan: Callable[[], None],
    ) -> None:
        self._table = table
        self._graph = graph
        self._options = options  # the engine's current ones
        #: Drops every pending job's reservation and marks a pass due
        #: (:meth:`.Engine.replan`): a window added or removed moves them all.
        self._replan = replan
        self._by_name: dict[str, Reservation] = {}
        #: Each reservation's ranks, flat in the planner's layout (made by :meth:`encode`).
        self._bits: dict[str, int] = {}
        self._overlaps = False
        #: The uid a reservation without users admits (the Flux instance
        #: owner); None in the replay: such a reservation admits no job.
        self.owner: int | None = None
        #: Pending jobs a window kept from starting earlier: id -> window names.
        self._held: dict[int, list[str]] = {}
        self._now = -math.inf
        #: A reservation went away: its pending jobs are denied at the next tick.
        self._orphans = False
        #: The names the instance config declares (:meth:`declare`): a
        #: config reload may change or remove these, never the others.
        self.declared: set[str] = set()
        #: Called with the list of reservations after each change (the Flux
        #: module writes them to the KVS).
        self.on_change: Callable[[list[Reservation]], None] | None = None

    def __iter__(self) -> Iterator[Reservation]:
        return iter(sorted(self._by_name.values(), key=lambda r: (r.start, r.name)))

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Reservation | None:
        return self._by_name.get(name)

    # -- changes -------------------------------------------------------------

    def add(
        self,
        name: str,
        start: float,
        end: float,
        *,
        ranks: IdSet | None = None,
        nodes: int | None = None,
        requires: Any = None,
        users: Sequence[int] = (),
        now: float,
        flags: Sequence[str] = (),
        accounts: Sequence[str] = (),
        groups: Sequence[str] = (),
        members: Sequence[int] = (),
    ) -> Reservation:
        """Add a reservation; raise :class:`ReservationError` (the field and
        why) when it is malformed, ended, meets another on a rank, or (without
        ``IGNORE_JOBS``) a running job.  ``flags``, ``accounts``, ``groups``
        and ``members`` as :class:`Reservation` holds them."""
        if name in self._by_name:
            raise ReservationError("name", f"reservation {name} exists")
        access = {"flags": flags, "accounts": accounts, "groups": groups, "members": members}
        r = self._make(name, start, end, ranks=ranks, nodes=nodes, requires=requires, users=users, now=now, **access)
        self._by_name[name] = r
        self._changed()
        return r

    def _make(
        self,
        name: str,
        start: float,
        end: float,
        *,
        ranks: IdSet | None,
        nodes: int | None,
        requires: Any,
        users: Sequence[int],
        now: float,
        flags: Sequence[str] = (),
        accounts: Sequence[str] = (),
        groups: Sequence[str] = (),
        members: Sequence[int] = (),
    ) -> Reservation:
        """A new reservation, checked against the ones there (not added)."""
        if not end > start:
            raise ReservationError("end", "must be after start")
        if end <= now:
            raise ReservationError("end", "already past")
        g = self._graph
        ignore_jobs = "IGNORE_JOBS" in flags
        if ranks is not None:
            unknown = IdSet(r for r in ranks if r not in g.ranks)
            if unknown:
                raise ReservationError("ranks", f"no such rank: {unknown}")
            if not ignore_jobs and (busy := IdSet(r for r in self._busy_ranks(start) if r in ranks)):
                why = f"ranks {busy} have running jobs past its start (flag IGNORE_JOBS takes them anyway)"
                raise ReservationError("ranks", why)
        else:
            assert nodes is not None
            ranks = self._pick(name, nodes, requires, max(start, now), end, "MAINT" in flags, ignore_jobs)
        if nodes is None:
            requires = None  # named ranks: nothing was picked (parse_spec refuses both)
        self._check_overlap(name, ranks, start, end, "MAINT" in flags)
        return Reservation(
            name,
            ranks,
            float(start),
            float(end),
            tuple(users),
            tuple(sorted(flags)),
            tuple(accounts),
            tuple(groups),
            tuple(members),
            requires,
        )

    def _busy_ranks(self, start: float) -> IdSet:
        """The ranks of running jobs that will still run at ``start``, as
        Slurm counts them for a reservation without ``IGNORE_JOBS``: their
        time limit ends later.  A best-effort job does not count: it is
        preempted when the window opens (docs/rfcs/preemption.md)."""
        out: set[int] = set()
        for job in self._table.jobs.values():
            if (
                job.state is JobState.RUNNING
                and job.expiration > start
                and job.preemptible_after is None
                and job.resources is not None
            ):
                out.update(job.resources.ranks)
        return IdSet(out)

    def remove(self, name: str) -> Reservation:
        """Remove a reservation (its hold is released at the next pass; its
        pending jobs are denied then, its running jobs run on)."""
        r = self._by_name.pop(name, None)
        if r is None:
            raise ReservationError("name", f"no reservation {name}")
        self._orphans = True
        self._changed()
        return r

    def update(self, name: str, end: float, now: float) -> Reservation:
        """Move a reservation's end (shorten or extend it)."""
        r = self._by_name.get(name)
        if r is None:
            raise ReservationError("name", f"no reservation {name}")
        if not end > r.start or end <= now:
            raise ReservationError("end", "must be after start and in the future")
        self._check_overlap(name, r.ranks, r.start, end, "MAINT" in r.flags)
        new = self._by_name[name] = dataclasses.replace(r, end=float(end))
        self._changed()
        return new

    def declare(
        self,
        specs: Sequence[Mapping[str, Any]],
        now: float,
        where: str = "reservation",
        place: Callable[[int, str], str] | None = None,
    ) -> list[str]:
        """Make the reservations a config declares (``specs``: :func:`parse_spec`
        results, in order) as it declares them, all or nothing: add those not
        there, replace those that differ (ranks, or the node count or the
        ``requires`` of a ``nodes`` entry, whose nodes are then picked again;
        start, end, users, groups, accounts, flags; one of that name added
        by RPC is taken over), remove those :attr:`declared` before and declared no
        more.  Reservations added otherwise (by RPC) are never removed.  An
        ended entry is skipped.  Raises :class:`ReservationError` (field
        ``where #N: field``, or what ``place(i, field)`` says for entry
        ``i``) and changes nothing when one is refused.
        Returns what changed, one line each (``added maint``)."""
        if place is None:

            def place(i: int, field: str) -> str:
                return f"{where} #{i + 1}: {field}"

        old, old_declared = dict(self._by_name), set(self.declared)
        live = [(i, spec) for i, spec in enumerate(specs) if spec["end"] > now]
        names: set[str] = set()
        for i, spec in enumerate(specs):
            if spec["name"] in names:
                raise ReservationError(place(i, "name"), f"reservation {spec['name']} is declared twice")
            names.add(spec["name"])
        wanted = {spec["name"] for _, spec in live}
        changes = [f"removed {n}" for n in sorted(old_declared - wanted) if n in self._by_name]
        for n in old_declared - wanted:
            self._by_name.pop(n, None)
        todo = []
        for i, spec in live:
            r = self._by_name.get(spec["name"])
            if r is not None and _same(r, spec):
                continue
            if r is not None:
                del self._by_name[spec["name"]]
            todo.append((i, spec, "updated" if r is not None else "added"))
        self.encode()  # pick nodes around the windows that stay
        try:
            for i, spec, _ in todo:
                args = {k: v for k, v in spec.items() if k not in ("name", "start", "end")}
                args = {"ranks": None, "nodes": None, "requires": None, "users": (), **args}
                try:
                    r = self._make(spec["name"], spec["start"], spec["end"], now=now, **args)
                except ReservationError as exc:
                    raise ReservationError(place(i, exc.field), exc.reason) from None
                self._by_name[r.name] = r
        except ReservationError:
            self._by_name = old
            self.encode()
            raise
        changes += [f"{verb} {spec['name']}" for _, spec, verb in todo]
        self.declared = wanted
        if changes or wanted != old_declared:
            self._orphans = True  # the pending jobs of a removed one are denied at the next pass
            self._changed()
        return changes

    def load(self, entries: list[Reservation]) -> None:
        """Reservations kept from before a restart (no overlap check, no pick)."""
        for r in entries:
            self._by_name[r.name] = r
        self._changed(store=False)

    def _check_overlap(self, name: str, ranks: IdSet, start: float, end: float, maint: bool) -> None:
        """Refuse a rank shared over overlapping time with another
        reservation, unless one of the two is ``MAINT`` (as Slurm's
        ``_resv_overlap``: a maintenance window may cover other reservations,
        and one may be added over it)."""
        if maint:
            return
        for other in self._by_name.values():
            if other.name != name and other.start < end and other.end > start and "MAINT" not in other.flags:
                shared = IdSet(r for r in ranks if r in other.ranks)
                if shared:
                    raise ReservationError("ranks", f"ranks {shared} are in reservation {other.name} at that time")

    def _pick(
        self, name: str, n: int, requires: Any, start: float, end: float, maint: bool, ignore_jobs: bool
    ) -> IdSet:
        """``n`` up nodes for a window ``[start, end)`` that meet ``requires``
        and no other window (a ``MAINT`` one: none if it can, else any):
        those free over the whole window in the plan, else free when it
        opens, else (``ignore_jobs``) any, else those no running job holds
        at its start."""
        planner = self._table.planner
        request = dataclasses.replace(node_request(n, end - start), constraints=requires)
        others = planner.blocked_during(start, end)
        pool = planner.pool_bits()
        if not ignore_jobs:
            pool &= ~planner.codec.ranks_mask(self._busy_ranks(start))
        policy = self._options().placement
        for keep_off in (others, 0) if maint else (others,):
            for avail in (planner.available_bits(start, end), planner.available_bits(start, start), pool):
                avail &= ~keep_off
                found = planner.match_bits(request, avail, policy)
                if found is not None:
                    return planner.resolve(found).ranks
        why = f"fewer than {n} up nodes outside other reservations"
        if not ignore_jobs:
            why += " and running jobs (flag IGNORE_JOBS takes those)"
        raise ReservationError("nodes", why + (" meet requires" if requires is not None else ""))

    def _changed(self, store: bool = True) -> None:
        """Every pending job is planned anew around the new windows."""
        self.encode()
        self._held.clear()
        self._replan()
        if store and self.on_change is not None:
            self.on_change(list(self))

    # -- the plan ------------------------------------------------------------

    def encode(self) -> None:
        """Have the job table hold every window in the engine's planner (a
        new one, or after a change), its ranks in the planner's layout."""
        codec = self._table.planner.codec
        self._bits = {r.name: codec.ranks_mask(r.ranks) for r in self._by_name.values()}
        #: Some windows share ranks over overlapping times (a MAINT one over another).
        self._overlaps = any("MAINT" in r.flags for r in self._by_name.values()) and len(self._by_name) > 1
        self._table.hold_windows([(r.name, self._bits[r.name], r.start, r.end) for r in self._by_name.values()])

    def window(self, job: Job) -> Window | None:
        """``(start, end, bits, avoid)`` of the reservation ``job`` runs
        inside, or None (no reservation, or a ``FLEX`` one: see :meth:`flex`).
        ``avoid``: the other windows over it that its jobs keep off (a
        ``MAINT`` window's; a ``MAINT`` reservation's own jobs keep off
        none, as in Slurm)."""
        name = getattr(job.request, "reservation", None)
        if name is None:
            return None
        r = self._by_name.get(name)
        if r is None:
            return (math.inf, math.inf, 0, ())  # removed: it waits to be denied
        if "FLEX" in r.flags:
            return None
        bits = self._bits[name]
        avoid: tuple[tuple[float, float, int], ...] = ()
        if self._overlaps and "MAINT" not in r.flags:
            avoid = tuple(
                (o.start, o.end, self._bits[o.name])
                for o in self._by_name.values()
                if o.name != name and o.start < r.end and o.end > r.start and self._bits[o.name] & bits
            )
        return r.start, r.end, bits, avoid

    def flex(self, job: Job) -> str | None:
        """The name of the ``FLEX`` reservation ``job`` names, whose window it
        may use as well as anything else (Slurm: it may begin before the
        reservation, end after it, and use resources outside it), or None."""
        name = getattr(job.request, "reservation", None)
        if name is None:
            return None
        r = self._by_name.get(name)
        return name if r is not None and "FLEX" in r.flags else None

    def of(self, job: Job) -> Reservation | None:
        name = getattr(job.request, "reservation", None)
        return None if name is None else self._by_name.get(name)

    def check(self, request: Request, userid: int) -> str | None:
        """Why a job of ``request`` submitted by ``userid`` is denied, or None."""
        name = getattr(request, "reservation", None)
        if name is None:
            return None
        r = self._by_name.get(name)
        if r is None:
            return f"reservation {name}: no such reservation"
        if (why := r.refusal(userid, job_bank(request), self.owner)) is not None:
            return f"reservation {name}: {why}"
        if "FLEX" in r.flags:
            return None  # it may run outside the window: any feasible request
        planner = self._table.planner
        whole = self._bits[name] & planner.pool_bits()
        if planner.match_bits(request, whole, self._options().placement) is None:
            return f"reservation {name}: the request does not fit its ranks {r.ranks}"
        if request.duration and request.duration > r.end - r.start:
            return f"reservation {name}: walltime longer than the reservation"
        return None

    def admit(self, job: Job) -> None:
        """A job of a reservation with no walltime plans until its end (a
        ``FLEX`` one's is planned as any job)."""
        r = self.of(job)
        if r is not None and job.walltime == math.inf and "FLEX" not in r.flags:
            job.duration = r.end - r.start

    def kill_time(self, job: Job, end: float) -> float:
        r = self.of(job)
        return end if r is None or "FLEX" in r.flags else min(end, r.end)

    def note_held(self, job: Job, names: list[str] | None) -> None:
        if names:
            self._held[job.id] = names
        else:
            self._held.pop(job.id, None)

    # -- time ----------------------------------------------------------------

    def tick(self, now: float) -> tuple[list[tuple[Job, str]], bool]:
        """At the start of a pass: forget ended reservations.  Returns the
        pending jobs of those gone, each with the reason the engine denies it
        for, in queue order, and whether a window opened or closed since the
        last tick (a pass is due)."""
        before, self._now = self._now, now
        if not self._by_name and not self._orphans:
            return [], False  # the common case: no reservation, nothing to do
        crossed = any(before < t <= now for r in self._by_name.values() for t in (r.start, r.end))
        ended = [r for r in self._by_name.values() if r.end <= now]
        for r in ended:
            del self._by_name[r.name]
        if ended:
            self._orphans = True
            self._changed()
        out: list[tuple[Job, str]] = []
        jobs = self._table.jobs
        if self._orphans:
            self._orphans = False
            pending = sorted((j for j in jobs.values() if j.state is JobState.PENDING), key=lambda j: j.sortkey)
            for job in pending:
                name = getattr(job.request, "reservation", None)
                if name is not None and name not in self._by_name:
                    out.append((job, f"reservation {name} ended or was removed"))
        if len(self._held) > 4096:
            self._held = {i: n for i, n in self._held.items() if (j := jobs.get(i)) and j.state is JobState.PENDING}
        return out, crossed or bool(out)

    def next_change(self) -> float:
        """The next time a window opens or closes (a pass is due then), inf if none."""
        if not self._by_name:
            return math.inf  # asked at every replay time: most runs have no reservation
        now = self._now
        return min((t for r in self._by_name.values() for t in (r.start, r.end) if t > now), default=math.inf)

    # -- what users read -----------------------------------------------------

    def reason(self, job: Job, now: float, fmt: Callable[[float], str]) -> str | None:
        """``reason_pending`` of a job a reservation holds back, or None."""
        name = getattr(job.request, "reservation", None)
        if name is not None:
            r = self._by_name.get(name)
            if r is None:
                return f"reservation {name}: ended or removed"
            if "FLEX" in r.flags:
                pass  # planned as any job: the windows in its way say why it waits
            elif now < r.start:
                return f"reservation {name}: opens at {fmt(r.start)}"
            else:
                return f"reservation {name}: waiting for resources of its ranks {r.ranks} (until {fmt(r.end)})"
        for held in self._held.get(job.id, ()):
            r = self._by_name.get(held)
            if r is not None:
                n = len(r.ranks)
                nodes = f"{n} node{'' if n == 1 else 's'}"
                return f"reservation {r.name}: {nodes} reserved from {fmt(r.start)} to {fmt(r.end)}"
        return None


def _same(r: Reservation, spec: Mapping[str, Any]) -> bool:
    """``r`` is what ``spec`` (:func:`parse_spec`) declares (a ``nodes`` spec:
    as many ranks, picked under the same ``requires``: a new constraint
    alone picks them again, as a new count does)."""
    ranks = spec.get("ranks")
    same_ranks = r.ranks == ranks if ranks is not None else len(r.ranks) == spec.get("nodes")
    same_ranks = same_ranks and r.requires == spec.get("requires")
    access = ("users", "flags", "accounts", "groups", "members")
    return (
        same_ranks
        and (r.start, r.end) == (spec["start"], spec["end"])
        and all(getattr(r, k) == tuple(spec.get(k, ())) for k in access)
    )


def job_bank(request: Request) -> str | None:
    """The bank a job is charged to: ``attributes.system.bank``, as
    flux-accounting's priority plugin sets it (``flux submit -B``, or the
    user's default bank), None when it names none."""
    attributes = getattr(request, "attributes", None)
    system = attributes.get("system") if isinstance(attributes, Mapping) else None
    bank = system.get("bank") if isinstance(system, Mapping) else None
    return bank if isinstance(bank, str) and bank else None


def _document(text: str, source: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ReservationError(source, f"not YAML or JSON: {str(exc).splitlines()[0]}") from None


def read_entries(text: str, source: str) -> list[Mapping[str, Any]]:
    """The entries of a reservations file (YAML or JSON): a list of
    :func:`parse_spec` mappings, or ``{reservations: [...], groups?}``.
    Raises :class:`ReservationError` (field ``source``) when it is neither."""
    doc = _document(text, source)
    if isinstance(doc, Mapping) and "reservations" in doc and set(doc) <= {"reservations", "groups"}:
        doc = doc["reservations"]
    if doc is None:
        return []
    if not isinstance(doc, list) or not all(isinstance(x, Mapping) for x in doc):
        raise ReservationError(source, "expected a list of reservations, or {reservations: [...]}")
    return doc


def read_groups(text: str, source: str) -> GroupResolver:
    """The groups of a reservations file, for the replay, which has no
    system to ask: its ``groups`` table, ``{NAME or GID: [uid, ...]}``
    (none: no group is known).  The resolver answers for the table's keys
    only.  Raises :class:`ReservationError` (``source.groups``) for a
    malformed table."""
    doc = _document(text, source)
    table = doc.get("groups") if isinstance(doc, Mapping) else None
    where = f"{source}.groups"
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ReservationError(where, "expected a table {group: [uid, ...]}")
    known: dict[str, tuple[str, tuple[int, ...]]] = {}
    for key, uids in table.items():
        if isinstance(key, bool) or not isinstance(key, str | int) or key == "":
            raise ReservationError(where, f"expected a group name or gid, got {key!r:.40}")
        if not isinstance(uids, list) or not all(
            isinstance(u, int) and not isinstance(u, bool) and u >= 0 for u in uids
        ):
            raise ReservationError(f"{where}.{key}", f"expected a list of uids, got {uids!r:.40}")
        known[str(key)] = (str(key), tuple(sorted(set(uids))))

    def resolve(group: str) -> tuple[str, tuple[int, ...]]:
        return known[group]

    return resolve


def on_clock(entries: Sequence[Mapping[str, Any]], calendar: Calendar, where: str = "reservations") -> list[Any]:
    """``entries`` with their ISO 8601 ``start`` and ``end`` as seconds of
    ``calendar``'s clock (the replay's): numbers and ``+FSD`` are kept as
    they are.  Raises :class:`ReservationError` (``where[i].start``) for a
    date the clock cannot place."""
    out: list[Any] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            out.append(entry)  # parse_spec names it
            continue
        entry = dict(entry)
        for key in ("start", "end"):
            value = entry.get(key)
            if isinstance(value, str) and value and not value.startswith("+"):
                try:
                    entry[key] = parse_time(value, 0.0, key, calendar)
                except ReservationError as exc:
                    raise ReservationError(f"{where}[{i}].{exc.field}", exc.reason) from None
        out.append(entry)
    return out


def add_entries(
    reservations: Reservations,
    entries: Sequence[Mapping[str, Any]],
    now: float,
    user_id: Callable[[str], int] | None = None,
    where: str = "reservations",
    group: GroupResolver | None = None,
) -> list[Reservation]:
    """Add every entry (:func:`parse_spec`), in order; the first bad one
    raises :class:`ReservationError` with its place (``where[i]: field``)."""
    out = []
    for i, entry in enumerate(entries):
        try:
            out.append(reservations.add(now=now, **parse_spec(entry, now, user_id, group)))
        except ReservationError as exc:
            raise ReservationError(f"{where}[{i}].{exc.field}", exc.reason) from None
    return out


def declare_entries(
    reservations: Reservations,
    entries: Sequence[Mapping[str, Any]],
    now: float,
    user_id: Callable[[str], int] | None = None,
    where: str = "reservations",
    group: GroupResolver | None = None,
) -> list[str]:
    """Declare ``entries`` (:func:`parse_spec`) at ``now``, replacing what
    was declared before, all or nothing (:meth:`Reservations.declare`): the
    replay's and the Batsim drivers' reservations events, as a config
    reload is under Flux.  A bad entry raises :class:`ReservationError`
    with its place (``where[i]: field``) and changes nothing.  Returns what
    changed."""
    specs = []
    for i, entry in enumerate(entries):
        try:
            specs.append(parse_spec(entry, now, user_id, group))
        except ReservationError as exc:
            raise ReservationError(f"{where}[{i}].{exc.field}", exc.reason) from None
    return reservations.declare(specs, now, where, lambda i, field: f"{where}[{i}].{field}")
