"""A scheduler restart forgets nothing a running job's jobspec says (issue 37).

The oracle is the engine that did not restart: each scenario runs one
engine straight through, and a second one that is started afresh half way,
told the running jobs by ``Engine.hello`` (their R and jobspec, as the Flux
module reads them at ``sched-hello``) and the pending ones by ``alloc`` (the
job-manager sends them again).  From then on both must decide the same:
the same starts on the same ranks, the same notices and preemptions (a
checkpointing job requeued), and a job held by a limit or a campaign bound
held with the same words.
"""

from __future__ import annotations

import math

from fluxsched_py.engine import Engine, JobState, ResponseType
from fluxsched_py.engine.runlimits import RunLimits
from fluxsched_py.replay.platform import nodes_graph

from .test_preempt_grace import spec


def make(nodes: int, limits: RunLimits | None = None, **options) -> Engine:
    opts = {"queue-policy": "easy", **{k.replace("_", "-"): v for k, v in options.items()}}
    return Engine(nodes_graph(nodes), opts, build_R=False, limits=limits, time_format=lambda t: f"t={t:.0f}s")


class Both:
    """The same jobs sent to an engine that runs straight through and, after
    :meth:`restart`, to one that restarted; every pass compared."""

    def __init__(self, factory):
        self.factory = factory
        self.straight = factory()
        self.restarted: Engine | None = None
        self.specs: dict[int, dict] = {}
        #: Each engine's last ``reason_pending`` of each job, from its annotations.
        self.reasons: dict[int, dict[int, str]] = {}

    def engines(self) -> list[Engine]:
        return [self.straight] if self.restarted is None else [self.straight, self.restarted]

    def alloc(self, jobid: int, t: float, jobspec: dict, userid: int = 0) -> None:
        self.specs[jobid] = jobspec
        for e in self.engines():
            assert e.alloc(jobid, 16, userid, t, jobspec) == []

    def free(self, jobid: int) -> None:
        for e in self.engines():
            e.free(jobid)

    def restart(self, with_jobspecs: bool = True) -> Engine:
        old = self.straight
        new = self.factory()
        hello, pending = [], []
        for job in sorted(old.table.jobs.values(), key=lambda j: j.sortkey):
            if job.state is JobState.RUNNING:
                end = 0.0 if job.expiration == math.inf else job.expiration
                h = {
                    "id": job.id,
                    "priority": job.priority,
                    "userid": job.userid,
                    "t_submit": job.t_submit,
                    "R": job.resources.to_rv1(old.graph, job.t_start, end, 1),
                }
                if with_jobspecs:
                    h["jobspec"] = self.specs[job.id]
                hello.append(h)
            elif job.state is JobState.PENDING:
                pending.append(job)
        assert new.hello(hello) == []
        for job in pending:
            assert new.alloc(job.id, job.priority, job.userid, job.t_submit, self.specs[job.id]) == []
        self.restarted = new
        return new

    def schedule(self, t: float) -> dict:
        """One pass of each engine at ``t``: what they did, which must be the same."""
        seen = [decisions(e, t, self.reasons.setdefault(id(e), {})) for e in self.engines()]
        assert all(s == seen[0] for s in seen), seen
        for e in self.engines():
            e.check_invariants()
        return seen[0]

    def reason(self, e: Engine, jobid: int) -> str | None:
        """``jobid``'s last ``reason_pending`` from ``e`` (the engine's own words)."""
        return self.reasons.get(id(e), {}).get(jobid)


def decisions(e: Engine, t: float, reasons: dict[int, str]) -> dict:
    r = e.schedule(t)
    success = [x for x in r.responses if x.type is ResponseType.SUCCESS]
    for x in r.responses:
        if x.type is ResponseType.ANNOTATE and "reason_pending" in (x.annotations or {}).get("sched", {}):
            reasons[x.id] = x.annotations["sched"]["reason_pending"]
    return {
        "ranks": sorted((x.id, tuple(sorted(x.resources.ranks))) for x in success),
        "started": sorted(x.id for x in success),
        "preempt": sorted((p.id, p.requeue) for p in r.preempt),
        "notice": sorted((n.id, n.at) for n in r.notice),
    }


def queued(jobspec: dict, queue: str) -> dict:
    jobspec["attributes"]["system"]["queue"] = queue
    return jobspec


