"""Preemption with notice, checkpoints and requeues (docs/rfcs/preemption.md, issue 25).

Small cases worked by hand on one- and two-node machines: a victim gets its
notice (the ``preempt-signal``) and is preempted ``preempt-grace`` later,
unless it ends first (then it completed); a job's own
``attributes.system.preempt-grace`` shortens it; a regular reservation's
victims are noticed ahead, so its job starts when planned; a checkpointing
job keeps its work up to its notice, is requeued with the rest and restarts
before the campaign's other pending jobs, on the node where it ran.  A
victim noticed again (taken by a second regular job, its reservation
moved, a checkpoint notice) keeps the deadline of its first notice
(issue 37).
"""

from __future__ import annotations

import json
import math
import signal

import pytest

from fluxsched_py.batsim.v4driver import V4Driver
from fluxsched_py.engine import Engine, EngineError, EngineOptions, ResponseType
from fluxsched_py.replay.metrics import summarize
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.records import COMPLETED, PREEMPTED
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import WorkloadError, load_workload
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1

from .batsim_recordings import BATSIM_DATA
from .test_batsim_driver import begins, reply, submit, types


def spec(nnodes: int, duration: float, pa: float | None = None, grace: str | None = None, **user) -> dict:
    slot = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}
    system: dict = {"duration": duration}
    if pa is not None:
        system["preemptible-after"] = pa
    if grace is not None:
        system["preempt-grace"] = grace
    attrs: dict = {"system": system}
    if user:
        attrs["user"] = user
    return {
        "version": 1,
        "resources": [{"type": "node", "count": nnodes, "exclusive": True, "with": [slot]}],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": attrs,
    }


def started(r) -> list[int]:
    return [x.id for x in r.responses if x.type is ResponseType.SUCCESS]


def two_besteffort(grace: str = "60", a_grace: str | None = None) -> Engine:
    """Two one-node best-effort jobs, 100 and 101, running on an idle 2-node machine from t=0."""
    e = Engine(
        nodes_graph(2),
        {"queue-policy": "easy", "preempt-grace": grace},
        build_R=False,
        time_format=lambda t: f"t={t:.0f}s",
    )
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0, grace=a_grace))
    e.alloc(101, 0, 0, 0.0, spec(1, 1000, pa=0))
    assert sorted(started(e.schedule(0.0))) == [100, 101]
    return e


def test_options_parse():
    o = EngineOptions.parse({"preempt-grace": "1.5m", "preempt-signal": "usr2", "checkpoint-campaigns": "a, b"})
    assert (o.preempt_grace, o.preempt_signal, o.checkpoint_campaigns) == (90.0, int(signal.SIGUSR2), ("a", "b"))
    assert EngineOptions().preempt_signal == int(signal.SIGUSR1) == 10
    for bad in ({"preempt-grace": "soon"}, {"preempt-signal": "SIGNOPE"}, {"besteffort-fit": "maybe"}):
        with pytest.raises(EngineError, match=next(iter(bad))):
            EngineOptions.parse(bad)


def test_a_regular_job_that_can_start_now_waits_the_grace_time():
    e = two_besteffort()
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    r = e.schedule(10.0)
    assert not r.preempt and 1 not in started(r)
    assert sorted((n.id, n.signal, n.at) for n in r.notice) == [(100, 10, 70.0), (101, 10, 70.0)]
    reason = e.job(1).reply.sent.get("reason_pending", "")
    assert "preempting 2 best-effort jobs" in reason and "waiting at most until t=70s" in reason
    assert e.wakeup() == 70.0  # the driver passes again then
    r = e.schedule(69.0)
    assert not r.preempt and not r.notice and not started(r)
    r = e.schedule(70.0)
    assert sorted(a.id for a in r.preempt) == [100, 101]
    e.free(100)
    e.free(101)
    assert started(e.schedule(70.0)) == [1]
    assert e.stats["preemptions"] == 2 and e.stats["notices"] == 2
    e.check_invariants()


