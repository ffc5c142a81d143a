"""Slurm's reservation flags (engine/reservations.py), hand-counted on 4 nodes.

As t/test_engine_reservations.py: 4 nodes of 4 cores (ranks 0-3),
placement ``low``, under easy and conservative, every input checked
(free + allocated + down = all, nothing allocated twice).  The rule each
test checks is Slurm's, quoted in docs/rfcs/reservations.md:

- without ``IGNORE_JOBS`` a reservation is refused on nodes whose running
  jobs' time limit ends after its start ("By default, only resources which
  are not expected to have a running job at the start time can be
  reserved"); with it, it is added and the jobs run on;
- ``MAINT`` "is permitted to use resources that are already in another
  reservation" (and Slurm's ``_resv_overlap`` lets a later reservation
  overlap a MAINT one); the other reservation's jobs keep off it ("the only
  jobs they may start in their reservation would have to be completed by
  12:30PM, when the maintenance reservation begins"), its own jobs do not
  keep off the other;
- ``FLEX`` lets the reservation's jobs "begin prior to the reservation's
  start time, end after the reservation's end time, and use any resources
  inside and/or outside of the reservation".
"""

from __future__ import annotations

import math

import pytest

from fluxsched_py.engine.reservations import ReservationError, parse_spec
from fluxsched_py.ids import IdSet

from .test_engine_reservations import denied, spec, started
from .test_engine_rfc27 import engine as make_engine


@pytest.fixture(params=["easy", "conservative"])
def e(request):
    return make_engine(options=[f"queue-policy={request.param}", "policy=low"])


def add(e, name, ranks, start, end, users=(7,), flags=(), now=0.0):
    return e.reservations.add(name, start, end, ranks=IdSet.parse(ranks), users=users, flags=flags, now=now)


# -- IGNORE_JOBS ------------------------------------------------------------------


def test_busy_ranks_are_refused_without_ignore_jobs_and_the_job_runs_on_with_it(e):
    # job 1 (2 nodes, 300 s) runs on 0-1 from 0: at 100 it still runs on rank 1.
    e.alloc(1, 16, 1, 0.0, spec(2, 300.0))
    assert started(e.schedule(0.0).responses) == {1: (0.0, 300.0, "0-1")}
    with pytest.raises(ReservationError, match=r"^ranks: ranks 1 have running jobs past its start \(flag IGNORE_JOBS"):
        add(e, "m", "1-2", 100.0, 200.0, now=10.0)
    assert e.reservations.get("m") is None
    r = add(e, "m", "1-2", 100.0, 200.0, flags=("IGNORE_JOBS",), now=10.0)
    assert r.flags == ("IGNORE_JOBS",)
    # the running job keeps its nodes and its end; a 1-node job of m gets rank 2 at 100
    e.alloc(5, 16, 7, 10.0, spec(1, 50.0, "m"))
    e.schedule(10.0)
    assert started(e.schedule(100.0).responses) == {5: (100.0, 150.0, "2")}
    assert (e.job(1).state.value, e.job(1).expiration) == ("running", 300.0)


def test_a_running_job_that_ends_by_the_start_is_no_obstacle(e):
    # Slurm's test: a job whose end time is at or before the start does not overlap it.
    e.alloc(1, 16, 1, 0.0, spec(1, 100.0))
    e.alloc(2, 16, 1, 0.0, spec(1, 0.0))  # no time limit: it may run forever
    assert started(e.schedule(0.0).responses) == {1: (0.0, 100.0, "0"), 2: (0.0, math.inf, "1")}
    add(e, "ok", "0", 100.0, 200.0)
    with pytest.raises(ReservationError, match="ranks 1 have running jobs"):
        add(e, "no", "1", 500.0, 600.0)


