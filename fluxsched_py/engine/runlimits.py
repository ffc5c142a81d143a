"""Scheduler-enforced limits: what a user, or a queue, may hold running at once.

A site sets, in the instance's TOML config, the most running jobs, nodes,
cores and GPUs (``jobs``, ``nodes``, ``cores``, ``gpus``) at three scopes,
each a table of the same three keys: ``user`` (each user), ``users.NAME``
(one user, overriding ``user`` resource by resource) and ``total`` (all
users together)::

    [sched-py.limits]                       # the whole instance, all queues together
    user = { jobs = 100 }

    [policy.scheduler.limits]               # RFC 33: every queue's, unless its own says otherwise
    user = { nodes = 64, jobs = 8 }
    users.alice = { nodes = 128 }

    [queues.batch.policy.scheduler.limits]  # RFC 33: queue batch's own
    user = { nodes = 16 }
    total = { nodes = 96 }

Precedence (``docs/rfcs/queue-limits.md``): a job of user U in queue Q is held by
the queue limit of each resource found first in ``queues.Q...users.U``,
``queues.Q...user``, ``policy.scheduler.limits.users.U``,
``policy.scheduler.limits.user`` (the queue's value wins, as RFC 33 says of
every policy), and by ``total`` of ``queues.Q`` else of
``policy.scheduler``; and, besides, by the instance limits of
``[sched-py.limits]`` (``users.U`` else ``user``, and ``total``), which count
its jobs in every queue.  ``-1`` is unlimited: it stops the look-up (a queue
may lift a global limit).  Every limit that applies must hold.

:class:`Usage` is the one owner of what is running, per user and per queue:
a :class:`~.jobtable.JobObserver` that follows the job table's ``run`` and
``forget`` effects (and partial frees) and counts each running regular job's
resources once, when first read.  :meth:`RunLimits.check` compares a job's
need with it.  Best-effort jobs (``preemptible-after``) are neither counted
nor held: they give way to regular jobs by preemption instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..memo import store as memo_store
from .jobs import Job
from .states import TRANSITIONS, JobState

if TYPE_CHECKING:
    from ..resource import ResourceSet

__all__ = ["RESOURCES", "PlannedUsage", "RunLimits", "Scope", "Usage", "held_by", "need_of"]

#: What a limit counts, in the order of a usage tuple.
RESOURCES = ("jobs", "nodes", "cores", "gpus")
_UNITS = {"jobs": ("running job", "running jobs"), "nodes": ("node", "nodes"), "cores": ("core", "cores")}
_UNITS["gpus"] = ("GPU", "GPUs")
#: Answers :meth:`RunLimits.check` remembers at most (then it starts afresh).
_MEMO_SIZE = 4096
#: Largest limit a key takes (RFC 14 counts are 32-bit).
MAX_LIMIT = (1 << 31) - 1
_SCOPE_KEYS = ("user", "users", "total")

#: (jobs, nodes, cores, gpus)
Amounts = tuple[int, int, int, int]
#: A limit per resource (absent: none at this level; -1: unlimited, which ends the look-up).
Table = Mapping[str, int]


@dataclass(frozen=True)
class Scope:
    """One table of limits: ``user``, ``users`` (by uid) and ``total``."""

    user: Table = field(default_factory=dict)
    users: Mapping[int, Table] = field(default_factory=dict)
    total: Table = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.user or self.users or self.total)


def _resolve(tables: Iterator[Table | None]) -> tuple[int | None, ...]:
    """Each resource's limit: the first of ``tables`` (most specific first)
    that names it; None when none does or it is -1."""
    out: list[int | None] = [None] * len(RESOURCES)
    todo = set(range(len(RESOURCES)))
    for t in tables:
        if not t:
            continue
        for i in list(todo):
            v = t.get(RESOURCES[i])
            if v is not None:
                out[i] = None if v < 0 else v
                todo.discard(i)
        if not todo:
            break
    return tuple(out)


@dataclass(frozen=True)
class RunLimits:
    """The limits of an instance: ``instance`` (``[sched-py.limits]``),
    ``default`` (``policy.scheduler.limits``) and ``queues`` (each
    ``queues.NAME.policy.scheduler.limits``).  Made by :meth:`from_config`."""

    instance: Scope = field(default_factory=Scope)
    default: Scope = field(default_factory=Scope)
    queues: Mapping[str, Scope] = field(default_factory=dict)
    _cache: dict[Any, tuple[int | None, ...]] = field(
        default_factory=lambda: memo_store("limits"), compare=False, repr=False
    )
    #: (queue, uid, need) -> (the usage it was checked against, at which
    #: version, the answer): see :meth:`check`.  One RunLimits may serve
    #: several engines (the replay's ``--compare``, a restart), so an answer
    #: stands only for the same usage.
    _memo: dict[Any, tuple[Usage, int, str | None]] = field(
        default_factory=lambda: memo_store("limits"), compare=False, repr=False
    )

    def __bool__(self) -> bool:
        return bool(self.instance or self.default or any(self.queues.values()))

    def user_limits(self, queue: str | None, uid: int) -> tuple[int | None, ...]:
        """User ``uid``'s limits in ``queue`` (None: the anonymous queue)."""
        key = ("u", queue, uid)
        got = self._cache.get(key)
        if got is None:
            q = self.queues.get(queue) if queue is not None else None
            d = self.default
            got = _resolve(iter((q and q.users.get(uid), q and q.user, d.users.get(uid), d.user)))
            self._cache[key] = got
        return got

    def queue_limits(self, queue: str | None) -> tuple[int | None, ...]:
        """The limits of ``queue``'s jobs together."""
        key = ("q", queue)
        got = self._cache.get(key)
        if got is None:
            q = self.queues.get(queue) if queue is not None else None
            got = self._cache[key] = _resolve(iter((q and q.total, self.default.total)))
        return got

    def instance_user_limits(self, uid: int) -> tuple[int | None, ...]:
        """User ``uid``'s limits over all queues together."""
        key = ("i", uid)
        got = self._cache.get(key)
        if got is None:
            i = self.instance
            got = self._cache[key] = _resolve(iter((i.users.get(uid), i.user)))
        return got

    def instance_limits(self) -> tuple[int | None, ...]:
        """The limits of all regular jobs together."""
        got = self._cache.get("t")
        if got is None:
            got = self._cache["t"] = _resolve(iter((self.instance.total,)))
        return got

    def _compiled(self, queue: str | None, uid: int) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
        """The limits a job of ``uid`` in ``queue`` must keep, as (scope, ((resource, limit), ...)),
        for the scopes that set any (0: the instance's per-user limits, 1: its total, 2: the
        queue's per-user limits, 3: its total): made once per user and queue."""
        key = ("c", queue, uid)
        got = self._cache.get(key)
        if got is None:
            scopes = (
                self.instance_user_limits(uid),
                self.instance_limits(),
                self.user_limits(queue, uid),
                self.queue_limits(queue),
            )
            got = tuple(
                (k, tuple((i, v) for i, v in enumerate(lim) if v is not None))
                for k, lim in enumerate(scopes)
                if any(v is not None for v in lim)
            )
            self._cache[key] = got
        return got  # type: ignore[return-value]

    def check(self, usage: Usage, job: Job, need: Amounts) -> str | None:
        """None when ``job`` may take ``need`` more now; else the
        ``reason_pending`` that names the first limit it would cross
        (instance, then the queue's per-user limit, then its total)."""
        uid = job.userid
        queue = job.request.queue or None
        if usage.pending_fold():
            usage.fold()
        # A user's pending jobs are mostly alike: each answer stands until the usage changes.
        memo = self._memo
        key = (queue, uid, need)
        got = memo.get(key)
        if got is not None and got[0] is usage and got[1] == usage.version:
            return got[2]
        answer = None
        for scope, limits in self._compiled(queue, uid):
            used = usage.amounts(scope, queue, uid)
            for i, limit in limits:
                if used[i] + need[i] > limit:
                    answer = _reason(scope, queue, RESOURCES[i], used[i], limit, need[i])
                    break
            if answer is not None:
                break
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[key] = (usage, usage.version, answer)
        return answer

    # -- config -------------------------------------------------------------

    @classmethod
    def from_config(
        cls, conf: Any, name: str = "sched-py", uid_of: Callable[[str], int] | None = None
    ) -> RunLimits | None:
        """The limits of a TOML config (a mapping), None when it sets none.

        ``name`` is the module's table (``[name.limits]``); ``uid_of`` turns
        a user name of ``users`` into a uid (KeyError or ValueError: unknown);
        a key of digits is a uid.  Raises ValueError with one line naming
        the key: ``bad config: queues.batch.policy.scheduler.limits.user.nodes: ...``."""
        if conf is None:
            return None
        if not isinstance(conf, Mapping):
            raise ValueError(f"bad config: expected a TOML table at the top, got {type(conf).__name__}")
        own = _table(conf.get(name), name)
        instance = _scope(own.get("limits"), f"{name}.limits", uid_of)
        policy = _table(conf.get("policy"), "policy")
        default = _scope(_scheduler(policy.get("scheduler"), "policy.scheduler"), "policy.scheduler.limits", uid_of)
        queues: dict[str, Scope] = {}
        for qname, entry in _table(conf.get("queues"), "queues").items():
            entry = _table(entry, f"queues.{qname}")
            qpolicy = _table(entry.get("policy"), f"queues.{qname}.policy")
            where = f"queues.{qname}.policy.scheduler"
            scope = _scope(_scheduler(qpolicy.get("scheduler"), where), f"{where}.limits", uid_of)
            if scope:
                queues[str(qname)] = scope
        limits = cls(instance, default, queues)
        return limits if limits else None

    def describe(self) -> list[str]:
        """One line per limit set, as a site reads them back (logs, ``--config`` notes)."""
        out = []
        for where, scope in (("instance", self.instance), ("every queue", self.default), *self.queues.items()):
            where = where if where in ("instance", "every queue") else f"queue {where}"
            for key in ("user", "total"):
                t = getattr(scope, key)
                if t:
                    out.append(f"{where}: {key} {_show(t)}")
            for uid, t in sorted(scope.users.items()):
                out.append(f"{where}: user {uid} {_show(t)}")
        return out