def test_a_victim_that_ends_in_its_grace_time_completed():
    e = two_besteffort()
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    e.schedule(10.0)
    e.free(100)  # it ends on its own at t=30
    r = e.schedule(30.0)
    assert not r.preempt and not started(r)  # 101 still holds its node
    r = e.schedule(70.0)
    assert [a.id for a in r.preempt] == [101]
    e.free(101)
    assert started(e.schedule(70.0)) == [1]
    assert e.stats["preemptions"] == 1


def test_victims_of_a_job_cancelled_in_their_grace_are_spared():
    """Job 1 (two nodes) arrives at t=10: 100 and 101 get their notice, to be
    preempted at t=70.  Job 1 is cancelled at t=30: at t=70 nobody is
    preempted, and both are lent again.  Job 2 (two nodes) at t=80 preempts
    them at once: their notice (t=10) is over."""
    e = two_besteffort()
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    assert len(e.schedule(10.0).notice) == 2
    assert [r.type for r in e.cancel(1)] == [ResponseType.CANCEL]
    r = e.schedule(70.0)
    assert not r.preempt and not r.notice
    assert e.stats["preemptions"] == 0 and e.wakeup() == math.inf
    e.alloc(2, 0, 0, 80.0, spec(2, 100))
    r = e.schedule(80.0)
    assert sorted(a.id for a in r.preempt) == [100, 101] and all(a.for_id == 2 for a in r.preempt)
    assert not r.notice
    e.free(100)
    e.free(101)
    assert started(e.schedule(80.0)) == [2]
    assert e.stats["preemptions"] == 2
    e.check_invariants()


def test_a_victim_preempted_before_the_cancel_stays_preempted_the_other_is_spared():
    """100 asks for a 5 s grace: preempted at t=15 for job 1; 101's grace
    ends at t=70.  Job 1 is cancelled at t=30: 101 is spared (lent again),
    100's preemption went out (it ends).  Job 2 (one node) arrives at t=40;
    its plan puts it on rank 1 (placement ``first``: the higher id among
    equals, and 101's lent node counts free), so 101 is its victim, with no
    new notice: preempted at t=70, a grace time after its notice at t=10."""
    e = two_besteffort(grace="60", a_grace="5s")
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    e.schedule(10.0)
    assert [a.id for a in e.schedule(15.0).preempt] == [100]
    e.cancel(1)
    e.free(100)
    assert not e.schedule(30.0).preempt
    e.alloc(2, 0, 0, 40.0, spec(1, 100))
    r = e.schedule(40.0)
    assert not started(r) and not r.preempt and not r.notice
    assert "waiting at most until t=70s" in e.job(2).reply.sent["reason_pending"]
    r = e.schedule(70.0)
    assert [(a.id, a.for_id) for a in r.preempt] == [(101, 2)]
    e.free(101)
    assert started(e.schedule(70.0)) == [2]
    assert e.stats["preemptions"] == 2
    e.check_invariants()


def test_a_jobs_own_grace_time_is_capped_by_the_option():
    e = two_besteffort(grace="60", a_grace="5s")
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    r = e.schedule(10.0)
    assert sorted((n.id, n.at) for n in r.notice) == [(100, 15.0), (101, 70.0)]
    assert [a.id for a in e.schedule(15.0).preempt] == [100]
    e2 = two_besteffort(grace="10", a_grace="1h")  # asking for more than the option gives the option
    e2.alloc(1, 0, 0, 10.0, spec(2, 100))
    assert sorted(n.at for n in e2.schedule(10.0).notice) == [20.0, 20.0]


def test_without_grace_the_preemption_is_at_once_and_no_notice():
    e = two_besteffort(grace="0")
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    r = e.schedule(10.0)
    assert sorted(a.id for a in r.preempt) == [100, 101] and not r.notice


