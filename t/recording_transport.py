"""A Flux driver transport that records everything, for tests and replays."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fluxsched_py.flux.driver import LOG_ERR, Driver
from fluxsched_py.flux.wire import copy_jobspec
from fluxsched_py.ids import IdSet


class RecordingTransport:
    """A :class:`Transport` that records everything (tests, replay).

    ``sent`` holds ``(kind, msg, payload)`` tuples in order: kind is
    ``respond``, ``error`` (payload ``(errnum, text)``), ``commit`` (payload:
    the puts), ``exception`` or ``log``.  Commits complete at once unless
    ``defer_commits`` is set (then :meth:`complete_commits` finishes them);
    passes run when the test calls :meth:`run_passes`; held annotations
    (``annotate-interval``) go when it calls ``driver.flush_annotations()``.
    """

    def __init__(self, *, defer_commits: bool = False, commit_error: str | None = None) -> None:
        self.sent: list[tuple[str, Any, Any]] = []
        self.logs: list[tuple[int, str]] = []
        self.kvs: dict[str, Any] = {}
        self.defer_commits = defer_commits
        self.commit_error = commit_error
        self._deferred: list[tuple[list[tuple[str, Any]], Callable[[str | None], None]]] = []
        self.pass_requests = 0
        self.pass_delays: list[float] = []
        #: Jobs the job-manager does not hold running: ``signal`` is refused (EINVAL).
        self.not_running: set[int] = set()
        #: Jobs whose shells have not started (a job-manager prolog runs):
        #: ``watch_shells`` waits until the test calls :meth:`start_shells`.
        self.shells_pending: set[int] = set()
        #: The jobs ``watch_shells`` was asked about, in order.
        self.shell_watches: list[int] = []
        self._shell_waiters: dict[int, list[Callable[[str | None], None]]] = {}
        self.flush_requests: list[float] = []
        self.forecast_requested = False
        #: Programs the driver ran (power-save): [argv, timeout, done], in order; a test calls ``done``.
        self.programs: list[tuple[list[str], float, Callable[[str | None], None]]] = []
        self.driver: Driver | None = None
        #: The instance owner's uid (None: no owner check, every job is the owner's).
        self.owner: int | None = None
        #: What ``job-manager.getattr`` answers for a job's jobspec (``duplicate`` builds the copy's from it).
        self.jobspecs: dict[int, Any] = {}
        #: ``duplicate`` fails with this text (a failed getattr or submit), when set.
        self.duplicate_error: str | None = None
        #: Each drained rank's reason, as the resource module would hold it after the drains sent.
        self.drained: dict[int, str] = {}

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

    def signal(self, jobid: int, signum: int, refused: Callable[[str], None] | None = None) -> None:
        self.sent.append(("kill", None, {"id": jobid, "signum": signum}))
        if jobid in self.not_running and refused is not None:  # flux-core's kill.c answer
            refused("job is not running")

    def watch_shells(self, jobid: int, done: Callable[[str | None], None]) -> None:
        """``done(None)`` at once, unless ``jobid`` is in :attr:`shells_pending`."""
        self.shell_watches.append(jobid)
        if jobid in self.shells_pending:
            self._shell_waiters.setdefault(jobid, []).append(done)
        else:
            done(None)

    def start_shells(self, jobid: int, err: str | None = None) -> None:
        """The shells of ``jobid`` start (``err``: its exec eventlog ended without ``shell.start``)."""
        self.shells_pending.discard(jobid)
        for done in self._shell_waiters.pop(jobid, []):
            done(err)

    def requeue(self, jobid: int) -> None:
        self.sent.append(("requeue", None, {"id": jobid}))

    def duplicate(self, jobid: int, done: Callable[[str | None], None]) -> None:
        """Records ``("duplicate", None, {"id", "jobspec"})``: the copy's jobspec, from :attr:`jobspecs`."""
        spec = self.jobspecs.get(jobid)
        copy = None if spec is None or self.duplicate_error else copy_jobspec(spec, jobid)
        self.sent.append(("duplicate", None, {"id": jobid, "jobspec": copy}))
        done(self.duplicate_error)

    def request_pass(self, delay: float) -> None:
        self.pass_requests += 1
        self.pass_delays.append(delay)

    def request_flush(self, delay: float) -> None:
        self.flush_requests.append(delay)

    def request_forecast(self, delay: float) -> None:
        self.forecast_requested = True

    def run_forecast_slices(self, limit: int = 10000) -> int:
        """Run the background forecast's slices while the driver asks for
        them (at most ``limit``); returns how many ran."""
        assert self.driver is not None
        n = 0
        while self.forecast_requested and n < limit:
            self.forecast_requested = False
            self.driver.run_forecast_slice()
            n += 1
        return n

    def run_program(self, argv: list[str], timeout: float, done: Callable[[str | None], None]) -> None:
        self.programs.append((argv, timeout, done))

    def drain(self, ranks: str, reason: str, overwrite: bool = False) -> None:
        mode = "overwrite" if overwrite else "update"
        self.sent.append(("drain", None, {"targets": ranks, "reason": reason, "mode": mode}))
        for r in IdSet.parse(ranks):
            if overwrite or r not in self.drained:
                self.drained[r] = reason

    def undrain(self, ranks: str) -> None:
        self.sent.append(("undrain", None, {"targets": ranks}))
        for r in IdSet.parse(ranks):
            self.drained.pop(r, None)

    def drain_status(self, done: Callable[[dict[int, str] | None], None]) -> None:
        """Answers at once with :attr:`drained`: what the drains and undrains sent left."""
        done(dict(self.drained))

    def run_passes(self, limit: int = 10000) -> None:
        assert self.driver is not None
        for _ in range(limit):
            if not self.driver.run_pass():
                return

    def responses(self, kind: str = "respond") -> list[Any]:
        return [p for k, _, p in self.sent if k == kind]

    def errors(self) -> list[tuple[int, str]]:
        return [text for level, text in self.logs if level <= LOG_ERR]
