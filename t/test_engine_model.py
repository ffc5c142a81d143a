"""Model-based tests of the engine (hypothesis stateful testing).

A :class:`RuleBasedStateMachine` plays the job-manager and the resource
module against a real :class:`~fluxsched_py.engine.Engine`, through its
public API only, the way the drivers do: random interleavings of alloc,
free (partial and final), cancel, prioritize, expiration, time passing,
resource down / up / drain / undrain / shrink, passes cut short by their
budget, and a restart (a fresh engine recovering the running jobs by hello,
then the job-manager re-sending every pending alloc).

The oracle is the test's own model, built only from what it sent and what
the engine answered: which job ids wait for an answer, which hold which
``(rank, core)`` items (from the R of each SUCCESS, minus the ranks the
test freed), which ranks are down, drained or shrunk.  After every step:

* no item is held by two jobs, and a SUCCESS only hands out items that were
  free (up, not drained, not shrunk, held by nobody);
* free + allocated + down = all, comparing the engine's
  ``resource_status()`` and ``graph.free()`` with the model;
* best-effort jobs (``preemptible-after``): a preemption only ever names a
  running best-effort job past its protected window, never twice (a
  restart included: hello says which were preempted), for a pending
  regular job; what the engine holds for a job waiting for its victims is
  held by no running job, counts as allocated, and is in its SUCCESS;
* every alloc gets exactly one final response (SUCCESS, DENY or CANCEL):
  no final response, and no ANNOTATE, goes to a job that has no alloc in
  flight, so no SUCCESS ever goes to a cancelled or denied job and a denied
  job is never retried; at teardown every job still pending is cancelled
  and must get its CANCEL;
* a SUCCESS gives what was asked (N whole nodes, or N cores);
* the annotations the job-manager holds (the diffs applied in order) agree
  with the engine: a running job keeps only ``resource_summary``; after a
  complete pass every pending job within ``annotate-depth`` has a
  ``reason_pending`` and its ``jobs_ahead`` is its place in its queue, and
  ``t_estimate`` is there exactly for jobs with a reservation, never in the
  past.

:func:`test_ten_thousand_steps` runs the machines for every queue policy
(and a per-queue mix) and checks that at least 10,000 steps ran.
``FLUXSCHED_MODEL_EXAMPLES=N`` runs N examples per configuration, with a
random seed, for a long session (docs/rfcs/RELIABILITY.md).
"""

from __future__ import annotations

import logging
import math
import os
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fluxsched_py.engine import Engine, EngineError, ResponseType
from fluxsched_py.engine.duplicates import CancelCopy, Duplicate
from fluxsched_py.resource import ResourceGraph

NODES = 4
CORES = 4
#: ranks a grow may add (rank NODES, ...): a job of NODES + 1 nodes is denied until one is added
MAX_GROW = 1
SCHED_KEYS = {
    "t_estimate",
    "reason_pending",
    "jobs_ahead",
    "queue",
    "resource_summary",
    "backfill",
    "besteffort",
    "campaign_eta",
}
RUNNING_KEYS = {"resource_summary", "backfill", "besteffort"}


def instance_R(first: int = 0, nodes: int = NODES) -> dict:
    """R of ranks ``first .. first + nodes - 1``, CORES cores each."""
    last = first + nodes - 1
    return {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": f"{first}-{last}", "children": {"core": f"0-{CORES - 1}"}}],
            "nodelist": [f"node[{first}-{last}]"],
            "starttime": 0.0,
            "expiration": 0.0,
        },
    }


def parse_ids(text: str) -> set[int]:
    """``0-2,5`` -> {0, 1, 2, 5}: the test's own idset reader (an oracle
    independent of fluxsched_py.ids)."""
    out: set[int] = set()
    for part in str(text).split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def items_of(R: dict) -> set[tuple[int, int]]:
    out = set()
    for entry in R["execution"]["R_lite"]:
        cores = parse_ids(entry.get("children", {}).get("core", ""))
        for r in parse_ids(entry["rank"]):
            out.update((r, c) for c in cores)
    return out


def R_of(items: set[tuple[int, int]]) -> dict:
    by_rank: dict[int, list[int]] = {}
    for r, c in sorted(items):
        by_rank.setdefault(r, []).append(c)
    lite = [{"rank": str(r), "children": {"core": ",".join(map(str, cs))}} for r, cs in by_rank.items()]
    return {"version": 1, "execution": {"R_lite": lite, "starttime": 0.0, "expiration": 0.0}}


def jobspec(
    nnodes: int,
    ncores: int,
    duration: float,
    queue: str | None,
    pa: float | None = None,
    checkpoint: bool = False,
    campaign: str | None = None,
) -> dict:
    if nnodes:
        slot = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": CORES}]}
        res = [{"type": "node", "count": nnodes, "exclusive": True, "with": [slot]}]
    else:
        res = [{"type": "slot", "count": ncores, "label": "task", "with": [{"type": "core", "count": 1}]}]
    system: dict = {"duration": duration}
    if queue:
        system["queue"] = queue
    if pa is not None:
        system["preemptible-after"] = pa
    attributes: dict = {"system": system}
    user = {"checkpoint": "signal"} if checkpoint else {}
    if campaign is not None:
        user["campaign"] = campaign
    if user:
        attributes["user"] = user
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": attributes,
    }


