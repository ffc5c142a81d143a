"""The module's control RPCs (``flux sched-py``), with no Flux in it.

Each RPC is ``<name>.<rpc>`` (``sched-py.forecast``...), registered by the
broker binding so that guests (users other than the instance owner) reach
it too; :func:`authorize` then decides per RPC: a guest may use the
read-only ones, and only the instance owner may use one that changes
something (``mutating``).  Every RPC rejects a malformed payload with an
EPROTO error response naming the field, and never raises.

========================  =========  ==============================================
RPC                       mutating   payload -> response
========================  =========  ==============================================
``<name>.status``         no         ``{}`` -> ``{policy, pending, running, reserved, ...}``
``<name>.forecast``       no         ``{limit?}`` -> ``{now, limit, budget, as_of, age, source, jobs: [...]}``
``<name>.when``           no         ``{jobspec, priority?, limit?}`` -> one job
``<name>.reserve-list``   no         ``{}`` -> ``{now, reservations: [...]}``
``<name>.reserve-add``    yes        ``{name, ranks | nodes [requires], start, end | duration, users? ...}`` -> one
``<name>.reserve-update`` yes        ``{name, end | duration}`` -> one
``<name>.reserve-remove`` yes        ``{name}`` -> one
========================  =========  ==============================================

A job in a response is ``{id, t_estimate, kind, reason, userid, queue,
duration, ranks, nodelist}`` (``t_estimate`` null when there is none,
``duration`` null when unlimited; see :mod:`fluxsched_py.engine.forecast`).
A reservation in a response is ``{name, ranks, nodelist, start, end,
users, flags, accounts, groups, members, requires?, active}``
(:mod:`fluxsched_py.engine.reservations`; times as epoch seconds;
``requires`` the RFC 31 object its nodes were picked under, when one was
given; in a request, also ISO 8601 dates or ``+FSD`` from now, users by
name, groups by name or gid, resolved to their members when it is added;
``members`` is not given in a request).  Further RPCs (limits) are entries of :data:`RPCS`.

The forecast off the scheduling path
    :class:`Control` keeps a whole-queue forecast
    (:class:`~fluxsched_py.engine.forecast.SlicedForecast`) made in slices
    of :data:`~fluxsched_py.engine.forecast.FORECAST_SLICE` seconds, one
    reactor callback each, after the scheduling passes (the driver asks for
    them, :meth:`Control.run_slice`); any change of the queue or the
    resources (:meth:`Control.changed`) starts it again.  ``forecast``
    answers from the latest complete one (``source: "background"``, its
    time ``as_of`` and ``age`` in seconds): jobs that are no longer pending
    are left out, jobs submitted since are listed ``"not planned"``, and no
    start is before ``now``.  With none complete yet, or with a ``limit``,
    it plans at once within the call's budget (``source: "on demand"``).
"""

from __future__ import annotations

import dataclasses
import errno
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..engine.forecast import (
    DEFAULT_URGENCY,
    FORECAST_BUDGET,
    FORECAST_LIMIT,
    FORECAST_SLICE,
    Forecast,
    SlicedForecast,
    forecast,
    job_facts,
    when,
)
from ..engine.reservations import Reservation, ReservationError, parse_duration, parse_spec, parse_time
from ..ids import Hostlist
from .reservestore import group_members, user_id
from .wire import payload_error

if TYPE_CHECKING:
    from .driver import Driver

__all__ = ["ROLE_OWNER", "ROLE_USER", "RPCS", "Control", "Rpc", "RpcError", "authorize"]

#: flux-core's ``FLUX_ROLE_OWNER`` and ``FLUX_ROLE_USER`` (``flux/core/message.h``).
ROLE_OWNER = 1
ROLE_USER = 2


class RpcError(Exception):
    """A request refused: ``errnum`` and the one-line reason sent back."""

    def __init__(self, errnum: int, text: str) -> None:
        super().__init__(text)
        self.errnum = errnum


