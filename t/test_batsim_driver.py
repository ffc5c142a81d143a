"""The Batsim 3/4 driver, sans I/O: one test per protocol sentence that matters.

These are scripted messages for the rules and the error cases (the issue allows
fakes for those); the main flow is driven from real recorded traffic in
``test_batsim_recorded.py``.
"""

from __future__ import annotations

import json
import logging
import math

import pytest

from fluxsched_py.batsim.driver import BatsimScheduler, CallMeLater, Host, hosts_R
from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.batsim.platform import property_names
from fluxsched_py.batsim.v4driver import V4Driver
from fluxsched_py.engine.states import PassResult
from fluxsched_py.ids import IdSet


def msg(now, *events):
    return json.dumps({"now": now, "events": [{"timestamp": t, "type": ty, "data": d} for t, ty, d in events]}).encode()


def begins(n=4, props=None):
    res = [{"id": i, "name": f"n{i}", "state": "idle", "properties": (props or {}).get(i, {})} for i in range(n)]
    return (
        0.0,
        "SIMULATION_BEGINS",
        {
            "nb_resources": n,
            "nb_compute_resources": n,
            "config": {"redis-enabled": False},
            "compute_resources": res,
            "workloads": {"w0": "/tmp/w0.json"},
        },
    )


def submit(t, jid, res, walltime=100.0):
    job = {"id": jid, "res": res, "profile": "p"}
    if walltime is not None:
        job["walltime"] = walltime
    return (t, "JOB_SUBMITTED", {"job_id": jid, "job": job})


def completed(t, jid):
    return (t, "JOB_COMPLETED", {"job_id": jid, "job_state": "COMPLETED_SUCCESSFULLY", "return_code": 0})


def reply(driver, now, *events):
    return json.loads(driver.handle(msg(now, *events)))


def types(r):
    return [e["type"] for e in r["events"]]


@pytest.fixture
def d():
    drv = V4Driver(["queue-policy=easy", "policy=low"])
    assert reply(drv, 0.0, begins(4)) == {"now": 0.0, "events": []}
    return drv


def test_simulation_begins_builds_one_node_per_compute_resource_with_properties():
    drv = V4Driver()
    reply(drv, 0.0, begins(3, props={1: {"role": "compute", "gpu": ""}}))
    g = drv.scheduler.engine.graph
    assert len(g.ranks) == 3
    assert g.hostname(1) == "n1"
    assert {"role=compute", "gpu"} <= set(g.properties(1))
    assert drv.workloads == {"w0": "/tmp/w0.json"} and drv.config == {"redis-enabled": False}


def test_property_names_follow_simgrid_prop_values():
    assert property_names({"role": "", "speed": "1Gf", "x": True, "off": False}) == ["role", "speed=1Gf", "x"]


def test_hosts_R_needs_ids_zero_to_n_minus_one():
    with pytest.raises(ProtocolError, match="0..N-1"):
        hosts_R([Host(0, "a"), Host(2, "b")])
    assert hosts_R([Host(1, "b"), Host(0, "a")])["execution"]["nodelist"] == ["a,b"]


def test_job_submitted_becomes_execute_job_with_an_interval_set_alloc(d):
    r = reply(d, 1.0, submit(1.0, "w0!1", 3))
    assert r == {
        "now": 1.0,
        "events": [{"timestamp": 1.0, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "0-2"}}],
    }


def test_alloc_with_a_hole_is_written_with_spaces(d):
    reply(d, 1.0, submit(1.0, "w0!1", 1), submit(1.0, "w0!2", 1), submit(1.0, "w0!3", 1))
    reply(d, 2.0, completed(2.0, "w0!2"))
    r = reply(d, 3.0, submit(3.0, "w0!4", 2))
    assert r["events"][0]["data"] == {"job_id": "w0!4", "alloc": "1 3"}


def test_infeasible_job_is_rejected_with_a_logged_reason(d, caplog):
    with caplog.at_level(logging.WARNING, logger="fluxsched_py.batsim"):
        r = reply(d, 1.0, submit(1.0, "w0!9", 5))
    assert r["events"] == [{"timestamp": 1.0, "type": "REJECT_JOB", "data": {"job_id": "w0!9"}}]
    assert "w0!9" in caplog.text and "5 nodes" in caplog.text


def test_job_completed_frees_the_nodes_for_the_next_job(d):
    reply(d, 0.0, submit(0.0, "w0!1", 4))
    assert reply(d, 1.0, submit(1.0, "w0!2", 2))["events"] == []
    r = reply(d, 5.0, completed(5.0, "w0!1"))
    assert types(r) == ["EXECUTE_JOB"] and r["events"][0]["data"]["job_id"] == "w0!2"