@pytest.mark.parametrize("wait", ["grace", "checkpoint", "none"])
def test_a_reservations_victims_are_noticed_ahead_and_its_job_starts_on_time(wait):
    """Node 0 runs regular job 1 until t=100 (its walltime); node 1 a
    best-effort job.  Regular job 2 needs both nodes: reserved at t=100.
    Its victim (it does not checkpoint: the signal may end it) gets its
    notice 60 s before, at t=40 (a wakeup then), so at t=100 it is
    preempted at once and job 2 starts then, whatever ``preempt-wait``
    says (it is about jobs that can start now)."""
    e = Engine(nodes_graph(2), {"queue-policy": "easy", "preempt-grace": "60", "preempt-wait": wait}, build_R=False)
    e.alloc(1, 0, 0, 0.0, spec(1, 100))
    assert started(e.schedule(0.0)) == [1]
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    assert started(e.schedule(0.0)) == [100]
    e.alloc(2, 0, 0, 5.0, spec(2, 100))
    r = e.schedule(5.0)
    assert not r.notice and not r.preempt
    assert e.job(2).estimate == 100.0 and e.wakeup() == 40.0
    assert not e.schedule(39.0).notice
    r = e.schedule(40.0)
    assert [(n.id, n.at) for n in r.notice] == [(100, 100.0)] and not r.preempt
    e.free(1)
    r = e.schedule(100.0)
    assert [a.id for a in r.preempt] == [100]
    e.free(100)
    assert started(e.schedule(100.0)) == [2]


def early_end(wait: str, at: float) -> tuple[Engine, object]:
    """The reservation above, with job 1 ending early at ``at``: job 2
    can start now on node 1, held by best-effort job 100 (which does not
    checkpoint), whose notice came at t=40 if ``at`` is later."""
    e = Engine(
        nodes_graph(2),
        {"queue-policy": "easy", "preempt-grace": "60", "preempt-wait": wait},
        build_R=False,
        time_format=lambda t: f"t={t:.0f}s",
    )
    e.alloc(1, 0, 0, 0.0, spec(1, 100))
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    e.schedule(0.0)
    e.alloc(2, 0, 0, 5.0, spec(2, 100))
    e.schedule(5.0)
    if at > 40:
        assert [n.id for n in e.schedule(40.0).notice] == [100]
    e.free(1)
    return e, e.schedule(at)


@pytest.mark.parametrize("at", [20.0, 60.0])
def test_by_default_a_job_that_can_start_now_waits_for_the_notice(at):
    """Job 1 ends early: job 2 waits for 100's notice to be over, at t=80
    (noticed now, at t=20) or t=100 (noticed at t=40)."""
    e, r = early_end("grace", at)
    over = 80.0 if at < 40 else 100.0
    assert not r.preempt and 2 not in started(r)
    assert f"waiting at most until t={over:.0f}s" in e.job(2).reply.sent["reason_pending"]
    assert [a.id for a in e.schedule(over).preempt] == [100]


@pytest.mark.parametrize("wait", ["checkpoint", "none"])
@pytest.mark.parametrize("at", [20.0, 60.0])
def test_preempt_wait_checkpoint_or_none_preempts_a_victim_that_does_not_checkpoint_at_once(wait, at):
    """Under ``preempt-wait=checkpoint`` (or ``none``) job 2 does not wait
    for 100, which does not checkpoint: it is preempted at once, with no
    new notice, its notice cut short if it had one; job 2 starts as it
    would with no grace time."""
    e, r = early_end(wait, at)
    assert [a.id for a in r.preempt] == [100] and not r.notice
    assert "waiting" not in e.job(2).reply.sent["reason_pending"]
    e.free(100)
    assert started(e.schedule(at)) == [2]
    assert e.stats["preempted_node_seconds"] == at  # all its work: it keeps none
    e.check_invariants()