def authorize(rolemask: int, mutating: bool, topic: str) -> None:
    """Raise :class:`RpcError` (EPERM) when a request with ``rolemask`` may
    not use ``topic``: the owner may use every RPC, a guest only the
    read-only ones."""
    if rolemask & ROLE_OWNER:
        return
    if mutating:
        raise RpcError(errno.EPERM, f"{topic}: only the instance owner may change the scheduler")
    if not rolemask & ROLE_USER:
        raise RpcError(errno.EPERM, f"{topic}: request without the user role")


class _Fields:
    """A payload's fields, each read once by name; unknown ones are refused."""

    def __init__(self, topic: str, payload: Any, userid: int = 0) -> None:
        #: The requester's uid (from the message's credentials).
        self.userid = userid
        if (why := payload_error(payload)) is not None:
            raise RpcError(errno.EPROTO, f"{topic}: payload: {why}")
        if payload is None:
            payload = {}
        if not isinstance(payload, Mapping):
            raise RpcError(errno.EPROTO, f"{topic}: payload: expected a JSON object")
        self.topic = topic
        self.payload = payload
        self.read: set[str] = set()

    def _bad(self, name: str, what: str) -> RpcError:
        return RpcError(errno.EPROTO, f"{self.topic}: {name}: {what}")

    def int(self, name: str, default: int, lo: int, hi: int) -> int:
        self.read.add(name)
        v = self.payload.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self._bad(name, f"expected an integer from {lo} to {hi}, got {v!r:.40}")
        return v

    def object(self, name: str) -> Mapping[str, Any]:
        self.read.add(name)
        if name not in self.payload:
            raise self._bad(name, "missing")
        v = self.payload[name]
        if not isinstance(v, Mapping):
            raise self._bad(name, f"expected a JSON object, got {type(v).__name__}")
        return v

    def string(self, name: str) -> str:
        self.read.add(name)
        v = self.payload.get(name)
        if not isinstance(v, str) or not v:
            raise self._bad(name, "missing" if v is None else f"expected a string, got {v!r:.40}")
        return v

    def done(self) -> None:
        extra = sorted(set(self.payload) - self.read)
        if extra:
            raise self._bad(extra[0], "unknown field")


@dataclasses.dataclass(frozen=True)
class Rpc:
    """One control RPC: its name (after ``<module name>.``), whether it
    changes anything, and its handler: ``(control, fields, now) -> response``."""

    name: str
    mutating: bool
    run: Callable[[Control, _Fields, float], Any]


def _status(c: Control, f: _Fields, now: float) -> Any:
    f.done()
    e = c.engine
    return {
        "policy": e.options.queue_policy,
        "pending": e.pending_count,
        "running": len(e.running),
        "reserved": e.planner.nreserved,
        "forecast_limit": FORECAST_LIMIT,
        "forecast_budget": c.budget,
        "forecast_slice": c.slice_budget,
        "forecast_age": None if c.latest is None else round(now - c.latest[0], 3),
        "forecast_slices": c.slices,
        "forecast_restarts": c.restarts,
        # power-save: the nodes it switched off or is switching (ranks), when it is on
        **({f"nodes_{k}": v for k, v in e.power.states().items()} if e.power is not None else {}),
    }


def _forecast(c: Control, f: _Fields, now: float) -> Any:
    asked = "limit" in f.payload
    limit = f.int("limit", FORECAST_LIMIT, 1, FORECAST_LIMIT)
    f.done()
    e = c.engine
    if c.latest is None or asked:
        jobs = forecast(e, now, limit, c.budget)
        as_of, source = now, "on demand"
    else:
        as_of, jobs = c.latest
        source = "background"
        pending = e.pending()
        ids = {j.id for j in pending}
        known = {x.jobid for x in jobs}
        jobs = [_not_before(x, now) for x in jobs if x.jobid in ids]
        jobs += [Forecast(j.id, None, "not planned", **job_facts(j)) for j in pending if j.id not in known]
    return {
        "now": now,
        "limit": limit,
        "budget": c.budget,
        "as_of": as_of,
        "age": now - as_of,
        "source": source,
        "jobs": [c.job(x) for x in jobs],
    }


