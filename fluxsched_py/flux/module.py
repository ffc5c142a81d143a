"""The binding of :class:`~fluxsched_py.flux.driver.Driver` to a ``flux.Flux`` handle.

This is the only file that imports ``flux``; the broker's
``flux module-python-exec`` imports it through the entry file
``modules/sched-py.py`` and calls :func:`mod_main`.  It uses only the plain
handle API (message watchers, RPCs, futures, timers, KVS transactions,
``flux.job``'s submit and eventlog watch), not ``flux.scheduler`` or
``flux.brokermod``, so it needs nothing newer than the Python broker
module loader itself.

Startup, in order:

1. read the ``[<name>]`` table of the instance config (``config.get``) and
   the module arguments, which override it (a bad value raises ValueError:
   the load fails with a one-line message), and import what the handshake
   needs;
2. register the ``sched`` and ``feasibility`` services and the request
   handlers, and report running (``flux_module_set_running()``);
3. ``resource.acquire`` (streaming): the first response synchronously, the
   rest through a continuation;
4. ``job-manager.sched-hello`` (streaming, ``partial-ok``): each job's R is
   looked up in the KVS at ``job.<dothex id>.R``, and its jobspec and eventlog
   asked of the job-manager (``job-manager.getattr``, up to
   :data:`HELLO_WINDOW` at once), for best-effort jobs and preemptions in
   flight (:mod:`~fluxsched_py.flux.helloinfo`);
5. ``job-manager.sched-ready``, then the reactor.

``flux_module_set_running()`` is called between 2 and 3: reporting running
only after the handshake deadlocks instance startup under modprobe's rc1.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import flux  # noqa: F401  (the broker's bindings)
import flux.constants
import flux.kvs

from . import reservestore
from .cbtime import CallbackClock
from .driver import LOG_ERR, LOG_INFO, Driver, bad_payload, kvs_key
from .gcpace import GcPacer
from .powerctl import config_power, drain_reasons
from .siteconf import config_limits, config_options
from .wire import copy_jobspec, requeued_jobspec, split_binding_args


def _f58(jobid: int) -> str:
    """A job id as ``flux job id --to=f58`` writes it in this process's locale."""
    from flux.job import JobID

    return JobID(jobid).f58


try:  # libflux through cffi: module name, set_running, raw respond_error
    from _flux._core import ffi, lib
except ImportError:  # pragma: no cover - very old bindings
    ffi = lib = None

__all__ = ["mod_main", "FluxBinding"]

#: How long a pass that has more to do waits for the requests queued on the
#: handle before it resumes anyway (seconds); see FluxBinding._on_timer.
DEFER_MAX = 0.1
#: seconds between looks at a running suspend or resume program (power-save)
PROGRAM_POLL = 0.2

#: Running jobs whose R lookup and ``job-manager.getattr`` are in flight at once at hello.
HELLO_WINDOW = 256


def _module_name(h: Any, default: str = "sched-py") -> str:
    if lib is None:
        return default
    try:
        p = ffi.cast("char *", lib.flux_aux_get(h.handle, b"flux::name"))
        if p != ffi.NULL:
            return ffi.string(p).decode()
    except Exception:
        pass
    return default


def _warm_imports() -> None:
    """Import what the first acquire, hello and alloc need before the module
    reports itself running, so the RFC 27 handshake right after is fast."""
    import fluxsched_py.jobspec  # noqa: F401
    import fluxsched_py.match  # noqa: F401
    import fluxsched_py.resource.rv1  # noqa: F401


def _environment_of(J: str) -> Any:
    """``attributes.system.environment`` of the jobspec signed into ``J``
    (None when it has none).  Not verified: the module only reads what the
    owner's own job was submitted with."""
    text = lib.flux_unwrap_string(J.encode(), False, ffi.NULL, ffi.NULL)
    if text == ffi.NULL:
        raise ValueError("J cannot be unwrapped")
    try:
        spec = json.loads(ffi.string(text).decode("utf-8", "replace"))
    finally:
        lib.free(text)
    system = (spec.get("attributes") or {}).get("system") or {}
    return system.get("environment")


