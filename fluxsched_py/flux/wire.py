"""The Flux module's wire details, apart from the driver's logic: syslog
levels, the :class:`Transport` interface, module arguments, KVS keys, R's
``scheduling`` key, payload checks and job ids as ``flux jobs`` prints them."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..engine import EngineError, EngineOptions
from ..engine.options import Option, Syntax, values_of
from ..policy.base import POLICY_DEFAULT

if TYPE_CHECKING:
    from .driver import Driver

# syslog levels, as flux_log() takes them
LOG_ERR = 3
LOG_WARNING = 4
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
#: seconds without a scheduling pass before the background forecast starts
FORECAST_QUIET = 0.1
#: seconds between tries of a notice the job-manager refused (the job not
#: running yet), and how many tries in all
SIGNAL_RETRY = 0.5
SIGNAL_TRIES = 20


class Transport(Protocol):
    """What the driver needs from the broker (see :mod:`fluxsched_py.flux.module`)."""

    def respond(self, msg: Any, payload: Mapping[str, Any] | None) -> None: ...

    def respond_error(self, msg: Any, errnum: int, text: str) -> None: ...

    def commit(self, puts: list[tuple[str, Any]], done: Callable[[str | None], None]) -> None:
        """Commit ``(key, value)`` pairs in one KVS transaction; call ``done(None)``
        once committed, or ``done(error text)``."""

    def log(self, level: int, text: str) -> None: ...

    def raise_exception(self, jobid: int, type: str, severity: int, note: str) -> None: ...

    # Optional (``preempt-grace``, checkpoints): ``signal(jobid, signum, refused)``
    # sends a running job a signal (``job-manager.kill``), and calls
    # ``refused(error text)`` when the job-manager answers EINVAL (the job
    # is not running yet, or no longer); ``requeue(jobid)`` submits a
    # preempted checkpointing job again, its jobspec with
    # ``attributes.user.requeued-from`` set.  Without them notices and
    # requeues are only counted.  ``watch_shells(jobid, done)`` calls
    # ``done(None)`` once the job's shells have started (``shell.start`` in
    # its exec eventlog), or ``done(reason)`` when they never will (the
    # eventlog ended without it, or the watch failed), without blocking:
    # the first notice to a job waits for it, since a signal the
    # job-manager takes before the shells run (during a job-manager
    # prolog) reaches no one.  Without it notices are sent at once.
    # Optional (``duplicates``): ``duplicate(jobid, done)`` submits an
    # end-of-campaign copy of running job ``jobid`` as the instance owner
    # (:func:`copy_jobspec`), then calls ``done(None)``, or ``done(error
    # text)`` when it could not; ``owner`` is the instance owner's uid.
    # Without ``duplicate`` no copy is submitted.

    def request_pass(self, delay: float) -> None:
        """Call :meth:`Driver.run_pass` after ``delay`` seconds (from the reactor)."""

    def drain(self, ranks: str, reason: str, overwrite: bool = False) -> None:
        """``resource.drain`` of ``ranks`` (an RFC 22 idset) with ``reason``
        (the sink effect, a node switched off, one that did not power on);
        a rank drained already keeps its reason unless ``overwrite``."""

    # Optional (``power-save``): ``undrain(ranks)`` sends ``resource.undrain``;
    # ``drain_status(done)`` asks ``resource.status`` and calls ``done({rank:
    # reason})`` with each drained rank's reason, or ``done(None)`` when it
    # failed.  Without them a node switched off and on again stays drained.

    # Optional: ``request_flush(delay)`` calls :meth:`Driver.flush_annotations`
    # after ``delay`` seconds; without it ``annotate-interval`` holds nothing.
    # Optional: ``request_forecast(delay)`` calls :meth:`Driver.run_forecast_slice`
    # after ``delay`` seconds; without it ``forecast`` is planned on demand only.
    # Optional (``power-save``): ``run_program(argv, timeout, done)`` runs a
    # suspend or resume program without blocking and calls ``done(None)``
    # when it exits 0, else ``done(reason)``; without it every switch fails.


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


def copy_jobspec(jobspec: Mapping[str, Any], of: int, environment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The jobspec of an end-of-campaign copy of job ``of`` (engine/duplicates.py):
    ``jobspec`` with ``attributes.system.duplicate-of = of``, which makes the
    engine take it for a copy, and ``attributes.system.preemptible-after = 0``,
    which makes it a best-effort job that no regular job waits for.
    ``environment``, when given, becomes ``attributes.system.environment``:
    the job-manager's jobspec has none (flux-core keeps it only in the
    signed J), and a copy run without its original's would not be the same
    job.  ``jobspec`` itself is left as it is."""
    spec = json.loads(json.dumps(jobspec))
    attrs = spec.setdefault("attributes", {})
    system = attrs.setdefault("system", {}) if isinstance(attrs, dict) else None
    if not isinstance(system, dict):
        raise ValueError("the jobspec's attributes.system is not an object")
    system["duplicate-of"] = int(of)
    system["preemptible-after"] = 0
    if environment is not None:
        system["environment"] = dict(environment)
    return spec