def test_a_job_running_in_a_limited_queue_still_holds_back_the_next_one():
    limits = RunLimits.from_config({"queues": {"batch": {"policy": {"scheduler": {"limits": {"total": {"jobs": 1}}}}}}})
    both = Both(lambda: make(4, limits))
    both.alloc(1, 0.0, queued(spec(1, 1000), "batch"))
    assert both.schedule(0.0)["started"] == [1]
    both.alloc(2, 1.0, queued(spec(1, 1000), "batch"))
    assert both.schedule(1.0)["started"] == []
    held = both.reason(both.straight, 2)
    assert held is not None and "limit" in held, held
    new = both.restart()
    assert both.schedule(2.0)["started"] == []  # job 2 stays held, in both
    assert both.reason(new, 2) == held
    both.free(1)
    assert both.schedule(1000.0)["started"] == [2]


def test_without_its_jobspec_the_queue_forgets_the_running_job():
    """The guard of the test above: told only R, the restarted engine lets
    job 2 start at once, past the queue's limit."""
    limits = RunLimits.from_config({"queues": {"batch": {"policy": {"scheduler": {"limits": {"total": {"jobs": 1}}}}}}})
    both = Both(lambda: make(4, limits))
    both.alloc(1, 0.0, queued(spec(1, 1000), "batch"))
    both.schedule(0.0)
    both.alloc(2, 1.0, queued(spec(1, 1000), "batch"))
    both.schedule(1.0)
    new = both.restart(with_jobspecs=False)
    assert [x.id for x in new.schedule(2.0).responses if x.type is ResponseType.SUCCESS] == [2]


def test_a_checkpointing_best_effort_job_is_noticed_and_requeued_as_before():
    both = Both(lambda: make(1, preempt_grace="60"))
    both.alloc(100, 0.0, spec(1, 5000, pa=0, checkpoint="signal"))
    assert both.schedule(0.0)["started"] == [100]
    both.restart()
    both.alloc(1, 10.0, spec(1, 100))
    assert both.schedule(10.0)["notice"] == [(100, 70.0)]
    assert both.schedule(70.0)["preempt"] == [(100, True)]  # requeued with its remaining work
    both.free(100)
    assert both.schedule(71.0)["started"] == [1]


def test_a_running_campaign_job_still_counts_against_its_campaigns_bound():
    both = Both(lambda: make(4, campaign_max_running="c:1"))
    both.alloc(100, 0.0, spec(1, 5000, pa=0, campaign="c"))
    assert both.schedule(0.0)["started"] == [100]
    both.alloc(101, 1.0, spec(1, 5000, pa=0, campaign="c"))
    assert both.schedule(1.0)["started"] == []
    new = both.restart()
    assert both.schedule(2.0)["started"] == []
    assert both.reason(new, 101) == both.reason(both.straight, 101)
    both.free(100)
    assert both.schedule(3.0)["started"] == [101]


def test_a_jobspec_that_cannot_be_parsed_leaves_a_regular_job_that_is_never_preempted(caplog):
    e = make(1)
    R = nodes_graph(1).all().to_rv1(nodes_graph(1), 0.0, 0.0, 1)
    e.hello([{"id": 7, "R": R, "jobspec": {"version": 1, "resources": "garbage"}}])
    assert "job 7: cannot parse its jobspec" in caplog.text
    job = e.job(7)
    assert job.state is JobState.RUNNING and job.request is None and job.preemptible_after is None
    e.alloc(1, 16, 0, 1.0, spec(1, 100))
    r = e.schedule(1.0)
    assert not r.preempt and not [x for x in r.responses if x.type is ResponseType.SUCCESS]


def test_a_copy_and_its_original_are_still_a_pair_after_a_restart():
    """duplicates=1: a campaign's last job gets a copy on the idle node; after
    a restart the first of the two to end still wins, in both engines, and
    the other is cancelled."""
    from .test_duplicates import be

    both = Both(lambda: make(2, duplicates="1"))
    both.alloc(1, 0.0, be())
    both.alloc(2, 0.0, be())
    assert both.schedule(0.0)["started"] == [1, 2]
    both.free(1)  # the campaign's history: 100 s
    assert both.schedule(100.0)["started"] == []
    (d,) = both.straight.copies(100.0)
    assert d.of == 2
    both.alloc(10, 100.0, be(copy_of=2))
    assert both.schedule(100.0)["started"] == [10]
    new = both.restart()
    assert new.duplicates.is_copy(10)
    both.free(10)  # the copy ends first
    both.schedule(150.0)
    acts = [e.copies(150.0) for e in both.engines()]
    assert [[(c.id, c.winner) for c in a] for a in acts] == [[(2, 10)], [(2, 10)]]
