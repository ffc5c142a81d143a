"""The legacy Batsim text protocol (versions 0 to 3, ``seeds/001``), on the shared engine.

Batsim is the server of a Unix stream socket; each message is a 32-bit
native-endian length and then ``VERSION:NOW|T1:STAMP[:CONTENT]|T2:...``.
The I/O (framing) lives in :mod:`.cli`; this module parses and writes the
message text.

That protocol keeps job descriptions in Redis and says only a job's id, so
the job sizes and walltimes come from the workload file(s) given with
``--workload`` (the same Batsim workload JSON Batsim reads), and the number
of machines from ``--nodes``/``--platform`` or the workload's ``nb_res``.

Stamps read: ``A`` (simulation begins), ``S`` (submitted), ``C`` (completed),
``N`` (nothing), ``Z`` (simulation ends), ``F``/``f`` (machines failed /
repaired), ``p``/``e`` (power state, energy: logged).  Stamps written: ``J``
(allocations, ``w!1=0-3,7;w!2=8``), ``R`` (reject), ``n`` (wake me up at),
``N`` when there is nothing to say.  Replies carry the version number of the
message they answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine import EngineOptions
from ..engine.reservations import GroupResolver
from ..engine.runlimits import RunLimits
from ..ids import IdSet, IdSetError
from ..inputs import read_bytes
from ..limits import MAX_NODES, MAX_SECONDS
from ..power import PowerModel
from .driver import BatsimScheduler, CallMeLater, Driver, Execute, Host, Kill, Reject, profile_runtime
from .entry import EntryFields, read_entry
from .errors import ProtocolError

__all__ = ["JobTable", "LegacyDriver", "WorkloadJob", "load_job_table", "parse_message", "format_message"]

log = logging.getLogger("fluxsched_py.batsim")

INCOMING = frozenset("ASCNZFfpe")


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One job of the ``--workload`` file(s): its size, walltime, run time
    (a ``delay`` profile's, used only to tell which jobs end at the same
    instant: :class:`~fluxsched_py.batsim.driver.BatsimScheduler`) and the
    rest of its entry (:mod:`.entry`)."""

    res: int
    walltime: float | None
    runtime: float | None
    fields: EntryFields


@dataclass(slots=True)
class JobTable:
    """``job id -> WorkloadJob`` from Batsim workload files, plus their ``nb_res``."""

    jobs: dict[str, WorkloadJob]
    nb_res: int | None = None
    #: Jobs of the files with ``preemptible-after``: run as regular jobs (this protocol cannot kill).
    best_effort: int = 0

    def lookup(self, job_id: str) -> WorkloadJob:
        hit = self.jobs.get(job_id)
        if hit is None:
            hit = self.jobs.get("!" + job_id.rsplit("!", 1)[-1])
        if hit is None:
            raise ProtocolError(f"job {job_id!r} is not in the --workload file(s): cannot know its size")
        return hit


