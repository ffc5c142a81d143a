"""The background forecast under Flux, without Flux: sliced across reactor
callbacks (flux/control.py, engine/forecast.py's SlicedForecast), restarted
when the queue or the resources change, served with its age.

The driver runs on a RecordingTransport (see test_flux_driver.py): two
nodes of four cores, a job holding every core until 1100 (the clock reads
1000), and jobs waiting behind it; each test runs the slices the driver
asks for, as the module's timer would.
"""

from __future__ import annotations

from fluxsched_py.engine import Engine
from fluxsched_py.engine.forecast import SlicedForecast, forecast

from . import test_flux_control
from .test_engine_rfc27 import graph
from .test_engine_rfc27 import jobspec as ejobspec
from .test_flux_control import ask
from .test_flux_driver import FULL100, alloc, jobspec, make

#: The fixture of test_flux_control: a driver with jobs 1-3 under easy.
dt = test_flux_control.dt


def plain(jobs):
    return [(j.jobid, j.start, j.kind) for j in jobs]


def test_a_pass_asks_for_the_forecast_and_the_rpc_serves_it_with_its_age(dt):
    d, t = dt
    assert t.forecast_requested
    assert t.run_forecast_slices() >= 1 and not t.forecast_requested
    as_of, jobs = d.control.latest
    assert as_of == 1000.0 and plain(jobs) == plain(forecast(d.engine, 1000.0))
    d.clock.t = 1007.0
    r = ask(d, t, "forecast", {})
    assert (r["source"], r["as_of"], r["age"], r["now"]) == ("background", 1000.0, 7.0, 1007.0)
    assert [(j["id"], j["t_estimate"], j["kind"]) for j in r["jobs"]] == plain(jobs)
    status = ask(d, t, "status", {})
    assert status["forecast_age"] == 7.0 and status["forecast_slices"] >= 1


def test_without_a_complete_forecast_it_is_planned_on_demand(dt):
    d, t = dt
    r = ask(d, t, "forecast", None)
    assert (r["source"], r["age"]) == ("on demand", 0.0) and len(r["jobs"]) == 2
    t.run_forecast_slices()
    # a limit asks for a plan now
    r = ask(d, t, "forecast", {"limit": 1})
    assert r["source"] == "on demand" and [j["kind"] for j in r["jobs"]] == ["reservation", "not planned"]


def test_a_change_starts_it_again_and_the_old_one_is_served_meanwhile(dt):
    d, t = dt
    t.run_forecast_slices()
    before = d.control.restarts
    d.clock.t = 1010.0
    alloc(d, t, 4, jobspec(ncores=2, duration=5))  # the queue changed
    r = ask(d, t, "forecast", {})
    # the last complete forecast, and the new job not in it yet
    assert r["source"] == "background" and r["as_of"] == 1000.0
    assert [(j["id"], j["kind"]) for j in r["jobs"]][-1] == (4, "not planned")
    t.run_forecast_slices()
    assert d.control.restarts == before + 1 and d.control.latest[0] == 1010.0
    r = ask(d, t, "forecast", {})
    assert {j["id"]: j["kind"] for j in r["jobs"]}[4] == "forecast" and r["age"] == 0.0


def test_jobs_that_started_are_left_out_and_no_start_is_in_the_past(dt):
    d, t = dt
    t.run_forecast_slices()
    d.clock.t = 1050.0
    d.handle("sched.free", None, {"id": 1, "final": True})  # the big job ends early
    r = ask(d, t, "forecast", {})  # before the pass: the old plan, from now on
    assert r["as_of"] == 1000.0 and [j["t_estimate"] for j in r["jobs"]] == [1100.0, 1100.0]
    t.run_passes()  # jobs 2 and 3 start
    r = ask(d, t, "forecast", {})
    assert r["jobs"] == [] and d.engine.pending_count == 0
    d.clock.t = 1200.0
    for jobid in (2, 3):
        d.handle("sched.free", None, {"id": jobid, "final": True})
    alloc(d, t, 5, FULL100)  # starts: every core until 1300
    alloc(d, t, 6, jobspec(ncores=1, duration=10))
    t.run_forecast_slices()
    d.clock.t = 1260.0
    r = ask(d, t, "forecast", {})
    assert r["as_of"] == 1200.0 and [(j["id"], j["t_estimate"]) for j in r["jobs"]] == [(6, 1300.0)]
    d.clock.t = 1350.0  # job 5 is overdue, its end not known yet: not before now
    assert [j["t_estimate"] for j in ask(d, t, "forecast", {})["jobs"]] == [1350.0]


def test_a_pass_that_starts_a_job_voids_the_plan_in_progress(dt):
    d, t = dt
    d.control.slice_budget = 0.0  # one job per slice: it stops before its second job
    t.run_forecast_slices(limit=1)
    run = d.control.in_progress
    assert run is not None and not run.done and run.valid()
    d.handle("sched.free", None, {"id": 1, "final": True})
    t.run_passes()
    assert d.control.in_progress is None  # changed(): void; the next slice starts over
    t.run_forecast_slices()
    assert d.control.latest[1] == [] and d.control.in_progress is None


def test_slices_wait_for_a_pending_pass(dt):
    d, t = dt
    t.forecast_requested = False
    d.handle("sched.cancel", None, {"id": 3})  # arms a pass
    assert d.control.wants_slice()
    d.run_forecast_slice()
    assert d.control.slices == 0 and not t.forecast_requested
    t.run_passes()
    assert t.forecast_requested


def test_an_empty_queue_needs_no_plan():
    d, t = make(["queue-policy=easy"])
    alloc(d, t, 1, FULL100)  # starts: nothing pending
    t.run_forecast_slices()
    assert d.control.latest == (1000.0, []) and d.control.restarts == 0 and d.control.in_progress is None
    assert ask(d, t, "forecast", {})["jobs"] == []


# -- the resumable plan itself ---------------------------------------------


def busy_engine(n=40):
    """4 nodes of 4 cores, a running job on each node ending at its own
    time, and ``n`` pending jobs of mixed sizes and walltimes, under easy."""
    e = Engine(graph(nodes=4, cores=4), ["queue-policy=easy"])
    for k in range(4):
        e.alloc(k + 1, 16, 1, 0.0, ejobspec(nnodes=1, duration=100.0 + 37 * k))
    e.schedule(0.0)
    for k in range(n):
        nodes = 1 + (k * 7) % 4
        e.alloc(100 + k, 16, 2, 1.0 + k, ejobspec(nnodes=nodes, duration=10.0 + (k * 13) % 90))
    e.schedule(5.0)
    return e


def test_sliced_plan_equals_the_plan_in_one_go():
    e = busy_engine()
    whole = plain(forecast(e, 5.0))
    ticks = iter(range(10**6))  # one second per reading: one job per slice of 1.5 s
    s = SlicedForecast(e, 5.0)
    slices = 0
    while not s.step(1.5, lambda: next(ticks)):
        slices += 1
        assert s.valid()
    assert slices >= 30 and plain(s.result()) == whole
    assert {j for j, start, kind in whole if kind == "forecast" and start is not None} == {
        j.id for j in e.pending() if j.id not in {x.jobid for x in e.planner.reserved()}
    }


def test_a_start_on_the_graph_makes_the_plan_invalid():
    e = busy_engine(3)
    s = SlicedForecast(e, 5.0)
    s.step(0.0)
    e.free(1, final=True)
    e.schedule(100.0)
    assert not s.valid()