def test_job_killed_frees_the_nodes(d):
    reply(d, 0.0, submit(0.0, "w0!1", 4))
    reply(d, 1.0, submit(1.0, "w0!2", 4))
    r = reply(d, 2.0, (2.0, "JOB_KILLED", {"job_ids": ["w0!1"], "job_progress": {"w0!1": {"progress": 0.5}}}))
    assert types(r) == ["EXECUTE_JOB"]


def test_easy_backfills_a_short_job_but_not_a_long_one(d):
    reply(d, 0.0, submit(0.0, "w0!1", 3, walltime=100.0))
    reply(d, 1.0, submit(1.0, "w0!2", 4, walltime=100.0))  # head: reserved at t=100
    assert types(reply(d, 2.0, submit(2.0, "w0!3", 1, walltime=500.0))) == []
    assert types(reply(d, 3.0, submit(3.0, "w0!4", 1, walltime=50.0))) == ["EXECUTE_JOB"]


def test_no_walltime_means_unlimited(d):
    reply(d, 0.0, submit(0.0, "w0!1", 3, walltime=None))
    reply(d, 1.0, submit(1.0, "w0!2", 4))
    # Nothing can ever be reserved behind an unlimited job, so nothing else backfills "before" it.
    assert d.scheduler.engine.job(1).duration == math.inf
    assert types(reply(d, 2.0, submit(2.0, "w0!3", 1, walltime=10.0))) == ["EXECUTE_JOB"]


def test_simulation_ends_gets_an_empty_reply_and_finishes(d):
    r = reply(d, 9.0, (9.0, "SIMULATION_ENDS", {}))
    assert r == {"now": 9.0, "events": []}
    assert d.finished
    with pytest.raises(ProtocolError, match="after SIMULATION_ENDS"):
        d.handle(msg(10.0))


def test_notify_no_more_static_job_to_submit_is_recorded(d):
    assert reply(d, 1.0, (1.0, "NOTIFY", {"type": "no_more_static_job_to_submit"}))["events"] == []
    assert d.scheduler.no_more_static_jobs


def test_query_estimate_waiting_time_is_answered_from_the_planner(d):
    reply(d, 0.0, submit(0.0, "w0!1", 3, walltime=100.0))
    q = {"requests": {"estimate_waiting_time": {"job_id": "dyn!q1", "job": {"res": 2, "walltime": 10.0}}}}
    r = reply(d, 10.0, (10.0, "QUERY", q))
    assert r["events"] == [
        {
            "timestamp": 10.0,
            "type": "ANSWER",
            "data": {"estimate_waiting_time": {"job_id": "dyn!q1", "estimated_waiting_time": 90.0}},
        }
    ]
    q1 = {"requests": {"estimate_waiting_time": {"job_id": "dyn!q2", "job": {"res": 1, "walltime": 10.0}}}}
    assert reply(d, 11.0, (11.0, "QUERY", q1))["events"][0]["data"]["estimate_waiting_time"][
        "estimated_waiting_time"
    ] == pytest.approx(0.0)


def test_unknown_query_is_a_protocol_error(d):
    with pytest.raises(ProtocolError, match="consumed_energy"):
        d.handle(msg(1.0, (1.0, "QUERY", {"requests": {"consumed_energy": {}}})))


@pytest.mark.parametrize(
    "events, reason",
    [
        ([completed(1.0, "w0!77")], "never submitted"),
        ([(1.0, "JOB_KILLED", {"job_ids": ["w0!77"]})], "never submitted"),
        ([submit(1.0, "w0!1", 4), submit(1.0, "w0!2", 4), completed(1.0, "w0!2")], "never started"),
        ([submit(1.0, "w0!1", 1), submit(1.0, "w0!1", 1)], "submitted twice"),
        ([(1.0, "JOB_SUBMITTED", {"job_id": "w0!1"})], "no 'job' object"),
        ([(1.0, "JOB_COMPLETED", {})], "no 'job_id'"),
        ([begins(2)], "received twice"),
        ([(1.0, "NOTIFY", {})], "no 'type'"),
        (
            [(1.0, "NOTIFY", {"type": "event_machine_unavailable", "resources": "4"})],
            "machine 4, but the platform has 4",
        ),
        ([(1.0, "NOTIFY", {"type": "event_machine_available", "resources": "0-99999999999"})], "exceeds the limit"),
    ],
)
def test_contradictions_are_protocol_errors(d, events, reason):
    with pytest.raises(ProtocolError, match=reason):
        d.handle(msg(1.0, *events))