class ErrorLog(logging.Handler):
    """Collects the engine's error records: the model only sends valid
    traffic, so any error the engine logs is a failure."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


class Ticks:
    """A stopwatch that advances one unit per reading: ``budget=k`` cuts a
    pass after about k steps, deterministically."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


#: steps run by every machine of this module (see test_ten_thousand_steps)
STEPS = {"steps": 0, "runs": 0}

job_shapes = st.one_of(
    st.tuples(st.integers(1, NODES + 1), st.just(0)),  # whole nodes (NODES + 1: DENY until a grow)
    st.tuples(st.just(0), st.integers(1, CORES * 2 + 1)),  # cores anywhere
)
durations = st.sampled_from([0.0, 5.0, 10.0, 30.0, 100.0])
#: preemptible-after: None for a regular job (most), else seconds or an FSD string
windows = st.sampled_from([None, None, None, 0, 0, 20.0, "1m"])


class EngineModel(RuleBasedStateMachine):
    """See the module docstring.  Subclasses set ``OPTIONS`` and ``QUEUES``."""

    OPTIONS: list[str] = ["queue-policy=fcfs"]
    QUEUES: list[str | None] = [None]
    #: campaigns of the best-effort jobs (attributes.user.campaign), by priority; none: no campaign
    CAMPAIGNS: list[str] = []

    def __init__(self) -> None:
        super().__init__()
        self.now = 100.0
        self.next_id = 1
        self.nodes = NODES  # ranks 0 .. nodes - 1, grown ones included
        self.down: set[int] = set()
        self.drained: set[int] = set()
        self.shrunk: set[int] = set()
        self.pending: dict[int, dict] = {}  # id -> {"spec", "prio", "t_submit", "shape"}
        self.running: dict[int, dict] = {}  # id -> {"items", "R", "prio", "t_submit", "freed", "start"}
        self.finals: dict[int, list[str]] = {}  # id -> final responses, in order, over all its allocs
        self.allocs: dict[int, int] = {}  # id -> allocs sent
        self.ann: dict[int, dict] = {}  # id -> sched annotations the job-manager holds
        self.estimated_at: dict[int, float] = {}  # id -> when its t_estimate was sent
        self.passed = False  # a complete pass ran since the last change
        self.preempted: dict[int, int] = {}  # victim -> the job it was preempted for (every one, ever)
        self.spent: set[int] = set()  # preempted before the last restart, still running then
        self.claims: dict[int, set] = {}  # job waiting for its victims -> what the engine holds for it
        self.awaited: dict[int, set] = {}  # job waiting for its victims -> what those victims hold
        self.victim_items: dict[int, set] = {}  # job -> what the jobs preempted for it held
        self.noticed: dict[int, float] = {}  # best-effort job -> when it got its first notice (preempt-grace)
        self.grace = next((float(o.split("=")[1]) for o in self.OPTIONS if o.startswith("preempt-grace=")), 0.0)
        # preempt-wait: which victims a regular job waits for while their notice is not over
        self.wait = next((o.split("=")[1] for o in self.OPTIONS if o.startswith("preempt-wait=")), "grace")
        # duplicates=N: job -> the original of its group (the copies the model submitted, and the
        # original); original -> the member that ended first, not preempted (the model ended them)
        self.group: dict[int, int] = {}
        self.winner: dict[int, int] = {}
        # campaign-max-running=CAMPAIGN[@PROPERTY]:N,... ('*' only), read from the test's own options
        self.bounds: list[tuple[str | None, int]] = [
            (name.partition("@")[2] or None, int(n))
            for o in self.OPTIONS
            if o.startswith("campaign-max-running=")
            for name, _, n in (e.rpartition(":") for e in o.split("=", 1)[1].split(","))
        ]
        self.props: dict[int, set[str]] = {}  # rank -> its properties (the properties rule)
        self.errors = ErrorLog()
        logging.getLogger("fluxsched_py").addHandler(self.errors)
        self.engine = self.new_engine()
        STEPS["runs"] += 1

    # -- helpers -------------------------------------------------------------

    def new_engine(self) -> Engine:
        self.graph = ResourceGraph.from_rv1(instance_R(0, self.nodes))
        self.stopwatch = Ticks()
        return Engine(self.graph, self.OPTIONS, stopwatch=self.stopwatch)

    def held(self) -> set[tuple[int, int]]:
        """Items of running jobs, and those the engine holds for jobs waiting
        for their victims (:meth:`claimed`): nobody else may have them."""
        out: set[tuple[int, int]] = set()
        for j in self.running.values():
            out |= j["items"]
        for items in self.claimed().values():
            assert not (out & items), f"items held for a starting job are held by a running job: {out & items}"
            out |= items
        return out

    def claimed(self) -> dict[int, set[tuple[int, int]]]:
        e = self.engine
        return {y: items_of(e.graph.allocation(y).to_rv1(e.graph)) for y in e.besteffort.starting()}

    def all_items(self) -> set[tuple[int, int]]:
        return {(r, c) for r in range(self.nodes) for c in range(CORES)}

    def model_all(self) -> set[tuple[int, int]]:
        held = self.held()
        return {i for i in self.all_items() if i[0] not in self.shrunk or i in held}

    def model_free(self) -> set[tuple[int, int]]:
        bad = self.down | self.drained | self.shrunk
        return {i for i in self.all_items() if i[0] not in bad} - self.held()

    def changed(self) -> None:
        self.passed = False

    def take(self, responses, expect_only: tuple[ResponseType, ...] | None = None) -> None:
        """Apply the engine's responses to the model, checking each."""
        free_before = self.model_free()
        claims = self.claims
        for r in responses:
            if expect_only is not None:
                assert r.type in expect_only, f"unexpected {r.type.name} for job {r.id}"
            if r.type is ResponseType.ANNOTATE:
                assert r.id in self.pending, f"ANNOTATE for job {r.id}, which has no alloc in flight"
                self.annotate(r.id, r.annotations)
                continue
            assert r.id in self.pending, f"{r.type.name} for job {r.id}, which has no alloc in flight"
            self.finals.setdefault(r.id, []).append(r.type.name)
            STEPS[r.type.name] = STEPS.get(r.type.name, 0) + 1
            job = self.pending.pop(r.id)
            if r.type is ResponseType.SUCCESS:
                items = items_of(r.R)
                assert items, f"job {r.id}: SUCCESS with an empty R"
                # What was held for it, and what its victims held (it may be on
                # a rank drained since: a drain does not take resources back).
                mine = claims.get(r.id, set()) | self.victim_items.get(r.id, set()) | self.awaited.get(r.id, set())
                assert items <= free_before | mine, f"job {r.id}: given items that are not free: {items - free_before}"
                assert claims.get(r.id, set()) <= items, f"job {r.id}: did not get what was held for it"
                free_before -= items
                nnodes, ncores = job["shape"]
                if nnodes:
                    ranks = {rk for rk, _ in items}
                    assert len(ranks) == nnodes and len(items) == nnodes * CORES, f"job {r.id}: {items}"
                else:
                    assert len(items) == ncores, f"job {r.id}: asked {ncores} cores, got {items}"
                ex = r.R["execution"]
                assert ex["starttime"] == self.now
                if job["duration"]:
                    assert ex["expiration"] == self.now + job["duration"]
                self.running[r.id] = {
                    "items": items,
                    "R": r.R,
                    "prio": job["prio"],
                    "t_submit": job["t_submit"],
                    "freed": set(),
                    "start": self.now,
                    "pa": job["pa"],
                    "checkpoint": job["spec"]["attributes"].get("user", {}).get("checkpoint") == "signal",
                    "spec": job["spec"],
                    "job": job,
                    "campaign": job.get("campaign"),
                    "props": set().union(*(self.props.get(rk, set()) for rk, _ in items)),
                }
                self.check_bounds(r.id)
                self.annotate(r.id, r.annotations)
                held = set(self.ann.get(r.id, {}))
                assert "resource_summary" in held and held <= RUNNING_KEYS, f"running job {r.id} keeps {held}"
                assert ("besteffort" in held) == (job["pa"] is not None), f"job {r.id}: {held}"
            else:
                if r.type is ResponseType.DENY:
                    assert r.note, f"job {r.id}: DENY without a note"
                self.ann.pop(r.id, None)

    def check_bounds(self, jobid: int) -> None:
        """A campaign job that starts is within its campaign's bounds, counting the running jobs
        of its campaign the engine knows the campaign of (not those known from a hello)."""
        job = self.running[jobid]
        if job["campaign"] is None:
            return
        mine = [j for j in self.running.values() if j["campaign"] == job["campaign"] and not j.get("adopted")]
        for prop, n in self.bounds:
            if prop is None:
                assert len(mine) <= n, f"job {jobid}: {len(mine)} jobs of campaign {job['campaign']} run, bound {n}"
            elif prop in job["props"]:
                on = [j for j in mine if prop in j["props"]]
                assert len(on) <= n, f"job {jobid}: {len(on)} jobs of {job['campaign']} on {prop}, bound {n}"

    def ended(self, jobid: int) -> None:
        """The model ends running job ``jobid`` (its final free): the first member of a group to
        end, not preempted, is its winner."""
        original = self.group.get(jobid)
        if original is not None and original not in self.winner and jobid not in self.preempted:
            self.winner[original] = jobid
        del self.running[jobid]
        self.ann.pop(jobid, None)

    def carry_out(self, actions) -> None:
        """Carry the duplicates' actions out, as the replay does: submit each copy, cancel each
        loser (a pending one gets its CANCEL, a running one is freed).  Then no member of a group
        that was won, but its winner, is left."""
        for a in actions:
            if isinstance(a, Duplicate):
                orig = self.running.get(a.of)
                assert orig is not None and orig["campaign"] is not None, f"copy of job {a.of}: no running campaign job"
                assert self.group.get(a.of, a.of) == a.of and a.of not in self.winner, f"copy of job {a.of}"
                spec = orig["spec"]
                system = {**spec["attributes"]["system"], "preemptible-after": 0, "duplicate-of": a.of}
                copy = {**orig["job"], "spec": {**spec, "attributes": {**spec["attributes"], "system": system}}}
                cid = self.next_id
                self.next_id += 1
                self.group[a.of] = self.group[cid] = a.of
                self.send_alloc(cid, {**copy, "t_submit": self.now, "pa": 0})
                STEPS["copies"] = STEPS.get("copies", 0) + 1
                continue
            assert isinstance(a, CancelCopy)
            original = self.group.get(a.id)
            assert original is not None and self.winner.get(original) == a.winner, (a, self.winner.get(original))
            if a.id in self.pending:
                self.take(self.engine.cancel(a.id), (ResponseType.CANCEL,))
            elif a.id in self.running:
                assert self.engine.free(a.id, R_of(self.running[a.id]["items"]), final=True) == []
                self.ended(a.id)
            STEPS["copies cancelled"] = STEPS.get("copies cancelled", 0) + 1
            self.changed()
        for member, original in self.group.items():
            w = self.winner.get(original)
            if w is not None and member != w:
                assert member not in self.pending and member not in self.running, f"job {member} outlives winner {w}"

    def annotate(self, jobid: int, annotations) -> None:
        if annotations is None:
            return
        assert set(annotations) == {"sched"}, annotations
        held = self.ann.setdefault(jobid, {})
        for k, v in annotations["sched"].items():
            assert k in SCHED_KEYS, f"job {jobid}: unknown annotation {k}"
            if v is None:
                held.pop(k, None)
            else:
                held[k] = v
                if k == "t_estimate":
                    self.estimated_at[jobid] = self.now

    def send_alloc(self, jobid: int, job: dict, resent: bool = False) -> None:
        if not resent:  # a re-sent alloc stands for the one the restart lost
            self.allocs[jobid] = self.allocs.get(jobid, 0) + 1
        self.pending[jobid] = job
        self.take(self.engine.alloc(jobid, job["prio"], 0, job["t_submit"], job["spec"]), (ResponseType.DENY,))
        self.changed()

    def run_pass(self, budget: float | None = None) -> bool:
        res = self.engine.schedule(self.now, budget)
        self.take(res.responses)
        if not res.more:
            self.passed = True  # (a requeue or a copy below is a change after it)
        for n in res.notice:  # preempt-grace: a notice names a running best-effort job not preempted yet
            job = self.running.get(n.id)
            assert job is not None and job["pa"] is not None, f"notice to job {n.id}, not a running best-effort job"
            assert n.id not in self.preempted and self.grace > 0, f"notice to job {n.id}"
            self.noticed.setdefault(n.id, self.now)
            STEPS["notices"] = STEPS.get("notices", 0) + 1
        for a in res.preempt:
            job = self.running.get(a.id)
            assert job is not None, f"preempt of job {a.id}, which does not run"
            assert job["pa"] is not None, f"regular job {a.id} preempted"
            assert a.id not in self.preempted, f"job {a.id} preempted twice"
            window = 60.0 if job["pa"] == "1m" else job["pa"]
            assert self.now >= job["start"] + window, f"job {a.id} preempted inside its protected window"
            # the engine knows a job checkpoints from its jobspec (not one known from hello)
            ckpt = job["checkpoint"] and not job.get("adopted")
            if self.grace and (self.wait == "grace" or (self.wait == "checkpoint" and ckpt)):
                # not before its notice is over (a victim preempt-wait waits for)
                assert self.now >= self.noticed.get(a.id, math.inf) + self.grace - 1e-9, f"job {a.id}: early"
            # always for a pending regular job: the victims of one cancelled in their grace are spared
            assert a.for_id in self.pending and self.pending[a.for_id]["pa"] is None, f"preempted for {a.for_id}"
            self.victim_items.setdefault(a.for_id, set()).update(job["items"])
            self.preempted[a.id] = a.for_id
            STEPS["preempted"] = STEPS.get("preempted", 0) + 1
            # a job known from hello has no jobspec: its checkpoint is not known (docs/rfcs/preemption.md)
            assert a.requeue == (job["checkpoint"] and not job.get("adopted")), f"job {a.id}: requeue {a.requeue}"
            if a.requeue:  # as the Flux module does: the same job again, naming the one it continues
                spec = {**job["spec"], "attributes": {**job["spec"]["attributes"]}}
                spec["attributes"]["user"] = {**spec["attributes"]["user"], "requeued-from": a.id}
                again = {**job["job"], "spec": spec, "t_submit": self.now}
                jobid = self.next_id
                self.next_id += 1
                if a.id in self.group:  # a requeued copy (its jobspec names the original) is one more member
                    self.group[jobid] = self.group[a.id]
                self.send_alloc(jobid, again)
                STEPS["requeued"] = STEPS.get("requeued", 0) + 1
        if not res.more:
            self.carry_out(self.engine.copies(self.now))
        return res.more

    # -- rules: the job-manager ------------------------------------------------
    # Most rules end with a pass (``then_pass``), as the drivers run one after
    # every change; ``schedule`` also runs passes cut short by their budget.

    def after(self, then_pass: bool) -> None:
        if then_pass:
            self.run_pass()

    @rule(
        jobs=st.lists(
            st.tuples(job_shapes, durations, st.integers(0, 31), st.integers(0, 2), windows), min_size=1, max_size=3
        ),
        then_pass=st.booleans(),
    )
    def alloc(self, jobs, then_pass):
        for shape, duration, prio, q, pa in jobs:
            jobid = self.next_id
            self.next_id += 1
            checkpoint = pa is not None and prio % 2 == 0  # with preempt-grace: requeued when preempted
            campaign = self.CAMPAIGNS[prio % len(self.CAMPAIGNS)] if pa is not None and self.CAMPAIGNS else None
            spec = jobspec(shape[0], shape[1], duration, self.QUEUES[q % len(self.QUEUES)], pa, checkpoint, campaign)
            job = {"spec": spec, "prio": prio, "t_submit": self.now, "shape": shape, "duration": duration, "pa": pa}
            job["campaign"] = campaign
            self.send_alloc(jobid, job)
        self.after(then_pass)

    @rule(budget=st.one_of(st.none(), st.integers(1, 6)))
    def schedule(self, budget):
        self.run_pass(budget)

    @rule(data=st.data(), then_pass=st.booleans())
    def cancel(self, data, then_pass):
        """A pending job gets its CANCEL; a running or unknown one, nothing."""
        jobid = data.draw(st.sampled_from(sorted(self.pending) + sorted(self.running) + [10_000]))
        if jobid in self.pending:
            self.take(self.engine.cancel(jobid), (ResponseType.CANCEL,))
            assert self.finals[jobid][-1] == "CANCEL", f"job {jobid}: no CANCEL"
            self.changed()
        else:
            assert self.engine.cancel(jobid) == []
        self.after(then_pass)

    @rule(data=st.data(), final=st.booleans(), then_pass=st.booleans())
    def free(self, data, final, then_pass):
        jobid = data.draw(st.sampled_from(sorted(self.running) + [10_000]))
        job = self.running.get(jobid)
        if job is None:
            assert self.engine.free(jobid, None, final=True) == []
            return
        ranks = sorted({r for r, _ in job["items"]})
        if not final and len(ranks) > 1:
            part = set(data.draw(st.lists(st.sampled_from(ranks), min_size=1, max_size=len(ranks) - 1, unique=True)))
            items = {i for i in job["items"] if i[0] in part}
            assert self.engine.free(jobid, R_of(items), final=False) == []
            job["items"] -= items
            job["freed"] |= part
        else:
            assert self.engine.free(jobid, R_of(job["items"]), final=True) == []
            self.ended(jobid)
        self.changed()
        self.after(then_pass)

    @rule(data=st.data(), then_pass=st.booleans())
    @precondition(lambda self: any(v in self.running for v in self.preempted))
    def preempted_job_ends(self, data, then_pass):
        """The job-manager raised the preempt exception: the job ends and is freed."""
        jobid = data.draw(st.sampled_from(sorted(v for v in self.preempted if v in self.running)))
        assert self.engine.free(jobid, None, final=True) == []
        self.ended(jobid)
        self.changed()
        self.after(then_pass)

    @rule(data=st.data(), prio=st.integers(0, 31), then_pass=st.booleans())
    @precondition(lambda self: self.pending)
    def prioritize(self, data, prio, then_pass):
        jobid = data.draw(st.sampled_from(sorted(self.pending)))
        self.pending[jobid]["prio"] = prio
        extra = [(jobid, prio), (10_000, 3)]  # unknown ids are ignored
        if self.running:  # so are priorities of running jobs
            extra.append((min(self.running), 0))
        assert self.engine.prioritize(extra) == []
        self.changed()
        self.after(then_pass)

    @rule(data=st.data(), delta=st.sampled_from([1.0, 20.0, 200.0]), then_pass=st.booleans())
    def expiration(self, data, delta, then_pass):
        """A running job's end moves; any other job's request is refused."""
        jobid = data.draw(st.sampled_from(sorted(self.running) + sorted(self.pending)[:1] + [10_000]))
        job = self.running.get(jobid)
        if job is None:
            with pytest.raises(EngineError):
                self.engine.expiration(jobid, self.now + delta)
            return
        t = max(self.now, job["start"]) + delta
        self.engine.expiration(jobid, t)
        job["R"] = {**job["R"], "execution": {**job["R"]["execution"], "expiration": t}}
        self.changed()
        self.after(then_pass)

    @rule(dt=st.sampled_from([1.0, 5.0, 50.0]), jobs_end=st.booleans(), then_pass=st.booleans())
    def time_passes(self, dt, jobs_end, then_pass):
        """Time passes; with ``jobs_end``, the jobs whose time is up end
        (the job-manager sends their final free)."""
        self.now += dt
        if jobs_end:
            for jobid in sorted(self.running):
                exp = self.running[jobid]["R"]["execution"]["expiration"]
                if exp and exp <= self.now:
                    assert self.engine.free(jobid, None, final=True) == []
                    self.ended(jobid)
                    self.changed()
        self.after(then_pass)

    # -- rules: the resource module --------------------------------------------

    @rule(rank=st.integers(0, NODES + MAX_GROW - 1), up=st.booleans(), then_pass=st.booleans())
    def up_down(self, rank, up, then_pass):
        rank %= self.nodes
        if up:
            self.engine.resource_update(up=str(rank))
            self.down.discard(rank)
        else:
            self.engine.resource_update(down=str(rank))
            if rank not in self.shrunk:
                self.down.add(rank)
        self.changed()
        self.after(then_pass)

    @rule(rank=st.integers(0, NODES + MAX_GROW - 1), drain=st.booleans(), then_pass=st.booleans())
    def drain(self, rank, drain, then_pass):
        rank %= self.nodes
        if drain:
            self.engine.graph.drain(str(rank), "model")
            if rank not in self.shrunk:
                self.drained.add(rank)
        else:
            self.engine.graph.undrain(str(rank))
            self.drained.discard(rank)
        self.engine.resource_update()
        self.changed()
        self.after(then_pass)

    @rule(rank=st.integers(1, NODES + MAX_GROW - 1), then_pass=st.booleans())
    @precondition(lambda self: len(self.shrunk) < NODES - 2)
    def shrink(self, rank, then_pass):
        rank = 1 + (rank - 1) % (self.nodes - 1)
        self.engine.resource_update(shrink=str(rank))
        self.shrunk.add(rank)
        self.down.discard(rank)
        self.drained.discard(rank)
        self.changed()
        self.after(then_pass)

    @rule(then_pass=st.booleans())
    @precondition(lambda self: self.nodes < NODES + MAX_GROW)
    def grow(self, then_pass):
        """resource.acquire adds a rank, up and free (a grow lays the flat sets out anew)."""
        self.engine.resource_update(grow=instance_R(self.nodes, 1))
        self.nodes += 1
        STEPS["grown"] = STEPS.get("grown", 0) + 1
        self.changed()
        self.after(then_pass)

    @rule(rank=st.integers(0, NODES + MAX_GROW - 1), rack=st.sampled_from([[], ["rack1"], ["rack1", "fast"]]))
    def properties(self, rank, rack):
        """A property change rebuilds the planner (the jobs here ask for none)."""
        rank %= self.nodes
        if rank not in self.shrunk:
            self.engine.resource_update(properties={rank: rack})
            self.props[rank] = set(rack)
            self.changed()

    # -- rules: a restart --------------------------------------------------------

    @rule(then_pass=st.booleans())
    def restart(self, then_pass):
        """A fresh engine: the resource module says what is up, the
        job-manager says hello with each running job's R (and the ranks it
        freed already), then re-sends every pending alloc."""
        self.engine = self.new_engine()
        # The new engine holds nothing for anyone: a job that was waiting for
        # its victims is pending again, and may now start elsewhere.
        self.claims, self.awaited = {}, {}
        # Nor which jobs are copies of which (hello has no jobspec; a re-sent copy names an
        # original it does not know), nor node properties (the model's R has none).
        self.group, self.winner, self.props = {}, {}, {}
        g = self.graph
        g.set_down(f"0-{self.nodes - 1}")
        up = set(range(self.nodes)) - self.down - self.shrunk
        self.engine.resource_update(up=",".join(map(str, sorted(up))) or None)
        if self.shrunk:
            self.engine.resource_update(shrink=",".join(map(str, sorted(self.shrunk))))
        if self.drained:
            g.drain(",".join(map(str, sorted(self.drained))), "model")
            self.engine.resource_update()
        self.spent = {v for v in self.preempted if v in self.running}
        hello = []
        for jobid, job in sorted(self.running.items()):
            job["adopted"] = True
            h = {"id": jobid, "priority": job["prio"], "userid": 0, "t_submit": job["t_submit"], "R": job["R"]}
            if job["freed"]:
                h["free"] = ",".join(map(str, sorted(job["freed"])))
            if job["pa"] is not None:  # the Flux driver reads it from the jobspec
                h["preemptible_after"] = 60.0 if job["pa"] == "1m" else job["pa"]
                h["preempted"] = jobid in self.preempted
            hello.append(h)
        assert self.engine.hello(hello) == []
        STEPS["hello jobs"] = STEPS.get("hello jobs", 0) + len(hello)
        assert sorted(j.id for j in self.engine.running) == sorted(self.running), "hello lost running jobs"
        pending, self.pending = self.pending, {}
        for jobid, job in sorted(pending.items(), key=lambda kv: kv[0]):
            self.ann.pop(jobid, None)  # the job-manager clears sched annotations of re-sent jobs
            self.send_alloc(jobid, job, resent=True)
        self.changed()
        self.after(then_pass)

    # -- invariants --------------------------------------------------------------

    @invariant()
    def count_step(self):
        STEPS["steps"] += 1
        self.claims = self.claimed()
        # After a restart a job may wait for a victim preempted before it (a
        # spent one) with no Preempt sent: what that victim holds is the job's
        # when it is freed, as for a victim preempted for it (victim_items).
        self.awaited = {
            y: set().union(*(self.running[v]["items"] for v in victims if v in self.running))
            for y, victims in self.engine.besteffort.starting().items()
        }

    @invariant()
    def engine_logged_no_error(self):
        assert not self.errors.records, self.errors.records

    @invariant()
    def engine_own_invariants(self):
        self.engine.check_invariants()

    @invariant()
    def no_double_allocation(self):
        seen: set[tuple[int, int]] = set()
        for jobid, job in self.running.items():
            assert not (seen & job["items"]), f"job {jobid} shares items with another job"
            seen |= job["items"]

    @invariant()
    def free_allocated_down_is_all(self):
        st_ = self.engine.resource_status()
        held = self.held()
        everything = self.model_all()
        assert items_of(st_["all"]) == everything, "all"
        assert items_of(st_["allocated"]) == held, "allocated"
        down = {i for i in self.all_items() if i[0] in self.down and i[0] not in self.shrunk}
        assert items_of(st_["down"]) == down, "down"
        free = items_of(self.engine.graph.free().to_rv1(self.engine.graph))
        assert free == self.model_free(), "free"
        unusable = {i for i in everything if i[0] in (self.down | self.drained)} - held
        assert free | held | unusable == everything and not (free & held) and not (free & unusable)

    @invariant()
    def engine_knows_what_the_model_knows(self):
        e = self.engine
        assert sorted(j.id for j in e.running) == sorted(self.running)
        starting = e.besteffort.starting()
        assert sorted([j.id for j in e.pending()] + list(starting)) == sorted(self.pending)
        assert e.pending_count == len(self.pending) - len(starting)
        for jobid, victims in starting.items():  # waits only for preempted jobs that still run
            # (or, after a restart, for jobs preempted before it, which any regular job may claim;
            # or, with preempt-grace, for victims given notice, to be preempted when it is over)
            assert all(
                (self.preempted.get(v) == jobid or v in self.spent or (self.grace and v in self.noticed))
                and v in self.running
                for v in victims
            ), (
                jobid,
                victims,
                self.preempted,
                sorted(self.running),
            )

    @invariant()
    def one_final_response_per_alloc(self):
        for jobid, finals in self.finals.items():
            assert len(finals) <= self.allocs[jobid], f"job {jobid}: {finals} for {self.allocs[jobid]} allocs"
            assert "SUCCESS" not in finals[:-1], f"job {jobid}: answered again after SUCCESS: {finals}"
            assert "DENY" not in finals[:-1], f"job {jobid}: answered again after DENY: {finals}"

    @invariant()
    def annotations_agree_with_the_engine(self):
        for jobid in self.running:
            extra = set(self.ann.get(jobid, {})) - RUNNING_KEYS
            assert not extra, f"running job {jobid} holds {extra}"
        if not self.passed:
            return
        depth = 64
        by_queue: dict[str | None, list[int]] = {}
        besteffort = []
        for job in self.engine.pending():
            if job.preemptible_after is not None:
                besteffort.append(job.id)
                continue
            by_queue.setdefault(job.queue.name if job.queue else None, []).append(job.id)
        for jobid in besteffort[:depth]:  # (or held by a campaign bound, or a copy being cancelled)
            reason = self.ann.get(jobid, {}).get("reason_pending", "")
            assert reason.startswith(("best-effort", "campaign ", "cancelled: another copy")), (jobid, reason)
        for jobid, victims in self.engine.besteffort.starting().items():
            reason = self.ann[jobid]["reason_pending"]
            if reason.startswith("waiting for "):  # only jobs preempted before a restart
                assert victims <= self.spent, (reason, victims, self.spent)
            else:
                assert reason.startswith("preempting "), self.ann[jobid]
        for _q, ids in by_queue.items():
            for pos, jobid in enumerate(ids[:depth]):
                ann = self.ann.get(jobid, {})
                assert "reason_pending" in ann, f"pending job {jobid} has no reason_pending: {ann}"
                assert ann.get("jobs_ahead") == pos, f"job {jobid}: jobs_ahead {ann.get('jobs_ahead')} != {pos}"
        for jobid in self.pending:
            ann = self.ann.get(jobid, {})
            est = self.engine.job(jobid).estimate
            if est is None:
                assert "t_estimate" not in ann, f"job {jobid}: t_estimate {ann} without a reservation"
            else:
                assert ann.get("t_estimate") == est, f"job {jobid}: t_estimate {ann.get('t_estimate')} != {est}"
                # Never in the past when sent (a job overrunning its end may make it stale later).
                at = self.estimated_at[jobid]
                assert math.isfinite(est) and est >= at, f"job {jobid}: t_estimate {est} sent at {at}"

    def teardown(self):
        """Cancel every job still pending (each must get its CANCEL), free
        every running job: everything is free or down again."""
        logging.getLogger("fluxsched_py").removeHandler(self.errors)
        for jobid in sorted(self.pending):
            self.take(self.engine.cancel(jobid), (ResponseType.CANCEL,))
        assert not self.pending
        for jobid in sorted(self.running):
            self.engine.free(jobid, None, final=True)
        self.running.clear()
        for jobid, n in self.allocs.items():
            assert len(self.finals.get(jobid, [])) == n, f"job {jobid}: {n} allocs, finals {self.finals.get(jobid)}"
        self.free_allocated_down_is_all()
        assert self.engine.resource_status()["allocated"]["execution"]["R_lite"] == []


