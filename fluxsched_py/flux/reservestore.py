"""Advance reservations under Flux: kept in the KVS, declared in the TOML config.

The module owns one KVS key, ``<name>.reservations`` (``sched-py.reservations``):
the list of reservations as ``{name, ranks, start, end, users, ...}`` objects
(:meth:`Reservation.as_dict <fluxsched_py.engine.reservations.Reservation.as_dict>`,
with the ``requires`` a ``nodes`` one was picked under),
written (one commit) after every change and read when the module loads, so
reservations survive ``flux module reload sched-py``, and an instance
restart that keeps its KVS (``flux start -Sstatedir=DIR``, a system
instance).  The instance's TOML config may declare reservations too, as
``[[sched-py.reservation]]`` tables with the fields of
:func:`~fluxsched_py.engine.reservations.parse_spec`::

    [[sched-py.reservation]]
    name = "maint"
    ranks = "0-3"                 # or: nodes = 2, requires = { properties = ["lyon"] }
    start = "2026-12-01T08:00:00"
    duration = "4h"               # or: end = "2026-12-01T12:00:00"
    users = ["alice", 1001]

A declared reservation is added when the module loads unless one of that
name is kept already (the KVS holds the latest state, with what was added,
removed or changed since); one that has ended is skipped.  A bad entry is
logged (``flux dmesg``) and skipped: it never stops the scheduler.

``flux config reload`` applies the entries as the new config declares them
(:func:`reload`, :meth:`Reservations.declare
<fluxsched_py.engine.reservations.Reservations.declare>`): new ones are
added, changed ones replaced (a ``nodes`` entry whose count or
``requires`` changed picks its nodes again), and those a config declared
before and declares no more are removed; a reservation added by RPC is never removed
by a reload.  Which names the config declared is kept in the KVS too (a
``"config": true`` member of the entry), so a module reload keeps knowing.
A bad entry at reload refuses the whole reload, with one error, and the
reservations stay as they were.  No ``flux`` import:
:mod:`fluxsched_py.flux.module` reads the key and the config, and calls
:func:`load`; the driver calls :func:`reload`.
"""

from __future__ import annotations

import grp
import json
import pwd
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..engine.reservations import Reservation, ReservationError, parse_spec
from .wire import LOG_INFO

if TYPE_CHECKING:
    from .driver import Driver

__all__ = ["group_members", "load", "reload", "save", "store_key", "user_id"]


def store_key(name: str) -> str:
    """The KVS key the module ``name`` keeps its reservations in."""
    return f"{name}.reservations"


def user_id(name: str) -> int:
    """The uid of user ``name``; KeyError when there is none."""
    return pwd.getpwnam(name).pw_uid


def group_members(group: str) -> tuple[str, tuple[int, ...]]:
    """A unix group (a name, or a gid as digits): its name and its members'
    uids, those it lists and those whose primary group it is, as they are
    now (a reservation keeps them as resolved when it is added, as Slurm
    does).  KeyError when there is no such group."""
    try:
        g = grp.getgrgid(int(group)) if group.isdigit() else grp.getgrnam(group)
    except (OverflowError, ValueError):  # a gid out of range, a NUL in a name
        raise KeyError(group) from None
    uids = set()
    for name in g.gr_mem:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue  # a member with no passwd entry can submit no job
    uids.update(p.pw_uid for p in pwd.getpwall() if p.pw_gid == g.gr_gid)
    return g.gr_name, tuple(sorted(uids))


def _stored(value: Any) -> tuple[list[Reservation], set[str]]:
    """The reservations of the KVS value, and the names the config declared."""
    if isinstance(value, bytes | bytearray | str):
        value = json.loads(value)
    if value is None:
        return [], set()
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    out, declared = [], set()
    for x in value:
        if not isinstance(x, Mapping):
            raise ValueError(f"expected an object, got {type(x).__name__}")
        out.append(Reservation.from_dict(x))
        if x.get("config") is True:
            declared.add(out[-1].name)
    return out, declared