def test_preempt_wait_checkpoint_waits_for_a_checkpointing_victim_only():
    """Best-effort 100 checkpoints (first notice at t=2, FIRST_NOTICE), 101
    does not.  Regular job 1 needs both nodes at t=10: 101 is preempted at
    once, and job 1 waits for 100's notice to be 60 s old, at t=62.  Under
    ``none`` both are preempted at once, and 100 loses only the 8 s since
    its checkpoint at t=2."""
    for wait, at_once in (("checkpoint", [101]), ("none", [100, 101])):
        e = Engine(nodes_graph(2), {"queue-policy": "easy", "preempt-grace": "60", "preempt-wait": wait}, build_R=False)
        e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0, checkpoint="signal"))
        e.alloc(101, 0, 0, 0.0, spec(1, 1000, pa=0))
        e.schedule(0.0)
        assert [n.id for n in e.schedule(2.0).notice] == [100]
        e.alloc(1, 0, 0, 10.0, spec(2, 100))
        r = e.schedule(10.0)
        assert sorted(a.id for a in r.preempt) == at_once and not r.notice, wait
        if wait == "checkpoint":
            assert [a.id for a in e.schedule(62.0).preempt] == [100]
            assert e.stats["preempted_node_seconds"] == 10.0 + 60.0  # 101's 10 s; 100's since t=2
        else:
            assert e.stats["preempted_node_seconds"] == 10.0 + 8.0


def test_preempt_wait_option_parses():
    assert EngineOptions().preempt_wait == "grace"
    assert EngineOptions.parse({"preempt-wait": "checkpoint"}).preempt_wait == "checkpoint"
    with pytest.raises(EngineError, match="preempt-wait"):
        EngineOptions.parse({"preempt-wait": "sometimes"})


def workload(tmp_path, jobs: list[dict], nb_res: int = 1):
    profiles = {f"p{j['runtime']}": {"type": "delay", "delay": j["runtime"]} for j in jobs}
    rows = []
    for j in jobs:
        row = {k: v for k, v in j.items() if k != "runtime"}
        row["profile"] = f"p{j['runtime']}"
        rows.append(row)
    p = tmp_path / "w.json"
    p.write_text(json.dumps({"nb_res": nb_res, "jobs": rows, "profiles": profiles}))
    return load_workload(p)


def test_a_checkpointing_job_keeps_its_work_and_restarts_before_the_campaigns_others(tmp_path):
    """One node, a 10 s grace time.  Best-effort jobs 1 (checkpoints, 100 s)
    and 2 (does not, 100 s) at t=0: 1 runs, and being lent it gets its
    notice (a checkpoint) 2 s after its start (FIRST_NOTICE), then every
    10 s: at t=2, 12, 22, 32, 42.  Regular job 3 (20 s) arrives at t=50:
    1's first notice is 48 s old, so 1 is preempted at once, losing the 8 s
    since its last checkpoint; 3 runs 50-70.  Then 1, requeued at t=50
    after 2 was submitted, restarts first, at t=70, with 58 s left: done at
    t=128; 2 runs 128-228."""
    w = workload(
        tmp_path,
        [
            {"id": 1, "subtime": 0, "walltime": 500, "res": 1, "runtime": 100, "preemptible-after": 0,
             "checkpoint": "signal"},
            {"id": 2, "subtime": 0, "walltime": 500, "res": 1, "runtime": 100, "preemptible-after": 0},
            {"id": 3, "subtime": 50, "walltime": 20, "res": 1, "runtime": 20},
        ],
    )  # fmt: skip
    res = replay(w, nodes_graph(1), {"queue-policy": "easy", "preempt-grace": "10"})
    rec = {r.job.id: r for r in res.records}
    assert (rec[3].start, rec[3].finish) == (50.0, 70.0)
    assert (rec[1].start, rec[1].finish, rec[1].state) == (70.0, 128.0, COMPLETED)
    assert (rec[1].lost, rec[1].recovered, rec[1].preemptions) == (8.0, 42.0, 1)
    assert rec[1].notices >= 5  # 2..42, then its second run's
    assert (rec[2].start, rec[2].finish) == (128.0, 228.0)
    s = summarize(res)
    assert s.besteffort_completed_nh == pytest.approx(200 / 3600)  # both jobs' whole run time
    assert s.besteffort_lost_nh == pytest.approx(8 / 3600)
    assert s.besteffort_recovered_nh == pytest.approx(42 / 3600)
    assert s.preemptions == 1