class _Lookup:
    """A KVS lookup in flight (a raw ``flux_kvs_lookup`` future)."""

    __slots__ = ("_f",)

    def __init__(self, future: Any) -> None:
        self._f = future

    def value(self) -> Any:
        """The value: decoded JSON, or the text when it is not JSON (the
        driver decides what does not parse).  Raises OSError when the
        lookup failed.  Frees the future."""
        try:
            valp = ffi.new("char *[1]")
            flux.kvs.RAW.flux_kvs_lookup_get(self._f, valp)
            if valp[0] == ffi.NULL:
                return None
            text = ffi.string(valp[0]).decode("utf-8", "replace")
            try:
                return json.loads(text)
            except ValueError:
                return text
        finally:
            flux.kvs.RAW.flux_future_destroy(self._f)


class FluxBinding:
    """The :class:`~fluxsched_py.flux.driver.Transport` on a real handle."""

    def __init__(self, h: Any, args: tuple[str, ...]) -> None:
        self.h = h
        self.name = _module_name(h)
        try:
            conf = h.conf_get(update=True)  # the config module answers config.get
        except OSError as exc:
            raise OSError(exc.errno, f"cannot read the instance config (config.get): {exc.strerror}") from exc
        args, bargs = split_binding_args(args)  # nice=, annotate-interval=: ValueError -> the load fails
        options = config_options(conf, self.name, args)  # ValueError -> the load fails
        limits = config_limits(conf, self.name)  # likewise
        power = config_power(conf, self.name, options)  # likewise
        self._conf = conf  # its [[sched-py.reservation]] entries are read once the engine exists
        _warm_imports()
        self.driver = Driver(
            self,
            options,
            name=self.name,
            job_name=_f58,
            module_args=args,
            annotate_interval=bargs.annotate_interval,
            limits=limits,
            power=power,
        )
        if bargs.nice:
            # Below the broker (whose niceness this process inherited): with
            # fewer cores than runnable threads, the broker runs first.
            self.driver.stats["nice"] = os.nice(bargs.nice)
        self._clock = CallbackClock(self.driver.stats, lambda: " / ".join(map(str, self.driver.last_work)))
        self._gc = GcPacer(self.driver.job_count, self.driver.stats)
        self._gc_timer = h.timer_watcher_create(0.0, self._timed(lambda *_: self._gc.tick(), "gc"))
        self._watchers: list[Any] = []
        self._timer = h.timer_watcher_create(0.0, self._timed(self._on_timer, "pass-timer"))
        self._flush_timer = h.timer_watcher_create(
            0.0, self._timed(lambda *_: self.driver.flush_annotations(), "annotations")
        )
        self._forecast_timer = h.timer_watcher_create(
            0.0, self._timed(lambda *_: self.driver.run_forecast_slice(), "forecast-slice")
        )
        self._acquire_f: Any = None
        self._failed = False
        self._deferred_since: float | None = None

    # -- Transport -------------------------------------------------------

    def respond(self, msg: Any, payload: Any) -> None:
        # Straight to flux_respond(): the Python wrapper layer costs more
        # than the scheduler's own work per job at high throughput.
        if lib is None:  # pragma: no cover
            self.h.respond(msg, payload)
            return
        data = ffi.NULL if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        if lib.flux_respond(self.h.handle, msg.handle, data) < 0:
            self.log(LOG_ERR, f"flux_respond failed (payload {str(payload)[:80]})")

    def respond_error(self, msg: Any, errnum: int, text: str) -> None:
        lib.flux_respond_error(self.h.handle, msg.handle, errnum, text.encode("utf-8", "replace"))

    def commit(self, puts: list[tuple[str, Any]], done: Any) -> None:
        txn = flux.kvs.KVSTxn(self.h)
        for key, value in puts:
            txn.put(key, value)
        try:
            f = flux.kvs.commit_async(self.h, _kvstxn=txn)
        except OSError as exc:
            done(str(exc))
            return

        # A flux Future with a continuation is a reference cycle (it holds a
        # handle to itself), so whatever its callback still refers to waits
        # for a full garbage collection (see gcpace).  The callback drops the
        # transaction and ``done`` (which holds the batch: every job's R)
        # before it returns, so that only the future itself is left.
        held: list[Any] = [txn, done]  # the transaction lives until the commit completes

        def cont(future: Any, _arg: Any = None) -> None:
            if not held:  # pragma: no cover - a commit completes once
                return
            finish = held[1]
            held.clear()
            try:
                future.get()
            except OSError as exc:
                finish(str(exc))
            else:
                finish(None)

        f.then(self._timed(cont, "kvs-commit"))

    def log(self, level: int, text: str) -> None:
        self.h.log(level, text)

    def _send(self, topic: str, payload: Any, failed: str, nodeid: int | None = None) -> None:
        """An RPC whose answer only matters when it fails: then ``failed: error`` is logged."""
        f = self.h.rpc(topic, payload) if nodeid is None else self.h.rpc(topic, payload, nodeid=nodeid)

        def cont(future: Any, _arg: Any = None) -> None:
            try:
                future.get()
            except OSError as exc:
                self.log(LOG_ERR, f"{failed}: {exc}")

        f.then(cont)

    def raise_exception(self, jobid: int, type: str, severity: int, note: str) -> None:
        payload = {"id": jobid, "severity": severity, "type": type, "note": note}
        self._send("job-manager.raise", payload, f"raising an exception on job {jobid} failed")

    #: The instance owner: the module submits requeued jobs as this user.
    owner = os.getuid()

    def signal(self, jobid: int, signum: int, refused: Callable[[str], None] | None = None) -> None:
        """``job-manager.kill {id, signum}`` (flux-core src/modules/job-manager/kill.c):
        the job shells deliver ``signum`` to the job's tasks.  EINVAL (``job is
        not running``, before the job-manager has the alloc response) goes to
        ``refused``."""
        f = self.h.rpc("job-manager.kill", {"id": jobid, "signum": signum})

        def cont(future: Any, _arg: Any = None) -> None:
            try:
                future.get()
            except OSError as exc:
                if refused is not None and exc.errno == errno.EINVAL:
                    refused(str(exc))
                else:
                    self.log(LOG_ERR, f"signal {signum} to job {jobid} failed: {exc}")

        f.then(cont)

    def watch_shells(self, jobid: int, done: Callable[[str | None], None]) -> None:
        """``done(None)`` once the shells of job ``jobid`` have started:
        ``shell.start`` in its exec eventlog (``guest.exec.eventlog``, which
        the rank 0 shell writes once every shell has started its tasks),
        read through ``job-info.eventlog-watch`` (``flux.job.event_watch_async``),
        which waits for the job's start and its guest namespace, and replays
        the events already there.  ``done(reason)`` when the eventlog ends
        without it (the job ended before its shells ran) or the watch
        fails.  Asynchronous: the broker is never blocked; the watch is
        cancelled at ``shell.start``."""
        import flux.job

        finished: list[bool] = []

        def finish(err: str | None) -> None:
            if finished:
                return
            finished.append(True)
            try:
                done(err)
            except Exception as exc:  # pragma: no cover - the driver never raises
                self.log(LOG_ERR, f"job {_f58(jobid)}: shells watch callback failed: {exc!r}")

        def cont(future: Any, _arg: Any = None) -> None:
            if finished:
                return
            try:
                event = future.get_event()
            except OSError as exc:
                finish(f"watching its exec eventlog failed: {exc.strerror or exc}")
                return
            except Exception as exc:  # an entry that cannot be read: as a failed watch
                finish(f"watching its exec eventlog failed: {exc!r}")
                return
            if event is None:
                finish("its exec eventlog ended without shell.start")
            elif event.name == "shell.start":
                try:
                    future.cancel(stop=True)
                except OSError:
                    pass
                finish(None)

        try:
            f = flux.job.event_watch_async(self.h, jobid, "guest.exec.eventlog")
            f.then(self._timed(cont, "shells-watch"))
        except OSError as exc:
            finish(f"cannot watch its exec eventlog: {exc.strerror or exc}")

    def requeue(self, jobid: int) -> None:
        """Submit preempted checkpointing job ``jobid`` again, with
        ``attributes.user.requeued-from`` the first job's id and its
        environment (:func:`~.wire.requeued_jobspec`), through
        ``job-ingest.submit`` as the instance owner (flux-core has no
        requeue; docs/rfcs/preemption.md says what that limits)."""

        def done(err: str | None) -> None:
            if err is not None:
                self.log(LOG_ERR, f"requeue of job {_f58(jobid)} failed: {err}")

        self._resubmit(jobid, requeued_jobspec, f"job {_f58(jobid)} requeued", done)

    def duplicate(self, jobid: int, done: Callable[[str | None], None]) -> None:
        """Submit an end-of-campaign copy of running job ``jobid`` as the
        instance owner (:func:`~.wire.copy_jobspec`).  ``done(None)`` once
        submitted, ``done(reason)`` when a step failed."""
        self._resubmit(jobid, copy_jobspec, f"copy of job {_f58(jobid)} submitted", done)

    def _resubmit(
        self,
        jobid: int,
        make: Callable[[Any, int, Any], dict[str, Any]],
        what: str,
        done: Callable[[str | None], None],
    ) -> None:
        """Submit ``make(jobspec, jobid, environment)`` as the instance owner
        (``job-ingest.submit``): the job's jobspec (the job-manager's copy,
        ``job-manager.getattr``) and its environment, which the job-manager's
        copy lacks: the one in its J (``job-info.lookup``), as ``flux job info
        --original`` reads it.  Both lookups go at once.  ``done(None)`` once
        submitted (``what`` is logged with the new job's id), ``done(reason)``
        when a step failed."""
        got: dict[str, Any] = {}
        finished: list[bool] = []

        def finish(err: str | None) -> None:
            if not finished:
                finished.append(True)
                done(err)

        def submitted(future: Any, _arg: Any = None) -> None:
            try:
                self.log(LOG_INFO, f"{what} as job {_f58(future.get_id())}")
            except OSError as exc:
                finish(f"submit failed: {exc}")
            else:
                finish(None)

        def submit() -> None:
            import flux.job

            try:
                spec = make(got["jobspec"], jobid, got["environment"])
                flux.job.submit_async(self.h, json.dumps(spec)).then(submitted)
            except Exception as exc:
                finish(f"submit failed: {exc}")

        def have(key: str, topic: str, read: Callable[[Any], Any]) -> Callable[..., None]:
            def cont(future: Any, _arg: Any = None) -> None:
                if finished:
                    return
                try:
                    got[key] = read(future.get())
                except Exception as exc:  # a failed lookup, or an answer that cannot be read
                    finish(f"{topic}: {exc}")
                    return
                if len(got) == 2:
                    submit()

            return cont

        try:
            spec_f = self.h.rpc("job-manager.getattr", {"id": jobid, "attrs": ["jobspec"]})
            j_f = self.h.rpc("job-info.lookup", {"id": jobid, "keys": ["J"], "flags": 0})
            spec_f.then(have("jobspec", "job-manager.getattr", lambda answer: answer["jobspec"]))
            j_f.then(have("environment", "job-info.lookup", lambda answer: _environment_of(answer["J"])))
        except OSError as exc:
            finish(str(exc))

    def drain(self, ranks: str, reason: str, overwrite: bool = False) -> None:
        # flux-core src/modules/resource/drain.c: {targets, reason?, mode?} to rank 0;
        # "update" leaves ranks an admin already drained as they are, "overwrite" does not.
        mode = "overwrite" if overwrite else "update"
        payload = {"targets": ranks, "reason": reason, "mode": mode}
        self._send("resource.drain", payload, f"draining ranks {ranks} failed", nodeid=0)

    def undrain(self, ranks: str) -> None:
        self._send("resource.undrain", {"targets": ranks}, f"undraining ranks {ranks} failed", nodeid=0)

    def drain_status(self, done: Callable[[dict[int, str] | None], None]) -> None:
        f = self.h.rpc("resource.status", nodeid=0)

        def cont(future: Any, _arg: Any = None) -> None:
            try:
                reasons, _ = drain_reasons(future.get())
            except (OSError, TypeError, ValueError) as exc:
                self.log(LOG_ERR, f"resource.status failed: {exc}")
                done(None)
                return
            done(reasons)

        f.then(cont)

    def run_program(self, argv: list[str], timeout: float, done: Callable[[str | None], None]) -> None:
        """Run ``argv`` without blocking the reactor: a timer looks at it
        every :data:`PROGRAM_POLL` seconds; ``done(None)`` when it exits 0,
        ``done(reason)`` when it fails, cannot start or outlives ``timeout``
        (then it is killed)."""
        import subprocess
        import tempfile

        err = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        except OSError as exc:
            err.close()
            done(f"cannot run {argv[0]}: {exc.strerror or exc}")
            return
        deadline = time.monotonic() + timeout

        def finish(reason: str | None) -> None:
            watcher.stop()
            self._watchers.remove(watcher)
            err.close()
            done(reason)

        def poll(*_: Any) -> None:
            rc = proc.poll()
            if rc is None:
                if time.monotonic() < deadline:
                    return
                proc.kill()
                proc.wait()
                finish(f"{argv[0]} still running after {timeout:g}s (killed)")
                return
            if rc == 0:
                finish(None)
                return
            err.seek(0)
            tail = err.read()[-400:].decode("utf-8", "replace").strip().replace("\n", " ")
            finish(f"{argv[0]} exited {rc}" + (f": {tail}" if tail else ""))

        watcher = self.h.timer_watcher_create(PROGRAM_POLL, self._timed(poll, "power-program"), repeat=PROGRAM_POLL)
        self._watchers.append(watcher)
        watcher.start()

    def request_pass(self, delay: float) -> None:
        self._timer.stop()
        self._timer.reset(after=max(0.0, delay))
        self._timer.start()

    def request_flush(self, delay: float) -> None:
        self._flush_timer.stop()
        self._flush_timer.reset(after=max(0.0, delay))
        self._flush_timer.start()

    def request_forecast(self, delay: float) -> None:
        self._forecast_timer.stop()
        self._forecast_timer.reset(after=max(0.0, delay))
        self._forecast_timer.start()

    # -- watchers --------------------------------------------------------

    def _timed(self, fn: Callable[..., Any], name: str = "") -> Callable[..., Any]:
        """``fn`` as a reactor callback timed into the module's stats
        (:class:`~fluxsched_py.flux.cbtime.CallbackClock`): how long sched-py
        ever made a request wait behind its own work."""
        return self._clock.wrap(name or getattr(fn, "__name__", "?"), fn)

    def _on_timer(self, *_args: Any) -> None:
        # libflux dispatches ONE message per reactor loop iteration.  Were a
        # pass slice (up to 50 ms) run at every iteration, the n-th queued
        # request (an alloc burst, a ping, stats-get) would wait n slices.
        # So while requests are queued, the pass waits (1 ms re-arms, each
        # loop iteration serving one request), at most DEFER_MAX in a row.
        if lib is not None and lib.flux_pollevents(self.h.handle) & lib.FLUX_POLLIN:
            now = time.monotonic()
            if self._deferred_since is None:
                self._deferred_since = now
            if now - self._deferred_since < DEFER_MAX:
                self.driver.stats["pass_deferrals"] += 1
                self.request_pass(0.001)
                return
        self._deferred_since = None
        try:
            more = self.driver.run_pass()
        except Exception as exc:  # pragma: no cover - driver.run_pass never raises
            self.log(LOG_ERR, f"pass failed: {exc!r}")
            return
        if not more and self._gc.active and self._gc.due():
            # A full collection while it is cheap (gcpace), in a callback of
            # its own so that it never adds to a pass slice.
            self._gc_timer.stop()
            self._gc_timer.reset(after=0.0)
            self._gc_timer.start()

    def _payload(self, msg: Any) -> Any:
        if lib is None:  # pragma: no cover
            return msg.payload if msg.payload_str is not None else None
        buf = ffi.new("char **")
        if lib.flux_msg_get_string(msg.handle, buf) < 0:
            return bad_payload("payload is not a string")
        if buf[0] == ffi.NULL:
            return None
        return json.loads(ffi.string(buf[0]))

    def _handler(self, topic: str) -> Any:
        handle = self.driver.handle

        def cb(_h: Any, _w: Any, msg: Any, _arg: Any) -> None:
            try:
                payload = self._payload(msg)
            except Exception as exc:
                payload = bad_payload(str(exc))
            handle(topic, msg, payload)

        return self._timed(cb, topic)

    def _control_handler(self, topic: str) -> Any:
        handle = self.driver.control.handle

        def cb(_h: Any, _w: Any, msg: Any, _arg: Any) -> None:
            try:
                payload = self._payload(msg)
            except Exception as exc:
                payload = bad_payload(str(exc))
            handle(topic, msg, payload, msg.rolemask, msg.userid)

        return self._timed(cb, topic)

    def _register(self) -> None:
        for service in ("sched", "feasibility"):
            try:
                self.h.service_register(service).get()
            except OSError as exc:
                raise OSError(exc.errno, f"cannot register service {service!r}: {exc.strerror}") from exc
        for topic in self.driver.topics():
            w = self.h.msg_watcher_create(self._handler(topic), flux.constants.FLUX_MSGTYPE_REQUEST, topic)
            w.start()
            self._watchers.append(w)
        # The control RPCs reach guests too: each one authorizes its caller.
        guests = flux.constants.FLUX_ROLE_OWNER | flux.constants.FLUX_ROLE_USER
        for topic in self.driver.control.topics():
            handler = self._control_handler(topic)
            w = self.h.msg_watcher_create(handler, flux.constants.FLUX_MSGTYPE_REQUEST, topic, rolemask=guests)
            w.start()
            self._watchers.append(w)

    def _set_running(self) -> None:
        if lib is not None and hasattr(lib, "flux_module_set_running"):
            if lib.flux_module_set_running(self.h.handle) < 0:
                raise OSError(errno.EIO, "flux_module_set_running failed")

    def _acquire(self) -> None:
        f = self.h.rpc("resource.acquire", flags=flux.constants.FLUX_RPC_STREAMING)
        try:
            first = f.get()
        except OSError as exc:
            raise OSError(exc.errno, f"resource.acquire failed: {exc.strerror}") from exc
        self.driver.acquire(first)
        f.reset()
        self._acquire_f = f
        f.then(self._timed(self._on_acquire, "resource.acquire"))

    def _on_acquire(self, future: Any, _arg: Any = None) -> None:
        try:
            payload = future.get()
        except OSError as exc:
            # The resource module went away (instance shutdown, or unload):
            # without resources there is nothing to schedule.  Exit cleanly.
            level = LOG_INFO if exc.errno in (errno.ECANCELED, errno.ENODATA) else LOG_ERR
            self.log(level, f"exiting: resource.acquire stream ended: {exc}")
            self.h.reactor_stop()
            return
        self.driver.acquire(payload)
        future.reset()

    def _hello(self) -> None:
        """The hello stream.  Each job's R lookup and ``job-manager.getattr``
        (jobspec and eventlog: best-effort? already preempted?) are sent as
        its hello response arrives and read up to :data:`HELLO_WINDOW` jobs
        later, so the round trips overlap and at most that many answers are
        held."""
        f = self.h.rpc(
            "job-manager.sched-hello",
            self.driver.hello_payload(),
            flags=flux.constants.FLUX_RPC_STREAMING,
        )
        window: deque[tuple[Any, Any, Any]] = deque()
        while True:
            try:
                payload = f.get()
            except OSError as exc:
                if exc.errno == errno.ENODATA:
                    break
                raise OSError(exc.errno, f"job-manager.sched-hello failed: {exc.strerror}") from exc
            R: Any
            info: Any
            try:
                jobid = int(payload["id"])
                R = self._kvs_lookup(kvs_key(jobid, "R"))
            except Exception as exc:
                R = exc
            try:
                info = self.h.rpc("job-manager.getattr", self.driver.hello_info_request(int(payload["id"])))
            except Exception as exc:
                info = exc
            window.append((payload, R, info))
            if len(window) >= HELLO_WINDOW:
                self._hello_one(*window.popleft())
            f.reset()
        while window:
            self._hello_one(*window.popleft())
        self.driver.hello_done()

    def _hello_one(self, payload: Any, R: Any, info: Any) -> None:
        if isinstance(R, _Lookup):
            try:
                R = R.value()
            except Exception as exc:
                R = exc
        if not isinstance(info, BaseException):
            try:
                info = info.get()
            except Exception as exc:
                info = exc
        self.driver.hello(payload, R, info)

    def _kvs_lookup(self, key: str) -> Any:
        """A lookup of ``key`` sent now and read by ``.value()`` later
        (:class:`_Lookup`); the value itself when the bindings offer no
        raw lookup."""
        if ffi is None:  # pragma: no cover - very old bindings
            return flux.kvs.get(self.h, key)
        return _Lookup(flux.kvs.RAW.flux_kvs_lookup(self.h, None, 0, key))

    def _load_reservations(self) -> None:
        """The reservations kept in the KVS and declared in the config,
        before any job is allocated (engine/reservations.py)."""
        key = reservestore.store_key(self.name)
        try:
            stored = flux.kvs.get(self.h, key)
        except FileNotFoundError:
            stored = None
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                self.log(LOG_ERR, f"reservations: cannot read {key}: {exc.strerror or exc}")
            stored = None
        reservestore.load(self.driver, stored, self._conf, os.getuid())

    def _load_power(self) -> None:
        """The power states the module kept at its last load (power-save:
        the nodes it had switched off are asleep), before any job is allocated."""
        if self.driver.engine is None or self.driver.engine.power is None:
            return
        key = f"{self.name}.power"
        try:
            kept = flux.kvs.get(self.h, key)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                self.log(LOG_ERR, f"power: cannot read {key}: {exc.strerror or exc}")
            kept = None
        drained = online = None
        if kept:  # the nodes it switched off are still drained as powered down, and reported down
            try:
                drained, online = drain_reasons(self.h.rpc("resource.status", nodeid=0).get())
            except (OSError, TypeError, ValueError) as exc:
                self.log(LOG_ERR, f"power: resource.status failed: {exc}; nodes drained as powered down stay down")
        self.driver.adopt_power(kept, drained, online)

    def _ready(self) -> None:
        f = self.h.rpc("job-manager.sched-ready", self.driver.ready_payload())
        try:
            resp = f.get()
        except OSError as exc:
            raise OSError(exc.errno, f"job-manager.sched-ready failed: {exc.strerror}") from exc
        self.driver.ready(resp)

    def run(self) -> None:
        self._register()
        # Report running before the handshake: in rc1, `flux module load`
        # blocking until resource.acquire answers deadlocks instance startup
        # (observed with flux-core 0.88 modprobe).  The imports are already
        # done, so acquire -> hello -> ready takes milliseconds after this.
        self._set_running()
        try:
            self._acquire()
            self._load_reservations()
            self._load_power()
            self._hello()
            self._ready()
        except (OSError, ValueError) as exc:
            self.log(LOG_ERR, f"initialization failed: {exc}")
            raise OSError(getattr(exc, "errno", None) or errno.EINVAL, str(exc)) from exc
        self._clock.install_gc_probe()
        self._gc.start()
        prof_path = os.environ.get("FLUXSCHED_PY_PROFILE")
        if prof_path:  # a developer aid: cProfile the reactor, dump at exit
            import cProfile

            prof = cProfile.Profile()
            try:
                rc = prof.runcall(self.h.reactor_run)
            finally:
                prof.dump_stats(prof_path)
        else:
            rc = self.h.reactor_run()
        self._clock.remove_gc_probe()
        self._gc.stop()
        self.driver.close()
        if rc < 0 or self._failed:
            raise OSError(errno.ECONNRESET, "reactor exited with error")


def mod_main(h: Any, *args: str) -> None:
    """Entry point called by ``flux module-python-exec``."""
    try:
        binding = FluxBinding(h, args)
    except ValueError as exc:
        msg = f"{_module_name(h)}: {exc}"
        try:
            h.log(LOG_ERR, msg)
        except Exception:
            pass
        raise ValueError(msg) from None
    binding.log(LOG_INFO, f"starting (python {sys.version.split()[0]}, args={' '.join(args) or '(none)'})")
    binding.run()