def _not_before(f: Forecast, now: float) -> Forecast:
    """``f`` with its start moved to ``now`` when it is earlier (an older plan's start)."""
    if f.start is None or f.start >= now:
        return f
    return dataclasses.replace(f, start=now)


def _when(c: Control, f: _Fields, now: float) -> Any:
    jobspec = f.object("jobspec")
    priority = f.int("priority", DEFAULT_URGENCY, 0, 2**32 - 1)
    limit = f.int("limit", FORECAST_LIMIT, 1, FORECAST_LIMIT)
    f.done()
    try:
        got = when(c.engine, jobspec, now, priority=priority, userid=f.userid, limit=limit, budget=c.budget)
    except ValueError as exc:
        raise RpcError(errno.EINVAL, f"{f.topic}: jobspec: {exc}") from None
    return {"now": now, **c.job(got)}


def _reserve_list(c: Control, f: _Fields, now: float) -> Any:
    f.done()
    return {"now": now, "reservations": [c.reservation(r, now) for r in c.engine.reservations]}


def _refused(f: _Fields, exc: ReservationError) -> RpcError:
    return RpcError(errno.EINVAL, f"{f.topic}: {exc}")


def _reserve_add(c: Control, f: _Fields, now: float) -> Any:
    try:
        spec = parse_spec(f.payload, now, user_id, group_members)  # reads (and checks) every field
    except ReservationError as exc:
        raise RpcError(errno.EPROTO, f"{f.topic}: {exc}") from None
    rs = c.engine.reservations
    try:
        r = rs.add(now=now, **spec)
    except ReservationError as exc:
        raise _refused(f, exc) from None
    c.driver.changed()
    return c.reservation(r, now)


def _reserve_update(c: Control, f: _Fields, now: float) -> Any:
    name = f.string("name")
    f.read.update(("end", "duration"))
    if ("end" in f.payload) == ("duration" in f.payload):
        raise RpcError(errno.EPROTO, f"{f.topic}: end: give end or duration (one of them)")
    f.done()
    rs = c.engine.reservations
    old = rs.get(name)
    if old is None:
        raise RpcError(errno.ENOENT, f"{f.topic}: name: no reservation {name}")
    try:
        if "end" in f.payload:
            end = parse_time(f.payload["end"], now, "end")
        else:
            end = old.start + parse_duration(f.payload["duration"], "duration")
    except ReservationError as exc:
        raise RpcError(errno.EPROTO, f"{f.topic}: {exc}") from None
    try:
        r = rs.update(name, end, now)
    except ReservationError as exc:
        raise _refused(f, exc) from None
    c.driver.changed()
    return c.reservation(r, now)


def _reserve_remove(c: Control, f: _Fields, now: float) -> Any:
    name = f.string("name")
    f.done()
    try:
        r = c.engine.reservations.remove(name)
    except ReservationError:
        raise RpcError(errno.ENOENT, f"{f.topic}: name: no reservation {name}") from None
    c.driver.changed()
    return c.reservation(r, now)


#: The control RPCs, by name.
RPCS: dict[str, Rpc] = {
    r.name: r
    for r in (
        Rpc("status", False, _status),
        Rpc("forecast", False, _forecast),
        Rpc("when", False, _when),
        Rpc("reserve-list", False, _reserve_list),
        Rpc("reserve-add", True, _reserve_add),
        Rpc("reserve-update", True, _reserve_update),
        Rpc("reserve-remove", True, _reserve_remove),
    )
}