def test_without_checkpoint_the_notice_keeps_nothing(tmp_path):
    """The same without the checkpoint: job 1 loses its 60 s and is not requeued."""
    w = workload(
        tmp_path,
        [
            {"id": 1, "subtime": 0, "walltime": 500, "res": 1, "runtime": 100, "preemptible-after": 0},
            {"id": 3, "subtime": 50, "walltime": 20, "res": 1, "runtime": 20},
        ],
    )
    res = replay(w, nodes_graph(1), {"queue-policy": "easy", "preempt-grace": "10"})
    rec = {r.job.id: r for r in res.records}
    assert (rec[1].state, rec[1].finish, rec[1].lost, rec[1].recovered) == (PREEMPTED, 60.0, 60.0, 0.0)


def test_a_victim_that_ends_in_its_grace_counts_as_completed_in_the_replay(tmp_path):
    w = workload(
        tmp_path,
        [
            {"id": 1, "subtime": 0, "walltime": 500, "res": 1, "runtime": 100, "preemptible-after": 0},
            {"id": 3, "subtime": 50, "walltime": 20, "res": 1, "runtime": 20},
        ],
    )
    res = replay(w, nodes_graph(1), {"queue-policy": "easy", "preempt-grace": "60"})
    rec = {r.job.id: r for r in res.records}
    assert (rec[1].state, rec[1].finish, rec[1].lost, rec[1].notices) == (COMPLETED, 100.0, 0.0, 1)
    assert rec[3].start == 100.0  # it waited less than its 60 s
    assert summarize(res).preemptions == 0


def test_the_replay_preempts_a_victim_taken_again_at_its_first_notices_deadline():
    """The input of the real Batsim run ``victim-again``
    (``t/data/batsim/features/victim_again4.json``, its description says
    how): best-effort job 3 gets its notice at t=40 for job 4's reservation,
    is spared when job 4 starts elsewhere at t=70, and is taken by job 5 at
    t=80.  It is preempted at t=100, 60 s after its one notice, not 60 s
    after the second taking (t=140), and job 5 starts then."""
    w = load_workload(BATSIM_DATA / "features" / "victim_again4.json")
    res = replay(w, nodes_graph(4), {"queue-policy": "easy", "preempt-grace": "60"})
    rec = {r.job.id: r for r in res.records}
    assert (rec[3].state, rec[3].finish, rec[3].notices) == (PREEMPTED, 100.0, 1)
    assert (rec[4].start, rec[5].start) == (70.0, 100.0)
    assert summarize(res).preemptions == 1


def test_a_requeued_job_prefers_the_node_it_ran_on(tmp_path):
    """Two nodes, placement ``first`` (regular jobs take the highest id
    among equals, best-effort jobs the lowest).  Best-effort job 1 (40 s)
    goes to rank 0, job 2 (checkpoints, 100 s) to rank 1.  At t=50, rank 0
    is free and regular jobs 3 and 4 (20 s each) arrive: 3 takes rank 1
    (lent, the higher id) and preempts 2 at once (its notice is old), 4 takes
    rank 0.  At t=70 both ranks are free: 2 restarts on rank 1, where it ran
    (the far end would be rank 0), with the 58 s left after its checkpoint
    at t=42 (its notices: 2 s after its start, then every 10 s)."""
    w = workload(
        tmp_path,
        [
            {"id": 1, "subtime": 0, "walltime": 500, "res": 1, "runtime": 40, "preemptible-after": 0},
            {"id": 2, "subtime": 0, "walltime": 500, "res": 1, "runtime": 100, "preemptible-after": 0,
             "checkpoint": "signal"},
            {"id": 3, "subtime": 50, "walltime": 20, "res": 1, "runtime": 20},
            {"id": 4, "subtime": 50, "walltime": 20, "res": 1, "runtime": 20},
        ],
        nb_res=2,
    )  # fmt: skip
    res = replay(w, nodes_graph(2), {"queue-policy": "easy", "preempt-grace": "10"})
    rec = {r.job.id: r for r in res.records}
    assert str(rec[1].ranks) == "0" and str(rec[3].ranks) == "1" and str(rec[4].ranks) == "0"
    assert (rec[2].preemptions, rec[2].lost, rec[2].recovered) == (1, 8.0, 42.0)
    assert (rec[2].start, rec[2].finish, str(rec[2].ranks)) == (70.0, 128.0, "1")


