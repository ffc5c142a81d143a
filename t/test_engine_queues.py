"""Named queues (flux-core ``flux submit -q NAME``, ``attributes.system.queue``).

Each queue is scheduled by its own policy over its own jobs, in order
(priority, t_submit, id), so one queue's blocked head only holds back jobs of
that queue; the resource graph and the planner, with every queue's
reservations, are shared.  Queues are visited in the order of their head
jobs.  ``queue-policy-per-queue`` gives a queue its own policy.  The resource
invariants are checked after every input (``Checked``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import EngineError, EngineOptions, ResponseType
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request, read_jobspec_list
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1

from .test_engine_rfc27 import Checked, estimates, graph, jobspec
from .test_policy_conservative import assert_no_start_after_first_estimate


def qjob(queue=None, nnodes=1, duration=100.0, requires=None):
    """A job submitted to ``queue``; ``requires`` are the queue's node
    properties, added as an RFC 31 constraint the way flux-core's
    ``[queues.NAME] requires`` does."""
    spec = jobspec(nnodes=nnodes, duration=duration, constraints={"properties": requires} if requires else None)
    if queue is not None:
        spec["attributes"]["system"]["queue"] = queue
    return spec


def engine(nodes=4, options=("queue-policy=easy",), properties=None, **kw):
    return Checked(graph(nodes, 4, properties), list(options), **kw)


def started(responses):
    return [r.id for r in responses if r.type is ResponseType.SUCCESS]


def annotations(responses):
    return {r.id: r.annotations["sched"] for r in responses if r.type is ResponseType.ANNOTATE}


SPLIT = {"debug": "0-1", "batch": "2-3"}  # flux-core: [queues.debug] requires = ["debug"], ...


# -- one queue's head only blocks its own queue ----------------------------------


def test_fcfs_blocked_batch_head_does_not_stop_debug_jobs():
    e = engine(options=["queue-policy=fcfs"], properties=SPLIT)
    e.alloc(1, 16, 1, 1.0, qjob("batch", 2, requires=["batch"]))
    e.alloc(2, 16, 1, 2.0, qjob("batch", 1, requires=["batch"]))  # batch's head: no batch node free
    e.alloc(3, 16, 1, 3.0, qjob("debug", 1, duration=10, requires=["debug"]))
    e.alloc(4, 16, 1, 4.0, qjob("debug", 1, duration=10, requires=["debug"]))
    e.alloc(5, 16, 1, 5.0, qjob("debug", 1, duration=10, requires=["debug"]))
    out = e.schedule(10.0).responses
    assert started(out) == [1, 3, 4]
    ann = annotations(out)
    # jobs_ahead counts jobs of the same queue; each queue has its own head.
    assert ann[2]["jobs_ahead"] == 0 and ann[5]["jobs_ahead"] == 0
    assert ann[2]["queue"] == "batch" and ann[5]["queue"] == "debug"
    assert "job 2" not in ann[5]["reason_pending"]
    assert ann[2]["t_estimate"] == 110.0 and ann[5]["t_estimate"] == 20.0
    e.free(3)
    assert started(e.schedule(20.0).responses) == [5]
    assert e.job(2).state.value == "pending"


def test_fcfs_within_a_queue_still_never_overtakes():
    e = engine(nodes=2, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 1.0, qjob("batch", 1))
    e.alloc(2, 16, 1, 2.0, qjob("batch", 2))  # blocked head of batch
    e.alloc(3, 16, 1, 3.0, qjob("batch", 1, duration=1))  # would fit, but is behind it
    out = e.schedule(10.0).responses
    assert started(out) == [1]
    assert "behind higher-priority job 2" in annotations(out)[3]["reason_pending"]
    assert annotations(out)[3]["jobs_ahead"] == 1


def test_reason_pending_names_the_job_ahead_in_the_same_queue():
    e = engine(nodes=2, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 1.0, qjob(None, 2))
    e.alloc(2, 16, 1, 2.0, qjob("a", 2))  # head of a
    e.alloc(3, 16, 1, 3.0, qjob("b", 2))  # head of b
    e.alloc(4, 16, 1, 4.0, qjob("a", 1))
    e.alloc(5, 16, 1, 5.0, qjob("b", 1))
    ann = annotations(e.schedule(10.0).responses)
    assert [ann[i]["jobs_ahead"] for i in (2, 3, 4, 5)] == [0, 0, 1, 1]
    assert "behind higher-priority job 2" in ann[4]["reason_pending"]
    assert "behind higher-priority job 3" in ann[5]["reason_pending"]


# -- a reservation held for one queue binds every other -------------------------


def test_easy_queue_b_never_delays_queue_a_reservation():
    e = engine(nodes=4, options=["queue-policy=easy"], time_format=lambda t: f"t={t:.0f}")
    e.alloc(1, 16, 1, 1.0, qjob("a", 3, duration=100))
    assert started(e.schedule(0.0).responses) == [1]
    e.alloc(2, 16, 1, 2.0, qjob("a", 4, duration=100))  # a's head: shadow time 100, every node
    e.alloc(3, 16, 1, 3.0, qjob("b", 1, duration=1000))  # b's head: would delay job 2
    e.alloc(4, 16, 1, 4.0, qjob("b", 1, duration=50))  # ends before the shadow time: backfills
    e.alloc(5, 16, 1, 5.0, qjob("b", 1, duration=50))  # no node left now
    out = e.schedule(10.0).responses
    assert started(out) == [4]
    est = estimates(out)
    # Each queue's head gets EASY's reservation, b's around a's.
    assert est == {2: 100.0, 3: 200.0}
    assert annotations(out)[5]["jobs_ahead"] == 1
    e.free(4)  # ends early
    out = e.schedule(40.0).responses
    assert 3 not in started(out)  # still may not take job 2's nodes
    e.free(1)
    for j in started(out):
        e.free(j)
    assert started(e.schedule(100.0).responses) == [2]  # at its first t_estimate
    e.free(2)
    assert 3 in started(e.schedule(200.0).responses)


def test_a_reservation_stands_when_a_more_urgent_queue_arrives():
    """Queue b's new job is visited first (higher priority), but a's
    reservation, made earlier, is respected: b plans around it."""
    e = engine(nodes=2, options=["queue-policy=easy"])
    e.alloc(1, 16, 1, 1.0, qjob("a", 1, duration=100))
    e.alloc(2, 16, 1, 2.0, qjob("a", 2, duration=100))
    out = e.schedule(0.0).responses
    assert started(out) == [1] and estimates(out) == {2: 100.0}
    e.alloc(3, 31, 1, 3.0, qjob("b", 1, duration=500))  # urgent, fits on the free node now...
    out = e.schedule(5.0).responses
    assert started(out) == []  # ...but would run into job 2's reservation
    assert estimates(out) == {3: 200.0}
    assert e.pending()[0].id == 3 and e.planner.span(2).start == 100.0


def test_conservative_queue_b_backfills_only_around_queue_a_reservations():
    e = engine(nodes=4, options=["queue-policy=conservative"])
    e.alloc(1, 16, 1, 1.0, qjob("a", 2, duration=100))
    e.alloc(2, 16, 1, 2.0, qjob("a", 4, duration=100))  # reserved at 100
    e.alloc(3, 16, 1, 3.0, qjob("b", 2, duration=50))  # ends before 100: backfills
    e.alloc(4, 16, 1, 4.0, qjob("b", 2, duration=150))  # would delay job 2
    e.alloc(5, 16, 1, 5.0, qjob("b", 1, duration=10))
    out = e.schedule(0.0).responses
    assert started(out) == [1, 3]
    # Job 5 fits the hole job 3 leaves, before job 2's reservation.
    assert estimates(out) == {2: 100.0, 4: 200.0, 5: 50.0}
    ann = annotations(out)
    assert ann[4]["jobs_ahead"] == 0 and ann[5]["jobs_ahead"] == 1  # b's own order
    e.free(3)  # ends early: job 5 moves earlier, job 4 still may not touch job 2's nodes
    out = e.schedule(30.0).responses
    assert started(out) == [5]
    assert e.planner.span(2).start == 100.0 and e.planner.span(4).start == 200.0
    e.free(5)
    e.free(1)
    assert started(e.schedule(100.0).responses) == [2]
    e.free(2)
    assert started(e.schedule(200.0).responses) == [4]


def test_queues_are_visited_in_the_order_of_their_head_jobs():
    """Conservative, one pass: queue a (head submitted first) plans all of
    its jobs before queue b, whose only job was submitted in between."""
    e = engine(nodes=2, options=["queue-policy=conservative"])
    e.alloc(1, 16, 1, 0.0, qjob(None, 2, duration=100))
    assert started(e.schedule(0.0).responses) == [1]
    e.alloc(2, 16, 1, 1.0, qjob("a", 2, duration=100))
    e.alloc(3, 16, 1, 2.0, qjob("b", 2, duration=100))
    e.alloc(4, 16, 1, 3.0, qjob("a", 2, duration=100))
    assert estimates(e.schedule(5.0).responses) == {2: 100.0, 4: 200.0, 3: 300.0}


def test_fcfs_forecasts_of_one_queue_bind_the_other_queue():
    e = engine(nodes=2, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 1.0, qjob("a", 1, duration=100))
    e.alloc(2, 16, 1, 2.0, qjob("a", 2, duration=100))  # forecast at 100 on both nodes
    e.alloc(3, 16, 1, 3.0, qjob("b", 1, duration=50))  # fits the hole before 100
    e.alloc(4, 16, 1, 4.0, qjob("b", 1, duration=200))  # b's head after job 3: would delay job 2
    out = e.schedule(0.0).responses
    assert started(out) == [1, 3]
    assert estimates(out) == {2: 100.0, 4: 200.0}


# -- per-queue policy ------------------------------------------------------------


def test_queue_policy_per_queue_overrides_queue_policy():
    e = engine(nodes=4, options=["queue-policy=easy", "queue-policy-per-queue=debug:fcfs"])
    assert e.policy_for("debug").name == "fcfs"
    assert e.policy_for("batch").name == "easy" and e.policy_for(None).name == "easy"
    e.alloc(1, 16, 1, 1.0, qjob("batch", 2, duration=100))
    assert started(e.schedule(0.0).responses) == [1]
    e.alloc(2, 16, 1, 2.0, qjob("debug", 4, duration=10))  # debug's head: reserved at 100
    e.alloc(3, 16, 1, 3.0, qjob("debug", 1, duration=10))  # fcfs: waits behind it
    e.alloc(4, 16, 1, 4.0, qjob("batch", 4, duration=10))  # batch's head: after debug's forecasts
    e.alloc(5, 16, 1, 5.0, qjob("batch", 1, duration=10))  # easy: backfills
    out = e.schedule(10.0).responses
    assert started(out) == [5]
    ann = annotations(out)
    assert "behind higher-priority job 2" in ann[3]["reason_pending"]
    # fcfs forecasts job 3 at 110 behind job 2; batch plans around both.
    assert (ann[2]["t_estimate"], ann[3]["t_estimate"], ann[4]["t_estimate"]) == (100.0, 110.0, 120.0)


def test_queue_policy_per_queue_is_parsed_like_fluxion():
    o = EngineOptions.parse(["queue-policy-per-queue=debug:fcfs,batch:conservative"])
    assert o.queue_policy_per_queue == (("debug", "fcfs"), ("batch", "conservative"))
    o = EngineOptions.parse({"queue-policy-per-queue": "debug:fcfs batch:easy"})
    assert dict(o.queue_policy_per_queue) == {"debug": "fcfs", "batch": "easy"}
    assert EngineOptions.parse({"queue-policy-per-queue": {"x": "hybrid"}}).queue_policy_per_queue == (("x", "hybrid"),)


@pytest.mark.parametrize(
    "value, named",
    [
        ("debug", "'debug'"),
        ("debug:sjf", "'debug:sjf'"),
        (":fcfs", "':fcfs'"),
        ("debug:fcfs,batch", "'batch'"),
        ("debug:fcfs,debug:easy", "listed twice"),
        ("", "no entries"),
    ],
)
def test_bad_queue_policy_per_queue_is_refused_naming_the_entry(value, named):
    with pytest.raises(EngineError, match="queue-policy-per-queue") as err:
        EngineOptions.parse([f"queue-policy-per-queue={value}"])
    assert named in str(err.value)
    assert "fcfs, easy, conservative, hybrid" in str(err.value)


def test_bad_queue_policy_per_queue_fails_the_module_load_clearly():
    from fluxsched_py.flux.driver import parse_module_args

    with pytest.raises(ValueError, match="queue-policy-per-queue='debug:lifo'.*'debug:lifo'"):
        parse_module_args(["queue-policy-per-queue=debug:lifo"])


# -- queue-depth, budgets, bookkeeping ---------------------------------------------


def test_queue_depth_counts_jobs_over_all_queues():
    """queue-depth=N: a pass considers the first N pending jobs in (priority,
    t_submit, id) order over all queues, each queue taking its own."""
    e = engine(nodes=4, options=["queue-policy=easy", "queue-depth=2"])
    e.alloc(1, 16, 1, 1.0, qjob("a", 1))
    e.alloc(2, 16, 1, 2.0, qjob("b", 1))
    e.alloc(3, 16, 1, 3.0, qjob("a", 1))
    assert started(e.schedule(5.0).responses) == [1, 2]
    e.free(1)
    assert started(e.schedule(6.0).responses) == [3]


def test_budgeted_pass_over_several_queues_resumes_to_the_same_outcome():
    ticks = itertools.count()
    opts = ["queue-policy=easy", "queue-policy-per-queue=q1:conservative,q2:fcfs"]
    e = engine(nodes=4, options=opts, stopwatch=lambda: next(ticks))
    ref = engine(nodes=4, options=opts)
    for eng in (e, ref):
        for i in range(1, 120):
            spec = jobspec(nslots=1, cores=1 + i % 3, duration=10 + i % 7)
            spec["attributes"]["system"]["queue"] = f"q{i % 3}"
            eng.alloc(i, 16, 1, float(i), spec)
    full = ref.schedule(0.0).responses
    got, rounds = [], 0
    while True:
        r = e.schedule(0.0, budget=3)
        got += r.responses
        rounds += 1
        if not r.more:
            break
    assert rounds > 3
    key = lambda rs: sorted((x.id, x.type, str(x.annotations)) for x in rs)  # noqa: E731
    assert key(got) == key(full)


def test_a_queue_that_empties_is_forgotten_and_can_come_back():
    e = engine(nodes=2, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 1.0, qjob("a", 2, duration=10))
    e.alloc(2, 16, 1, 2.0, qjob("b", 1, duration=10))
    assert started(e.schedule(0.0).responses) == [1]
    e.cancel(2)
    e.schedule(1.0)
    assert e.pending() == [] and e.table.queues == {}
    e.alloc(3, 16, 1, 3.0, qjob("b", 1, duration=10))
    e.free(1)
    assert started(e.schedule(10.0).responses) == [3]


def test_pending_lists_one_queue_or_all():
    e = engine(nodes=1, options=["queue-policy=easy"])
    e.alloc(1, 16, 1, 1.0, qjob(None, 1))
    e.alloc(2, 16, 1, 2.0, qjob("a", 1))
    e.alloc(3, 16, 1, 3.0, qjob(None, 1))
    e.schedule(0.0)
    assert [j.id for j in e.pending()] == [2, 3]
    assert [j.id for j in e.pending("a")] == [2]
    assert [j.id for j in e.pending(None)] == [3]


# -- replay: the YAML jobspec list carries attributes.system.queue -------------------


WORKLOAD = """
nb_res: 4
jobs:
"""


def _yaml_job(i, submit, runtime, queue, nnodes, duration):
    return (
        f"  - id: {i}\n    submit: {submit}\n    runtime: {runtime}\n    jobspec:\n"
        "      version: 1\n"
        f"      resources: [{{type: node, count: {nnodes}, exclusive: true, with: [{{type: slot, count: 1,"
        " label: task, with: [{type: core, count: 1}]}]}]\n"
        "      tasks: [{command: ['true'], slot: task, count: {per_slot: 1}}]\n"
        f"      attributes: {{system: {{duration: {duration}, queue: {queue},"
        f" constraints: {{properties: [{queue}]}}}}}}\n"
    )


def test_replay_schedules_each_queue_of_a_jobspec_list_separately():
    text = WORKLOAD + "".join(
        [
            _yaml_job(0, 0, 100, "batch", 2, 100),
            _yaml_job(1, 1, 100, "batch", 2, 100),  # batch's head until t=100
            _yaml_job(2, 2, 10, "debug", 1, 10),
            _yaml_job(3, 3, 10, "debug", 2, 10),
            _yaml_job(4, 4, 10, "debug", 1, 10),
        ]
    )
    w = read_jobspec_list(text, name="queues")
    R = hosts_rv1([f"node{i}" for i in range(4)], 1)
    R["execution"]["properties"] = SPLIT
    r = replay(w, ResourceGraph.from_rv1(R), {"queue-policy": "fcfs"}, check=lambda e: e.check_invariants())
    assert r.starts() == {0: 0.0, 1: 100.0, 2: 2.0, 3: 12.0, 4: 22.0}


# -- properties on random workloads ------------------------------------------------


@st.composite
def queued_workloads(draw, full_walltime=True):
    nodes = draw(st.integers(2, 10))
    n = draw(st.integers(1, 25))
    jobs = []
    for i in range(n):
        submit = draw(st.integers(0, 60))
        res = draw(st.integers(1, nodes))
        wall = draw(st.integers(1, 40))
        run = wall if full_walltime else draw(st.integers(1, wall))
        queue = draw(st.sampled_from([None, "a", "b"]))
        jobs.append((i, float(submit), res, float(wall), float(run), queue))
    return nodes, jobs


def _replay(nodes, jobs, options, same_queue=None):
    w = Workload(
        [
            WorkloadJob(i, str(i), s, dataclasses.replace(node_request(r, wl), queue=same_queue or q), wl, run, r)
            for i, s, r, wl, run, q in jobs
        ],
        nodes,
    )
    return replay(w, nodes_graph(nodes), options, check=lambda e: e.check_invariants())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queued_workloads(full_walltime=True))
def test_conservative_queues_never_start_a_job_after_its_first_t_estimate(wl):
    nodes, jobs = wl
    assert_no_start_after_first_estimate(_replay(nodes, jobs, {"queue-policy": "conservative"}).records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queued_workloads(full_walltime=False))
def test_fcfs_queues_start_each_queue_in_its_own_order(wl):
    nodes, jobs = wl
    r = _replay(nodes, jobs, {"queue-policy": "fcfs"})
    for q in (None, "a", "b"):
        recs = sorted((rec for rec in r.records if rec.job.request.queue == q), key=lambda x: (x.job.submit, x.job.id))
        starts = [rec.start for rec in recs]
        assert all(s is not None for s in starts)
        assert starts == sorted(starts), (q, starts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    queued_workloads(full_walltime=False),
    st.sampled_from(["fcfs", "easy", "conservative", "hybrid"]),
    st.sampled_from(["fcfs", "easy", "conservative", "hybrid"]),
)
def test_mixed_queue_policies_run_every_job_and_keep_the_invariants(wl, pa, pb):
    nodes, jobs = wl
    r = _replay(nodes, jobs, {"queue-policy": "easy", "queue-policy-per-queue": f"a:{pa},b:{pb}"})
    assert all(rec.start is not None and rec.finish is not None for rec in r.records)
    assert all(rec.start >= rec.job.submit for rec in r.records)
    assert not any(math.isinf(rec.finish) for rec in r.records)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queued_workloads(full_walltime=False), st.sampled_from(["fcfs", "easy", "conservative"]))
def test_one_named_queue_schedules_exactly_like_no_queue(wl, policy):
    nodes, jobs = wl
    plain = _replay(nodes, [j[:5] + (None,) for j in jobs], {"queue-policy": policy})
    named = _replay(nodes, jobs, {"queue-policy": policy}, same_queue="batch")
    assert [(x.start, x.ranks, x.first_estimate) for x in plain.records] == [
        (x.start, x.ranks, x.first_estimate) for x in named.records
    ]
