"""Model-based test of end-of-campaign duplication (hypothesis stateful testing).

A :class:`RuleBasedStateMachine` plays the job-manager against an engine
with ``duplicates=2`` through its public API, as the replay does: regular
jobs and best-effort campaign jobs (``preemptible-after: 0``, campaigns
``a`` and ``b``) arrive, jobs finish, pending jobs are cancelled, time
passes; after each pass the test carries out every action at once: a
preemption frees the victim, a :class:`~fluxsched_py.engine.duplicates.Duplicate`
submits a copy (``attributes.system.duplicate-of``), a
:class:`~fluxsched_py.engine.duplicates.CancelCopy` frees or cancels the job.

The oracles are the test's own: which ranks each job holds (from each
SUCCESS), which job is a copy of which (it submitted them), which member of
each group finished first (it finished them), and a *twin* engine that
gets the same regular jobs, frees and cancels at the same times but no
best-effort job and no copy.  After every step:

* no rank is held by two jobs (every job is ``node[N] exclusive``);
* every preemption names a best-effort job (never a regular one), and a
  regular job starts at exactly the time it starts in the twin: no regular
  job is delayed by a campaign or its copies (with ``preemptible-after:
  0`` and ``preempt-victims=plan`` regular jobs plan as if they were not
  there);
* the winner of a group is the member the test finished first, every
  other member is cancelled then, and none of them is left pending or
  running once the actions are carried out: no copy outlives its winner.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fluxsched_py.engine import Engine, JobState, ResponseType
from fluxsched_py.engine.duplicates import CancelCopy, Duplicate
from fluxsched_py.replay.platform import nodes_graph

NODES = 5
STATS = {"copies": 0, "won by a copy": 0, "cancelled": 0, "preempted": 0, "regular starts": 0}


def spec(nnodes: int, duration: float, campaign: str | None = None, copy_of: int | None = None) -> dict:
    slot = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}
    system: dict = {"duration": duration}
    attrs: dict = {"system": system}
    if campaign is not None:
        system["preemptible-after"] = 0
        attrs["user"] = {"campaign": campaign}
    if copy_of is not None:
        system["duplicate-of"] = copy_of
    return {
        "version": 1,
        "resources": [{"type": "node", "count": nnodes, "exclusive": True, "with": [slot]}],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": attrs,
    }


class DuplicatesModel(RuleBasedStateMachine):
    OPTIONS: dict = {"queue-policy": "easy"}

    def __init__(self) -> None:
        super().__init__()
        opts = {**self.OPTIONS, "duplicates": "2", "preempt-victims": "plan"}
        self.e = Engine(nodes_graph(NODES), opts, build_R=False, summaries=False)
        self.twin = Engine(nodes_graph(NODES), {**self.OPTIONS, "preempt-victims": "plan"}, build_R=False)
        self.now = 0.0
        self.next_id = 1
        self.regular: set[int] = set()
        self.specs: dict[int, dict] = {}
        self.held: dict[int, set[int]] = {}  # running job -> its ranks
        self.pending: set[int] = set()
        self.starts: dict[int, float] = {}  # regular job -> start, engine under test
        self.twin_starts: dict[int, float] = {}
        self.group: dict[int, int] = {}  # job (original or copy) -> its original, once a copy is asked for
        self.winner: dict[int, int] = {}  # original -> the member the test finished first
        self.cancelled: set[int] = set()

    # -- the driver ------------------------------------------------------------

    def _success(self, r) -> None:
        ranks = set(r.resources.ranks)
        for other, theirs in self.held.items():
            assert not (ranks & theirs), f"job {r.id} given ranks {ranks & theirs} that job {other} holds"
        self.held[r.id] = ranks
        self.pending.discard(r.id)
        if r.id in self.regular:
            self.starts[r.id] = self.now
            STATS["regular starts"] += 1

    def _pass(self) -> None:
        e = self.e
        # A full pass in both at every step: a best-effort event (a cancel, a
        # free) makes the engine re-plan regular jobs too, and a jobs past
        # its walltime may then let a backfill start; the twin must re-plan
        # at the same moments for its start times to be comparable.
        e.changed()
        self.twin.changed()
        res = e.schedule(self.now)
        while True:
            for r in res.responses:
                if r.type is ResponseType.SUCCESS:
                    self._success(r)
                elif r.type in (ResponseType.DENY, ResponseType.CANCEL):
                    self.pending.discard(r.id)
            if res.preempt:
                for p in res.preempt:
                    assert p.id not in self.regular, f"regular job {p.id} preempted"
                    assert p.for_id in self.regular
                    STATS["preempted"] += 1
                    self._gone(p.id)
                    e.free(p.id)
                res = e.schedule(self.now)
                continue
            acts = e.copies(self.now)
            if not acts:
                break
            for a in acts:
                if isinstance(a, Duplicate):
                    self._submit_copy(a.of)
                else:
                    self._cancel(a)
            res = e.schedule(self.now)
        for r in self.twin.schedule(self.now).responses:
            if r.type is ResponseType.SUCCESS:
                self.twin_starts[r.id] = self.now

    def _submit_copy(self, of: int) -> None:
        assert of not in self.regular and of in self.held and of not in self.winner
        cid = self.next_id
        self.next_id += 1
        orig = self.specs[of]
        self.specs[cid] = spec(1, orig["attributes"]["system"]["duration"], "?", copy_of=of)
        self.specs[cid]["attributes"]["user"] = orig["attributes"]["user"]
        self.group[of] = of
        self.group[cid] = of
        self.pending.add(cid)
        STATS["copies"] += 1
        assert self.e.alloc(cid, 0, 0, self.now, self.specs[cid]) == []

    def _cancel(self, a: CancelCopy) -> None:
        original = self.group[a.id]
        assert self.winner.get(original) == a.winner, "the winner is the member finished first"
        self.cancelled.add(a.id)
        STATS["cancelled"] += 1
        if a.id in self.held:
            self._gone(a.id)
            self.e.free(a.id)
        elif a.id in self.pending:
            self.pending.discard(a.id)
            assert [r.type for r in self.e.cancel(a.id)] == [ResponseType.CANCEL]

    def _gone(self, jobid: int) -> None:
        self.held.pop(jobid, None)

    # -- rules ------------------------------------------------------------------

    @rule(nnodes=st.integers(1, 3), duration=st.sampled_from([10.0, 50.0, 200.0]))
    def submit_regular(self, nnodes, duration):
        j = self.next_id
        self.next_id += 1
        self.regular.add(j)
        self.pending.add(j)
        self.specs[j] = spec(nnodes, duration)
        self.e.alloc(j, 0, 0, self.now, self.specs[j])
        self.twin.alloc(j, 0, 0, self.now, self.specs[j])
        self._pass()

    @rule(campaign=st.sampled_from(["a", "b"]), n=st.integers(1, 4))
    def submit_campaign_jobs(self, campaign, n):
        for _ in range(n):
            j = self.next_id
            self.next_id += 1
            self.pending.add(j)
            self.specs[j] = spec(1, 1000.0, campaign)
            self.e.alloc(j, 0, 0, self.now, self.specs[j])
        self._pass()

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def finish(self, data):
        j = data.draw(st.sampled_from(sorted(self.held)))
        original = self.group.get(j)
        if original is not None and original not in self.winner:
            self.winner[original] = j
            if j != original:
                STATS["won by a copy"] += 1
        self._gone(j)
        self.e.free(j)
        if j in self.regular:
            self.twin.free(j)
        self._pass()

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def cancel_pending(self, data):
        j = data.draw(st.sampled_from(sorted(self.pending)))
        if self.e.job(j) is None or self.e.job(j).state is not JobState.PENDING:
            return
        self.pending.discard(j)
        self.e.cancel(j)
        if j in self.regular:
            self.twin.cancel(j)
        self._pass()

    @rule(dt=st.sampled_from([1.0, 10.0, 60.0]))
    def time_passes(self, dt):
        self.now += dt
        self._pass()

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def regular_jobs_start_as_without_campaigns(self):
        assert self.starts == self.twin_starts

    @invariant()
    def no_member_outlives_its_winner(self):
        for job, original in self.group.items():
            if original in self.winner and job != self.winner[original]:
                assert self.e.job(job) is None, f"job {job} outlives the winner {self.winner[original]} of its group"

    @invariant()
    def engine_agrees(self):
        self.e.check_invariants()
        running = {j.id for j in self.e.running}
        assert running == set(self.held)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_duplicates_model(policy):
    class Machine(DuplicatesModel):
        OPTIONS = {"queue-policy": policy}

    Machine.TestCase.settings = settings(
        max_examples=60,
        stateful_step_count=40,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    Machine.TestCase().runTest()
    assert STATS["copies"] > 20 and STATS["won by a copy"] > 5 and STATS["cancelled"] > 20, STATS
