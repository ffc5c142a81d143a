"""The RFC 27 driver, with no Flux in it.

:class:`Driver` turns the messages a Flux scheduler receives into calls on
:class:`~fluxsched_py.engine.Engine`, and the engine's answers back into
replies.  It never imports ``flux``: everything it needs from the broker goes
through a :class:`Transport` (respond, respond with an error, commit to the
KVS, log, raise a job exception, arm the pass timer).
:mod:`fluxsched_py.flux.module` implements the transport on a real
``flux.Flux`` handle; the tests implement it with lists
(:class:`RecordingTransport`) and replay traffic recorded from flux-core.

What the driver adds to the engine
    * the startup sequence: the first ``resource.acquire`` response builds the
      resource graph (every target down until it is ``up``), each
      ``job-manager.sched-hello`` response plus the job's R from the KVS is
      handed to :meth:`Engine.hello`, then the ``job-manager.sched-ready``
      payload;
    * the wire format of every request: ``sched.alloc``, ``sched.free``,
      ``sched.cancel``, ``sched.prioritize``, ``sched.expiration``,
      ``sched.resource-status``, ``feasibility.check``, ``<name>.stats-get``,
      ``<name>.config-reload`` (the ``[<name>]`` table of the instance config,
      :mod:`~fluxsched_py.flux.siteconf`);
    * R is committed to the KVS (``job.<dothex id>.R``) before SUCCESS is
      sent: the SUCCESS responses of one pass go into one transaction;
    * passes are coalesced: any change arms one pass; a pass that runs out
      of its time budget (``PassResult.more``) arms the next one right away,
      so the reactor serves other messages in between.

Rules it keeps (RFC 27)
    * No error response is ever sent to ``sched.alloc`` or ``sched.free``.  A
      malformed alloc is denied (when it carries an id: without one nothing
      can be matched to it, so it is logged and dropped).  A free of an
      unknown job is logged and ignored.  ``sched.free`` gets no response
      (flux-core >= 0.84 sends it without expecting one).
    * Nothing a peer sends raises out of a handler: every handler logs and
      carries on.

R that cannot be read at hello
    The job keeps running.  When R_lite still names its ranks, every
    resource of those ranks that no other job holds is marked allocated to
    the job until its final ``sched.free``: no other job can be placed on
    its nodes (it may hold more than it had, never less).  When not even the
    ranks can be read, the job is unknown to the scheduler, so a fatal
    ``scheduler-restart`` exception is raised on it (as flux-core's own
    schedulers do) and its resources come back through the normal free.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ..engine import Engine, EngineError, EngineOptions, Response, ResponseType, rlist_summary
from ..ids import IdSet
from ..resource import ResourceSet

__all__ = [
    "Driver",
    "Transport",
    "RecordingTransport",
    "parse_module_args",
    "kvs_key",
    "f58",
    "LOG_ERR",
    "LOG_WARNING",
    "LOG_INFO",
    "LOG_DEBUG",
]

# syslog levels, as flux_log() takes them
LOG_ERR = 3
LOG_WARNING = 4
LOG_NOTICE = 5
LOG_INFO = 6
LOG_DEBUG = 7

_SYSLOG = {
    logging.CRITICAL: 2,
    logging.ERROR: LOG_ERR,
    logging.WARNING: LOG_WARNING,
    logging.INFO: LOG_INFO,
    logging.DEBUG: LOG_DEBUG,
}

#: placement policy when the module arguments name none
FLUX_DEFAULT_POLICY = "low"
#: time budget of one engine.schedule() call: the reactor is not blocked longer
PASS_BUDGET = 0.05
#: upper bound of the coalescing delay of a pass during an alloc burst
MAX_DELAY = 0.5


class Transport(Protocol):
    """What the driver needs from the broker (see :mod:`fluxsched_py.flux.module`)."""

    def respond(self, msg: Any, payload: Mapping[str, Any] | None) -> None: ...

    def respond_error(self, msg: Any, errnum: int, text: str) -> None: ...

    def commit(self, puts: list[tuple[str, Any]], done: Callable[[str | None], None]) -> None:
        """Commit ``(key, value)`` pairs in one KVS transaction; call ``done(None)``
        once committed, or ``done(error text)``."""

    def log(self, level: int, text: str) -> None: ...

    def raise_exception(self, jobid: int, type: str, severity: int, note: str) -> None: ...

    def request_pass(self, delay: float) -> None:
        """Call :meth:`Driver.run_pass` after ``delay`` seconds (from the reactor)."""


#: The largest instance ``R.scheduling`` copied into every job's R.
JOB_SCHEDULING_MAX = 64 * 1024


def job_scheduling(R: Any) -> Any:
    """The instance ``R.scheduling`` to copy into each job's R, or None.

    RFC 20 leaves ``scheduling`` opaque; flux-core's sched-simple copies it
    into every allocation, and its t2300 checks that.  sched-py copies it
    too, unless it is JGF (a ``graph`` key: the whole instance's graph, not
    the job's) or larger than :data:`JOB_SCHEDULING_MAX` bytes of JSON.  Job
    R is kept small on purpose: R carrying JGF made Fluxion's brokers grow to
    160 GB (flux-sched issues 1009, 1039).
    """
    sched = R.get("scheduling") if isinstance(R, Mapping) else None
    if not isinstance(sched, Mapping) or "graph" in sched:
        return None
    try:
        size = len(json.dumps(sched, separators=(",", ":")))
    except (TypeError, ValueError):
        return None
    return sched if size <= JOB_SCHEDULING_MAX else None


def kvs_key(jobid: int, name: str = "R") -> str:
    """``job.<dothex id>.<name>``, the RFC 16 job schema key (``job.0000.000a.c800.0000.R``)."""
    j = int(jobid)
    if j < 0 or j >= 1 << 64:
        raise ValueError(f"job id {jobid} out of range")
    return f"job.{j >> 48:04x}.{(j >> 32) & 0xFFFF:04x}.{(j >> 16) & 0xFFFF:04x}.{j & 0xFFFF:04x}.{name}"


def parse_module_args(args: Iterable[str]) -> EngineOptions:
    """Module arguments -> :class:`EngineOptions`; ValueError with a clear message.

    The engine's options (``queue-policy=``, ``reserve-depth=``,
    ``queue-depth=`` or sched-simple's ``mode=``, ``policy=``,
    ``log-level=``, ``annotate-depth=``).  Under Flux the placement
    ``policy`` defaults to :data:`FLUX_DEFAULT_POLICY` (``low``) rather than
    the engine's ``first``.
    """
    out = [str(a) for a in args]
    if not any(a.partition("=")[0].strip() == "policy" for a in out):
        # Under Flux, place lowest ranks and ids first, as flux-core's own
        # schedulers do (rank0/core0 first); policy= changes it.
        out.append(f"policy={FLUX_DEFAULT_POLICY}")
    try:
        return EngineOptions.parse(out)
    except EngineError as exc:
        raise ValueError(str(exc)) from None


def options_text(o: EngineOptions) -> str:
    """The options as module arguments, for the log."""
    per_queue = ",".join(f"{q}:{p}" for q, p in o.queue_policy_per_queue)
    depth = "default" if o.reserve_depth is None else o.reserve_depth or "unlimited"
    return (
        f"queue-policy={o.queue_policy} "
        + (f"queue-policy-per-queue={per_queue} " if per_queue else "")
        + f"reserve-depth={depth} queue-depth={o.queue_depth or 'unlimited'} policy={o.policy}"
    )


class _LogBridge(logging.Handler):
    """Engine (``fluxsched_py.*``) log records -> the transport's log."""

    def __init__(self, driver: Driver) -> None:
        super().__init__()
        self.driver = driver

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = _SYSLOG.get(record.levelno, LOG_INFO)
            self.driver.transport.log(level, record.getMessage())
        except Exception:  # never let logging break a handler
            pass


