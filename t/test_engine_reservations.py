"""engine/reservations.py: advance reservations, hand-counted on 4 nodes.

Every case: 4 nodes of 4 cores (ranks 0-3), placement ``low`` (lowest ranks
first), under easy and conservative (fcfs would not backfill), and a
reservation ``maint`` of ranks 2-3 over [100, 200) for user 7, unless a
test says otherwise.  Start times are counted by hand in each test's
comment; the engine checks free + allocated + down = all and that no
resource is allocated twice after every input (``Checked``).
"""

from __future__ import annotations

import math

import pytest

from fluxsched_py.engine.forecast import forecast, when
from fluxsched_py.engine.reservations import Reservation, ReservationError, parse_spec
from fluxsched_py.engine.states import ResponseType
from fluxsched_py.ids import IdSet

from .test_engine_rfc27 import engine as make_engine
from .test_engine_rfc27 import jobspec


def spec(nnodes, duration, reservation=None):
    js = jobspec(nnodes=nnodes, duration=duration)
    if reservation is not None:
        js["attributes"]["system"]["reservation"] = reservation
    return js


def started(out):
    return {r.id: (r.start, r.expiration, str(r.resources.ranks)) for r in out if r.type is ResponseType.SUCCESS}


def denied(out):
    return {r.id: r.note for r in out if r.type is ResponseType.DENY}


@pytest.fixture(params=["easy", "conservative"])
def e(request):
    eng = make_engine(options=[f"queue-policy={request.param}", "policy=low"])
    eng.reservations.add("maint", 100.0, 200.0, ranks=IdSet.parse("2-3"), users=(7,), now=0.0)
    return eng


def test_a_job_that_would_overlap_the_window_waits_one_that_ends_before_starts(e):
    # job 1 (3 nodes, 150 s) would still run on rank 2 at 100: it waits for
    # the window's end (200).  Job 2 (3 nodes, 50 s) ends at 50: at once.
    e.alloc(1, 16, 1, 0.0, spec(3, 150.0))
    e.alloc(2, 16, 1, 0.0, spec(3, 50.0))
    out = e.schedule(0.0).responses
    assert started(out) == {2: (0.0, 50.0, "0-2")}
    assert e.job(1).estimate == 200.0
    reason = e.job(1).reply.sent["reason_pending"]
    assert reason.startswith("reservation maint: 2 nodes reserved from ")
    assert [(f.jobid, f.start) for f in forecast(e, 0.0)] == [(1, 200.0)]
    # at 50 job 2 ends; job 1 still cannot start before the window
    e.free(2)
    assert started(e.schedule(50.0).responses) == {}
    assert e.job(1).estimate == 200.0


def test_a_job_whose_expiration_ends_before_the_window_uses_its_ranks(e):
    # ranks 0-1 busy until 300; a 1-node job of 90 s on rank 2 ends at 90 <
    # 100: it starts; one of 110 s would still run at 100: it waits for 200.
    e.alloc(1, 16, 1, 0.0, spec(2, 300.0))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, spec(1, 110.0))
    e.alloc(3, 16, 1, 2.0, spec(1, 90.0))
    out = e.schedule(2.0).responses
    assert started(out) == {3: (2.0, 92.0, "2")}
    assert e.pending_count == 1 and e.job(2).state.value == "pending"


def test_a_reservation_job_starts_at_the_window_start_on_its_ranks(e):
    # user 7's 2-node job waits while the machine is idle; the engine asks
    # for a pass at 100, and it starts there on ranks 2-3, until 150.
    e.alloc(5, 16, 7, 0.0, spec(2, 50.0, "maint"))
    assert started(e.schedule(0.0).responses) == {}
    assert e.job(5).reply.sent["reason_pending"].startswith("reservation maint: opens at ")
    assert e.wakeup() == 100.0
    assert started(e.schedule(100.0).responses) == {5: (100.0, 150.0, "2-3")}