def machine(options: list[str], queues: list[str | None]) -> type[EngineModel]:
    return type(
        "EngineModel_" + "_".join(o.split("=")[1] for o in options),
        (EngineModel,),
        {
            "OPTIONS": options,
            "QUEUES": queues,
            "CAMPAIGNS": ["a", "b"] if any(o.startswith("duplicates=") for o in options) else [],
        },
    )


CONFIGS = [
    (["queue-policy=fcfs", "policy=low"], [None]),
    (["queue-policy=easy", "policy=first"], [None]),
    (["queue-policy=conservative", "policy=high"], [None]),
    (["queue-policy=easy", "policy=worstfit", "reserve-depth=2"], [None]),
    (
        ["queue-policy=conservative", "policy=locality", "queue-policy-per-queue=debug:fcfs,batch:easy"],
        [None, "debug", "batch"],
    ),
    # preemption with notice, checkpointing jobs requeued, victims whose notice is over first
    (["queue-policy=easy", "policy=first", "preempt-grace=20", "preempt-victims=fewest"], [None]),
    (
        [
            "queue-policy=conservative",
            "policy=low",
            "preempt-grace=20",
            "besteffort-fit=prefer",
            "preempt-wait=checkpoint",
        ],
        [None],
    ),
]
#: all of issue 25 at once (run with three times the examples): notices, checkpointing jobs
#: requeued, copies of campaigns' last jobs (campaigns a and b), and bounds on each campaign,
#: anywhere and on rack1 nodes
MIXED = (
    ["queue-policy=easy", "policy=low", "preempt-grace=20", "duplicates=2", "campaign-max-running=*:3,*@rack1:1"],
    [None],
)
CONFIGS.append(MIXED)

