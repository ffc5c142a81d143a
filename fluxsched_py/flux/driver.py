"""The RFC 27 driver, with no Flux in it.

:class:`Driver` turns the messages a Flux scheduler receives into calls on
:class:`~fluxsched_py.engine.Engine`, and the engine's answers back into
replies.  It never imports ``flux``: everything it needs from the broker goes
through a :class:`Transport` (respond, respond with an error, commit to the
KVS, log, raise a job exception, arm the pass timer).
:mod:`fluxsched_py.flux.module` implements the transport on a real
``flux.Flux`` handle; the tests implement it with lists
(``t/recording_transport.py``) and replay traffic recorded from flux-core.

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
      so the reactor serves other messages in between;
    * after a complete pass, the engine's end-of-campaign actions
      (``duplicates``, :meth:`Engine.copies`): a copy of the instance
      owner's job is submitted as the owner (``transport.duplicate``); a
      guest's is not, as it would run as the owner; a loser is cancelled
      as ``flux cancel`` does (``job-manager.raise``, type ``cancel``,
      severity 0).  A guest's job that claims to be a copy
      (``attributes.system.duplicate-of``) is taken as an ordinary job: its
      end must not cancel another user's job.

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
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..engine import Engine, EngineError, EngineOptions, JobState, Response, ResponseType
from ..engine.campaigns import campaign_of
from ..engine.duplicates import CancelCopy, Duplicate
from ..engine.options import LOG_LEVELS
from ..engine.power import PowerOff, PowerOn
from ..engine.runlimits import RunLimits
from ..ids import Hostlist, IdSet
from .allocrequest import AllocRequest
from .annotbatch import AnnotationBatcher
from .control import Control
from .powerctl import POWERED_DOWN, PowerConfig
from .startup import Startup
from .wire import (
    _NOTE_PREFIXES,
    FORECAST_QUIET,
    LOG_DEBUG,
    LOG_ERR,
    LOG_INFO,
    LOG_WARNING,
    MAX_DELAY,
    PASS_BUDGET,
    SIGNAL_RETRY,
    SIGNAL_TRIES,
    Transport,
    _BadPayload,
    _jobid,
    _LogBridge,
    _v1_duration_problem,
    bad_payload,
    f58,
    kvs_key,
    options_text,
    parse_module_args,
    split_binding_args,
)

__all__ = [
    "Driver",
    "bad_payload",
    "Transport",
    "parse_module_args",
    "kvs_key",
    "f58",
    "LOG_ERR",
    "LOG_WARNING",
    "LOG_INFO",
    "LOG_DEBUG",
]


def _request_of(r: Response, admitted: AllocRequest | None = None) -> AllocRequest | None:
    """The request ``r`` answers: its job's (``r.reply``), else ``admitted``
    when ``r`` is for that alloc's job (a DENY before the engine admitted it)."""
    if r.reply is not None:
        return r.reply.request
    return admitted if admitted is not None and admitted.jobid == r.id else None