def two_clusters(affinity: str | None = None) -> Engine:
    """Four nodes, ranks 0-1 ``lyon``, 2-3 ``grenoble``; ``policy=high``, so
    best-effort jobs take the lowest free id and regular ones the highest.
    Best-effort jobs 100-103 (campaign ``c``, 1,000 s) start at t=0 on
    ranks 0, 1, 2, 3 (with ``affinity=c:lyon`` too: Lyon first, then the
    rest by id); 103 checkpoints and gets its first notice at the pass at
    t=10 (due at t=2, FIRST_NOTICE after its start).  At t=20, 100 (rank 0) and 102 (rank 2) end.  At
    t=30 regular job 1 (one node) arrives: its plan takes rank 3 (the
    highest; lent nodes count free), so 103 is preempted at once (its notice
    is over) and requeued as 200, as the Flux module does."""
    opts = {"queue-policy": "easy", "policy": "high", "preempt-grace": "10"}
    if affinity:
        opts["affinity"] = affinity
    R = hosts_rv1([f"node{i}" for i in range(4)], 1)
    R["execution"]["properties"] = {"lyon": "0-1", "grenoble": "2-3"}
    e = Engine(ResourceGraph.from_rv1(R), opts, build_R=False)
    for j in range(100, 104):
        e.alloc(j, 0, 0, 0.0, spec(1, 1000, pa=0, campaign="c", **({"checkpoint": "signal"} if j == 103 else {})))
    r = e.schedule(0.0)
    assert {x.id: list(x.resources.ranks) for x in r.responses if x.type is ResponseType.SUCCESS} == {
        100: [0],
        101: [1],
        102: [2],
        103: [3],
    }
    assert [n.id for n in e.schedule(10.0).notice] == [103]
    e.free(100)
    e.free(102)
    e.schedule(20.0)
    e.alloc(1, 0, 0, 30.0, spec(1, 100))
    r = e.schedule(30.0)
    assert [(a.id, a.requeue) for a in r.preempt] == [(103, True)]
    e.free(103)
    e.alloc(200, 0, 0, 30.0, spec(1, 1000, pa=0, campaign="c", checkpoint="signal", **{"requeued-from": 103}))
    return e


def test_a_requeued_job_whose_node_is_busy_restarts_in_the_cluster_where_it_ran():
    """Rank 3, where 103 ran, is job 1's now; ranks 0 (Lyon) and 2
    (Grenoble) are free.  The far end would give 200 rank 0; it restarts on
    rank 2, in Grenoble, where it ran."""
    e = two_clusters()
    starts = {x.id: list(x.resources.ranks) for x in e.schedule(30.0).responses if x.type is ResponseType.SUCCESS}
    assert starts == {1: [3], 200: [2]}
    e.check_invariants()


def test_a_requeued_job_goes_to_its_campaigns_affinity_property_first():
    """With ``affinity=c:lyon`` the campaign's property comes before the
    cluster where it ran: 200 restarts on rank 0 (Lyon), not rank 2."""
    e = two_clusters("c:lyon")
    starts = {x.id: list(x.resources.ranks) for x in e.schedule(30.0).responses if x.type is ResponseType.SUCCESS}
    assert starts == {1: [3], 200: [0]}
    e.check_invariants()