def test_events_before_simulation_begins_are_protocol_errors():
    with pytest.raises(ProtocolError, match="before SIMULATION_BEGINS"):
        V4Driver().handle(msg(0.0, submit(0.0, "w0!1", 1)))


def test_redis_enabled_is_refused_with_a_clear_reason():
    t, ty, data = begins(2)
    data["config"]["redis-enabled"] = True
    with pytest.raises(ProtocolError, match="Redis"):
        V4Driver().handle(msg(0.0, (t, ty, data)))


def test_out_of_order_timestamps_are_protocol_errors(d):
    with pytest.raises(ProtocolError, match="before the previous"):
        d.handle(msg(5.0, submit(4.0, "w0!1", 1), submit(3.0, "w0!2", 1)))
    with pytest.raises(ProtocolError, match="after now"):
        d.handle(msg(5.0, submit(6.0, "w0!1", 1)))


def test_engine_ids_follow_the_workload_numbers_like_the_replay():
    s = BatsimScheduler()
    s.begin([Host(0, "a")])
    s.submit("w0!7", 1, 10.0, 0.0)
    s.submit("w1!7", 1, 10.0, 0.0)  # collision: a fresh id
    s.submit("w0!foo", 1, 10.0, 0.0)
    assert s.jobs["w0!7"].engine_id == 7
    assert s.jobs["w1!7"].engine_id > 1 << 40 and s.jobs["w0!foo"].engine_id > 1 << 40


class _Span:
    def __init__(self, start, end, running):
        self.start, self.end, self.running = start, end, running


class _Planner:
    def __init__(self, spans):
        self._spans = spans

    def reserved(self):
        return [s for s in self._spans if not s.running]

    def spans(self):
        return list(self._spans)


class _Engine:
    def __init__(self, spans):
        self.planner = _Planner(spans)

    def wakeup(self):
        return math.inf  # no EASY++ correction to wait for

    def schedule(self, now):
        return PassResult([])


def test_call_me_later_only_for_a_reservation_no_running_job_explains():
    s = BatsimScheduler()
    s.vnow = 10.0
    s.engine = _Engine([_Span(0.0, 50.0, True), _Span(50.0, 80.0, False)])
    assert s.decide(10.0) == []  # the running job's completion (by t=50) wakes us
    s.engine = _Engine([_Span(0.0, math.inf, True), _Span(70.0, 80.0, False)])
    assert s.decide(10.0) == [CallMeLater(70.0)]
    assert s.decide(11.0) == []  # already asked for
    s.requested_call(70.0)
    s.engine = _Engine([_Span(0.0, math.inf, True), _Span(90.0, 95.0, False)])
    assert s.decide(70.0) == [CallMeLater(90.0)]
    assert s.vnow == 70.0


def test_call_me_later_is_encoded_as_the_protocol_says():
    from fluxsched_py.batsim.v4 import call_me_later

    assert call_me_later(10.0, 25.5) == {"timestamp": 10.0, "type": "CALL_ME_LATER", "data": {"timestamp": 25.5}}


def test_alloc_is_an_idset_of_batsim_resource_ids(d):
    reply(d, 1.0, submit(1.0, "w0!1", 2))
    assert d.scheduler.jobs["w0!1"].alloc == IdSet.parse("0-1")


def _regroup_run(with_profiles: bool) -> list[list[str]]:
    """Two jobs that end at the same workload instant, whose completions Batsim delivers 3 ms apart."""
    drv = V4Driver(["queue-policy=easy", "policy=low"])
    t, ty, data = begins(4)
    if with_profiles:
        data["profiles"] = {"w0": {"p": {"type": "delay", "delay": 10.0}}}
    reply(drv, 0.0, (t, ty, data))
    started = []

    def go(now, *events):
        r = reply(drv, now, *events)
        started.append([e["data"]["job_id"] for e in r["events"] if e["type"] == "EXECUTE_JOB"])

    go(0.0006, submit(0.0006, "w0!1", 2), submit(0.0006, "w0!2", 2))  # both end at workload time 10
    go(1.0, submit(1.0, "w0!3", 4))  # head: needs all 4 nodes
    go(2.0, submit(2.0, "w0!4", 2, walltime=50.0))  # could backfill on 2 nodes until the head's shadow
    go(10.0012, completed(10.0012, "w0!1"))
    go(10.0042, completed(10.0042, "w0!2"))
    return started