def load_job_table(paths: Iterable[str]) -> JobTable:
    """Read Batsim workload JSON files (``jobs: [{id, res, walltime}]``)."""
    jobs: dict[str, WorkloadJob] = {}
    ambiguous: set[str] = set()
    nb_res = None
    best_effort = 0
    for path in paths:
        p = Path(path)
        try:
            data = json.loads(read_bytes(p))
        except OSError as exc:
            raise ValueError(f"{p}: --workload: cannot read: {exc.strerror or exc}") from None
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{p}: --workload: not JSON: {type(exc).__name__}") from None
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
            raise ValueError(f"--workload {p}: not a Batsim workload (no 'jobs' list)")
        nb = data.get("nb_res")
        if nb:
            if isinstance(nb, bool) or not isinstance(nb, int) or not 0 < nb <= MAX_NODES:
                raise ValueError(f"{p}: --workload: nb_res must be an integer in 1..{MAX_NODES}, got {str(nb)[:40]}")
            nb_res = max(nb_res or 0, nb)
        for j in data["jobs"]:
            try:
                jid, res = str(j["id"]), j["res"]
                wt = j.get("walltime")
                walltime = float(wt) if wt is not None else None
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ValueError(f"{p}: --workload: job without id/res: {str(j)[:80]}") from None
            if isinstance(res, bool) or not isinstance(res, int) or not 0 < res <= MAX_NODES:
                raise ValueError(f"{p}: --workload: job {jid[:40]!r}: res must be an integer in 1..{MAX_NODES}")
            if walltime is not None and not (math.isfinite(walltime) and walltime <= MAX_SECONDS):
                raise ValueError(f"{p}: --workload: job {jid[:40]!r}: walltime {wt} is not a finite time")
            walltime = walltime if walltime is not None and walltime > 0 else None
            runtime = profile_runtime((data.get("profiles") or {}).get(j.get("profile")))
            try:
                fields = read_entry(jid, j)
            except ProtocolError as exc:
                raise ValueError(f"{p}: --workload: {exc}") from None
            best_effort += fields.preemptible_after is not None
            wjob = WorkloadJob(res, walltime, runtime, fields)
            tail = jid.rsplit("!", 1)[-1]
            # Real Batsim 2.0 (the last text-protocol Batsim) names a workload by the first 6 hex digits
            # of the SHA-1 of its file name as given on its command line ("df1c41!0").
            sha = hashlib.sha1(str(path).encode()).hexdigest()[:6]
            for key in (f"{p.stem}!{tail}", f"{p.name}!{tail}", str(p) + "!" + tail, f"{sha}!{tail}"):
                jobs[key] = wjob
            if "!" + tail in jobs and jobs["!" + tail] != wjob:
                ambiguous.add("!" + tail)
            jobs["!" + tail] = wjob
    for key in ambiguous:
        del jobs[key]  # only full WORKLOAD!ID names resolve these
    if not jobs:
        raise ValueError("--protocol legacy needs --workload FILE (with jobs): job sizes are not in that protocol")
    return JobTable(jobs, nb_res, best_effort)