def _show(t: Table) -> str:
    return ", ".join(f"{k}={'unlimited' if v < 0 else v}" for k, v in t.items())


def _label(scope: int, queue: str | None) -> str:
    """How ``reason_pending`` names a scope of :meth:`RunLimits._compiled`:
    the instance's per-user limit, the instance's total, the queue's per-user
    limit, the queue's total."""
    if scope == 0 or (scope == 2 and queue is None):
        return "user limit"
    if scope == 1:
        return "instance limit"
    if queue is None:
        return "queue limit"
    return f"queue {queue} {'user limit' if scope == 2 else 'limit'}"


def _reason(scope: int, queue: str | None, resource: str, used: int, limit: int, n: int) -> str:
    label = _label(scope, queue)
    singular, plural = _UNITS[resource]
    if n > limit:
        return (
            f"{label}: job needs {n} {singular if n == 1 else plural}, "
            f"more than the limit of {limit} (held until the limit is raised)"
        )
    text = f"{label}: {used} of {limit} {singular if limit == 1 else plural} in use"
    return text if used >= limit else f"{text}, job needs {n}"


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the string {value!r:.40}"
    if isinstance(value, float):
        return f"the float {value:g}"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def _table(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"bad config: {where} must be a table, not {_toml_type(value)}")
    return value