def test_nodes_picks_around_running_jobs_unless_ignore_jobs(e):
    # jobs on 0-2 until 300: one node over [100, 200) is 3; two are refused
    # without IGNORE_JOBS, and 0 and 3 with it (the node free when it opens first).
    e.alloc(1, 16, 1, 0.0, spec(3, 300.0))
    e.schedule(0.0)
    assert str(e.reservations.add("a", 100.0, 200.0, nodes=1, now=0.0).ranks) == "3"
    e.reservations.remove("a")
    with pytest.raises(ReservationError, match="nodes: fewer than 2 up nodes outside other reservations and running"):
        e.reservations.add("b", 100.0, 200.0, nodes=2, now=0.0)
    assert len(e.reservations.add("b", 100.0, 200.0, nodes=2, now=0.0, flags=("IGNORE_JOBS",)).ranks) == 2


# -- MAINT ------------------------------------------------------------------------


def test_maint_may_overlap_another_reservation_and_be_overlapped(e):
    add(e, "a", "2-3", 100.0, 200.0)
    with pytest.raises(ReservationError, match="ranks: ranks 2-3 are in reservation a at that time"):
        add(e, "m", "0-3", 150.0, 250.0, users=(9,))
    m = add(e, "m", "0-3", 150.0, 250.0, users=(9,), flags=("MAINT",))
    assert str(m.ranks) == "0-3"
    add(e, "b", "0", 160.0, 170.0, users=(8,))  # over the MAINT one only: allowed, as in Slurm
    with pytest.raises(ReservationError, match="ranks 0 are in reservation b"):
        add(e, "c", "0", 165.0, 175.0, users=(8,))
    # extending a into m stays allowed (m is MAINT); the blocked windows are all held
    e.reservations.update("a", 240.0, now=0.0)
    assert sorted(e.planner.blocks()) == ["a", "b", "m"]


def test_the_other_reservations_jobs_must_end_before_the_maintenance(e):
    # a on 2-3 over [100, 200) for user 7; MAINT m on 0-3 over [150, 250).
    # Job 5 (2 nodes, 40 s) of a starts at 100 and ends at 140, before m.
    # Job 6 (2 nodes, 60 s) of a would start after it at 140 and run into m
    # (to 200): it never fits, and is denied when a ends.
    add(e, "a", "2-3", 100.0, 200.0)
    add(e, "m", "0-3", 150.0, 250.0, users=(9,), flags=("MAINT",))
    e.alloc(5, 16, 7, 0.0, spec(2, 40.0, "a"))
    e.alloc(6, 16, 7, 0.0, spec(2, 60.0, "a"))
    e.schedule(0.0)
    assert started(e.schedule(100.0).responses) == {5: (100.0, 140.0, "2-3")}
    e.free(5)
    assert started(e.schedule(140.0).responses) == {}
    assert e.job(6).state.value == "pending"
    assert denied(e.schedule(200.0).responses) == {6: "reservation a ended or was removed"}


def test_without_the_maintenance_the_second_job_starts_after_the_first(e):
    # the same two jobs of a, no m: job 6 starts at 140 on 2-3.
    add(e, "a", "2-3", 100.0, 200.0)
    e.alloc(5, 16, 7, 0.0, spec(2, 40.0, "a"))
    e.alloc(6, 16, 7, 0.0, spec(2, 60.0, "a"))
    e.schedule(0.0)
    assert started(e.schedule(100.0).responses) == {5: (100.0, 140.0, "2-3")}
    e.free(5)
    assert started(e.schedule(140.0).responses) == {6: (140.0, 200.0, "2-3")}


def test_the_maintenance_jobs_use_its_ranks_inside_the_other_window(e):
    # m's job 7 (user 9, 4 nodes, 50 s) starts at m's start, 150, on 0-3,
    # though a holds 2-3 until 200: a MAINT reservation's jobs keep off no other window.
    # A regular job of 1 node and 300 s (user 1) keeps off both: it may
    # start only after m ends (250).
    add(e, "a", "2-3", 100.0, 200.0)
    add(e, "m", "0-3", 150.0, 250.0, users=(9,), flags=("MAINT",))
    e.alloc(7, 16, 9, 0.0, spec(4, 50.0, "m"))
    e.alloc(1, 16, 1, 0.0, spec(1, 300.0))
    e.schedule(0.0)
    assert e.job(1).estimate == 250.0
    assert started(e.schedule(150.0).responses) == {7: (150.0, 200.0, "0-3")}