def _entries(driver: Driver, conf: Any) -> list[Any]:
    """The ``[[<name>.reservation]]`` tables of ``conf``; ValueError when it is no array."""
    table = conf.get(driver.name) if isinstance(conf, Mapping) else None
    entries = table.get("reservation") if isinstance(table, Mapping) else None
    if isinstance(entries, Mapping):
        entries = [entries]
    if entries is not None and not isinstance(entries, list):
        raise ValueError(
            f"reservations: [{driver.name}] reservation: expected an array of tables ([[{driver.name}.reservation]])"
        )
    return entries or []


def load(driver: Driver, stored: Any, conf: Any, owner: int) -> None:
    """Give the driver's engine its reservations: those ``stored`` in the
    KVS (its value, None when the key does not exist), then those the
    config ``conf`` declares under another name.  From then on every change
    is written back to the KVS.  ``owner`` is the instance owner's uid (a
    reservation without users admits only the owner)."""
    engine = driver.engine
    assert engine is not None
    rs = engine.reservations
    rs.owner = owner
    now = driver.clock()
    try:
        stored_list, declared = _stored(stored)
        kept = [r for r in stored_list if r.end > now]
    except (ValueError, TypeError, KeyError) as exc:
        driver.error(f"reservations: ignoring unreadable KVS key {store_key(driver.name)}: {exc}")
        kept, declared = [], set()
    rs.load(kept)
    try:
        entries = _entries(driver, conf)
    except ValueError as exc:
        driver.error(str(exc))
        entries = []
    added = 0
    for i, entry in enumerate(entries):
        where = f"[[{driver.name}.reservation]] #{i + 1}"
        if not isinstance(entry, Mapping):
            driver.error(f"reservations: {where}: expected a table")
            continue
        if rs.get(str(entry.get("name"))) is not None:
            declared.add(str(entry.get("name")))
            continue  # kept in the KVS: the latest state
        try:
            rs.add(now=now, **parse_spec(entry, now, user_id, group_members))
            declared.add(str(entry.get("name")))
            added += 1
        except ReservationError as exc:
            if exc.reason == "already past":
                continue
            driver.error(f"reservations: skipping {where}: {exc}")
    rs.declared = declared
    rs.on_change = lambda _: save(driver)
    if added:
        save(driver)
    if len(rs):
        names = ", ".join(f"{r.name} ({r.ranks})" for r in rs)
        driver.log(LOG_INFO, f"reservations: {names}")


def reload(driver: Driver, conf: Any) -> list[str]:
    """Apply the ``[[<name>.reservation]]`` entries of a reloaded config
    ``conf`` (module docstring): what changed, one line each.  Raises
    ValueError with one line naming the entry and the field, and changes
    nothing, when an entry is bad."""
    engine = driver.engine
    assert engine is not None
    now = driver.clock()
    specs = []
    for i, entry in enumerate(_entries(driver, conf)):
        where = f"[[{driver.name}.reservation]] #{i + 1}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"reservations: {where}: expected a table")
        try:
            specs.append(parse_spec(entry, now, user_id, group_members))
        except ReservationError as exc:
            raise ValueError(f"reservations: {where}: {exc}") from None
    try:
        return engine.reservations.declare(specs, now, f"[[{driver.name}.reservation]]")
    except ReservationError as exc:
        raise ValueError(f"reservations: {exc}") from None


def save(driver: Driver) -> None:
    """Write the reservations to the KVS (one commit; a failure is logged)."""
    engine = driver.engine
    assert engine is not None
    declared = engine.reservations.declared
    value = [{**r.as_dict(), **({"config": True} if r.name in declared else {})} for r in engine.reservations]

    def done(err: str | None) -> None:
        if err is not None:
            driver.error(f"reservations: KVS commit of {store_key(driver.name)} failed: {err}")

    driver.transport.commit([(store_key(driver.name), value)], done)