def test_checkpoint_must_be_signal(tmp_path):
    with pytest.raises(WorkloadError, match=r'jobs\[0\]: job 1: .checkpoint. must be "signal", got "yes"'):
        workload(tmp_path, [{"id": 1, "subtime": 0, "walltime": 5, "res": 1, "runtime": 1, "checkpoint": "yes"}])


def test_checkpoint_campaigns_option_makes_a_campaigns_jobs_checkpoint():
    e = Engine(nodes_graph(1), {"preempt-grace": "10", "checkpoint-campaigns": "c1"}, build_R=False)
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0, campaign="c1"))
    e.schedule(0.0)
    e.alloc(1, 0, 0, 5.0, spec(1, 10))
    e.schedule(5.0)
    (a,) = e.schedule(15.0).preempt
    assert a.id == 100 and a.requeue


def test_batsim_v4_has_no_signal_so_the_kill_goes_out_at_the_end_of_the_grace_time():
    """The v4 protocol has no signal: the notice is dropped, the driver asks
    to be called back when the grace time ends, and the KILL_JOB goes out then,
    in the reply that starts the regular job."""
    d = V4Driver(["queue-policy=easy", "policy=low", "preempt-grace=30"])
    reply(d, 0.0, begins(2))
    be = [{"id": f"w0!{i}", "res": 1, "profile": "p", "walltime": 100.0, "preemptible-after": 0} for i in (1, 2)]
    r = reply(d, 0.0, *((0.0, "JOB_SUBMITTED", {"job_id": j["id"], "job": j}) for j in be))
    assert types(r) == ["EXECUTE_JOB"] * 2
    r = reply(d, 5.0, submit(5.0, "w0!10", 2))
    assert types(r) == ["CALL_ME_LATER"] and r["events"][0]["data"]["timestamp"] == 35.0
    r = reply(d, 35.0, (35.0, "REQUESTED_CALL", {}))
    assert types(r) == ["KILL_JOB", "EXECUTE_JOB"]
    assert sorted(r["events"][0]["data"]["job_ids"]) == ["w0!1", "w0!2"]


# -- a victim noticed again keeps its first deadline (issue 37) ---------------------
#
# A victim's deadline is its first notice plus its grace time
# (``BestEffort._first_noticed``): a later regular job that takes it, a plan
# that moves, a checkpoint notice, none of them gives it a new one, so it is
# never preempted later than that (the regular job waiting for it would wait
# longer) nor earlier (it was promised the grace time).


def test_a_victim_taken_again_by_a_second_regular_job_keeps_its_first_deadline():
    """Job 1 (two nodes) at t=10 notices 100 and 101 (deadline t=70); it is
    cancelled at t=20, so they are spared.  Job 2 (two nodes) at t=40 takes
    them again: no new notice, no preemption at once (their grace is not
    over), and not a grace time from t=40 (t=100): at t=70."""
    e = two_besteffort()
    e.alloc(1, 0, 0, 10.0, spec(2, 100))
    assert sorted((n.id, n.at) for n in e.schedule(10.0).notice) == [(100, 70.0), (101, 70.0)]
    e.cancel(1)
    assert not e.schedule(20.0).preempt
    e.alloc(2, 0, 0, 40.0, spec(2, 100))
    r = e.schedule(40.0)
    assert not r.notice and not r.preempt and not started(r)
    assert "waiting at most until t=70s" in e.job(2).reply.sent["reason_pending"]
    assert e.wakeup() == 70.0
    assert not e.schedule(69.0).preempt
    assert sorted((a.id, a.for_id) for a in e.schedule(70.0).preempt) == [(100, 2), (101, 2)]
    e.free(100)
    e.free(101)
    assert started(e.schedule(70.0)) == [2]
    assert e.stats["notices"] == 2 and e.stats["preemptions"] == 2
    e.check_invariants()