# -- FLEX -------------------------------------------------------------------------


def test_a_flex_job_starts_before_the_window_runs_past_it_and_outside_it(e):
    # f on 2-3 over [100, 200) for user 7.  Job 5 of f (4 nodes, 300 s): at
    # once on 0-3, until 300 (not killed at 200).  A 2-node job of 300 s in
    # g (0-1, 100 s, no FLEX) is denied: walltime longer than it.
    add(e, "f", "2-3", 100.0, 200.0, flags=("FLEX",))
    add(e, "g", "0-1", 400.0, 500.0)
    e.alloc(5, 16, 7, 0.0, spec(4, 300.0, "f"))
    assert started(e.schedule(0.0).responses) == {5: (0.0, 300.0, "0-3")}
    assert denied(e.alloc(6, 16, 7, 0.0, spec(2, 300.0, "g"))) == {
        6: "reservation g: walltime longer than the reservation"
    }


def test_a_flex_job_without_walltime_is_not_killed_at_the_end(e):
    add(e, "f", "2-3", 100.0, 200.0, flags=("FLEX",))
    e.alloc(5, 16, 7, 0.0, spec(1, 0.0, "f"))
    assert started(e.schedule(0.0).responses) == {5: (0.0, math.inf, "0")}


def test_other_jobs_still_keep_off_a_flex_window_and_other_users_are_denied(e):
    # user 1's job 1 (3 nodes, 150 s) would run on rank 2 at 100: it waits for 200.
    # A FLEX job keeps off the other windows (g on 0-1 from 100): job 5
    # (user 7, 2 nodes, 150 s) starts at once on 2-3, in and past its own.
    add(e, "f", "2-3", 100.0, 200.0, flags=("FLEX",))
    add(e, "g", "0-1", 100.0, 150.0, users=(8,))
    e.alloc(1, 16, 1, 0.0, spec(3, 150.0))
    e.alloc(5, 16, 7, 0.0, spec(2, 150.0, "f"))
    assert started(e.schedule(0.0).responses) == {5: (0.0, 150.0, "2-3")}
    assert e.job(1).estimate == 200.0
    assert denied(e.alloc(6, 16, 1, 0.0, spec(1, 10.0, "f"))) == {6: "reservation f: user 1 may not use it"}


def test_a_flex_job_waits_like_any_job_where_it_does_not_fit(e):
    # g (not FLEX) on 0-3 over [100, 200): job 5 of f (4 nodes, 150 s) would
    # run into g: it waits for g's end, 200, like any job, and says why.
    add(e, "f", "2-3", 300.0, 400.0, flags=("FLEX",))
    add(e, "g", "0-1", 100.0, 200.0, users=(8,))
    e.alloc(5, 16, 7, 0.0, spec(4, 150.0, "f"))
    assert started(e.schedule(0.0).responses) == {}
    assert e.job(5).estimate == 200.0
    assert e.job(5).reply.sent["reason_pending"].startswith("reservation g: 2 nodes reserved from ")
    assert started(e.schedule(200.0).responses) == {5: (200.0, 350.0, "0-3")}


# -- the flags as written ---------------------------------------------------------


def test_flags_are_read_as_slurm_writes_them():
    spec_ = {"name": "m", "ranks": "0", "start": 5, "duration": 5}
    assert parse_spec({**spec_, "flags": "maint,Ignore_Jobs"}, 0.0)["flags"] == ("IGNORE_JOBS", "MAINT")
    assert parse_spec({**spec_, "flags": ["FLEX", "flex"]}, 0.0)["flags"] == ("FLEX",)
    assert "flags" not in parse_spec(spec_, 0.0)
    for bad in ("OVERLAP", "DAILY", 3):
        with pytest.raises(ReservationError, match=r"^flags: .* is not a flag this scheduler implements \(FLEX, "):
            parse_spec({**spec_, "flags": [bad]}, 0.0)
