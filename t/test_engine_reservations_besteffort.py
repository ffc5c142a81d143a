"""Best-effort jobs are kept off advance reservation windows (docs/rfcs/reservations.md).

Hand-counted on 2 whole nodes, placement low (so best-effort jobs take the
far end, high: node 1 first).  The window ``maint`` holds rank 1 over
[100, 200).  A best-effort job is started only where no window opens
before its walltime ends; one already running on rank 1 when the window is
added gets its notice ``preempt-grace`` before 100 and is preempted at 100,
and the window's own job starts on rank 1 once it is freed.
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import Engine
from fluxsched_py.engine.reservations import ReservationError
from fluxsched_py.ids import IdSet
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.records import PREEMPTED
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import read_batsim

from .test_preempt_grace import spec, started


def engine(grace="0"):
    options = {"queue-policy": "easy", "policy": "low", "preempt-grace": grace}
    e = Engine(nodes_graph(2), options, build_R=False, time_format=lambda t: f"t={t:.0f}")
    e.reservations.owner = 0
    return e


def maint(e, now, ranks="1", flags=()):
    e.reservations.add("maint", 100.0, 200.0, ranks=IdSet.parse(ranks), now=now, flags=flags)


def ranks(e, jobid):
    return str(e.job(jobid).resources.ranks)


def in_maint(nnodes, duration):
    s = spec(nnodes, duration)
    s["attributes"]["system"]["reservation"] = "maint"
    return s


def test_a_best_effort_job_starts_only_where_no_window_opens_before_its_walltime_ends():
    e = engine()
    maint(e, 0.0)
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))  # would run at 100: not on rank 1, so on rank 0
    e.alloc(101, 0, 0, 0.0, spec(1, 50, pa=0))  # ends at 50, before the window: rank 1
    e.alloc(102, 0, 0, 0.0, spec(1, 1000, pa=0))  # rank 0 is taken, rank 1 is reserved at 100
    assert sorted(started(e.schedule(0.0))) == [100, 101]
    assert (ranks(e, 100), ranks(e, 101)) == ("0", "1")
    assert e.job(102).state.value == "pending"
    e.free(101)
    assert started(e.schedule(50.0)) == []  # still 1000 s: would run into the window
    e.free(100)
    assert started(e.schedule(60.0)) == [102] and ranks(e, 102) == "0"


def test_without_the_window_the_far_end_takes_rank_1_first():
    e = engine()
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    assert started(e.schedule(0.0)) == [100] and ranks(e, 100) == "1"


@pytest.mark.parametrize("pa", [0, 500])  # lent, or still in its protected window: evicted alike
def test_a_job_on_the_window_when_it_opens_is_preempted_then_though_the_window_has_no_job(pa):
    e = engine()
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=pa))
    assert started(e.schedule(0.0)) == [100] and ranks(e, 100) == "1"
    maint(e, 10.0)  # added while it runs there
    r = e.schedule(20.0)
    assert not r.preempt and not r.notice
    assert e.wakeup() == 100.0  # the window opens
    r = e.schedule(100.0)
    assert [(a.id, a.note) for a in r.preempt] == [(100, "preempted: reservation maint opens at t=100")]
    assert not e.schedule(110.0).preempt  # once
    assert e.stats["preemptions"] == 1


@pytest.mark.parametrize(
    ("pa", "note"), [(0, "preempted for job 1"), (500, "preempted: reservation maint opens at t=100")]
)
def test_the_windows_job_starts_once_the_job_there_is_freed(pa, note):
    # lent: the window's job preempts it as any regular job does; protected: the window clears it
    e = engine()
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=pa))
    e.schedule(0.0)
    maint(e, 10.0)
    e.alloc(1, 0, 0, 20.0, in_maint(1, 50))
    assert started(e.schedule(20.0)) == []
    r = e.schedule(100.0)
    assert [(a.id, a.note) for a in r.preempt] == [(100, note)] and started(r) == []
    e.free(100)
    r = e.schedule(100.0)
    assert started(r) == [1] and ranks(e, 1) == "1"
    assert e.stats["preemptions"] == 1


def test_with_a_grace_time_the_notice_comes_ahead_of_the_window():
    e = engine("60")
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    assert started(e.schedule(0.0)) == [100]
    maint(e, 10.0)
    r = e.schedule(10.0)
    assert not r.notice and not r.preempt
    assert e.wakeup() == 40.0  # 60 s before the window opens
    assert not e.schedule(39.0).notice
    r = e.schedule(40.0)
    assert [(n.id, n.at, n.note) for n in r.notice] == [(100, 100.0, "reservation maint opens at t=100")]
    assert not r.preempt and not e.schedule(70.0).notice  # one notice
    r = e.schedule(100.0)
    assert [a.id for a in r.preempt] == [100]


def test_a_window_added_within_the_grace_time_notices_at_once():
    e = engine("60")
    e.alloc(100, 0, 0, 0.0, spec(1, 1000, pa=0))
    e.schedule(0.0)
    maint(e, 70.0)
    r = e.schedule(70.0)
    assert [(n.id, n.at) for n in r.notice] == [(100, 100.0)] and not r.preempt
    assert [a.id for a in e.schedule(100.0).preempt] == [100]


def test_a_job_that_ends_before_the_window_and_a_regular_job_are_left_alone():
    e = engine("60")
    e.alloc(100, 0, 0, 0.0, spec(1, 90, pa=0))  # its walltime ends it at 90
    e.alloc(1, 0, 0, 0.0, spec(1, 1000))  # regular: runs on (docs/rfcs/reservations.md, Running jobs)
    assert sorted(started(e.schedule(0.0))) == [1, 100]
    assert (ranks(e, 1), ranks(e, 100)) == ("0", "1")
    with pytest.raises(ReservationError, match=r"ranks: ranks 0 have running jobs past its start"):
        maint(e, 10.0, "0-1")  # job 1 runs past 100 on rank 0 (job 100, best-effort, does not count)
    maint(e, 10.0, "0-1", ("IGNORE_JOBS",))  # over both
    for t in (40.0, 89.0):
        r = e.schedule(t)
        assert not r.notice and not r.preempt
    e.free(100)
    assert not e.schedule(100.0).preempt  # the regular job 1 runs on


def test_the_replay_keeps_best_effort_work_off_the_window():
    """2 nodes, ``maint`` on rank 1 over [100, 200) for user 7.  Best-effort
    jobs 1 and 2 (300 s each, at 0): 1 runs on rank 0 from 0 to 300; 2 would
    run into the window on rank 1, so it waits for the window's end (rank 1
    from 200 to 500; rank 0 is busy until 300).
    Best-effort job 3 (90 s, at 0) ends before the window: rank 1 from 0
    to 90.  Job 4 of the window (user 7, 100 s at 50) runs on rank 1 from
    100 to 200.  Nothing is preempted."""
    w = {
        "nb_res": 2,
        "jobs": [
            {"id": 1, "subtime": 0, "walltime": 300, "res": 1, "profile": "p300", "preemptible-after": 0},
            {"id": 2, "subtime": 0, "walltime": 300, "res": 1, "profile": "p300", "preemptible-after": 0},
            {"id": 3, "subtime": 0, "walltime": 90, "res": 1, "profile": "p90", "preemptible-after": 0},
            {"id": 4, "subtime": 50, "walltime": 100, "res": 1, "profile": "p100", "user": 7, "reservation": "maint"},
        ],
        "profiles": {f"p{n}": {"type": "delay", "delay": n} for n in (90, 100, 300)},
    }
    resv = [{"name": "maint", "ranks": "1", "start": 100, "end": 200, "users": [7]}]
    r = replay(read_batsim(w), nodes_graph(2), {"queue-policy": "easy", "policy": "low"}, reservations=resv)
    got = {x.job.id: (x.start, x.finish, str(x.ranks)) for x in r.records}
    assert got == {1: (0.0, 300.0, "0"), 2: (200.0, 500.0, "1"), 3: (0.0, 90.0, "1"), 4: (100.0, 200.0, "1")}
    assert not any(x.state == PREEMPTED for x in r.records)