class _BadPayload:
    """Stands for a request payload that could not be decoded."""

    def __init__(self, error: str) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"<bad payload: {self.error}>"


def bad_payload(error: str) -> _BadPayload:
    return _BadPayload(error)


def _jobid(p: Any) -> int | None:
    if not isinstance(p, Mapping):
        return None
    v = p.get("id")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


class Driver:
    """The sans-flux RFC 27 driver.  See the module docstring.

    Parameters
    ----------
    transport:
        the broker side (:class:`Transport`).
    options:
        :class:`EngineOptions`, or module arguments for :func:`parse_module_args`.
    name:
        the module name (``<name>.stats-get``).
    clock:
        wall clock for ``now`` (epoch seconds, as R and ``t_estimate`` use).
    budget:
        seconds of work per :meth:`run_pass` call.
    graph_factory:
        R -> resource graph (default :meth:`ResourceGraph.from_rv1`).
    job_name:
        how annotations write a job id (default :func:`f58`); the module
        passes flux-core's own encoder, which, like ``flux job id``, writes
        ``f`` rather than ``ƒ`` in a locale that is not UTF-8.
    module_args:
        the module arguments, which override the config table on every
        ``config-reload`` (default: ``options`` when it is arguments).
    """

    def __init__(
        self,
        transport: Transport,
        options: EngineOptions | Iterable[str] | None = None,
        *,
        name: str = "sched-py",
        clock: Callable[[], float] = time.time,
        budget: float | None = PASS_BUDGET,
        graph_factory: Callable[[Any], Any] | None = None,
        job_name: Callable[[int], str] | None = None,
        module_args: Iterable[str] | None = None,
    ) -> None:
        self.transport = transport
        if module_args is None and options is not None and not isinstance(options, EngineOptions):
            module_args = options = list(options)
        self.module_args = [str(a) for a in module_args or ()]
        self.options = options if isinstance(options, EngineOptions) else parse_module_args(options or [])
        self.name = name
        self.clock = clock
        self.budget = budget
        self._graph_factory = graph_factory
        self._job_scheduling: Any = None  # see job_scheduling()
        self._job_name = job_name or f58
        self.engine: Engine | None = None
        self.graph: Any = None
        self._allocs: dict[int, Any] = {}  # job id -> its pending sched.alloc message
        self._committing = 0
        self._pass_armed = False
        self._last_change = 0.0
        self._interval_ewma = 0.0
        self._duration_ewma = 0.0
        self._delay = 0.0
        self._hello_count = 0
        self.stats = {
            "sched_passes": 0,
            "sched_yields": 0,
            "allocs": 0,
            "frees": 0,
            "commits": 0,
            "commit_errors": 0,
            "bad_requests": 0,
            "hello_jobs": 0,
            "hello_errors": 0,
            "config_reloads": 0,
            # filled in by the broker binding (fluxsched_py.flux.module)
            "callback_max_ms": 0.0,
            "callback_max_cpu_ms": 0.0,
            "callbacks_over_100ms_cpu": 0,
            "pass_deferrals": 0,
        }
        self._log_bridge = _LogBridge(self)
        logger = logging.getLogger("fluxsched_py")
        logger.addHandler(self._log_bridge)
        logger.propagate = False

    def close(self) -> None:
        logging.getLogger("fluxsched_py").removeHandler(self._log_bridge)

    # ------------------------------------------------------------------
    # logging helpers
    # ------------------------------------------------------------------

    def log(self, level: int, text: str) -> None:
        try:
            self.transport.log(level, text)
        except Exception:
            pass

    def error(self, text: str) -> None:
        self.log(LOG_ERR, text)

    # ------------------------------------------------------------------
    # startup: resource.acquire, hello, ready
    # ------------------------------------------------------------------

    def acquire(self, payload: Any) -> None:
        """A ``resource.acquire`` response.  The first builds the graph and
        the engine (raises ValueError if its R is unusable); later ones are
        up/down/shrink/expiration updates (errors are logged)."""
        if self.engine is None:
            self._acquire_first(payload)
            return
        try:
            if not isinstance(payload, Mapping):
                raise ValueError(f"expected an object, got {payload!r}")
            up, down, shrink = payload.get("up"), payload.get("down"), payload.get("shrink")
            exp = payload.get("expiration")
            if exp is not None and (not isinstance(exp, int | float) or isinstance(exp, bool) or exp < 0):
                raise ValueError(f"bad expiration {exp!r}")
            for key, val in (("up", up), ("down", down), ("shrink", shrink)):
                if val is not None:
                    self._check_ranks(key, val)
            self.engine.resource_update(up=up or None, down=down or None, shrink=shrink or None, expiration=exp)
            parts = [f"{k}={v}" for k, v in (("up", up), ("down", down), ("shrink", shrink)) if v]
            if exp is not None:
                parts.append(f"expiration={exp:.2f}")
            self.log(LOG_DEBUG, "resource update: " + " ".join(parts))
        except Exception as exc:
            self.error(f"resource.acquire: ignoring bad update {payload!r}: {exc}")
            return
        self._changed()

    def _check_ranks(self, key: str, val: Any) -> IdSet:
        ids = IdSet.parse(val) if isinstance(val, str) else IdSet(val)
        topo = getattr(self.graph, "topo", None)
        unknown = ids - IdSet.from_mask(topo.ranks_mask) if topo is not None else None
        if unknown:
            raise ValueError(f"{key}: ranks {unknown} are unknown")
        return ids

    def _acquire_first(self, payload: Any) -> None:
        if not isinstance(payload, Mapping) or "resources" not in payload:
            raise ValueError(f"resource.acquire: first response has no 'resources': {payload!r}")
        R = payload["resources"]
        try:
            g = self._read_graph(R)
        except Exception as exc:
            if not (isinstance(R, Mapping) and "scheduling" in R):
                raise ValueError(f"resource.acquire: cannot read the instance R: {exc}") from exc
            # R.scheduling is opaque to RFC 20 (another scheduler's data, or
            # JGF we cannot use): schedule from R_lite alone.
            self.log(LOG_WARNING, f"resource.acquire: ignoring R.scheduling ({exc})")
            R = {k: v for k, v in R.items() if k != "scheduling"}
            try:
                g = self._read_graph(R)
            except Exception as exc2:
                raise ValueError(f"resource.acquire: cannot read the instance R: {exc2}") from exc2
        self.graph = g
        self._job_scheduling = job_scheduling(payload["resources"])
        self.engine = Engine(g, self.options, job_name=self._job_name)
        # RFC 27 / resource.acquire: every target is down until it is up.
        g.set_down(g.ranks)
        up = payload.get("up") or None
        exp = ((R.get("execution") or {}).get("expiration") or 0) if isinstance(R, Mapping) else 0
        self.engine.resource_update(up=up, expiration=float(exp) if exp else None)
        all_ = g.all()
        self.log(
            LOG_INFO,
            f"resources: {len(g.ranks)} ranks, {all_.count('core')} cores, {all_.count('gpu')} gpus; up={up or ''}",
        )

    def _read_graph(self, R: Any) -> Any:
        if self._graph_factory is not None:
            return self._graph_factory(R)
        from ..resource import ResourceGraph

        return ResourceGraph.from_rv1(R)

    def hello_payload(self) -> dict:
        """The ``job-manager.sched-hello`` request payload."""
        return {"partial-ok": True}

    def hello(self, payload: Any, R: Any) -> None:
        """One ``sched-hello`` response, with the job's R as read from the KVS
        (a dict, JSON text, or an exception if the lookup failed)."""
        jobid = _jobid(payload)
        if jobid is None:
            self.error(f"hello: response without a valid job id: {payload!r}")
            return
        assert self.engine is not None and self.graph is not None
        self.stats["hello_jobs"] += 1
        try:
            if isinstance(R, BaseException):
                raise ValueError(f"cannot read {kvs_key(jobid)}: {R}")
            if isinstance(R, bytes | bytearray):
                R = R.decode()
            if isinstance(R, str):
                R = json.loads(R)
            if not isinstance(R, Mapping):
                raise ValueError(f"R is not an object: {R!r:.80}")
            ResourceSet.from_rv1(self.graph, R)  # readable? (the engine reads it again, and applies ``free``)
            free = payload.get("free")
            if free:
                IdSet.parse(str(free))
        except Exception as exc:
            self.stats["hello_errors"] += 1
            self._hello_unreadable(jobid, payload, R, exc)
            return
        self._engine_hello(jobid, payload, R)
        if self.engine.job(jobid) is None:
            self.stats["hello_errors"] += 1
            self.error(f"hello: job {jobid}: its R could not be marked allocated (see above)")

    def _engine_hello(self, jobid: int, payload: Mapping[str, Any], R: Mapping[str, Any]) -> None:
        assert self.engine is not None
        h = {
            "id": jobid,
            "priority": _int(payload.get("priority"), 0),
            "userid": _int(payload.get("userid"), 0),
            "t_submit": _float(payload.get("t_submit"), 0.0),
            "R": R,
        }
        if payload.get("free"):
            h["free"] = str(payload["free"])
        self.engine.hello([h])
        self._hello_count += 1

    def _hello_unreadable(self, jobid: int, payload: Mapping[str, Any], R: Any, exc: Exception) -> None:
        g = self.graph
        ranks = None
        try:
            lite = (R.get("execution") or {}).get("R_lite") if isinstance(R, Mapping) else None
            ranks = IdSet()
            for item in lite or ():
                ranks = ranks | IdSet.parse(str(item["rank"]))
            ranks = ranks & g.ranks
        except Exception:
            ranks = None
        if ranks:
            free = payload.get("free")
            try:
                if free:
                    ranks = ranks - IdSet.parse(str(free))
            except Exception:
                pass
            hold = g.all().restrict(ranks) - g.allocated()
            self.error(
                f"hello: job {jobid}: unreadable R ({exc}); holding every free resource of ranks {ranks} "
                "for it until its final free"
            )
            self._engine_hello(jobid, payload, hold.to_rv1(g))
            return
        self.error(f"hello: job {jobid}: unreadable R ({exc}); raising a fatal exception on the job")
        try:
            self.transport.raise_exception(
                jobid, "scheduler-restart", 0, "failed to reallocate R for running job: unreadable R"
            )
        except Exception as e:
            self.error(f"hello: job {jobid}: raising the exception failed: {e}")

    def hello_done(self) -> None:
        """The hello stream ended (ENODATA)."""
        self.log(LOG_DEBUG, f"hello: {self._hello_count} running jobs recovered")
        self._changed()

    def ready_payload(self) -> dict:
        """The ``job-manager.sched-ready`` request payload (limited/unlimited from queue-depth=)."""
        assert self.engine is not None
        return self.engine.ready_mode()

    def ready(self, payload: Any) -> None:
        """The ``job-manager.sched-ready`` response ``{count}``."""
        count = payload.get("count") if isinstance(payload, Mapping) else None
        o = self.options
        depth = self.engine.policy.reserve_depth if self.engine is not None else o.reserve_depth
        try:
            rl = self.graph.all().to_rv1(self.graph)["execution"]["R_lite"]
            res = rlist_summary(rl) or "(no resources)"
        except Exception:
            res = "?"
        per_queue = ",".join(f"{q}:{p}" for q, p in o.queue_policy_per_queue)
        self.log(
            LOG_INFO,
            f"ready: queue-depth={o.queue_depth or 'unlimited'} queue-policy={o.queue_policy} "
            + (f"queue-policy-per-queue={per_queue} " if per_queue else "")
            + f"policy={o.policy} reserve-depth={depth or 'unlimited'} count={count} {res}",
        )
        self._changed()

    # ------------------------------------------------------------------
    # requests
    # ------------------------------------------------------------------

    def topics(self) -> list[str]:
        """The request topics to register handlers for."""
        return [
            "sched.alloc",
            "sched.free",
            "sched.cancel",
            "sched.prioritize",
            "sched.expiration",
            "sched.resource-status",
            "feasibility.check",
            f"{self.name}.stats-get",
            f"{self.name}.config-reload",
        ]

    def handle(self, topic: str, msg: Any, payload: Any) -> None:
        """Dispatch one request.  ``payload`` is the decoded JSON (None when
        empty) or :func:`bad_payload`.  Never raises."""
        try:
            if topic == f"{self.name}.config-reload":
                self.on_config_reload(msg, payload)
                return
            if self.engine is None and not topic.endswith(".stats-get"):
                # Only possible before the first resource.acquire response
                # (the job-manager sends nothing before sched-ready).
                if topic in ("sched.expiration", "sched.resource-status", "feasibility.check"):
                    self._respond_error(msg, errno.EAGAIN, "the scheduler is starting: no resources yet")
                else:
                    self.error(f"{topic}: received before resources are known; ignored")
                return
            if topic == "sched.alloc":
                self.on_alloc(msg, payload)
            elif topic == "sched.free":
                self.on_free(msg, payload)
            elif topic == "sched.cancel":
                self.on_cancel(msg, payload)
            elif topic == "sched.prioritize":
                self.on_prioritize(msg, payload)
            elif topic == "sched.expiration":
                self.on_expiration(msg, payload)
            elif topic == "sched.resource-status":
                self.on_resource_status(msg, payload)
            elif topic == "feasibility.check":
                self.on_feasibility(msg, payload)
            elif topic.endswith(".stats-get"):
                self.transport.respond(msg, self.stats_get())
            else:
                self.error(f"{topic}: unexpected request")
        except Exception as exc:  # last resort: a handler bug must not kill the module
            self.stats["bad_requests"] += 1
            self.error(f"{topic}: internal error handling {payload!r:.200}: {exc!r}")
            if topic in ("sched.expiration", "sched.resource-status", "feasibility.check") or topic.endswith(
                (".stats-get", ".config-reload")
            ):
                self._respond_error(msg, errno.EINVAL, f"internal error: {exc}")

    def _respond_error(self, msg: Any, errnum: int, text: str) -> None:
        try:
            self.transport.respond_error(msg, errnum, text)
        except Exception as exc:
            self.error(f"respond_error failed: {exc}")

    def on_alloc(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobid = _jobid(p)
        if jobid is None:
            self.stats["bad_requests"] += 1
            self.error(f"sched.alloc: no valid job id, cannot answer: {p!r:.200}")
            return
        self.stats["allocs"] += 1
        problems = []
        prio = p.get("priority")
        if isinstance(prio, bool) or not isinstance(prio, int):
            problems.append(f"priority={prio!r}")
        userid = p.get("userid", 0)
        if isinstance(userid, bool) or not isinstance(userid, int):
            problems.append(f"userid={userid!r}")
        t_submit = p.get("t_submit", 0.0)
        if isinstance(t_submit, bool) or not isinstance(t_submit, int | float) or not math.isfinite(t_submit):
            problems.append(f"t_submit={t_submit!r}")
        jobspec = p.get("jobspec")
        if not isinstance(jobspec, Mapping):
            problems.append("jobspec missing" if jobspec is None else "jobspec is not an object")
        elif (why := _v1_duration_problem(jobspec)) is not None:
            problems.append(why)
        self._allocs[jobid] = msg
        if problems:
            self.stats["bad_requests"] += 1
            self.error(f"sched.alloc: job {jobid}: malformed request ({', '.join(problems)}): denied")
            if len(problems) == 1 and problems[0].startswith("invalid jobspec"):
                note = problems[0]
            else:
                note = "malformed sched.alloc: " + ", ".join(problems)
            self._send([Response(jobid, ResponseType.DENY, note=note)])
            return
        out = self.engine.alloc(jobid, prio, userid, float(t_submit), jobspec)
        if out:
            self._send(out)
        if jobid in self._allocs and self.engine.job(jobid) is None:
            # denied by the engine: nothing to wait for
            self._allocs.pop(jobid, None)
        self._changed()

    def on_free(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobid = _jobid(p)
        if jobid is None:
            self.stats["bad_requests"] += 1
            self.error(f"sched.free: no valid job id: {p!r:.200}")
            return
        self.stats["frees"] += 1
        final = p.get("final", True)
        R = p.get("R")
        if not isinstance(final, bool):
            self.error(f"sched.free: job {jobid}: final={final!r} is not a boolean; taken as true")
            final = True
        if R is not None and not isinstance(R, Mapping):
            self.error(f"sched.free: job {jobid}: R is not an object; releasing everything")
            R, final = None, True
        if not final and R is None:
            self.error(f"sched.free: job {jobid}: partial free without R; ignored")
            return
        self.engine.free(jobid, R, final)
        self._changed()

    def on_cancel(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobid = _jobid(p)
        if jobid is None:
            self.stats["bad_requests"] += 1
            self.error(f"sched.cancel: no valid job id: {p!r:.200}")
            return
        out = self.engine.cancel(jobid)
        if out:
            self._send(out)
            self._changed()

    def on_prioritize(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobs = p.get("jobs") if isinstance(p, Mapping) else None
        if not isinstance(jobs, list):
            self.stats["bad_requests"] += 1
            self.error(f"sched.prioritize: no 'jobs' array: {p!r:.200}")
            return
        good = []
        for item in jobs:
            if (
                isinstance(item, list | tuple)
                and len(item) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
            ):
                good.append((item[0], item[1]))
            else:
                self.stats["bad_requests"] += 1
                self.error(f"sched.prioritize: ignoring bad entry {item!r:.100}")
        if good:
            self.engine.prioritize(good)
            self._changed()

    def on_expiration(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobid = _jobid(p)
        exp = p.get("expiration") if isinstance(p, Mapping) else None
        if jobid is None or isinstance(exp, bool) or not isinstance(exp, int | float) or exp < 0:
            self.stats["bad_requests"] += 1
            self._respond_error(msg, errno.EPROTO, f"malformed sched.expiration request: {p!r:.100}")
            return
        try:
            # Looked up on the class: an earlier engine had an instance
            # attribute ``expiration`` that shadowed the method.
            Engine.expiration(self.engine, jobid, float(exp))
        except EngineError as exc:
            self._respond_error(msg, errno.EINVAL, str(exc))
            return
        self.log(LOG_DEBUG, f"expiration: job {jobid} now ends at {exp:.2f}")
        self.transport.respond(msg, None)
        self._changed()

    def on_resource_status(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        self.transport.respond(msg, self.engine.resource_status())

    def on_feasibility(self, msg: Any, p: Any) -> None:
        assert self.engine is not None
        jobspec = p.get("jobspec") if isinstance(p, Mapping) else None
        if not isinstance(jobspec, Mapping):
            self._respond_error(msg, errno.EPROTO, "feasibility.check: malformed request: no jobspec object")
            return
        reason = self.engine.feasibility(jobspec)
        if reason is None:
            self.transport.respond(msg, None)
        elif reason.startswith("invalid jobspec"):
            self._respond_error(msg, errno.EINVAL, reason)
        else:
            self._respond_error(msg, errno.EOVERFLOW, reason)

    def on_config_reload(self, msg: Any, p: Any) -> None:
        """``<name>.config-reload`` (``flux config reload``): the payload is the
        whole new instance config.  Its ``[<name>]`` table, overridden by the
        module arguments, replaces the options and the next pass re-plans.
        A bad table gets an error response (flux-core then reverts every
        module and the command fails) and the old options stay."""
        from .siteconf import config_options

        try:
            if isinstance(p, _BadPayload):
                raise ValueError(f"malformed config-reload request: {p.error}")
            new = config_options(p, self.name, self.module_args)
        except ValueError as exc:
            self.error(f"config reload refused: {exc}")
            self._respond_error(msg, errno.EINVAL, f"{self.name}: {exc}")
            return
        old = self.options
        if new.queue_depth != old.queue_depth:
            # The RFC 27 ready mode was sent once, at startup.
            self.log(
                LOG_WARNING,
                f"config reload: queue-depth={new.queue_depth or 'unlimited'} takes effect when the module is "
                f"reloaded; keeping queue-depth={old.queue_depth or 'unlimited'}",
            )
            new = dataclasses.replace(new, queue_depth=old.queue_depth)
        if new != old:
            if self.engine is not None:
                try:
                    self.engine.reconfigure(new)
                except EngineError as exc:  # pragma: no cover - config_options checked it
                    self._respond_error(msg, errno.EINVAL, f"{self.name}: {exc}")
                    return
            self.options = new
            self.stats["config_reloads"] += 1
            self.log(LOG_INFO, f"config reload: {options_text(new)}")
            if self.engine is not None:
                self._changed()
        self.transport.respond(msg, None)

    def stats_get(self) -> dict:
        e = self.engine
        s = dict(self.stats)
        s["pending_jobs"] = e.pending_count if e else 0
        s["running_jobs"] = len(e.running) if e else 0
        s["alloc_requests"] = len(self._allocs)
        s["commits_in_flight"] = self._committing
        s["sched_delay"] = self._delay
        s["sched_duration_ewma"] = self._duration_ewma
        s["sched_interval_ewma"] = self._interval_ewma
        if e:
            s["engine"] = dict(e.stats)
            o = e.options
            s["options"] = {
                "queue-policy": o.queue_policy,
                "queue-policy-per-queue": dict(o.queue_policy_per_queue),
                "policy": o.policy,
                "queue-depth": o.queue_depth,
                "reserve-depth": o.reserve_depth,
                "annotate-depth": o.annotate_depth,
                "log-level": o.log_level,
            }
        return s

    # ------------------------------------------------------------------
    # passes and responses
    # ------------------------------------------------------------------

    def _changed(self) -> None:
        now = time.monotonic()
        if self._last_change:
            self._interval_ewma = 0.25 * (now - self._last_change) + 0.75 * self._interval_ewma
        self._last_change = now
        if not self._pass_armed:
            self._pass_armed = True
            self.transport.request_pass(self._delay)

    def run_pass(self) -> bool:
        """Run (part of) a scheduling pass and send what it decided.
        Returns True when the pass is not finished (another is armed)."""
        self._pass_armed = False
        if self.engine is None:
            return False
        t0 = time.monotonic()
        try:
            res = self.engine.schedule(self.clock(), self.budget)
        except Exception as exc:  # an engine bug must not kill the module
            self.error(f"scheduling pass failed: {exc!r}")
            return False
        dt = time.monotonic() - t0
        self._duration_ewma = 0.25 * dt + 0.75 * self._duration_ewma
        # Coalesce during bursts: when changes come faster than passes run,
        # wait about one pass duration so one pass serves many changes.
        if 0 < self._interval_ewma < self._duration_ewma:
            self._delay = min(self._duration_ewma, MAX_DELAY)
        else:
            self._delay = 0.0
        if res.more:
            self.stats["sched_yields"] += 1
        else:
            self.stats["sched_passes"] += 1
        self._send(res.responses)
        if res.more and not self._pass_armed:
            self._pass_armed = True
            self.transport.request_pass(0.0)
        return res.more

    def _send(self, responses: list[Response]) -> None:
        success = []
        for r in responses:
            if r.type is ResponseType.SUCCESS:
                success.append(r)
                continue
            if r.type is ResponseType.DENY and r.note and not r.note.startswith(_NOTE_PREFIXES):
                # flux-core's wording for a request that can never be met
                r.note = f"unsatisfiable request: {r.note}"
            msg = self._allocs.get(r.id)
            if msg is None:
                self.log(LOG_DEBUG, f"no pending sched.alloc for job {r.id}: dropping {r.type.name}")
                continue
            if r.type in (ResponseType.DENY, ResponseType.CANCEL):
                del self._allocs[r.id]
                if r.type is ResponseType.DENY:
                    self.log(LOG_DEBUG, f"alloc: job {r.id} denied: {r.note}")
            self.transport.respond(msg, r.payload())
        if success:
            extra = self._job_scheduling
            puts = [(kvs_key(r.id, "R"), r.R if extra is None else {**r.R, "scheduling": extra}) for r in success]
            self._committing += 1
            self.transport.commit(puts, lambda err, batch=success: self._committed(batch, err))

    def _committed(self, batch: list[Response], err: str | None) -> None:
        self._committing -= 1
        if err is None:
            self.stats["commits"] += 1
            for r in batch:
                msg = self._allocs.pop(r.id, None)
                if msg is None:
                    self.error(f"alloc: job {r.id}: no pending sched.alloc to answer SUCCESS")
                    continue
                self.transport.respond(msg, r.payload())
            return
        self.stats["commit_errors"] += 1
        self.error(f"alloc: KVS commit of R failed for {len(batch)} jobs: {err}; denying them")
        assert self.engine is not None
        for r in batch:
            self.engine.free(r.id, None, True)
            msg = self._allocs.pop(r.id, None)
            if msg is not None:
                deny = Response(r.id, ResponseType.DENY, note=f"scheduler could not commit R to the KVS: {err}")
                self.transport.respond(msg, deny.payload())
        self._changed()


_NOTE_PREFIXES = (
    "invalid jobspec",
    "malformed",
    "unsatisfiable",
    "scheduler could not",
    "scheduler error",
    "job already",
)


def _v1_duration_problem(jobspec: Mapping[str, Any]) -> str | None:
    """RFC 25 (jobspec V1, what flux-core submits) requires
    ``attributes.system.duration``; flux-core's own parser rejects a job
    without it, so the scheduler denies it too (with flux-core's wording)."""
    if jobspec.get("version") != 1:
        return None
    node: Any = jobspec
    for key in ("attributes", "system", "duration"):
        if not isinstance(node, Mapping) or key not in node:
            return f"invalid jobspec: getting duration: Object item not found: {key}"
        node = node[key]
    return None


_F58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def f58(jobid: int) -> str:
    """A job id as flux-core shows it (``ƒLqTPgb``, RFC 19 FLUID base58)."""
    n = int(jobid)
    if n == 0:
        return "ƒ1"
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(_F58[r])
    return "ƒ" + "".join(reversed(out))


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _float(v: Any, default: float) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


class RecordingTransport:
    """A :class:`Transport` that records everything (tests, replay).

    ``sent`` holds ``(kind, msg, payload)`` tuples in order: kind is
    ``respond``, ``error`` (payload ``(errnum, text)``), ``commit`` (payload:
    the puts), ``exception`` or ``log``.  Commits complete at once unless
    ``defer_commits`` is set (then :meth:`complete_commits` finishes them);
    passes run when the test calls :meth:`run_passes`.
    """

    def __init__(self, *, defer_commits: bool = False, commit_error: str | None = None) -> None:
        self.sent: list[tuple[str, Any, Any]] = []
        self.logs: list[tuple[int, str]] = []
        self.kvs: dict[str, Any] = {}
        self.defer_commits = defer_commits
        self.commit_error = commit_error
        self._deferred: list[tuple[list[tuple[str, Any]], Callable[[str | None], None]]] = []
        self.pass_requests = 0
        self.driver: Driver | None = None

    def respond(self, msg: Any, payload: Any) -> None:
        self.sent.append(("respond", msg, payload))

    def respond_error(self, msg: Any, errnum: int, text: str) -> None:
        self.sent.append(("error", msg, (errnum, text)))

    def commit(self, puts: list[tuple[str, Any]], done: Callable[[str | None], None]) -> None:
        self.sent.append(("commit", None, [k for k, _ in puts]))
        if self.defer_commits:
            self._deferred.append((puts, done))
        else:
            self._finish(puts, done)

    def _finish(self, puts: list[tuple[str, Any]], done: Callable[[str | None], None]) -> None:
        if self.commit_error is None:
            for k, v in puts:
                self.kvs[k] = json.loads(json.dumps(v))
        done(self.commit_error)

    def complete_commits(self) -> None:
        todo, self._deferred = self._deferred, []
        for puts, done in todo:
            self._finish(puts, done)

    def log(self, level: int, text: str) -> None:
        self.logs.append((level, text))

    def raise_exception(self, jobid: int, type: str, severity: int, note: str) -> None:
        self.sent.append(("exception", None, {"id": jobid, "type": type, "severity": severity, "note": note}))

    def request_pass(self, delay: float) -> None:
        self.pass_requests += 1

    def run_passes(self, limit: int = 10000) -> None:
        assert self.driver is not None
        for _ in range(limit):
            if not self.driver.run_pass():
                return

    def responses(self, kind: str = "respond") -> list[Any]:
        return [p for k, _, p in self.sent if k == kind]

    def errors(self) -> list[tuple[int, str]]:
        return [text for level, text in self.logs if level <= LOG_ERR]
