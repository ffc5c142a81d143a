"""The Flux driver's startup sequence: ``resource.acquire``, hello, ready.

A base of :class:`~fluxsched_py.flux.driver.Driver` (the state it reads and
writes is the driver's): the first ``resource.acquire`` response builds the
resource graph and the engine, each ``job-manager.sched-hello`` job is
handed to :meth:`Engine.hello`, then the ``job-manager.sched-ready`` payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..engine import Engine
from ..ids import IdSet
from ..resource import ResourceSet
from ..resource.rlist import rlist_summary
from .helloinfo import HelloInfo, hello_info
from .wire import LOG_DEBUG, LOG_INFO, LOG_WARNING, _float, _int, _jobid, job_scheduling, kvs_key

__all__ = ["Startup"]


class Startup:
    """``resource.acquire``, hello and ready (see the module docstring)."""

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
            if down and self.engine.power is not None:
                # the nodes it switched off are drained, so flux-core reports them down: they are asleep
                asleep = self.engine.power.state
                down = str(IdSet([r for r in self._check_ranks("down", down) if r not in asleep]))
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
        power = None
        if self.power is not None:  # power saving or a power cap reads it
            power = [self.power.model] * (max(g.ranks, default=-1) + 1)
        self.engine = Engine(g, self.options, job_name=self._job_name, limits=self.limits, power=power)
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

    def hello_info_request(self, jobid: int) -> dict:
        """The ``job-manager.getattr`` payload that asks for what
        :func:`~.helloinfo.hello_info` reads (jobspec and eventlog)."""
        return {"id": jobid, "attrs": ["jobspec", "eventlog"]}

    def hello(self, payload: Any, R: Any, info: Any = None) -> None:
        """One ``sched-hello`` response, with the job's R as read from the KVS
        (a dict, JSON text, or an exception if the lookup failed) and, when
        given, the ``job-manager.getattr`` answer for
        :meth:`hello_info_request` (or an exception): its jobspec, and
        whether it was already preempted.  Without it (None), the job is
        regular, in no queue."""
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
        self._engine_hello(jobid, payload, R, self._hello_info(jobid, info))
        if self.engine.job(jobid) is None:
            self.stats["hello_errors"] += 1
            self.error(f"hello: job {jobid}: its R could not be marked allocated (see above)")

    def _hello_info(self, jobid: int, info: Any) -> HelloInfo | None:
        """The job's jobspec and preemption state from the getattr answer.

        When it cannot be read the job is taken as regular (None): it is
        never preempted, so nothing can be preempted twice; regular jobs
        wait for its end instead (logged)."""
        if info is None:
            return None
        try:
            if isinstance(info, BaseException):
                raise info
            return hello_info(info)
        except Exception as exc:
            self.stats["hello_errors"] += 1
            self.error(f"hello: job {jobid}: cannot read its jobspec/eventlog ({exc}); taken as a regular job")
            return None

    def _engine_hello(
        self,
        jobid: int,
        payload: Mapping[str, Any],
        R: Mapping[str, Any],
        info: HelloInfo | None = None,
    ) -> None:
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
        if info is not None:
            h["jobspec"] = info.jobspec
            h["preempted"] = info.preempted
        self.engine.hello([h])
        self._hello_count += 1
        job = self.engine.job(jobid)
        if job is not None and job.preemptible_after is not None:
            self.stats["hello_besteffort"] += 1
            if info is not None and info.preempted:
                self.stats["hello_preempted"] += 1

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
        depth = self.engine.queue_policy.reserve_depth if self.engine is not None else o.reserve_depth
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
            + f"policy={o.placement} reserve-depth={depth or 'unlimited'} count={count} {res}",
        )
        self._changed()
