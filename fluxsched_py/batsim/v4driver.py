"""The Batsim 3/4 JSON protocol driver: :mod:`.v4` events in, decisions out,
through the shared :class:`~.driver.BatsimScheduler`.

Batsim 4 forwards a job's whole workload entry in JOB_SUBMITTED (the
fields it does not use included, ``src/jobs.cpp`` keeps the job's JSON
text), so a workload can say what the replay reads from it: ``user``,
``reservation``, and, with ``campaigns``, ``campaign`` and ``campaign-type``.

With ``dynamic`` (``--dynamic-jobs``; Batsim runs with
``--enable-dynamic-jobs``) the driver registers jobs (REGISTER_PROFILE,
REGISTER_JOB): a preempted checkpointing job (``"checkpoint": "signal"``)
again, for its remaining work, and end-of-campaign copies; it checks the
JOB_SUBMITTED acknowledgements Batsim sends back for them, and says
``registration_finished`` once no job is left, which Batsim needs to end
the simulation (docs/rfcs/batsim-v4.md, "Dynamic jobs").

With ``batsim --forward-unknown-events``, an events file's event of a type
Batsim does not know arrives whole as a NOTIFY: a ``reservations`` one
declares the reservations from then on (:mod:`.external_events`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine import EngineOptions
from ..engine.reservations import GroupResolver
from ..engine.runlimits import RunLimits
from ..power import PowerModel
from .driver import (
    BatsimScheduler,
    CallMeLater,
    Decision,
    Driver,
    Execute,
    Host,
    Kill,
    Register,
    Reject,
    SetMetadata,
    SetPower,
    profile_runtime,
)
from .errors import ProtocolError
from .external_events import RESERVATIONS, reservation_entries
from .intervals import parse_intervals
from .ordering import order_decisions

__all__ = ["V4Driver"]

#: Simulated seconds Batsim may take per event of a reply before a CALL_ME_LATER
#: (about 1.2 ms on cluster512.xml: :mod:`.ordering`), with room to spare.
CALL_MARGIN = 0.005

log = logging.getLogger("fluxsched_py.batsim")


class V4Driver(Driver):
    """Batsim 3/4 JSON protocol (``seeds/000``) on :class:`BatsimScheduler`."""

    def __init__(
        self,
        options: EngineOptions | Iterable[str] | Mapping[str, Any] | None = None,
        power: Sequence[PowerModel] | None = None,
        *,
        limits: RunLimits | None = None,
        reservations: Sequence[Mapping[str, Any]] = (),
        groups: GroupResolver | None = None,
        campaigns: bool = False,
        metadata: bool = False,
        dynamic: bool = False,
    ) -> None:
        from . import v4

        self._v4 = v4
        self.decoder = v4.MessageDecoder()
        self.scheduler = BatsimScheduler(
            options,
            power,
            limits=limits,
            reservations=reservations,
            groups=groups,
            metadata=metadata,
            dynamic=dynamic,
        )
        #: Whether ``registration_finished`` was sent (Batsim runs with
        #: dynamic jobs: it ends the simulation only after it).
        self.registration_finished = False
        self._dynamic_enabled = False
        #: A job's ``campaign`` becomes ``attributes.user.campaign`` (off: the
        #: engine sees no campaign, and decides as with no campaign field).
        self.campaigns = campaigns
        self.finished = False
        self.config: dict[str, Any] = {}
        self.workloads: dict[str, Any] = {}
        self.profiles: dict[str, dict[str, Any]] = {}
        #: Whether Batsim was asked for the energy it counted (at the end, with a power model).
        self.asked_energy = False

    def handle(self, raw: bytes) -> bytes:
        v4 = self._v4
        if self.finished:
            raise ProtocolError("message received after SIMULATION_ENDS")
        now, events = self.decoder.decode(raw)
        sched = self.scheduler
        out: list[dict[str, Any]] = []
        ends = False
        for ev in events:
            if ends:
                raise ProtocolError(f"{ev.type} event after SIMULATION_ENDS in the same message")
            handler = getattr(self, "_on_" + ev.type.lower(), None)
            if handler is None:  # pragma: no cover - the decoder only lets known types through
                raise ProtocolError(f"unsupported event type {ev.type}")
            if ev.type != "SIMULATION_BEGINS" and not sched.started:
                raise ProtocolError(f"{ev.type} event before SIMULATION_BEGINS")
            if ev.type == "SIMULATION_ENDS":
                ends = True
                continue
            out.extend(handler(ev, now))
        if ends:
            self.finished = True
            left = sched.unfinished()
            if left:
                log.warning("simulation ended with %d jobs not finished: %s", len(left), ", ".join(left[:10]))
            log.info("simulation ends at %.6f: %s", now, sched.summary())
            return v4.encode_message(now, [])
        if sched.started:
            out.extend(self._encode(now, sched.decide(now)))
            if (
                sched.power is not None
                and not self.asked_energy
                and sched.no_more_static_jobs
                and not sched.unfinished()
            ):
                # every job has ended: what did the machine draw? (batsim -E answers)
                self.asked_energy = True
                out.append(v4.query(now, {"consumed_energy": {}}))
            if (
                self._dynamic_enabled
                and not self.registration_finished
                and (not sched.dynamic or (sched.no_more_static_jobs and not sched.unfinished()))
            ):
                # no job left that could be requeued or copied (or none ever registered)
                self.registration_finished = True
                out.append(v4.notify(now, "registration_finished"))
        return v4.encode_message(now, out)

    def _encode(self, now: float, decisions: list[Decision]) -> list[dict[str, Any]]:
        """The decisions as events, in :func:`.ordering.order_decisions`' order.

        A job's SET_JOB_METADATA goes before the KILL_JOB or REJECT_JOB that
        ends it, as Batsim writes its out_jobs.csv row then (``src/server.cpp``
        ``server_on_killing_done``, ``server_on_reject_job``); the others go
        after the reply's decisions, before its CALL_ME_LATER, so that they
        do not delay a start (Batsim applies one event after another, and
        each takes simulated time: :mod:`.ordering`)."""
        v4 = self._v4
        jobs = self.scheduler.jobs
        metas = [d for d in decisions if isinstance(d, SetMetadata)]
        if metas:
            decisions = [d for d in decisions if not isinstance(d, SetMetadata)]
        kills_first, order = order_decisions(decisions, lambda j: jobs[j].preemptible_after is not None)
        ending = set(kills_first) | {d.job_id for d in order if isinstance(d, Kill | Reject)}
        out = [v4.set_job_metadata(now, m.job_id, m.metadata) for m in metas if m.job_id in ending]
        later = [v4.set_job_metadata(now, m.job_id, m.metadata) for m in metas if m.job_id not in ending]
        if kills_first:
            out.append(v4.kill_job(now, kills_first))
        for d in order:
            if later and isinstance(d, CallMeLater):
                out.extend(later)
                later = []
            if isinstance(d, Execute):
                out.append(v4.execute_job(now, d.job_id, d.alloc))
            elif isinstance(d, Kill):
                out.append(v4.kill_job(now, [d.job_id]))
            elif isinstance(d, Reject):
                out.append(v4.reject_job(now, d.job_id))
            elif isinstance(d, SetPower):
                out.append(v4.set_resource_state(now, d.ranks, d.pstate))
            elif isinstance(d, Register):
                out.append(v4.register_profile(now, self.scheduler.dyn_workload, d.profile_name, dict(d.profile)))
                out.append(v4.register_job(now, d.job_id, dict(d.job)))
            else:
                # Batsim refuses a wake-up time it has passed ("You asked to be awaken in the
                # past!", src/server.cpp), and its clock runs on while it applies the events
                # before this one: ask for no earlier than they can take.
                out.append(v4.call_me_later(now, max(d.when, now + CALL_MARGIN * (len(out) + 1))))
        out.extend(later)
        return out

    # -- one method per event type; each returns events for the reply --------

    def _on_simulation_begins(self, ev: Any, now: float) -> list[dict[str, Any]]:
        data = ev.data
        config = data.get("config")
        self.config = config if isinstance(config, dict) else {}
        wl = data.get("workloads")
        self.workloads = wl if isinstance(wl, dict) else {}
        profiles = data.get("profiles")
        self.profiles = {k: v for k, v in profiles.items() if isinstance(v, dict)} if isinstance(profiles, dict) else {}
        if self.config.get("redis-enabled"):
            raise ProtocolError(
                "Batsim runs with Redis enabled: job descriptions are not in the protocol (run batsim without "
                "--enable-redis)"
            )
        self._dynamic_enabled = self.config.get("dynamic-jobs-enabled") is True
        sched = self.scheduler
        if sched.dynamic and not self._dynamic_enabled:
            raise ProtocolError(
                "--dynamic-jobs: Batsim runs without dynamic job registration (run batsim with --enable-dynamic-jobs)"
            )
        if self._dynamic_enabled and not sched.dynamic:
            log.info("dynamic job registration is enabled in Batsim; without --dynamic-jobs none is made")
        # The registered jobs' workload: one Batsim does not have (REGISTER_PROFILE creates it).
        while sched.dyn_workload in self.workloads:
            sched.dyn_workload += "_"
        hosts = [Host(h["id"], h["name"], h["properties"]) for h in self._v4.parse_hosts(ev)]
        self.scheduler.begin(hosts)
        return []

    def _on_job_submitted(self, ev: Any, now: float) -> list[dict[str, Any]]:
        job = self._v4.parse_job(ev)
        if self.scheduler.acknowledged(job.id, job.res):
            return []  # a job this scheduler registered: Batsim says it has it
        profile = ev.data.get("profile")  # present when Batsim forwards profiles on submission
        if not isinstance(profile, dict) and job.profile is not None:
            profile = (self.profiles.get(job.id.split("!", 1)[0]) or {}).get(job.profile)
        self.scheduler.submit(
            job.id,
            job.res,
            job.walltime,
            job.subtime,
            profile_runtime(profile),
            # a checkpointing job is requeued only with --dynamic-jobs
            **job.fields.submission(campaigns=self.campaigns, checkpoints=self.scheduler.dynamic),
            profile=profile if isinstance(profile, dict) else None,
            entry=job.entry,
        )
        return []

    def _job_id(self, ev: Any) -> str:
        job_id = ev.data.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            raise ProtocolError(f"{ev.type} has no 'job_id' string")
        return job_id

    def _on_job_completed(self, ev: Any, now: float) -> list[dict[str, Any]]:
        self.scheduler.complete(self._job_id(ev), ev.timestamp, ev.data.get("job_state"))
        return []

    def _on_job_killed(self, ev: Any, now: float) -> list[dict[str, Any]]:
        ids = ev.data.get("job_ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ProtocolError("JOB_KILLED has no 'job_ids' list of strings")
        self.scheduler.killed(ids, ev.timestamp)
        return []

    def _on_resource_state_changed(self, ev: Any, now: float) -> list[dict[str, Any]]:
        resources, state = ev.data.get("resources"), ev.data.get("state")
        try:
            ids = parse_intervals(resources)
            pstate = int(state)
        except (TypeError, ValueError):
            raise ProtocolError(f"RESOURCE_STATE_CHANGED: bad resources {resources!r} or state {state!r}") from None
        self.scheduler.power_changed(ids, pstate, ev.timestamp)
        return []

    def _on_requested_call(self, ev: Any, now: float) -> list[dict[str, Any]]:
        self.scheduler.requested_call(ev.timestamp)
        return []

    def _on_query(self, ev: Any, now: float) -> list[dict[str, Any]]:
        requests = ev.data.get("requests")
        if not isinstance(requests, dict) or not requests:
            raise ProtocolError("QUERY has no 'requests' object")
        answers: dict[str, Any] = {}
        for kind, arg in requests.items():
            if kind != "estimate_waiting_time":
                raise ProtocolError(f"QUERY {kind!r} is not supported (only estimate_waiting_time)")
            if not isinstance(arg, dict) or not isinstance(arg.get("job"), dict):
                raise ProtocolError("QUERY estimate_waiting_time has no 'job' object")
            job_id = str(arg.get("job_id", ""))
            fake = self._v4.Event(ev.timestamp, "JOB_SUBMITTED", {"job_id": job_id or "query", "job": arg["job"]})
            job = self._v4.parse_job(fake)
            wait = self.scheduler.estimate_waiting_time(job.res, job.walltime, now)
            answers[kind] = {"job_id": job_id, "estimated_waiting_time": wait}
        return [self._v4.answer(now, answers)]

    def _on_answer(self, ev: Any, now: float) -> list[dict[str, Any]]:
        joules = ev.data.get("consumed_energy") if self.asked_energy else None
        if isinstance(joules, int | float) and not isinstance(joules, bool):
            self.scheduler.stats["consumed_joules"] = float(joules)
            log.info("Batsim counted %.3f J consumed from t=0 to t=%.6f", joules, ev.timestamp)
        else:
            log.info("ANSWER from Batsim (not one this scheduler asked for): %s", ev.data)
        return []

    def _on_notify(self, ev: Any, now: float) -> list[dict[str, Any]]:
        kind = ev.data.get("type")
        if not isinstance(kind, str):
            raise ProtocolError("NOTIFY has no 'type' string")
        if kind == "no_more_static_job_to_submit":
            self.scheduler.no_more_static_jobs = True
            log.info("no more static jobs to submit (t=%.6f)", ev.timestamp)
        elif kind == "no_more_external_event_to_occur":
            log.info("no more external events (t=%.6f)", ev.timestamp)
        elif kind in ("event_machine_unavailable", "event_machine_available"):
            res = ev.data.get("resources")
            if not isinstance(res, str):
                raise ProtocolError(f"NOTIFY {kind} has no 'resources' interval set")
            from .intervals import parse_intervals

            ids = parse_intervals(res)
            if kind == "event_machine_unavailable":
                self.scheduler.resources_down(ids, ev.timestamp)
            else:
                self.scheduler.resources_up(ids, ev.timestamp)
        elif kind == RESERVATIONS:  # an events file's own type, forwarded (batsim --forward-unknown-events)
            what = f"reservations event at t={ev.timestamp:.6f}"
            try:
                self.scheduler.reservations_declared(reservation_entries(ev.data), ev.timestamp, what)
            except ValueError as exc:  # refused, as a bad entry is (BatsimScheduler.reservations_declared)
                log.error("%s refused; the reservations stay as they were: %s", what, exc)
        else:
            log.warning("NOTIFY %r ignored", kind)
        return []

    def _on_simulation_ends(self, ev: Any, now: float) -> list[dict[str, Any]]:  # pragma: no cover
        return []
