"""End-of-campaign duplication (``duplicates=``, engine/duplicates.py), worked by hand.

The engine is driven as a driver would: ``alloc``, ``schedule``, ``free``,
then ``engine.copies(now)``; a :class:`Duplicate` is carried
out by allocating a copy (``attributes.system.duplicate-of``), a
:class:`CancelCopy` by a free (running) or a cancel (pending).  Expected
copies, winners and run times are worked out from the rules in
docs/rfcs/campaigns.md, not from a run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.engine import Engine, EngineError, EngineOptions, JobState, ResponseType
from fluxsched_py.engine.duplicates import CancelCopy, Duplicate
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.records import CANCELLED, COMPLETED
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import Workload, WorkloadJob

from .test_affinity import jobspec

ROOT = Path(__file__).resolve().parents[1]


def be(campaign="c", duration=1000.0, copy_of=None, window=0):
    spec = jobspec(1, duration, campaign)
    spec["attributes"]["system"]["preemptible-after"] = window
    if copy_of is not None:
        spec["attributes"]["system"]["duplicate-of"] = copy_of
    return spec


def engine(nodes, **opts):
    return Engine(nodes_graph(nodes), {"duplicates": "1", **opts})


def started(e, now):
    out = {r.id: list(r.resources.ranks) for r in e.schedule(now).responses if r.type is ResponseType.SUCCESS}
    e.check_invariants()
    return out


def test_a_copy_of_the_last_running_job_wins_and_its_original_is_cancelled():
    e = engine(2)
    e.alloc(1, 0, 0, 0.0, be())
    e.alloc(2, 0, 0, 0.0, be())
    assert set(started(e, 0.0)) == {1, 2}
    assert e.copies(0.0) == []  # no node idle
    e.free(1)  # job 1 ran 100 s: the campaign's history is [100]
    started(e, 100.0)
    (d,) = e.copies(100.0)
    assert isinstance(d, Duplicate) and d.of == 2
    e.alloc(10, 0, 0, 100.0, be(copy_of=2))
    assert started(e, 100.0) == {10: [e.job(1) is None and 0]}  # job 1's node, rank 0 (job 1 is gone)
    assert e.copies(100.0) == []  # one copy per job (duplicates=1)
    e.free(10)  # the copy ends first, after 50 s
    started(e, 150.0)
    (c,) = e.copies(150.0)
    assert c == CancelCopy(2, 10, c.note) and "finished first" in c.note
    e.free(2)
    started(e, 150.0)
    assert e.copies(150.0) == []
    assert e.stats["duplicates_requested"] == e.stats["duplicates_started"] == e.stats["duplicates_won"] == 1
    assert e.stats["duplicates_cancelled"] == 0  # the loser was the original, not a copy
    row = e.hooks.stats(150.0)["c"]
    # the cancelled original is no run time: 100 s (job 1) and 50 s (the copy)
    assert (row["completed"], row["mean_runtime"], row["running"], row["pending"]) == (2, 75.0, 0, 0)


def test_the_original_wins_and_the_copy_is_cancelled_running_or_pending():
    e = engine(3, **{"duplicates": "2"})
    e.alloc(1, 0, 0, 0.0, be())
    started(e, 0.0)
    acts = e.copies(0.0)  # two idle nodes, at most two copies of job 1
    assert [a.of for a in acts] == [1, 1]
    e.alloc(10, 0, 0, 0.0, be(copy_of=1))
    started(e, 0.0)
    e.alloc(11, 0, 0, 0.0, be(copy_of=1))
    e.alloc(12, 0, 0, 0.0, jobspec(1))  # a regular job takes the last node first
    assert started(e, 5.0) == {12: [2]}
    e.free(1)
    assert started(e, 30.0) == {}  # copy 11 is being cancelled: it does not start on job 1's node
    cancels = e.copies(30.0)
    assert sorted((c.id, c.winner) for c in cancels) == [(10, 1), (11, 1)]
    assert e.job(10).state is JobState.RUNNING and e.job(11).state is JobState.PENDING
    e.free(10)
    assert [r.type for r in e.cancel(11)] == [ResponseType.CANCEL]
    assert e.stats["duplicates_cancelled"] == 2 and e.stats["duplicates_won"] == 0
    assert e.duplicates.copies() == frozenset() and not e.duplicates.is_loser(10) and not e.duplicates.is_loser(11)
    assert e.hooks.stats(30.0)["c"]["completed"] == 1  # job 1's 30 s; the cancelled copy is no run time


def test_copies_go_to_the_longest_predicted_remaining_run_time():
    # Five nodes.  Four history jobs (101-104) end at 100, 200, 400 and 800
    # s; jobs 1, 2, 3 start on the nodes they free at 100, 200 and 400.  At
    # t=1000 they have run 900, 800 and 600 s.  Predicted remaining (the
    # campaign's completed run times 100, 200, 400, 800): job 1 outran all
    # of them, as long again: 900 s; job 2 too: 800 s; job 3: mean(800) -
    # 600 = 200 s.  Two idle nodes: copies of jobs 1 and 2, in that order.
    e = engine(5)
    for j in (101, 102, 103, 104):
        e.alloc(j, 0, 0, 0.0, be(duration=1e4))
    started(e, 0.0)
    e.copies(0.0)  # one idle node, no history: a copy of job 101 (never submitted here)
    for j, freed, t in ((1, 101, 100.0), (2, 102, 200.0), (3, 103, 400.0)):
        e.alloc(j, 0, 0, t, be(duration=1e4))
        e.free(freed)
        assert j in started(e, t)
    e.free(104)
    started(e, 800.0)
    acts = e.copies(1000.0)
    assert [a.of for a in acts] == [1, 2]
    c = e.hooks.runtimes.get("c")
    assert [c.residual(x) for x in (900.0, 800.0, 600.0, 50.0)] == [900.0, 800.0, 200.0, 375.0 - 50.0]
    # never past the walltime: with 1000 s walltimes, jobs 1, 2, 3 have 100, 200, 400 s left at most
    assert [c.residual(x, 1000.0) for x in (900.0, 800.0, 600.0)] == [100.0, 200.0, 200.0]


def test_no_copy_while_the_campaign_has_pending_jobs_or_best_effort_work_of_no_campaign_waits():
    e = engine(3)
    for j in (1, 2, 3, 4):
        e.alloc(j, 0, 0, 0.0, be())
    started(e, 0.0)
    e.free(1)
    assert set(started(e, 10.0)) == {4}  # campaign c's last pending job
    assert e.copies(10.0) == []  # no idle node
    e.free(2)
    started(e, 20.0)
    assert [type(a) for a in e.copies(20.0)] == [Duplicate]  # one idle node, c all running
    e = engine(2)
    e.alloc(1, 0, 0, 0.0, be())
    e.alloc(2, 0, 0, 0.0, be(campaign="d"))
    e.alloc(3, 0, 0, 0.0, be(campaign="d"))  # campaign d waits: no copy of d's jobs
    started(e, 0.0)
    assert e.copies(0.0) == []  # and no idle node for c's
    e.free(1)
    assert set(started(e, 5.0)) == {3}
    e.alloc(4, 0, 0, 5.0, be(campaign=None))  # best-effort work of no campaign waits
    e.free(2)
    assert set(started(e, 6.0)) == {4}
    e.alloc(5, 0, 0, 6.0, be(campaign=None))
    started(e, 6.0)
    assert e.copies(6.0) == []


def test_duplicates_running_bounds_live_copies_and_zero_is_off():
    def run(opts):
        e = Engine(nodes_graph(5), opts)
        e.alloc(1, 0, 0, 0.0, be())
        e.alloc(2, 0, 0, 0.0, be())
        started(e, 0.0)
        return [a.of for a in e.copies(0.0)]

    assert run({}) == []
    assert run({"duplicates": "1"}) == [1, 2]  # no history: walltime left, equal; lower id first
    assert run({"duplicates": "3"}) == [1, 2, 1]  # three idle nodes: one copy each first, then a second
    assert run({"duplicates": "3", "duplicates-running": "2"}) == [1, 2]
    with pytest.raises(EngineError, match="duplicates='x'"):
        EngineOptions.parse({"duplicates": "x"})


def test_a_dropped_copy_frees_its_room_and_its_job_is_not_asked_about_again():
    # Four nodes, two campaigns of one job each, room for one live copy: job 1's copy is asked
    # for first (lower id).  The driver drops it (the Flux module copies only the owner's jobs):
    # the room goes to job 2, and job 1 is not asked about again.
    e = Engine(nodes_graph(4), {"duplicates": "2", "duplicates-running": "1"})
    e.alloc(1, 0, 0, 0.0, be("c"))
    e.alloc(2, 0, 0, 0.0, be("d"))
    started(e, 0.0)
    assert [a.of for a in e.copies(0.0)] == [1]
    assert e.copies(0.0) == []  # the copy asked for takes the room
    e.copy_dropped(1)
    assert [a.of for a in e.copies(0.0)] == [2]
    e.copy_dropped(2)
    assert e.copies(0.0) == [] and e.copies(10.0) == []  # neither again, though two nodes are idle
    e.free(1)  # no group is left: its end cancels nothing
    started(e, 10.0)
    assert e.copies(10.0) == []
    e.copy_dropped(1)  # a job gone, or a copy never asked for: nothing to do
    e.check_invariants()


def test_a_copy_is_preempted_before_other_best_effort_jobs_with_fewest():
    # Three nodes: job 1 (campaign c, started at 0), its copy 10 (started at
    # 100) and job 2 of campaign d, started at 150.  A regular one-node job
    # at 200 preempts one: by lost work, job 2 (50 node-s) would go; the copy
    # goes first.
    e = Engine(nodes_graph(3), {"duplicates": "1", "preempt-victims": "fewest"})
    e.alloc(1, 0, 0, 0.0, be())
    started(e, 0.0)
    (d,) = [a for a in e.copies(0.0) if a.of == 1][:1] or [None]
    assert d is not None
    e.alloc(10, 0, 0, 100.0, be(copy_of=1))
    started(e, 100.0)
    e.alloc(2, 0, 0, 150.0, be(campaign="d"))
    started(e, 150.0)
    e.alloc(3, 0, 0, 200.0, jobspec(1))
    res = e.schedule(200.0)
    assert [(p.id, p.for_id) for p in res.preempt] == [(10, 3)]


def test_a_copy_that_arrives_after_its_group_was_won_is_cancelled_at_once():
    e = engine(2)
    e.alloc(1, 0, 0, 0.0, be())
    started(e, 0.0)
    (d,) = e.copies(0.0)
    e.free(1)  # the original ends before the copy is submitted
    started(e, 10.0)
    assert e.copies(10.0) == []
    e.alloc(10, 0, 0, 10.0, be(copy_of=1))
    (c,) = e.copies(10.0)
    assert (c.id, c.winner) == (10, 1)


def campaign_workload(runtimes):
    from fluxsched_py.jobspec import parse_jobspec

    request = parse_jobspec(json.dumps(be(), sort_keys=True))
    jobs = [WorkloadJob(i + 1, str(i + 1), 0.0, request, 1000.0, rt, 1, campaign="c") for i, rt in enumerate(runtimes)]
    return Workload(jobs, 3)


def test_replay_same_run_time_the_copy_starts_with_its_original_and_loses():
    # 3 nodes, run times 10, 10, 10, 100: jobs 1-3 end at 10, job 4 starts
    # then; two nodes are idle, one copy (duplicates=1) starts at 10 with the
    # same 100 s: both end at 110, the original first (it was freed first).
    r = replay(campaign_workload([10, 10, 10, 100]), nodes_graph(3), {"duplicates": "1"}, check=Engine.check_invariants)
    assert [(x.start, x.finish, x.state) for x in r.records][-1] == (10.0, 110.0, COMPLETED)
    ((c),) = r.copies
    assert (c.job.id, c.start, c.finish, c.state, c.wasted, c.lost) == (5, 10.0, 110.0, CANCELLED, 100.0, 0.0)


def test_replay_campaign_run_time_the_first_to_finish_wins():
    r = replay(
        campaign_workload([10, 10, 10, 100]),
        nodes_graph(3),
        {"duplicates": "1"},
        duplicate_runtime="campaign",
        check=Engine.check_invariants,
    )
    (c,) = r.copies
    orig = r.records[3]
    assert c.job.runtime in (10, 100) and c.start == 10.0
    if c.job.runtime == 10:  # the copy ends at 20: it wins, job 4 completes then
        assert (c.state, c.finish, orig.state, orig.finish) == (COMPLETED, 20.0, COMPLETED, 20.0)
        assert orig.note == "completed by its copy 5" and r.stats["duplicates_won"] == 1
    else:
        assert (c.state, orig.finish) == (CANCELLED, 110.0)


def test_replay_json_reports_copies_and_campaign_makespan(tmp_path):
    doc = {
        "nb_res": 3,
        "jobs": [{"id": i + 1, "submit": 0, "runtime": rt, "jobspec": be()} for i, rt in enumerate([10, 10, 10, 100])],
    }
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(doc))
    exe = Path(sys.executable).with_name("fluxsched-py")
    out = subprocess.run(
        [str(exe), "replay", str(path), "--queue-policy", "fcfs", "--duplicates", "1", "--json", "--no-progress"],
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(out.stdout)
    s = row[0] if isinstance(row, list) else row
    s = s.get("summary", s)
    assert (s["duplicates"], s["duplicates_cancelled"], s["duplicates_won"]) == (1, 1, 0)
    assert s["duplicates_wasted_nh"] == pytest.approx(100 / 3600)
    assert s["campaigns"] == [["c", 110.0]]


def test_the_batsim_driver_refuses_duplicates_without_dynamic_jobs_in_one_line():
    exe = Path(sys.executable).with_name("fluxsched-py")
    out = subprocess.run([str(exe), "batsim", "--duplicates", "1"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr == (
        "fluxsched-py batsim: --duplicates 1: copies are registered with Batsim only with --dynamic-jobs "
        "(and batsim --enable-dynamic-jobs; docs/rfcs/batsim-v4.md)\n"
    )


def test_replay_a_preempted_original_is_completed_by_its_copy():
    # 2 nodes.  Job 1 (campaign c, 100 s, submitted at 5) starts at 5 and
    # its first copy (same run time) on the other node.  At 10 a regular
    # 1-node job (50 s) preempts one of them (the plan's placement decides
    # which); the other carries on and does job 1's work by 105.  At 60 the
    # regular job ends: a second copy starts there, cancelled at 105.
    from fluxsched_py.jobspec import parse_jobspec
    from fluxsched_py.replay.metrics import summarize

    reg = parse_jobspec(json.dumps(jobspec(1, 1000.0), sort_keys=True))
    w = campaign_workload([100])
    w.jobs[0].submit = 5.0
    w.jobs.append(WorkloadJob(2, "2", 10.0, reg, 1000.0, 50.0, 1))
    w.nb_res = 2
    r = replay(w, nodes_graph(2), {"duplicates": "1"}, check=Engine.check_invariants)
    orig, regular = r.records
    first, second = r.copies
    assert regular.start == 10.0 and r.stats["preemptions"] == 1
    assert (orig.state, orig.finish) == (COMPLETED, 105.0) and dict(summarize(r).campaigns)["c"] == 100.0
    assert (second.start, second.state, second.finish, second.wasted) == (60.0, CANCELLED, 105.0, 45.0)
    if orig.preemptions:  # the original was the victim: its first copy did its work
        assert orig.won_by == first.job.id and (first.state, first.finish) == (COMPLETED, 105.0)
    else:  # the first copy was the victim
        assert orig.won_by is None and (first.state, first.finish, first.lost) == ("COMPLETED_KILLED", 10.0, 5.0)
    assert summarize(r).duplicates_wasted_nh == pytest.approx((45.0 + 5.0) / 3600)