def _scheduler(value: Any, where: str) -> Any:
    """The ``limits`` table of a ``policy.scheduler`` table (RFC 33: the scheduler's own)."""
    table = _table(value, where)
    for key in table:
        if key != "limits":
            raise ValueError(f"bad config: {where}.{key}: unknown key (sched-py reads only {where}.limits)")
    return table.get("limits")


def _scope(value: Any, where: str, uid_of: Callable[[str], int] | None) -> Scope:
    table = _table(value, where)
    for key in table:
        if key not in _SCOPE_KEYS:
            raise ValueError(f"bad config: {where}.{key}: unknown key (expected one of {', '.join(_SCOPE_KEYS)})")
    users: dict[int, Table] = {}
    for uname, t in _table(table.get("users"), f"{where}.users").items():
        uid = _uid(str(uname), f"{where}.users.{uname}", uid_of)
        if uid in users:
            raise ValueError(f"bad config: {where}.users.{uname}: user {uid} is given twice")
        users[uid] = _amounts(t, f"{where}.users.{uname}")
    return Scope(_amounts(table.get("user"), f"{where}.user"), users, _amounts(table.get("total"), f"{where}.total"))


_DIGITS = re.compile(r"[0-9]{1,10}")


def _uid(uname: str, where: str, uid_of: Callable[[str], int] | None) -> int:
    if _DIGITS.fullmatch(uname):
        return int(uname)
    if uid_of is None:
        raise ValueError(f"bad config: {where}: users are named by uid here")
    try:
        return int(uid_of(uname))
    except (KeyError, ValueError):
        raise ValueError(f"bad config: {where}: no such user") from None