class Control:
    """The control RPCs of one :class:`~fluxsched_py.flux.driver.Driver`."""

    def __init__(
        self,
        driver: Driver,
        rpcs: Mapping[str, Rpc] | None = None,
        budget: float | None = FORECAST_BUDGET,
        slice_budget: float | None = FORECAST_SLICE,
    ) -> None:
        self.driver = driver
        self.rpcs = dict(RPCS if rpcs is None else rpcs)
        #: Seconds of planning per forecast or when (None: no limit but the job count).
        self.budget = budget
        #: Seconds of planning per background slice (None: the whole plan in one).
        self.slice_budget = slice_budget
        #: ``(as_of, jobs)``: the latest complete background forecast.
        self.latest: tuple[float, list[Forecast]] | None = None
        self.slices = 0
        self.restarts = 0
        self._running: SlicedForecast | None = None
        self._stale = True

    # -- the background forecast ------------------------------------------

    def changed(self) -> None:
        """The queue or the resources changed: the forecast in progress is void."""
        self._stale = True
        self._running = None

    @property
    def in_progress(self) -> SlicedForecast | None:
        """The background forecast being planned, if any."""
        return self._running

    def wants_slice(self) -> bool:
        """A slice has work to do: the forecast is out of date or unfinished."""
        return self.driver.engine is not None and (self._stale or self._running is not None)

    def run_slice(self, now: float) -> bool:
        """Plan one slice of the background forecast (starting a new one when
        the last is out of date).  Returns True when more slices are needed."""
        e = self.driver.engine
        if e is None or not self.wants_slice():
            return False
        if e.pending_count == 0:  # nothing to plan: no copy of the plan either
            self.latest, self._running, self._stale = (now, []), None, False
            return False
        if self._running is None or not self._running.valid():
            self._running = SlicedForecast(e, now)
            self._stale = False
            self.restarts += 1
        self.slices += 1
        run = self._running
        if not run.step(self.slice_budget):
            return True
        self.latest = (run.now, run.result())
        self._running = None
        return False

    @property
    def engine(self) -> Any:
        e = self.driver.engine
        if e is None:
            raise RpcError(errno.EAGAIN, "the scheduler is starting: no resources yet")
        return e

    def topics(self) -> list[str]:
        """The request topics, each to be registered open to guests."""
        return [f"{self.driver.name}.{n}" for n in self.rpcs]

    def job(self, f: Forecast) -> dict[str, Any]:
        """A forecast as the wire shows it."""
        hosts = f.hosts(self.engine.graph)
        return {
            "id": f.jobid,
            "t_estimate": f.start,
            "kind": f.kind,
            "reason": f.reason,
            "userid": f.userid,
            "queue": f.queue,
            "duration": f.duration if math.isfinite(f.duration) else None,
            "ranks": f.ranks(),
            "nodelist": Hostlist(hosts).encode() if hosts else "",
        }

    def reservation(self, r: Reservation, now: float) -> dict[str, Any]:
        """A reservation as the wire shows it."""
        g = self.engine.graph
        hosts = [g.hostname(x) or str(x) for x in r.ranks]
        return {**r.as_dict(), "nodelist": Hostlist(hosts).encode(), "active": r.start <= now < r.end}

    def handle(self, topic: str, msg: Any, payload: Any, rolemask: int, userid: int = 0) -> None:
        """Answer one request from ``userid`` (its credentials): the response,
        or an error response.  Never raises."""
        d = self.driver
        d.last_work = (topic,)
        try:
            rpc = self.rpcs[topic.removeprefix(f"{d.name}.")]
            authorize(rolemask, rpc.mutating, topic)
            out = rpc.run(self, _Fields(topic, payload, userid), d.clock())
        except RpcError as exc:
            d.stats["bad_requests"] += exc.errnum == errno.EPROTO
            self._error(msg, exc.errnum, str(exc))
            return
        except Exception as exc:  # a bug must not kill the module
            d.error(f"{topic}: internal error handling {payload!r:.200}: {exc!r}")
            self._error(msg, errno.EINVAL, f"{topic}: internal error: {exc}")
            return
        try:
            d.transport.respond(msg, out)
        except Exception as exc:
            d.error(f"{topic}: respond failed: {exc}")

    def _error(self, msg: Any, errnum: int, text: str) -> None:
        try:
            self.driver.transport.respond_error(msg, errnum, text)
        except Exception as exc:
            self.driver.error(f"respond_error failed: {exc}")