def test_a_reservation_job_without_walltime_ends_with_the_window(e):
    e.alloc(5, 16, 7, 0.0, spec(1, 0.0, "maint"))
    e.schedule(0.0)
    assert started(e.schedule(120.0).responses) == {5: (120.0, 200.0, "2")}


def test_reservation_jobs_use_only_the_windows_ranks(e):
    # three 1-node jobs of user 7: two fit on ranks 2-3 at 100, the third
    # waits for the first to end (150), though ranks 0-1 are free.
    for i in (5, 6, 7):
        e.alloc(i, 16, 7, float(i), spec(1, 50.0, "maint"))
    e.schedule(10.0)
    out = e.schedule(100.0).responses
    assert started(out) == {5: (100.0, 150.0, "2"), 6: (100.0, 150.0, "3")}
    e.free(5)
    assert started(e.schedule(150.0).responses) == {7: (150.0, 200.0, "2")}


def test_a_job_of_a_reservation_cannot_outlive_the_window(e):
    # 80 s do not fit in [150, 200): it waits, and is denied when the window ends
    e.alloc(5, 16, 7, 0.0, spec(2, 90.0, "maint"))
    e.alloc(4, 16, 1, 0.0, spec(2, 500.0))  # ranks 0-1 busy
    e.schedule(0.0)
    e.alloc(6, 16, 7, 0.0, spec(2, 80.0, "maint"))
    assert started(e.schedule(100.0).responses) == {5: (100.0, 190.0, "2-3")}
    e.free(5)
    assert started(e.schedule(190.0).responses) == {}
    assert denied(e.schedule(200.0).responses) == {6: "reservation maint ended or was removed"}
    assert e.reservations.get("maint") is None and e.planner.nblocked == 0


def test_shortening_then_removing_releases_the_hold(e):
    e.alloc(1, 16, 1, 0.0, spec(3, 150.0))
    e.schedule(0.0)
    assert e.job(1).estimate == 200.0
    e.reservations.update("maint", 120.0, now=1.0)
    e.schedule(1.0)
    assert e.job(1).estimate == 120.0
    e.reservations.remove("maint")
    assert started(e.schedule(2.0).responses) == {1: (2.0, 152.0, "0-2")}


def test_jobs_naming_an_unknown_or_forbidden_reservation_are_denied(e):
    assert denied(e.alloc(8, 16, 7, 0.0, spec(1, 10.0, "nope"))) == {8: "reservation nope: no such reservation"}
    assert denied(e.alloc(9, 16, 1, 0.0, spec(1, 10.0, "maint"))) == {9: "reservation maint: user 1 may not use it"}
    assert 10 in denied(e.alloc(10, 16, 7, 0.0, spec(3, 10.0, "maint")))  # 3 nodes in a 2-node window
    assert e.pending_count == 0
    assert e.feasibility(spec(1, 10.0, "nope")) == "reservation nope: no such reservation"
    assert e.feasibility(spec(1, 10.0, "maint")) is None


def test_without_users_only_the_owner_may_use_it():
    e = make_engine(options=["policy=low"])
    e.reservations.owner = 42
    e.reservations.add("m", 10.0, 20.0, ranks=IdSet.parse("0"), now=0.0)
    assert denied(e.alloc(1, 16, 7, 0.0, spec(1, 5.0, "m")))
    assert not e.alloc(2, 16, 42, 0.0, spec(1, 5.0, "m"))


def test_overlapping_reservations_on_a_shared_rank_are_refused(e):
    with pytest.raises(ReservationError, match="ranks 3 are in reservation maint") as err:
        e.reservations.add("other", 150.0, 250.0, ranks=IdSet.parse("3"), now=0.0)
    assert err.value.field == "ranks"
    e.reservations.add("later", 200.0, 250.0, ranks=IdSet.parse("3"), now=0.0)  # touches, no overlap
    e.reservations.add("beside", 150.0, 250.0, ranks=IdSet.parse("0"), now=0.0)
    assert [r.name for r in e.reservations] == ["maint", "beside", "later"]