def test_a_victim_noticed_ahead_of_a_reservation_that_moves_later_is_not_noticed_again():
    """The reservation of test_a_reservations_victims_are_noticed_ahead_...:
    100 is noticed at t=40, 60 s before job 2's reservation at t=100.  Job 1's
    expiration moves to t=200, and the reservation with it: 100 is not noticed
    again at t=140 (its deadline stays t=100), and when job 1 ends at t=150
    and job 2 can start, 100 is preempted at once, not a grace time later."""
    e = Engine(nodes_graph(2), {"queue-policy": "easy", "preempt-grace": "60"}, build_R=False)
    e.alloc(1, 0, 0, 0.0, spec(1, 100))
    e.schedule(0.0)
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    e.schedule(0.0)
    e.alloc(2, 0, 0, 5.0, spec(2, 100))
    e.schedule(5.0)
    assert [(n.id, n.at) for n in e.schedule(40.0).notice] == [(100, 100.0)]
    e.expiration(1, 200.0)
    r = e.schedule(41.0)
    assert e.job(2).estimate == 200.0 and not r.notice and not r.preempt
    for now in (100.0, 140.0):
        r = e.schedule(now)
        assert not r.notice and not r.preempt, now
    e.free(1)
    r = e.schedule(150.0)
    assert [a.id for a in r.preempt] == [100] and not r.notice
    e.free(100)
    assert started(e.schedule(150.0)) == [2]
    assert e.stats["notices"] == 1


def test_a_checkpointing_victims_deadline_is_its_first_notice_not_its_next_checkpoint():
    """100 checkpoints: its first notice at t=2 (FIRST_NOTICE), the next due at
    t=62.  Regular job 1 (two nodes, with 101 which does not checkpoint) at
    t=30 waits for 100 until t=62, its first notice plus 60 s, not t=90
    (a grace time from t=30); 101 gets its notice at t=30 and its deadline
    t=90; at t=62 100 is preempted with no checkpoint notice first."""
    e = Engine(nodes_graph(2), {"queue-policy": "easy", "preempt-grace": "60"}, build_R=False)
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0, checkpoint="signal"))
    e.alloc(101, 0, 0, 0.0, spec(1, 1000, pa=0))
    e.schedule(0.0)
    assert [(n.id, n.at) for n in e.schedule(2.0).notice] == [(100, 62.0)]
    e.alloc(1, 0, 0, 30.0, spec(2, 100))
    r = e.schedule(30.0)
    assert [(n.id, n.at) for n in r.notice] == [(101, 90.0)] and not r.preempt
    assert not e.schedule(61.0).preempt
    r = e.schedule(62.0)
    assert [a.id for a in r.preempt] == [100] and not r.notice
    assert [a.id for a in e.schedule(90.0).preempt] == [101]
    assert e.stats["notices"] == 2


def test_a_checkpointing_victim_noticed_twice_is_preempted_at_once_after_its_first_deadline():
    """100 checkpoints: notices at t=2 and t=62 (each a checkpoint).  Regular
    job 1 at t=70 preempts it at once: its deadline was t=62, a grace time
    after its first notice; the checkpoint notice at t=62 did not move it to
    t=122.  It loses the 8 s since that checkpoint."""
    e = Engine(nodes_graph(1), {"queue-policy": "easy", "preempt-grace": "60"}, build_R=False)
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0, checkpoint="signal"))
    e.schedule(0.0)
    assert [n.at for n in e.schedule(2.0).notice] == [62.0]
    assert [n.at for n in e.schedule(62.0).notice] == [122.0]
    e.alloc(1, 0, 0, 70.0, spec(1, 100))
    r = e.schedule(70.0)
    assert [a.id for a in r.preempt] == [100] and not r.notice
    assert e.stats["preempted_node_seconds"] == 8.0