def _amounts(value: Any, where: str) -> dict[str, int]:
    table = _table(value, where)
    out = {}
    for key, v in table.items():
        if key not in RESOURCES:
            raise ValueError(f"bad config: {where}.{key}: unknown key (expected one of {', '.join(RESOURCES)})")
        if isinstance(v, bool) or not isinstance(v, int) or not -1 <= v <= MAX_LIMIT:
            raise ValueError(
                f"bad config: {where}.{key}: expected an integer from 0 to {MAX_LIMIT}, or -1 for unlimited, "
                f"not {_toml_type(v) if not isinstance(v, int) or isinstance(v, bool) else v}"
            )
        out[key] = v
    return out


# -- what a job needs and holds ------------------------------------------------------


def need_of(job: Job) -> Amounts:
    """The least a pending job holds once it runs: one job, at least one node
    (its ``node`` count), its slots' cores and GPUs.  A whole-node job holds
    every core of its nodes: its start is checked again on its placement
    (:func:`held_by`)."""
    req = job.request
    return (1, max(req.nnodes, 1), req.nslots * req.slot_size, req.nslots * req.slot_gpus)


def held_by(rs: ResourceSet) -> Amounts:
    """What a running job holding ``rs`` counts: one job, its ranks (nodes), cores and GPUs."""
    return (1, len(rs.ranks), rs.count("core"), rs.count("gpu"))


# -- the tally ------------------------------------------------------------------------

_ZERO: Amounts = (0, 0, 0, 0)
#: The events that make a job hold resources, and those after which the table forgets it.
_RUN = frozenset(ev for (_, ev), (_, effects) in TRANSITIONS.items() if "run" in effects)
_FORGET = frozenset(ev for (_, ev), (_, effects) in TRANSITIONS.items() if "forget" in effects)


def _add(tally: dict[Any, Amounts], key: Any, a: Amounts, sign: int) -> None:
    old = tally.get(key, _ZERO)
    new = (old[0] + sign * a[0], old[1] + sign * a[1], old[2] + sign * a[2], old[3] + sign * a[3])
    if new == _ZERO:
        tally.pop(key, None)
    else:
        tally[key] = new


