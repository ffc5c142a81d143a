"""Batsim 5 "batprotocol", JSON mode (``seeds/002``), on the shared engine.

The wire format, as observed against a real Batsim of the batprotocol era
(commit 3bb38700, ``batsim ... --edc-socket-str tcp://localhost:PORT 1 INIT``)
and as batprotocol's flatbuffers schema names the fields (flatbuffers' JSON
mode writes a union field ``x`` as ``x_type`` + ``x``):

1. **Init.**  The first ZeroMQ message is binary: a native-endian uint32
   flags word (2 = JSON, 1 = flatbuffers binary), a uint32 size, then that
   many bytes of EDC init data.  The reply is empty.
2. **Hello.**  Batsim sends ``BatsimHelloEvent`` ``{batprotocol_version,
   batsim_version, batsim_commit}``; the EDC answers ``EDCHelloEvent`` with
   ``decision_component_commit`` and ``requested_simulation_features`` —
   Batsim crashes if either is missing, and aborts if any ``forward_*``
   feature is true ("... is unimplemented"), so none is asked for.
3. **Messages.**  ``{"now": t, "events": [{"timestamp", "event_type",
   "event"}]}``, NUL-terminated in both directions.

Profiles are not forwarded, so run times (for the workload-time bookkeeping
of :class:`~fluxsched_py.batsim.driver.BatsimScheduler`) come from the
workload files ``SimulationBeginsEvent`` names in ``workloads``.

Events handled: SimulationBeginsEvent (``computation_hosts``), JobSubmittedEvent
(``job.resource_request`` — or the older ``computation_resource_request``
``{host_number}`` — and ``job.walltime``), JobCompletedEvent,
JobsKilledEvent, RequestedCallEvent, AllStaticJobsHaveBeenSubmittedEvent,
AllStaticExternalEventsHaveBeenInjectedEvent, SimulationEndsEvent, and
ExternalEventOccurredEvent: a generic event whose ``data`` is Batsim's
documented machine-event object (``{"type": "machine_unavailable",
"resources": "0-4 6 8"}``, or ``machine_available``) takes the machines
down or brings them up, as Batsim 4's NOTIFY does under v4, and one whose
``data`` is a reservations event declares them (:mod:`.external_events`);
any other external event is logged and left alone.  HostPStateChangedEvent and
ProbeDataEmittedEvent are logged and ignored (this EDC never asks for them).  Decisions:
ExecuteJobEvent, RejectJobEvent, CallMeLaterEvent (one-shot), and
KillJobsEvent ``{job_ids}`` to preempt best-effort jobs (all of a reply's
victims in one event, first: :mod:`.ordering`).

Workload fields: Batsim 3bb38700 forwards of a workload job only its
``extra_data`` (a string; an object there is forwarded as its JSON text), so
a job's fields (``user``, ``reservation``, ``bank``, ``queue``,
``campaign``, ``preemptible-after``...: :mod:`.entry`, the same reader as
the v4 and legacy drivers) come from a JSON object in ``extra_data``, over
the job's entry in the workload file ``SimulationBeginsEvent`` names.

``host_allocation`` interval sets are comma-separated at 3bb38700 and
space-separated in later release candidates: both are accepted, and the
separator written is an option (comma by default).
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine import EngineOptions
from ..engine.reservations import GroupResolver
from ..engine.runlimits import RunLimits
from ..inputs import read_bytes
from ..power import PowerModel
from .driver import BatsimScheduler, Decision, Driver, Execute, Host, Kill, Reject, profile_runtime
from .entry import EntryFields, read_entry
from .envelope import decode_envelope, number
from .errors import ProtocolError
from .external_events import RESERVATIONS, external_event_in, reservation_entries
from .intervals import format_intervals, parse_intervals
from .ordering import order_decisions

__all__ = [
    "BatprotocolDriver",
    "FLAG_BINARY",
    "FLAG_JSON",
    "decode_init",
    "decode_message",
    "encode_init",
    "encode_message",
    "KNOWN_EVENTS",
]

log = logging.getLogger("fluxsched_py.batsim")

FLAG_BINARY = 0x1
FLAG_JSON = 0x2

#: Event types Batsim may send, by batprotocol's flatbuffers union names.
KNOWN_EVENTS = frozenset(
    {
        "BatsimHelloEvent",
        "SimulationBeginsEvent",
        "SimulationEndsEvent",
        "JobSubmittedEvent",
        "JobCompletedEvent",
        "JobsKilledEvent",
        "RequestedCallEvent",
        "AllStaticJobsHaveBeenSubmittedEvent",
        "AllStaticExternalEventsHaveBeenInjectedEvent",
        "ExternalEventOccurredEvent",
        "HostPStateChangedEvent",
        "ProbeDataEmittedEvent",
    }
)
_IGNORED = frozenset({"HostPStateChangedEvent", "ProbeDataEmittedEvent"})


def decode_init(raw: bytes) -> tuple[int, bytes]:
    """The binary init message: ``(flags, init data)``."""
    if len(raw) < 8:
        raise ProtocolError(f"truncated init message: {len(raw)} bytes, need at least 8 (flags, size)")
    flags, size = struct.unpack("=II", raw[:8])
    data = raw[8:]
    if size != len(data):
        raise ProtocolError(f"init message says {size} bytes of init data but carries {len(data)} (truncated frame?)")
    return flags, data


def encode_init(flags: int, data: bytes) -> bytes:
    """The init message as Batsim sends it (tests and fakes use this)."""
    return struct.pack("=II", flags, len(data)) + data


def decode_message(raw: bytes, last_now: float = 0.0) -> tuple[float, list[tuple[float, str, dict[str, Any]]]]:
    """A JSON batprotocol message: ``(now, [(timestamp, event_type, event)])``, envelope checked."""
    return decode_envelope(
        raw, last_now, type_key="event_type", payload_key="event", known=KNOWN_EVENTS, payload_required=False
    )


def encode_message(now: float, events: list[dict[str, Any]]) -> bytes:
    """A NUL-terminated JSON message, as Batsim writes them."""
    return json.dumps({"now": now, "events": events}, separators=(",", ":")).encode() + b"\0"


def _event(ts: float, etype: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": ts, "event_type": etype, "event": data}


def _host_properties(value: Any) -> dict[str, Any]:
    # flatbuffers JSON writes [HostProperty] as [{"key", "value"}]; accept a plain object too.
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        out = {}
        for p in value:
            if not isinstance(p, dict) or "key" not in p:
                raise ProtocolError("host properties must be {key, value} objects")
            out[str(p["key"])] = p.get("value", "")
        return out
    raise ProtocolError("host 'properties' must be a list of {key, value}")


def _resource_request(job_id: str, job: dict[str, Any]) -> int:
    rr = job.get("resource_request")
    if rr is None:
        crr = job.get("computation_resource_request")
        kind = job.get("computation_resource_request_type", "HostNumber")
        if isinstance(crr, dict):
            if kind != "HostNumber" or "host_number" not in crr:
                raise ProtocolError(f"job {job_id}: only host-number resource requests are supported, got {kind}")
            rr = crr.get("host_number")
    if isinstance(rr, bool) or not isinstance(rr, int) or rr < 1:
        raise ProtocolError(f"job {job_id}: 'resource_request' must be a positive integer, got {json.dumps(rr)}")
    return rr


class BatprotocolDriver(Driver):
    """Batsim 5 EDC, JSON mode; see the module docstring."""

    NAME = "fluxsched-py"

    def __init__(
        self,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
        power: Sequence[PowerModel] | None = None,
        *,
        host_allocation_sep: str = ",",
        commit: str = "unknown",
        workload_files: Sequence[str | os.PathLike[str]] = (),
        limits: RunLimits | None = None,
        reservations: Sequence[Mapping[str, Any]] = (),
        groups: GroupResolver | None = None,
        campaigns: bool = False,
    ) -> None:
        # ``power``: each host's power model (``--platform``), for ``power-cap``.
        self.scheduler = BatsimScheduler(options, power, limits=limits, reservations=reservations, groups=groups)
        self.finished = False
        self.phase = "init"  # init -> hello -> begins -> running
        self.init_data = b""
        self.batsim: dict[str, Any] = {}
        self.sep = host_allocation_sep
        self.commit = commit
        self.now = 0.0
        self._call_ids = 0
        self.profiles: dict[str, dict[str, Any]] = {}  # "workload!name" -> ProfileAndId, or a workload file's profile
        self.workload_files = [str(f) for f in workload_files]
        # "workload!job id" -> the job's entry in the workload file (:meth:`_fields`)
        self.file_entries: dict[str, dict[str, Any]] = {}
        #: A job's ``campaign`` reaches the engine (as :class:`~.v4driver.V4Driver`'s ``campaigns``).
        self.campaigns = campaigns

    def handle(self, raw: bytes) -> bytes:
        if self.finished:
            raise ProtocolError("message received after SimulationEndsEvent")
        if self.phase == "init":
            flags, self.init_data = decode_init(raw)
            if flags == FLAG_BINARY:
                raise ProtocolError("Batsim asks for flatbuffers binary messages; only JSON mode (flag 2) is supported")
            if flags != FLAG_JSON:
                raise ProtocolError(f"init flags {flags:#x}: expected 0x2 (JSON)")
            self.phase = "hello"
            log.info("batprotocol init: JSON mode, init data %r", self.init_data[:80])
            return b""
        now, events = decode_message(raw, self.now)
        self.now = now
        out: list[dict[str, Any]] = []
        for ts, etype, data in events:
            if self.finished:
                raise ProtocolError(f"{etype} after SimulationEndsEvent in the same message")
            out.extend(self._dispatch(now, ts, etype, data))
        if self.finished:
            log.info("simulation ends at %.6f: %s", now, self.scheduler.summary())
            return encode_message(now, [])
        if self.scheduler.started:
            out.extend(self._decisions(now))
        return encode_message(now, out)

    def _dispatch(self, now: float, ts: float, etype: str, data: dict[str, Any]) -> list[dict[str, Any]]:
        sched = self.scheduler
        if self.phase == "hello":
            if etype != "BatsimHelloEvent":
                raise ProtocolError(f"expected BatsimHelloEvent first, got {etype}")
            self.batsim = data
            self.phase = "begins"
            return [self._hello(now, data)]
        if etype == "BatsimHelloEvent":
            raise ProtocolError("BatsimHelloEvent received twice")
        if etype == "SimulationBeginsEvent":
            if self.phase != "begins":
                raise ProtocolError("SimulationBeginsEvent received twice")
            self.phase = "running"
            sched.begin(self._hosts(data))
            for p in data.get("profiles") or []:
                if isinstance(p, dict) and isinstance(p.get("id"), str):
                    self.profiles[p["id"]] = p
            if not self.profiles:
                self._profiles_from_workload_files(data.get("workloads"))
            return []
        if self.phase != "running":
            raise ProtocolError(f"{etype} before SimulationBeginsEvent")
        if etype == "JobSubmittedEvent":
            job_id, job = self._job_id(data), data.get("job")
            if not isinstance(job, dict):
                raise ProtocolError(f"JobSubmittedEvent {job_id} has no 'job' object")
            res = _resource_request(job_id, job)
            wt = job.get("walltime")
            walltime = None if wt is None else number(wt, f"job {job_id} 'walltime'")
            t_submit = number(data.get("submission_time", ts), f"job {job_id} 'submission_time'")
            runtime = self._runtime(job_id, job, data.get("profile"))
            fields = self._fields(job_id, job).submission(campaigns=self.campaigns, checkpoints=False)
            sched.submit(job_id, res, walltime if walltime and walltime > 0 else None, t_submit, runtime, **fields)
            return []
        if etype == "JobCompletedEvent":
            sched.complete(self._job_id(data), ts, data.get("state"))
        elif etype == "JobsKilledEvent":
            ids = data.get("job_ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ProtocolError("JobsKilledEvent has no 'job_ids' list of strings")
            sched.killed(ids, ts)
        elif etype == "RequestedCallEvent":
            sched.requested_call(ts)
        elif etype == "AllStaticJobsHaveBeenSubmittedEvent":
            sched.no_more_static_jobs = True
            log.info("no more static jobs to submit (t=%.6f)", ts)
        elif etype == "AllStaticExternalEventsHaveBeenInjectedEvent":
            log.info("no more external events (t=%.6f)", ts)
        elif etype == "ExternalEventOccurredEvent":
            self._external_event(ts, data)
        elif etype == "SimulationEndsEvent":
            self.finished = True
        elif etype in _IGNORED:
            log.info("%s ignored: %s", etype, json.dumps(data)[:200])
        return []

    def _external_event(self, ts: float, data: dict[str, Any]) -> None:
        """A machine event in a generic external event's ``data`` (Batsim 5's
        documented use of it), or a reservations event (:mod:`.external_events`);
        anything else is the user's, logged."""
        generic = data.get("external_event") if data.get("external_event_type") == "GenericExternalEvent" else None
        doc = external_event_in(generic.get("data")) if isinstance(generic, dict) else None
        if doc is None:
            log.info("external event left alone (t=%.6f): %s", ts, json.dumps(data)[:200])
            return
        if doc["type"] == RESERVATIONS:
            what = f"reservations event at t={ts:.6f}"
            try:
                self.scheduler.reservations_declared(reservation_entries(doc), ts, what)
            except ValueError as exc:  # refused, as a bad entry is (BatsimScheduler.reservations_declared)
                log.error("%s refused; the reservations stay as they were: %s", what, exc)
            return
        kind, resources = doc["type"], doc.get("resources")
        if not isinstance(resources, str):
            raise ProtocolError(f"external event {kind} at t={ts:.6f} has no 'resources' interval set")
        try:
            ids = parse_intervals(resources)
        except ProtocolError as exc:
            raise ProtocolError(f"external event {kind} at t={ts:.6f}: {exc}") from None
        if kind == "machine_unavailable":
            self.scheduler.resources_down(ids, ts)
        else:
            self.scheduler.resources_up(ids, ts)

    def _fields(self, job_id: str, job: dict[str, Any]) -> EntryFields:
        """What the job's entry says (:mod:`.entry`): a JSON object in its
        ``extra_data`` over its entry in the workload file.  ``extra_data``
        that is not a JSON object is user data, ignored."""
        entry = self.file_entries.get(job_id, {})
        extra = job.get("extra_data")
        if isinstance(extra, str) and extra.lstrip().startswith("{"):
            try:
                doc = json.loads(extra)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                entry = {**entry, **doc}
        return read_entry(job_id, entry)

    def _runtime(self, job_id: str, job: dict[str, Any], forwarded: Any) -> float | None:
        """A job's run time when its profile is a delay (flatbuffers JSON: ``profile_type`` + ``profile``)."""
        prof = forwarded
        if not isinstance(prof, dict):
            pid = job.get("profile_id")
            if not isinstance(pid, str):
                return None
            if "!" not in pid:
                pid = f"{job_id.split('!', 1)[0]}!{pid}"
            prof = self.profiles.get(pid)
        if not isinstance(prof, dict):
            return None
        if prof.get("profile_type") == "DelayProfile" and isinstance(prof.get("profile"), dict):
            return profile_runtime({"type": "delay", **prof["profile"]})
        return profile_runtime(prof)

    def _profiles_from_workload_files(self, workloads: Any) -> None:
        """Profiles from the workload files ``SimulationBeginsEvent`` names (``[{name, filename}]``).

        Batsim 3bb38700 cannot forward profiles (asking for them aborts it),
        but it names each static workload's file: read the profiles there.  A
        ``workload_files`` entry with the same base name is preferred (for a
        file Batsim names relative to another directory, or a recording
        replayed elsewhere).  An unreadable file only costs the run times.
        """
        if not isinstance(workloads, list):
            return
        for w in workloads:
            if not isinstance(w, dict) or not isinstance(w.get("name"), str) or not isinstance(w.get("filename"), str):
                raise ProtocolError("SimulationBeginsEvent 'workloads' must be [{name, filename}] objects")
            name, filename = w["name"], w["filename"]
            base = os.path.basename(filename)
            candidates = [f for f in self.workload_files if os.path.basename(f) == base] + [filename]
            for path in candidates:
                try:
                    doc = json.loads(read_bytes(path))
                    profiles = doc.get("profiles")
                except (OSError, ValueError, AttributeError, RecursionError) as exc:
                    log.debug("workload %s: cannot read profiles from %s: %s", name, path, exc)
                    continue
                jobs = doc.get("jobs")
                for j in jobs if isinstance(jobs, list) else []:
                    if isinstance(j, dict) and "id" in j:
                        self.file_entries[f"{name}!{j['id']}"] = j
                if isinstance(profiles, dict):
                    for pname, prof in profiles.items():
                        if isinstance(prof, dict):
                            self.profiles[f"{name}!{pname}"] = prof
                    log.info("workload %s: %d profiles read from %s", name, len(profiles), path)
                    break
            else:
                log.warning(
                    "workload %s: cannot read its profiles from %s; without run times, jobs that end at the same "
                    "instant may be decided one by one (see docs/rfcs/batsim-batprotocol.md)",
                    name,
                    filename,
                )

    @staticmethod
    def _job_id(data: dict[str, Any]) -> str:
        job_id = data.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            raise ProtocolError("event has no 'job_id' string")
        return job_id

    def _hello(self, now: float, data: dict[str, Any]) -> dict[str, Any]:
        from .. import __version__

        version = data.get("batprotocol_version")
        if not isinstance(version, str):
            raise ProtocolError("BatsimHelloEvent has no 'batprotocol_version' string")
        log.info(
            "Batsim %s (commit %s), batprotocol %s",
            data.get("batsim_version", "?"),
            data.get("batsim_commit", "?"),
            version,
        )
        return _event(
            now,
            "EDCHelloEvent",
            {
                "batprotocol_version": version,
                "decision_component_name": self.NAME,
                "decision_component_version": __version__,
                # Batsim dereferences both of these unconditionally.
                "decision_component_commit": self.commit,
                "requested_simulation_features": {
                    "dynamic_registration": False,
                    "profile_reuse": False,
                    "acknowledge_dynamic_jobs": False,
                    "forward_profiles_on_job_submission": False,
                    "forward_profiles_on_jobs_killed": False,
                    # Batsim 3bb38700 aborts on any forward_* feature ("... is unimplemented"); the
                    # profiles come from the workload files SimulationBeginsEvent names instead.
                    "forward_profiles_on_simulation_begins": False,
                    "forward_unknown_external_events": False,
                },
                "scheduling_constraints": {
                    "compute_sharing": False,
                    "storage_sharing": True,
                    "job_allocation_validation_strategy": "MatchJobRequestExactly",
                },
            },
        )

    def _hosts(self, data: dict[str, Any]) -> list[Host]:
        hosts = data.get("computation_hosts")
        if not isinstance(hosts, list) or not hosts:
            raise ProtocolError("SimulationBeginsEvent has no 'computation_hosts' list")
        n = data.get("computation_host_number")
        if n is not None and n != len(hosts):
            raise ProtocolError(f"computation_host_number={n} but {len(hosts)} computation_hosts are listed")
        out = []
        for i, h in enumerate(hosts):
            if not isinstance(h, dict):
                raise ProtocolError(f"computation_hosts[{i}] is not an object")
            hid = h.get("id", i)
            if isinstance(hid, bool) or not isinstance(hid, int) or hid < 0:
                raise ProtocolError(f"computation_hosts[{i}] has no non-negative integer 'id'")
            cores = h.get("core_count", 1)
            if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
                cores = 1
            out.append(Host(hid, str(h.get("name") or f"host{hid}"), _host_properties(h.get("properties")), cores))
        return out

    def _decisions(self, now: float) -> list[dict[str, Any]]:
        jobs = self.scheduler.jobs
        decisions: list[Decision] = self.scheduler.decide(now)
        kills, order = order_decisions(decisions, lambda j: jobs[j].preemptible_after is not None)
        out = [_event(now, "KillJobsEvent", {"job_ids": kills})] if kills else []
        for d in order:
            if isinstance(d, Kill):
                out.append(_event(now, "KillJobsEvent", {"job_ids": [d.job_id]}))
            elif isinstance(d, Execute):
                out.append(
                    _event(
                        now,
                        "ExecuteJobEvent",
                        {
                            "job_id": d.job_id,
                            "allocation": {
                                "host_allocation": format_intervals(d.alloc, self.sep),
                                "executor_placement_type": "PredefinedExecutorPlacementStrategyWrapper",
                                "executor_placement": {"strategy": "SpreadOverHostsFirst"},
                            },
                            "profile_allocation_override": [],
                            "storage_placement": [],
                        },
                    )
                )
            elif isinstance(d, Reject):
                out.append(_event(now, "RejectJobEvent", {"job_id": d.job_id}))
            else:
                # Whole milliseconds, rounded up so the call never comes before the reservation.
                self._call_ids += 1
                out.append(
                    _event(
                        now,
                        "CallMeLaterEvent",
                        {
                            "call_me_later_id": f"fluxsched-{self._call_ids}",
                            "when_type": "OneShot",
                            "when": {"time": math.ceil(d.when * 1000), "time_unit": "Millisecond"},
                        },
                    )
                )
        return out