class Driver(Startup):
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
    annotate_interval:
        ``annotate-interval`` (:mod:`~fluxsched_py.flux.annotbatch`), also read from ``options``.
    limits:
        the run limits of the instance config (:func:`~.siteconf.config_limits`), replaced on every
        ``config-reload``.
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
        annotate_interval: float = 0.0,
        limits: RunLimits | None = None,
        power: PowerConfig | None = None,
    ) -> None:
        self.transport = transport
        self.limits = limits
        #: ``[sched-py.power]``: the nodes' power model and the programs that switch them.
        self.power = power
        self._power_changed = False  # since the power states were last kept in the KVS
        if options is not None and not isinstance(options, EngineOptions):
            options, bargs = split_binding_args(options)
            annotate_interval = annotate_interval or bargs.annotate_interval
            module_args = options if module_args is None else module_args
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
        self._committing = 0
        #: SUCCESS responses whose R is being committed (their requests not answered yet).
        self._uncommitted = 0
        self._pass_armed = False
        self._wakeup_armed = False  # the armed pass is only the engine's wakeup (EASY++ correction)
        self._wake_at = math.inf  # when the armed wakeup is due
        #: Notices the job-manager refused (the job not RUNNING yet): (when to try again, id, signal, tries).
        self._resignal: list[tuple[float, int, int, int]] = []
        #: Running jobs whose shells are known to have started (``transport.watch_shells``):
        #: a notice to one goes out at once.  Forgotten at the job's final free.
        self._shells_up: set[int] = set()
        #: Notices held until the job's shells start: job id -> signals, each once, in order.
        self._held_notices: dict[int, list[int]] = {}
        self._last_change = 0.0
        self._interval_ewma = 0.0
        self._duration_ewma = 0.0
        self._delay = 0.0
        self._hello_count = 0
        #: (user, campaign) of guests' campaigns whose copies were refused, each logged once.
        self._copies_refused: set[tuple[int, str | None]] = set()
        arm = getattr(transport, "request_flush", None)  # optional: without it, nothing is held
        self.annotations = AnnotationBatcher(annotate_interval, time.monotonic, self._annotate, arm)
        #: What the last callback did, for the module's slow-callback records.
        self.last_work: tuple[Any, ...] = ()
        self.stats = {
            "sched_passes": 0,
            "sched_yields": 0,
            "allocs": 0,
            "frees": 0,
            "commits": 0,
            "commit_errors": 0,
            "annotations": 0,
            "bad_requests": 0,
            "hello_jobs": 0,
            "hello_errors": 0,
            "hello_besteffort": 0,
            "hello_preempted": 0,
            "config_reloads": 0,
            # filled in by the broker binding (fluxsched_py.flux.module)
            "callback_max_ms": 0.0,
            "callback_max_cpu_ms": 0.0,
            "callbacks_over_100ms_cpu": 0,
            "pass_deferrals": 0,
        }
        #: The control RPCs (``flux sched-py``), open to guests for reading.
        self.control = Control(self)
        self._log_bridge = _LogBridge(self)
        # The module owns its process's logging: the engine never sets a level.
        logger = logging.getLogger("fluxsched_py")
        logger.addHandler(self._log_bridge)
        logger.setLevel(LOG_LEVELS[self.options.log_level])
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
        self.last_work = (topic,)
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
        request = AllocRequest(jobid, msg, self.transport.respond)
        if problems:
            self.stats["bad_requests"] += 1
            self.error(f"sched.alloc: job {jobid}: malformed request ({', '.join(problems)}): denied")
            if len(problems) == 1 and problems[0].startswith("invalid jobspec"):
                note = problems[0]
            else:
                note = "malformed sched.alloc: " + ", ".join(problems)
            self._send([Response(jobid, ResponseType.DENY, note=note)], request)
            return
        jobspec = self._not_a_copy(jobid, userid, jobspec)
        out = self.engine.alloc(jobid, prio, userid, float(t_submit), jobspec, request)
        if out:
            self._send(out, request)  # a DENY at once: the engine never admitted it
        self._changed()

    def _not_a_copy(self, jobid: int, userid: int, jobspec: Mapping[str, Any]) -> Mapping[str, Any]:
        """``jobspec`` without ``attributes.system.duplicate-of`` when a guest
        (not the instance owner) submitted it: only the module submits
        copies, and a copy that ends first gets the other members of its
        group cancelled, as the owner."""
        owner = getattr(self.transport, "owner", None)
        attrs = jobspec.get("attributes")
        system = attrs.get("system") if isinstance(attrs, Mapping) else None
        if owner is None or userid == owner or not isinstance(system, Mapping) or "duplicate-of" not in system:
            return jobspec
        self.log(LOG_INFO, f"job {self._job_name(jobid)} of user {userid}: duplicate-of ignored (a guest's job)")
        system = {k: v for k, v in system.items() if k != "duplicate-of"}
        return {**jobspec, "attributes": {**attrs, "system": system}}

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
        if final:
            self._shells_up.discard(jobid)
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
        module arguments, replaces the options, its limits (and RFC 33's
        ``policy.scheduler`` ones) replace the limits, its
        ``[[<name>.reservation]]`` entries are applied
        (:func:`~.reservestore.reload`), and the next pass re-plans.  A bad
        table or entry gets an error response (flux-core then reverts every
        module and the command fails) and the old options, limits and
        reservations stay."""
        from . import reservestore
        from .siteconf import config_limits, config_options

        try:
            if isinstance(p, _BadPayload):
                raise ValueError(f"malformed config-reload request: {p.error}")
            new = config_options(p, self.name, self.module_args)
            limits = config_limits(p, self.name)
            # [[<name>.reservation]]: all or nothing, before the options and limits change
            reserved = reservestore.reload(self, p) if self.engine is not None else []
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
        if new.power_save != old.power_save:
            self.log(
                LOG_WARNING, f"config reload: power-save={new.power_save} takes effect when the module is reloaded"
            )
            new = dataclasses.replace(new, power_save=old.power_save)
        if new.queue_parent != old.queue_parent:
            # Pending jobs wait in the queue they joined: a parent changes with the module.
            self.log(LOG_WARNING, "config reload: queue-parent (virtual queues) changes when the module is reloaded")
            new = dataclasses.replace(new, queue_parent=old.queue_parent)
        if new != old:
            if self.engine is not None:
                try:
                    self.engine.reconfigure(new)
                except EngineError as exc:  # pragma: no cover - config_options checked it
                    self._respond_error(msg, errno.EINVAL, f"{self.name}: {exc}")
                    return
            self.options = new
            logging.getLogger("fluxsched_py").setLevel(LOG_LEVELS[new.log_level])
            self.log(LOG_INFO, f"config reload: {options_text(new)}")
        if limits != self.limits:
            # Running jobs stay, even over a lowered limit; the next pass holds or starts pending ones.
            self.limits = limits
            if self.engine is not None:
                self.engine.set_limits(limits)
            self.log(LOG_INFO, "config reload: limits: " + ("; ".join(limits.describe()) if limits else "none"))
        elif new == old and not reserved:
            self.transport.respond(msg, None)
            return
        if reserved:
            self.log(LOG_INFO, "config reload: reservations: " + ", ".join(reserved))
        self.stats["config_reloads"] += 1
        if self.engine is not None:
            self._changed()
        self.transport.respond(msg, None)

    def _open_requests(self) -> int:
        """The alloc requests not answered yet: those of pending jobs (and of
        jobs waiting for their victims), and those whose SUCCESS waits for
        its commit."""
        e = self.engine
        if e is None:
            return 0
        waiting = sum(
            1 for j in e.table.jobs.values() if j.state is not JobState.RUNNING and j.reply.request is not None
        )
        return waiting + self._uncommitted

    def job_count(self) -> int:
        """Pending jobs, jobs holding resources and alloc messages held: what
        the module's memory grows with (:mod:`~fluxsched_py.flux.gcpace`)."""
        e = self.engine
        return (len(e.table) if e is not None else 0) + self._uncommitted

    def stats_get(self) -> dict:
        e = self.engine
        s = dict(self.stats)
        s["pending_jobs"] = e.pending_count if e else 0
        s["running_jobs"] = len(e.running) if e else 0
        s["alloc_requests"] = self._open_requests()
        s["commits_in_flight"] = self._committing
        s["sched_delay"] = self._delay
        s["sched_duration_ewma"] = self._duration_ewma
        a = self.annotations
        s.update(annotations_merged=a.merged, annotations_dropped=a.dropped, annotate_interval=a.interval)
        s["sched_interval_ewma"] = self._interval_ewma
        if e:
            s["engine"] = dict(e.stats)
            o = e.options
            s["options"] = o.as_dict()
            s["campaigns"] = e.hooks.stats(self.clock())
            if e.usage is not None:
                s["limits"] = {"set": e.limits.describe() if e.limits else [], **e.usage.as_dict()}
            if e.power is not None:
                s["power"] = e.power.states()
        return s

    # ------------------------------------------------------------------
    # passes and responses
    # ------------------------------------------------------------------

    def changed(self) -> None:
        """Arm a pass: something other than a job message changed the plan
        (a control RPC added or removed a reservation)."""
        self._changed()

    def _changed(self) -> None:
        self.control.changed()
        now = time.monotonic()
        if self._last_change:
            self._interval_ewma = 0.25 * (now - self._last_change) + 0.75 * self._interval_ewma
        self._last_change = now
        if not self._pass_armed or self._wakeup_armed:
            self._pass_armed, self._wakeup_armed = True, False
            self.transport.request_pass(self._delay)

    def run_pass(self) -> bool:
        """Run (part of) a scheduling pass and send what it decided.
        Returns True when the pass is not finished (another is armed)."""
        self._pass_armed = self._wakeup_armed = False
        if self.engine is None:
            return False
        t0 = time.monotonic()
        try:
            res = self.engine.schedule(self.clock(), self.budget)
        except Exception as exc:  # an engine bug must not kill the module
            self.error(f"scheduling pass failed: {exc!r}")
            return False
        t1 = time.monotonic()
        dt = t1 - t0
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
        for d in res.drains:  # the sink effect: no further job is placed there
            self.log(LOG_INFO, f"draining ranks {d.ranks}: {d.reason}")
            self.transport.drain(str(d.ranks), d.reason)
        for a in res.power:  # power-save: the site's suspend and resume programs
            self._switch(a)
        self.save_power()
        self.last_work = (
            "pass",
            f"schedule {1e3 * dt:.1f} ms, send {1e3 * (time.monotonic() - t1):.1f} ms",
            f"{len(res.responses)} responses",
            f"{self.engine.pending_count} pending",
            "more" if res.more else "done",
        )
        for n in res.notice:  # preempt-grace: the victim's notice, through job-manager.kill
            self.stats["notices_sent"] = self.stats.get("notices_sent", 0) + 1
            self._notify(n.id, n.signal)
        self._resend()
        for a in res.preempt:  # the job-manager ends it; its sched.free follows as usual
            self.stats["preempt_raised"] = self.stats.get("preempt_raised", 0) + 1
            self.transport.raise_exception(a.id, "preempt", 0, a.note)
            if a.requeue:
                self._requeue(a.id)
        if not res.more:
            self._carry_out_copies()
        if any(r.type is ResponseType.SUCCESS for r in res.responses):
            self.control.changed()  # jobs started: the background forecast's plan is void
        if res.more and not self._pass_armed:
            self._pass_armed = True
            self.transport.request_pass(0.0)
        elif not self._pass_armed and (wake := self._next_wakeup()) < math.inf:
            # a running job reaches its EASY++ prediction: re-plan then
            self._arm_wakeup(wake)
        if not res.more:
            self._request_forecast(FORECAST_QUIET)
        return res.more

    def _switch(self, action: PowerOff | PowerOn) -> None:
        """Run the suspend or resume program for ``action``'s nodes; tell the
        engine when it is done (a failed resume leaves them drained)."""
        cfg = self.power
        run = getattr(self.transport, "run_program", None)
        on = isinstance(action, PowerOn)
        ranks = action.ranks
        assert self.engine is not None and cfg is not None  # power-save needs both
        hosts = Hostlist([self.engine.graph.hostname(r) or str(r) for r in ranks]).encode()
        argv = [*(cfg.resume if on else cfg.suspend), hosts]
        timeout = cfg.resume_timeout if on else cfg.suspend_timeout
        why = f" for {action.reason}" if isinstance(action, PowerOn) and action.reason else ""
        self.log(LOG_INFO, f"power: {'resuming' if on else 'suspending'} {hosts} (ranks {ranks}){why}")

        def done(err: str | None) -> None:
            engine = self.engine
            if engine is None or engine.power is None:
                return
            self._power_changed = True
            now = self.clock()
            if err is None:
                if on:
                    self._undrain_powered_on(ranks)
                else:  # flux resource shows them drained, powered down, until they are on again
                    self.transport.drain(str(ranks), POWERED_DOWN)
                self._switch_all(engine.power_changed(ranks, on, now))
            elif not on:  # the nodes stay on: usable again
                self.error(f"power: suspend of {hosts} failed: {err}; they stay on")
                engine.power_changed(ranks, True, now)
            else:
                reason = f"sched-py: {hosts} did not power on: {err}"
                self.error(f"power: {reason}")
                engine.power_changed(ranks, True, now)
                engine.resource_update(down=ranks)
                self.transport.drain(str(ranks), reason, overwrite=True)
            self._changed()

        self._power_changed = True
        if run is None:
            done("this transport runs no program")
            return
        run(argv, timeout, done)

    def _undrain_powered_on(self, ranks: IdSet) -> None:
        """``ranks`` are on again: undrain those still drained as powered
        down.  One an admin drained meanwhile (another reason) stays
        drained, and down for the engine too."""
        status = getattr(self.transport, "drain_status", None)
        if status is None:
            return

        def have(reasons: Mapping[int, str] | None) -> None:
            engine = self.engine
            if reasons is None or engine is None:
                return  # logged by the transport; the drain stays, the nodes are used
            ours = IdSet([r for r in ranks if reasons.get(r) == POWERED_DOWN])
            theirs = IdSet([r for r in ranks if r in reasons and reasons[r] != POWERED_DOWN])
            if ours:
                self.transport.undrain(str(ours))
            if theirs:
                self.log(LOG_INFO, f"power: ranks {theirs} are on, but drained meanwhile: left down")
                engine.resource_update(down=theirs)
                self._changed()

        status(have)

    def _switch_all(self, actions: list[PowerOn]) -> None:
        for a in actions:
            self._switch(a)

    def save_power(self) -> None:
        """Keep the nodes' power states in the KVS (``<name>.power``) when
        they changed, for the next load of the module (:meth:`adopt_power`)."""
        if not self._power_changed or self.engine is None or self.engine.power is None:
            return
        self._power_changed = False
        key = f"{self.name}.power"

        def done(err: str | None) -> None:
            if err is not None:
                self.error(f"power: KVS commit of {key} failed: {err}")

        self.transport.commit([(key, self.engine.power.states())], done)

    def adopt_power(self, stored: Any, drained: Mapping[int, str] | None = None, online: IdSet | None = None) -> None:
        """The power states the module kept at its last load (``<name>.power``):
        nodes it had switched off, or was switching, are asleep now (a resume
        in flight when it unloaded is run again when a job needs them).
        ``drained`` (rank -> reason) and ``online`` are flux-core's: a node
        still drained as powered down is reported down, and is asleep, not
        down, when it is online."""
        engine = self.engine
        if engine is None or engine.power is None or not isinstance(stored, Mapping):
            return
        ranks: set[int] = set()
        for state in ("sleeping", "switching_off", "switching_on"):
            try:
                ranks |= set(IdSet.of(stored.get(state) or ""))
            except (TypeError, ValueError):
                self.error(f"power: ignoring the unreadable {self.name}.power {state}: {stored.get(state)!r}")
        if drained:
            asleep = [r for r in ranks if drained.get(r) == POWERED_DOWN and (online is None or r in online)]
            if asleep:
                engine.resource_update(up=IdSet(asleep))
        taken = engine.power_adopt(ranks, self.clock())
        if taken:
            self.log(LOG_INFO, f"power: ranks {taken} were switched off before this load: asleep")
        self._power_changed = True

    def _next_wakeup(self) -> float:
        """When a pass is due with no message: the engine's wakeup, or the
        next try of a refused notice."""
        assert self.engine is not None
        wake = self.engine.wakeup()
        return min(wake, min(r[0] for r in self._resignal)) if self._resignal else wake

    def _arm_wakeup(self, at: float) -> None:
        self._pass_armed = self._wakeup_armed = True
        self._wake_at = at
        self.transport.request_pass(max(0.0, at - self.clock()))

    def _notify(self, jobid: int, signum: int) -> None:
        """Send a notice once the job's shells run.  A signal the job-manager
        takes before then is lost: flux-core 0.88's ``job-manager.kill``
        accepts any job in RUN (a job-manager prolog may still be running,
        the shells not started) and publishes the event ``shell-<id>.kill``,
        which only a running shell listens to.  So the first notice to a job
        waits for ``shell.start`` in its exec eventlog
        (``transport.watch_shells``); notices given meanwhile are held with
        it (the same signal once).  The engine's kill time does not move:
        it stays a grace time after the notice, so a late signal leaves the
        job that much less of it."""
        watch = getattr(self.transport, "watch_shells", None)
        if watch is None or jobid in self._shells_up:
            self._signal(jobid, signum, 1)
            return
        held = self._held_notices.get(jobid)
        if held is not None:  # already waiting for the shells
            if signum not in held:
                held.append(signum)
            return
        self._held_notices[jobid] = [signum]
        self._count("notices_held")
        try:
            watch(jobid, lambda err: self._shells_started(jobid, err))
        except Exception as exc:  # the transport's own failure: as a failed watch
            self._shells_started(jobid, f"cannot watch its shells: {exc!r}")

    def _shells_started(self, jobid: int, err: str | None) -> None:
        """``transport.watch_shells`` answered for ``jobid``: its shells run
        (``err`` None), and its held notices go out.  Otherwise (its exec
        eventlog ended without ``shell.start``, the watch failed) they are
        dropped when the engine no longer holds the job running (it ended
        before its shells ran), and sent anyway when it does: the watch
        cannot tell, and a signal that may be lost beats none."""
        self.last_work = ("shells started", jobid)
        signals = self._held_notices.pop(jobid, [])
        job = self.engine.job(jobid) if self.engine is not None else None
        if job is None or job.state is not JobState.RUNNING:
            if err is not None:
                self._count("notices_dropped")
                self.log(LOG_DEBUG, f"notice to job {self._job_name(jobid)} dropped: it ended ({err})")
            return
        if err is None:
            self._shells_up.add(jobid)
        else:
            self.log(LOG_WARNING, f"job {self._job_name(jobid)}: {err}; sending its notice anyway")
        for signum in signals:
            self._signal(jobid, signum, 1)

    def _signal(self, jobid: int, signum: int, tries: int) -> None:
        """Send a notice (``transport.signal``); one the job-manager refuses
        is tried again (:meth:`_refused`)."""
        if (send := getattr(self.transport, "signal", None)) is not None:
            send(jobid, signum, lambda err: self._refused(jobid, signum, tries, err))

    def _refused(self, jobid: int, signum: int, tries: int, err: str) -> None:
        """The job-manager refused notice ``signum`` to ``jobid`` (EINVAL: under
        flux-core 0.88, ``job is not running`` until it has the job's alloc
        response).  While the engine holds the job running, try again
        ``SIGNAL_RETRY`` seconds later, ``SIGNAL_TRIES`` times in all; then
        log it."""
        job = self.engine.job(jobid) if self.engine is not None else None
        if job is None or job.state is not JobState.RUNNING or tries >= SIGNAL_TRIES:
            self.log(LOG_ERR, f"signal {signum} to job {jobid} failed: {err}")
            return
        self.stats["notices_retried"] = self.stats.get("notices_retried", 0) + 1
        at = self.clock() + SIGNAL_RETRY
        self._resignal.append((at, jobid, signum, tries + 1))
        if not self._pass_armed or (self._wakeup_armed and at < self._wake_at):
            self._arm_wakeup(at)  # (else a pass is due at once or sooner: it sends it)

    def _resend(self) -> None:
        """Try again the refused notices whose time has come, to jobs still running."""
        if not self._resignal or self.engine is None:
            return
        now = self.clock()
        due = [r for r in self._resignal if r[0] <= now]
        self._resignal = [r for r in self._resignal if r[0] > now]
        for _, jobid, signum, tries in due:
            if (job := self.engine.job(jobid)) is not None and job.state is JobState.RUNNING:
                self._signal(jobid, signum, tries)

    def _request_forecast(self, delay: float = 0.0) -> None:
        """Arm the next slice of the background forecast, when it has work
        and no pass is due first (a pass's end asks again).  After a pass it
        waits ``FORECAST_QUIET`` seconds, re-armed by every pass meanwhile,
        so that a burst of jobs does not start a forecast per pass."""
        arm = getattr(self.transport, "request_forecast", None)  # optional: without it, forecasts on demand only
        if arm is not None and self.control.wants_slice() and (not self._pass_armed or self._wakeup_armed):
            arm(delay)

    def run_forecast_slice(self) -> None:
        """The forecast timer: one slice of the background forecast
        (:meth:`Control.run_slice`), then the next one armed.  Never raises."""
        if self._pass_armed and not self._wakeup_armed:
            return  # a change is being scheduled: the pass's end asks again
        self.last_work = ("forecast slice",)
        try:
            self.control.run_slice(self.clock())
        except Exception as exc:  # a bug must not kill the module
            self.error(f"background forecast failed: {exc!r}")
            self.control.changed()
            return
        self._request_forecast()

    def _requeue(self, jobid: int) -> None:
        """A preempted checkpointing job is submitted again (``transport.requeue``),
        only when it is the instance owner's: the module submits as the owner."""
        requeue = getattr(self.transport, "requeue", None)
        job = self.engine.job(jobid) if self.engine is not None else None
        owner = getattr(self.transport, "owner", None)
        if requeue is None or job is None:
            return
        if owner is not None and job.userid != owner:
            self.stats["requeue_refused"] = self.stats.get("requeue_refused", 0) + 1
            self.log(LOG_INFO, f"job {jobid} of user {job.userid} not requeued: only the instance owner's are")
            return
        self.stats["requeued"] = self.stats.get("requeued", 0) + 1
        requeue(jobid)

    def _count(self, key: str) -> None:
        self.stats[key] = self.stats.get(key, 0) + 1

    def _carry_out_copies(self) -> None:
        """The engine's end-of-campaign actions after a complete pass
        (engine/duplicates.py): submit the copies, cancel the losers."""
        assert self.engine is not None
        try:
            actions = self.engine.copies(self.clock())
        except Exception as exc:  # an engine bug must not kill the module
            self.error(f"end-of-campaign copies failed: {exc!r}")
            return
        dropped = False
        for a in actions:
            if isinstance(a, Duplicate):
                dropped |= not self._duplicate(a)
            elif isinstance(a, CancelCopy):
                self._cancel_copy(a)
        if dropped and not self._pass_armed:
            self._changed()  # the nodes it would have had may take a copy of another job

    def _duplicate(self, a: Duplicate) -> bool:
        """Submit the copy ``a`` asks for (``transport.duplicate``), as the
        instance owner: only of the owner's jobs, since a guest's copy would
        run as the owner.  False when it is not submitted (the engine is told)."""
        engine = self.engine
        assert engine is not None
        job = engine.job(a.of)
        submit = getattr(self.transport, "duplicate", None)
        owner = getattr(self.transport, "owner", None)
        if job is None or submit is None:
            engine.copy_dropped(a.of)
            return False
        if owner is not None and job.userid != owner:
            self._count("copies_refused")
            campaign = campaign_of(job.request)[0]
            if (job.userid, campaign) not in self._copies_refused:
                self._copies_refused.add((job.userid, campaign))
                self.log(
                    LOG_INFO,
                    f"campaign {campaign} of user {job.userid}: no copies; the module submits them as the "
                    "instance owner, so only the owner's jobs are copied",
                )
            engine.copy_dropped(a.of)
            return False
        self.log(LOG_INFO, f"submitting {a.note}")
        try:
            submit(a.of, lambda err, of=a.of: self._copy_submitted(of, err))
        except Exception as exc:  # the transport's own failure: the same as a failed submit
            self._copy_submitted(a.of, repr(exc))
        return True

    def _copy_submitted(self, of: int, err: str | None) -> None:
        """``transport.duplicate`` is done: a copy that could not be submitted
        no longer counts (:meth:`Engine.copy_dropped`)."""
        if err is None:
            self._count("copies_submitted")
            return
        self._count("copies_failed")
        self.error(f"copy of job {self._job_name(of)} not submitted: {err}")
        if self.engine is not None:
            self.engine.copy_dropped(of)
            self._changed()

    def _cancel_copy(self, a: CancelCopy) -> None:
        """Cancel a loser, pending or running, as ``flux cancel`` does (flux-core's
        ``flux_job_cancel()``: a severity 0 ``cancel`` exception with the note)."""
        self._count("copies_cancelled")
        self.log(LOG_INFO, f"cancelling job {self._job_name(a.id)}: {a.note}")
        try:
            self.transport.raise_exception(a.id, "cancel", 0, a.note)
        except Exception as exc:
            self.error(f"cancel of job {self._job_name(a.id)} failed: {exc!r}")

    def _send(self, responses: list[Response], admitted: AllocRequest | None = None) -> None:
        """Answer each response through its job's request; ``admitted`` is
        the request of an alloc being handled, for a DENY of a job the
        engine never admitted."""
        success = []
        annotate = []
        for r in responses:
            if r.type is ResponseType.ANNOTATE:
                annotate.append((r.id, r.annotations or {}))
                continue
            self.annotations.forget(r.id)  # a final response: held annotations are moot
            if r.type is ResponseType.SUCCESS:
                success.append(r)
                continue
            if r.type is ResponseType.DENY and r.note and not r.note.startswith(_NOTE_PREFIXES):
                # flux-core's wording for a request that can never be met
                r.note = f"unsatisfiable request: {r.note}"
            request = _request_of(r, admitted)
            if request is None or not request.answer(r.payload()):
                self.log(LOG_DEBUG, f"no pending sched.alloc for job {r.id}: dropping {r.type.name}")
            elif r.type is ResponseType.DENY:
                self.log(LOG_DEBUG, f"alloc: job {r.id} denied: {r.note}")
        self.annotations.batch(annotate)
        if success:
            extra = self._job_scheduling
            puts = [(kvs_key(r.id, "R"), r.R if extra is None else {**r.R, "scheduling": extra}) for r in success]
            self._committing += 1
            self._uncommitted += len(success)
            self.transport.commit(puts, lambda err, batch=success: self._committed(batch, err))

    def _annotate(self, jobid: int, annotations: dict[str, Any]) -> None:
        job = self.engine.job(jobid) if self.engine is not None else None
        request = job.reply.request if job is not None else None
        payload = {"id": jobid, "type": int(ResponseType.ANNOTATE), "annotations": annotations}
        if request is None or job.reply.done or not request.answer(payload):
            return  # answered meanwhile (a SUCCESS decided, its commit in flight or done)
        self.stats["annotations"] += 1

    def flush_annotations(self) -> None:
        """The ``annotate-interval`` timer: send the held annotations."""
        self.last_work = ("annotations", f"{self.annotations.pending} jobs")
        self.annotations.flush()

    def _committed(self, batch: list[Response], err: str | None) -> None:
        self._committing -= 1
        self._uncommitted -= len(batch)
        self.last_work = ("commit", f"{len(batch)} jobs")
        if err is None:
            self.stats["commits"] += 1
            for r in batch:
                request = _request_of(r)
                if request is None or not request.answer(r.payload()):
                    self.error(f"alloc: job {r.id}: no pending sched.alloc to answer SUCCESS")
            return
        self.stats["commit_errors"] += 1
        self.error(f"alloc: KVS commit of R failed for {len(batch)} jobs: {err}; denying them")
        assert self.engine is not None
        for r in batch:
            for deny in self.engine.revoke(r.id, f"scheduler could not commit R to the KVS: {err}"):
                if (request := _request_of(deny)) is not None:
                    request.answer(deny.payload())
        self._changed()