class Usage:
    """What running regular jobs hold, per user, per queue and per user in a
    queue: the one record of it, derived from the job table's events (a
    :class:`~.jobtable.JobObserver`).  A job is counted from its resources
    when first read after it starts (the observer is told before the table
    sets them), taken out when the table forgets it, and counted again
    after a partial free."""

    def __init__(self, jobs: Mapping[int, Job]) -> None:
        #: job id -> (its queue, its uid, what it was counted as), None until counted
        self._counted: dict[int, tuple[str | None, int, Amounts] | None] = {}
        self._new: list[Job] = []
        self._user: dict[int, Amounts] = {}
        self._queue: dict[str | None, Amounts] = {}
        self._queue_user: dict[tuple[str | None, int], Amounts] = {}
        #: Changes whenever a tally does.
        self.version = 0
        for job in jobs.values():
            if job.state is not JobState.PENDING:
                self._counted[job.id] = None
                self._new.append(job)

    def job_event(self, job: Job, event: str, old: JobState | None, now: float | None, preempted: bool) -> None:
        if event in _RUN:
            if job.id not in self._counted:
                self._counted[job.id] = None
                self._new.append(job)
        elif event == "free":  # a partial free: counted again from what is left
            self._uncount(job.id)
            self._counted[job.id] = None
            self._new.append(job)
        if event in _FORGET and job.id in self._counted:
            self._uncount(job.id)
            del self._counted[job.id]

    def _uncount(self, jobid: int) -> None:
        entry = self._counted.get(jobid)
        if entry is not None:
            self._tally(*entry, -1)
            self._counted[jobid] = None

    def _tally(self, queue: str | None, uid: int, a: Amounts, sign: int) -> None:
        self.version += 1
        _add(self._user, uid, a, sign)
        _add(self._queue, queue, a, sign)
        _add(self._queue_user, (queue, uid), a, sign)

    def pending_fold(self) -> bool:
        """Jobs started since the tallies were last read: :meth:`fold` counts them."""
        return bool(self._new)

    def fold(self) -> None:
        """Count the jobs that started since the tallies were last read."""
        new, self._new = self._new, []
        counted = self._counted
        for job in new:
            if job.id not in counted or counted[job.id] is not None or job.resources is None:
                continue
            if job.preemptible_after is not None:
                continue  # best-effort: never counted (module docstring)
            queue = (job.request.queue or None) if job.request is not None else None
            entry = (queue, job.userid, held_by(job.resources))
            counted[job.id] = entry
            self._tally(*entry, 1)

    def amounts(self, scope: int, queue: str | None, uid: int) -> Amounts:
        """What counts against a scope of :meth:`RunLimits._compiled` (0: ``uid``'s jobs,
        1: every job, 2: ``uid``'s jobs in ``queue``, 3: ``queue``'s jobs)."""
        if scope == 2:
            return self.queue_user(queue, uid)
        if scope == 0:
            return self.user(uid)
        if scope == 3:
            return self.queue(queue)
        return self.total()

    def user(self, uid: int) -> Amounts:
        """What ``uid``'s running jobs hold, in every queue."""
        if self._new:
            self.fold()
        return self._user.get(uid, _ZERO)

    def total(self) -> Amounts:
        """What every running regular job holds."""
        if self._new:
            self.fold()
        out = _ZERO
        for a in self._queue.values():
            out = (out[0] + a[0], out[1] + a[1], out[2] + a[2], out[3] + a[3])
        return out

    def queue(self, queue: str | None) -> Amounts:
        """What the running jobs of ``queue`` hold."""
        if self._new:
            self.fold()
        return self._queue.get(queue, _ZERO)

    def queue_user(self, queue: str | None, uid: int) -> Amounts:
        """What ``uid``'s running jobs of ``queue`` hold."""
        if self._new:
            self.fold()
        return self._queue_user.get((queue, uid), _ZERO)

    def as_dict(self) -> dict[str, Any]:
        """Usage by user and by queue, for stats: ``{"users": {uid: {...}}, "queues": {name: {...}}}``."""
        if self._new:
            self.fold()
        return {
            "users": {str(u): dict(zip(RESOURCES, a, strict=True)) for u, a in sorted(self._user.items())},
            "queues": {
                (q or ""): dict(zip(RESOURCES, a, strict=True))
                for q, a in sorted(self._queue.items(), key=lambda kv: kv[0] or "")
            },
        }


class PlannedUsage:
    """What running and planned regular jobs hold over a window of time,
    read as :class:`Usage` is read (:meth:`RunLimits.check` takes either):
    the forecast asks whether a job that starts at ``start`` and runs until
    ``end`` keeps every limit for its whole run, with the jobs running then
    and those the forecast placed before it.  ``spans`` are ``(start, end,
    queue, uid, amounts)``; each scope's amount is the most it reaches over
    ``[start, end)``, resource by resource."""

    version = 0

    def __init__(self, spans: list[tuple[float, float, str | None, int, Amounts]], start: float, end: float) -> None:
        self._spans = [s for s in spans if s[0] < end and s[1] > start]
        self._start = start

    def pending_fold(self) -> bool:
        return False

    def fold(self) -> None:
        pass

    def amounts(self, scope: int, queue: str | None, uid: int) -> Amounts:
        """See :meth:`Usage.amounts`."""
        if scope == 0:
            mine = [s for s in self._spans if s[3] == uid]
        elif scope == 2:
            mine = [s for s in self._spans if s[3] == uid and s[2] == queue]
        elif scope == 3:
            mine = [s for s in self._spans if s[2] == queue]
        else:
            mine = self._spans
        if not mine:
            return _ZERO
        # the most held at once: at the window's start or where a span starts in it
        steps = sorted([(max(s[0], self._start), 1, s[4]) for s in mine] + [(s[1], 0, s[4]) for s in mine])
        now = [0, 0, 0, 0]
        most = [0, 0, 0, 0]
        for _, starts, a in steps:
            sign = 1 if starts else -1
            for i in range(4):
                now[i] += sign * a[i]
                if now[i] > most[i]:
                    most[i] = now[i]
        return (most[0], most[1], most[2], most[3])