def requeued_jobspec(
    jobspec: Mapping[str, Any], of: int, environment: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The jobspec a preempted checkpointing job ``of`` is submitted again
    with: ``jobspec`` with ``attributes.user.requeued-from`` (the first
    job's id, kept when ``of`` was itself a requeue), which the engine starts
    first and restarts where it last ran; ``environment`` as in
    :func:`copy_jobspec`.  ``jobspec`` itself is left as it is."""
    spec = json.loads(json.dumps(jobspec))
    attrs = spec.setdefault("attributes", {})
    if not isinstance(attrs, dict):
        raise ValueError("the jobspec's attributes is not an object")
    user = attrs.setdefault("user", {})
    if not isinstance(user, dict):
        raise ValueError("the jobspec's attributes.user is not an object")
    user.setdefault("requeued-from", int(of))
    if environment is not None:
        attrs.setdefault("system", {})["environment"] = dict(environment)
    return spec


def parse_module_args(args: Iterable[str]) -> EngineOptions:
    """Module arguments -> :class:`EngineOptions`; ValueError with a clear message.

    Each is an engine option, ``NAME=VALUE`` with NAME a row of
    :data:`~fluxsched_py.engine.options.OPTIONS` (the binding's own ``nice=``
    and ``annotate-interval=`` are taken out first: :func:`split_binding_args`).
    Under Flux the placement ``policy`` defaults to :data:`FLUX_DEFAULT_POLICY`
    (``low``) rather than the engine's ``first``.
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


def _nice(key: str, value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if not 0 <= n <= 19:
        raise EngineError(f"{key}={value}: expected an integer from 0 to 19")
    return n


def _interval(key: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = -1.0
    if not (math.isfinite(x) and 0.0 <= x <= 60.0):
        raise EngineError(f"{key}={value}: expected seconds from 0 to 60")
    return x


#: Module arguments the Flux binding takes itself: not engine options, so
#: not in the ``[<name>]`` config table either (the same rows as
#: :data:`~fluxsched_py.engine.options.OPTIONS`).
BINDING_OPTIONS: tuple[Option, ...] = (
    Option("nice", "nice", Syntax(_nice, "N"), 0,
           "0-19: the module's process runs this many nice levels below the broker, so the broker gets "
           "the cores first on a busy machine",
           module_only="the Flux binding's own: no other driver has a broker"),
    Option("annotate-interval", "annotate_interval", Syntax(_interval, "SECONDS"), 0.0,
           "seconds (0-60): once a batch of pending jobs' annotations has gone to the job-manager, those of "
           "the next passes are held and merged per job and sent when the interval ends; a job started, "
           "denied or cancelled meanwhile never gets them (fewer messages to the broker during a burst; the "
           "decisions do not change); 0: every pass's annotations at once",
           module_only="the Flux binding's own: no other driver has a broker"),
)  # fmt: skip
_BINDING = {o.name: o for o in BINDING_OPTIONS}

BindingArgs = values_of(
    "BindingArgs", BINDING_OPTIONS, "The binding's own module arguments, parsed (:data:`BINDING_OPTIONS`).", __name__
)


def split_binding_args(args: Iterable[str]) -> tuple[list[str], BindingArgs]:
    """``args`` without the :data:`BINDING_OPTIONS` ones, and those parsed;
    ValueError with a one-line message for a bad value."""
    rest: list[str] = []
    kw: dict[str, Any] = {}
    for arg in (str(a) for a in args):
        key, _, value = arg.partition("=")
        option = _BINDING.get(key.strip())
        if option is None:
            rest.append(arg)
        else:
            try:
                kw[option.field] = option.parse(value)
            except EngineError as e:
                raise ValueError(str(e)) from None
    return rest, BindingArgs(**kw)


def options_text(o: EngineOptions) -> str:
    """The options as module arguments, for the log."""
    per_queue = ",".join(f"{q}:{p}" for q, p in o.queue_policy_per_queue)
    depth = "default" if o.reserve_depth is POLICY_DEFAULT else o.reserve_depth or "unlimited"
    return (
        f"queue-policy={o.queue_policy} "
        + (f"queue-policy-per-queue={per_queue} " if per_queue else "")
        + f"reserve-depth={depth} queue-depth={o.queue_depth or 'unlimited'} policy={o.placement}"
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


def payload_error(p: Any) -> str | None:
    """Why ``p`` could not be decoded, when it is a :func:`bad_payload`; else None."""
    return p.error if isinstance(p, _BadPayload) else None


def _jobid(p: Any) -> int | None:
    if not isinstance(p, Mapping):
        return None
    v = p.get("id")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


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