def test_nodes_are_picked_free_over_the_window():
    # ranks 0-1 busy until 300: 2 nodes over [100, 200) are 2-3; with
    # ranks 2-3 taken by maint, a second pick finds only busy nodes 0-1:
    # refused as Slurm refuses busy nodes, taken with IGNORE_JOBS.
    e = make_engine(options=["policy=low"])
    e.alloc(1, 16, 1, 0.0, spec(2, 300.0))
    e.schedule(0.0)
    r = e.reservations.add("a", 100.0, 200.0, nodes=2, now=0.0)
    assert str(r.ranks) == "2-3"
    with pytest.raises(ReservationError, match=r"nodes: fewer than 2 up nodes outside other reservations and running"):
        e.reservations.add("b", 100.0, 200.0, nodes=2, now=0.0)
    b = e.reservations.add("b", 100.0, 200.0, nodes=2, now=0.0, flags=("IGNORE_JOBS",))
    assert str(b.ranks) == "0-1"
    with pytest.raises(ReservationError, match="nodes: fewer than 1 up nodes"):
        e.reservations.add("c", 150.0, 160.0, nodes=1, now=0.0)


def test_nodes_honour_requires():
    e = make_engine()
    con = parse_spec({"name": "x", "nodes": 1, "requires": {"ranks": ["1"]}, "start": 5, "duration": 5}, 0.0)
    assert str(e.reservations.add(now=0.0, **con).ranks) == "1"


def test_a_declared_reservation_whose_requires_alone_changes_picks_its_nodes_again():
    """A config reload (``Reservations.declare``) of a ``nodes = 2`` entry
    with the same name, count and times: the same ``requires`` keeps its
    ranks (nothing changes), another one picks them again under it, as a
    new node count does; ``requires`` goes through the KVS form, so a
    module reload compares it too."""
    e = make_engine(properties={"lyon": "0-1", "nancy": "2-3"}, options=["queue-policy=easy", "policy=low"])
    rs = e.reservations
    entry = {"name": "x", "nodes": 2, "start": 100, "duration": 50}

    def declare(requires):
        return rs.declare([parse_spec({**entry, "requires": requires}, 0.0)], 0.0)

    assert declare({"properties": ["nancy"]}) == ["added x"]
    assert str(rs.get("x").ranks) == "2-3"
    assert declare({"properties": ["nancy"]}) == [] and str(rs.get("x").ranks) == "2-3"
    assert declare({"properties": ["lyon"]}) == ["updated x"]
    assert str(rs.get("x").ranks) == "0-1"
    kept = rs.get("x").as_dict()
    assert kept["requires"] == {"properties": ["lyon"]}
    # a module reload: the reservation read back from the KVS compares the same
    e2 = make_engine(properties={"lyon": "0-1", "nancy": "2-3"}, options=["queue-policy=easy", "policy=low"])
    e2.reservations.load([Reservation.from_dict(kept)])
    e2.reservations.declared = {"x"}
    assert e2.reservations.declare([parse_spec({**entry, "requires": {"properties": ["lyon"]}}, 0.0)], 0.0) == []
    # named ranks keep no requires
    named = {"name": "x", "ranks": "0-1", "start": 100, "duration": 50}
    assert rs.declare([parse_spec(named, 0.0)], 0.0) == ["updated x"]
    assert rs.get("x").requires is None and "requires" not in rs.get("x").as_dict()


def test_when_and_forecast_plan_inside_the_window(e):
    e.alloc(5, 16, 7, 0.0, spec(2, 50.0, "maint"))
    e.schedule(0.0)
    assert [(f.jobid, f.start, f.ranks()) for f in forecast(e, 0.0)] == [(5, 100.0, "2-3")]
    f = when(e, spec(3, 150.0), 0.0)
    assert (f.start, len(f.resources.ranks)) == (200.0, 3)  # the forecast places as Fluxion's "first"
    f = when(e, spec(4, 50.0), 0.0)  # before the window, on every node
    assert (f.start, f.ranks()) == (0.0, "0-3")