def test_simultaneous_completions_split_by_batsim_latency_are_decided_together():
    # The replay frees both at t=10 and starts the head there; so must the driver.
    assert _regroup_run(with_profiles=True) == [["w0!1", "w0!2"], [], [], [], ["w0!3"]]


def test_without_run_times_each_completion_is_decided_at_once():
    # No delay profile: nothing says the second completion is on its way, so EASY backfills job 4.
    assert _regroup_run(with_profiles=False) == [["w0!1", "w0!2"], [], [], ["w0!4"], []]


def test_call_me_later_for_an_easypp_correction():
    # 2 hosts, EASY++.  a (2 nodes) completes at 10: the history is [10].  b
    # (1 node, walltime 100) is predicted 10 s and starts at 20; c (2 nodes)
    # is reserved at b's predicted end, 30.  No completion comes at 30 (b
    # really runs longer): the driver asks Batsim to call back then.
    s = BatsimScheduler(["queue-policy=easy", "predict-runtimes=true"])
    s.begin([Host(0, "h0"), Host(1, "h1")])
    s.submit("w!a", 2, 100.0, 0.0)
    assert [type(d).__name__ for d in s.decide(0.0)] == ["Execute"]
    s.complete("w!a", 10.0)
    s.decide(10.0)
    s.submit("w!b", 1, 100.0, 20.0)
    s.submit("w!c", 2, 50.0, 20.0)
    assert s.decide(20.0)[-1] == CallMeLater(30.0)
    plain = BatsimScheduler(["queue-policy=easy"])
    plain.begin([Host(0, "h0"), Host(1, "h1")])
    plain.submit("w!a", 2, 100.0, 0.0)
    plain.decide(0.0)
    plain.complete("w!a", 10.0)
    plain.decide(10.0)
    plain.submit("w!b", 1, 100.0, 20.0)
    plain.submit("w!c", 2, 50.0, 20.0)
    assert not any(isinstance(d, CallMeLater) for d in plain.decide(20.0))  # b's completion explains c's start


# -- best-effort jobs (docs/rfcs/preemption.md) -----------------------------------


def submit_be(t, jid, res, after=0, walltime=100.0):
    job = {"id": jid, "res": res, "profile": "p", "walltime": walltime, "preemptible-after": after}
    return (t, "JOB_SUBMITTED", {"job_id": jid, "job": job})


def test_a_regular_job_kills_best_effort_jobs_then_starts_in_the_same_reply(d):
    r = reply(d, 0.0, *(submit_be(0.0, f"w0!{i}", 1) for i in range(1, 5)))
    assert types(r) == ["EXECUTE_JOB"] * 4
    r = reply(d, 1.0, submit(1.0, "w0!10", 2))
    # Killed at once, as in the replay; both in ONE KILL_JOB before the
    # EXECUTE_JOB (Batsim charges simulated time per event of a reply).
    assert types(r) == ["KILL_JOB", "EXECUTE_JOB"]
    victims = r["events"][0]["data"]["job_ids"]
    assert len(victims) == 2 and set(victims) < {f"w0!{i}" for i in range(1, 5)}
    assert r["events"][1]["data"]["job_id"] == "w0!10"
    # Batsim then reports the kills (JOB_COMPLETED with COMPLETED_KILLED, or
    # JOB_KILLED, also for a job that completed on its own first): acknowledged.
    killed = {"job_ids": victims, "job_progress": {}}
    r = reply(d, 1.2, completed(1.2, victims[0]), (1.2, "JOB_KILLED", killed))
    assert "EXECUTE_JOB" not in types(r) and "KILL_JOB" not in types(r)
    assert d.scheduler.engine.stats["preemptions"] == 2 and d.scheduler.stats["killed"] == 2
    assert set(d.scheduler.unfinished()) == {"w0!10"} | ({f"w0!{i}" for i in range(1, 5)} - set(victims))


def test_regular_jobs_execute_before_best_effort_ones_in_a_reply(d):
    # Best-effort w0!1 first in the queue, then the regular w0!2: the engine
    # decides both at once; the regular EXECUTE_JOB goes out first.
    r = reply(d, 0.0, submit_be(0.0, "w0!1", 1), submit(0.0, "w0!2", 1))
    assert [e["data"]["job_id"] for e in r["events"] if e["type"] == "EXECUTE_JOB"] == ["w0!2", "w0!1"]


def test_malformed_preemptible_after_is_a_protocol_error(d):
    with pytest.raises(ProtocolError, match="preemptible-after"):
        reply(d, 0.0, submit_be(0.0, "w0!1", 1, after="later"))