def _time(text: str, what: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise ProtocolError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(t):
        raise ProtocolError(f"{what} {text!r} is not finite")
    return t


def parse_message(text: str, last_now: float = 0.0) -> tuple[str, float, list[tuple[float, str, str]]]:
    """``VERSION:NOW|T:STAMP[:CONTENT]|...`` -> ``(version, now, [(t, stamp, content)])``."""
    parts = text.split("|")
    head = parts[0].split(":")
    if len(head) != 2 or not head[0].isdigit():
        raise ProtocolError(f"message must start with VERSION:NOW, got {parts[0][:40]!r}")
    version, now = head[0], _time(head[1], "message time")
    if now < last_now:
        raise ProtocolError(f"time went backwards: now={now} after now={last_now}")
    if len(parts) < 2:
        raise ProtocolError("message has no event")
    events = []
    last = -math.inf
    for i, part in enumerate(parts[1:]):
        fields = part.split(":", 2)
        if len(fields) < 2:
            raise ProtocolError(f"event {i} {part[:40]!r} is not TIME:STAMP[:CONTENT]")
        t = _time(fields[0], f"event {i} time")
        stamp = fields[1]
        if stamp not in INCOMING or len(stamp) != 1:
            raise ProtocolError(f"event {i} has unknown stamp {stamp!r}")
        if t > now:
            raise ProtocolError(f"event {i} ({stamp}) time {t} is after the message time {now}")
        if t < last:
            raise ProtocolError(f"event {i} ({stamp}) time {t} is before the previous event's {last}")
        last = t
        events.append((t, stamp, fields[2] if len(fields) > 2 else ""))
    return version, now, events


def _fmt_time(t: float) -> str:
    return f"{t:.6f}"


def format_message(version: str, now: float, events: list[tuple[str, str]]) -> bytes:
    """``VERSION:NOW|NOW:STAMP[:CONTENT]...``; ``N`` when there are no events."""
    ts = _fmt_time(now)
    body = [f"{ts}:{stamp}" + (f":{content}" if content else "") for stamp, content in events] or [f"{ts}:N"]
    return (f"{version}:{ts}|" + "|".join(body)).encode()


def _machines(text: str) -> IdSet:
    try:
        return IdSet.parse(text)
    except IdSetError as exc:
        raise ProtocolError(f"bad machine list {text!r}: {exc}") from None


class LegacyDriver(Driver):
    """The legacy text protocol; see the module docstring."""

    def __init__(
        self,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None,
        table: JobTable,
        hosts: list[Host] | None = None,
        power: Sequence[PowerModel] | None = None,
        *,
        limits: RunLimits | None = None,
        reservations: Sequence[Mapping[str, Any]] = (),
        groups: GroupResolver | None = None,
        campaigns: bool = False,
    ) -> None:
        # ``power``: each host's power model (``--platform``), for ``power-cap``.
        self.scheduler = BatsimScheduler(options, power, limits=limits, reservations=reservations, groups=groups)
        self.table = table
        #: A job's ``campaign`` reaches the engine (as :class:`~.v4driver.V4Driver`'s ``campaigns``).
        self.campaigns = campaigns
        self.hosts = hosts
        self.finished = False
        self.now = 0.0

    def _begin(self) -> None:
        hosts = self.hosts
        if hosts is None:
            if not self.table.nb_res:
                raise ProtocolError("the number of machines is unknown: give --nodes or a workload with nb_res")
            hosts = [Host(i, f"host{i}") for i in range(self.table.nb_res)]
        if self.table.best_effort:
            # Batsim 2.0's stamps (src/network.hpp: J R N S C P n E p Q e W) have no kill.
            log.warning(
                "%d jobs have preemptible-after, but the legacy protocol cannot kill a job: they run as regular "
                "jobs (never preempted)",
                self.table.best_effort,
            )
        self.scheduler.begin(hosts)

    def handle(self, raw: bytes) -> bytes:
        if self.finished:
            raise ProtocolError("message received after Z (simulation ends)")
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"message is not ASCII text (byte offset {e.start})") from None
        version, now, events = parse_message(text, self.now)
        self.now = now
        sched = self.scheduler
        out: list[tuple[str, str]] = []
        for t, stamp, content in events:
            if self.finished:
                raise ProtocolError(f"event {stamp} after Z in the same message")
            if stamp == "A":
                self._begin()
                continue
            if stamp == "N":
                sched.requested_call(t)
                continue
            if not sched.started:
                if stamp == "S":
                    self._begin()  # protocol versions before 3 have no A
                else:
                    raise ProtocolError(f"event {stamp} before the simulation began")
            if stamp == "S":
                job = self.table.lookup(content)
                sched.submit(
                    content,
                    job.res,
                    job.walltime,
                    t,
                    job.runtime,
                    **job.fields.submission(campaigns=self.campaigns, checkpoints=False, preemptible=False),
                )
            elif stamp == "C":
                sched.complete(content, t)
            elif stamp == "Z":
                self.finished = True
            elif stamp == "F":
                sched.resources_down(_machines(content), t)
            elif stamp == "f":
                sched.resources_up(_machines(content), t)
            else:  # p, e
                log.info("event %s:%s ignored", stamp, content)
        if self.finished:
            log.info("simulation ends at %.6f: %s", now, sched.summary())
            return format_message(version, now, [])
        if sched.started:
            allocs = []
            for d in sched.decide(now):
                if isinstance(d, Execute):
                    allocs.append(f"{d.job_id}={d.alloc.encode()}")
                elif isinstance(d, Reject):
                    out.append(("R", d.job_id))
                elif isinstance(d, CallMeLater):
                    out.append(("n", _fmt_time(d.when)))
                elif isinstance(d, Kill):
                    # only a reservation's end kills here (best-effort jobs run as regular ones)
                    raise ProtocolError(
                        f"job {d.job_id} must be killed ({d.note}), and the legacy protocol cannot kill a job "
                        "(give it a walltime within its reservation, or use --protocol v4)"
                    )
            if allocs:
                out.insert(0, ("J", ";".join(allocs)))
        return format_message(version, now, out)