#: runs per configuration x steps per run >= 10,000 over CONFIGS
LONG = "FLUXSCHED_MODEL_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("FLUXSCHED_MODEL_EXAMPLES", "50"))
STEP_COUNT = 50


def test_ten_thousand_steps():
    STEPS.clear()
    STEPS.update(steps=0, runs=0)
    t0 = time.perf_counter()
    for options, queues in CONFIGS:
        m = machine(options, queues)
        before = dict(STEPS)
        m.TestCase.settings = settings(
            max_examples=EXAMPLES * (3 if (options, queues) == MIXED else 1),
            stateful_step_count=STEP_COUNT,
            derandomize=not LONG,  # the suite is deterministic; a long run explores new cases
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        m.TestCase().runTest()
        if (options, queues) == MIXED:
            mixed = {k: v - before.get(k, 0) for k, v in STEPS.items()}
    dt = time.perf_counter() - t0
    steps = STEPS.pop("steps") - STEPS["runs"]  # invariants are checked once before the first step too
    print(f"engine model: {steps} steps in {STEPS['runs']} runs, {dt:.1f} s; {STEPS}")
    assert steps >= 10_000, STEPS
    # The interleavings did exercise every kind of answer and a recovery.
    assert all(STEPS.get(k, 0) > 100 for k in ("SUCCESS", "DENY", "CANCEL", "hello jobs")), STEPS
    assert STEPS.get("preempted", 0) > 20, STEPS
    assert STEPS.get("notices", 0) > 20 and STEPS.get("requeued", 0) > 5, STEPS
    # ... and the mixed configuration mixed them: copies, losers cancelled, notices, preemptions, requeues
    assert mixed.get("copies", 0) > 20 and mixed.get("copies cancelled", 0) > 5, mixed
    assert mixed.get("notices", 0) > 20 and mixed.get("preempted", 0) > 0, mixed