def test_parse_spec_names_the_field():
    now = 1000.0
    ok = parse_spec({"name": "m", "ranks": "0-1", "start": "+1m", "duration": "1h", "users": "3,4"}, now)
    assert ok == {"name": "m", "ranks": IdSet.parse("0-1"), "start": 1060.0, "end": 4660.0, "users": (3, 4)}
    bad = [
        ({"ranks": "0", "start": 1, "end": 2}, "name"),
        ({"name": "m", "start": 1, "end": 2}, "ranks"),
        ({"name": "m", "ranks": "x", "start": 1, "end": 2}, "ranks"),
        ({"name": "m", "nodes": 0, "start": 1, "end": 2}, "nodes"),
        ({"name": "m", "ranks": "0", "end": 2}, "start"),
        ({"name": "m", "ranks": "0", "start": "soon", "end": 2}, "start"),
        ({"name": "m", "ranks": "0", "start": 1}, "end"),
        ({"name": "m", "ranks": "0", "start": 1, "duration": "-1s"}, "duration"),
        ({"name": "m", "ranks": "0", "start": 1, "end": 2, "users": ["nobody-here"]}, "users"),
        ({"name": "m", "ranks": "0", "start": 1, "end": 2, "color": 1}, "color"),
        ({"name": "m", "nodes": 1, "requires": {"bogus": 1}, "start": 1, "end": 2}, "requires"),
    ]
    for obj, field in bad:
        with pytest.raises(ReservationError) as err:
            parse_spec(obj, now)
        assert err.value.field == field, obj
    assert parse_spec({"name": "m", "ranks": "0", "start": "2026-01-01T00:00:00+00:00", "end": 1.8e9}, now)[
        "start"
    ] == pytest.approx(1767225600.0)


def test_no_reservation_changes_nothing():
    e = make_engine()
    e.alloc(1, 16, 1, 0.0, spec(3, 150.0))
    e.schedule(0.0)
    assert e.wakeup() == math.inf and e.planner.nblocked == 0


def test_under_fcfs_a_job_waiting_for_its_window_holds_back_no_one():
    # fcfs, as Slurm: job 5 (user 7, maint) waits for 100; job 6 behind it
    # (1 node, 500 s) starts at once on rank 0, outside the window.
    e = make_engine(options=["queue-policy=fcfs", "policy=low"])
    e.reservations.add("maint", 100.0, 200.0, ranks=IdSet.parse("2-3"), users=(7,), now=0.0)
    e.alloc(5, 16, 7, 0.0, spec(2, 50.0, "maint"))
    e.alloc(6, 16, 1, 1.0, spec(1, 500.0))
    assert started(e.schedule(1.0).responses) == {6: (1.0, 501.0, "0")}
    assert e.job(5).estimate == 100.0
    assert started(e.schedule(100.0).responses) == {5: (100.0, 150.0, "2-3")}


def test_under_fcfs_a_job_of_the_window_does_not_wait_behind_the_head():
    # job 1 (4 nodes, 1000 s) is the blocked head behind job 0 (ranks 0-1
    # until 300); job 5 of maint, behind it, still starts at 100 on 2-3.
    e = make_engine(options=["queue-policy=fcfs", "policy=low"])
    e.reservations.add("maint", 100.0, 200.0, ranks=IdSet.parse("2-3"), users=(7,), now=0.0)
    e.alloc(9, 16, 1, 0.0, spec(2, 300.0))
    e.schedule(0.0)
    e.alloc(1, 16, 1, 1.0, spec(4, 1000.0))
    e.alloc(5, 16, 7, 2.0, spec(2, 50.0, "maint"))
    assert started(e.schedule(2.0).responses) == {}
    assert e.job(1).estimate == 300.0 and e.job(5).estimate == 100.0
    assert started(e.schedule(100.0).responses) == {5: (100.0, 150.0, "2-3")}
