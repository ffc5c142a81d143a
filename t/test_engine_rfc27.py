"""The engine against RFC 27 (sched.alloc/free/cancel/prioritize/expiration,
hello, feasibility) and the annotations of DESIGN.md.  One test per
requirement, named after it; resource invariants checked after every step."""

from __future__ import annotations

import math
import re

import pytest

from fluxsched_py.engine import Engine, EngineError, EngineOptions, JobState, ResponseType
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1


def jobspec(nnodes=0, cores=1, duration=0.0, exclusive=True, constraints=None, nslots=1):
    if nnodes:
        res = [
            {
                "type": "node",
                "count": nnodes,
                "exclusive": exclusive,
                "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": cores}]}],
            }
        ]
    else:
        res = [{"type": "slot", "count": nslots, "label": "task", "with": [{"type": "core", "count": cores}]}]
    system = {"duration": duration}
    if constraints is not None:
        system["constraints"] = constraints
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": system},
    }


def graph(nodes=4, cores=4, properties=None):
    R = hosts_rv1([f"node{i}" for i in range(nodes)], cores)
    if properties:
        R["execution"]["properties"] = properties
    return ResourceGraph.from_rv1(R)


class Checked(Engine):
    """An engine that checks the resource invariants after every input."""

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if name in ("alloc", "free", "cancel", "schedule", "hello", "prioritize", "resource_update"):

            def wrapped(*a, **kw):
                out = attr(*a, **kw)
                Engine.check_invariants(self)
                return out

            return wrapped
        return attr


def engine(nodes=4, cores=4, options=None, **kw):
    return Checked(graph(nodes, cores, kw.pop("properties", None)), options or ["queue-policy=easy"], **kw)


def by_type(responses, t):
    return [r for r in responses if r.type is t]


def test_alloc_success_carries_R_and_resource_summary():
    e = engine()
    assert e.alloc(1, 16, 100, 1.0, jobspec(nnodes=2, duration=60)) == []
    out = e.schedule(10.0).responses
    (ok,) = by_type(out, ResponseType.SUCCESS)
    p = ok.payload()
    assert p["id"] == 1 and p["type"] == 0
    ex = p["R"]["execution"]
    assert ex["starttime"] == 10.0 and ex["expiration"] == 70.0
    assert len(ok.resources.ranks) == 2
    assert p["annotations"]["sched"]["resource_summary"].startswith("rank")
    assert e.job(1).state is JobState.RUNNING


def test_a_driver_that_sends_nothing_gets_neither_R_nor_resource_summary():
    """The replay's engine (``build_R=False, summaries=False``) starts the
    same job on the same resources; its SUCCESS has no R and no summary."""
    answers = []
    for kw in ({}, {"build_R": False, "summaries": False}):
        e = Engine(graph(), ["queue-policy=fcfs"], **kw)
        e.alloc(1, 16, 100, 1.0, jobspec(nnodes=2, duration=60))
        (ok,) = by_type(e.schedule(10.0).responses, ResponseType.SUCCESS)
        answers.append(ok)
    full, bare = answers
    assert full.R is not None and "resource_summary" in full.annotations["sched"]
    assert bare.R is None and "resource_summary" not in bare.annotations["sched"]
    assert bare.resources.ranks == full.resources.ranks  # two graphs: their sets compare by what they name
    assert bare.resources.count("core") == full.resources.count("core") == 8
    assert (bare.start, bare.expiration) == (full.start, full.expiration)


def test_alloc_that_can_never_run_is_denied_with_a_note():
    e = engine(nodes=4)
    (deny,) = e.alloc(1, 16, 100, 1.0, jobspec(nnodes=5))
    assert deny.type is ResponseType.DENY and deny.payload()["note"]
    assert e.job(1) is None


def test_invalid_jobspec_is_denied_never_raised():
    e = engine()
    (deny,) = e.alloc(1, 16, 100, 1.0, {"version": 1, "resources": "nonsense"})
    assert deny.type is ResponseType.DENY and "invalid jobspec" in deny.note


def test_cancel_of_pending_alloc_responds_CANCEL():
    e = engine(nodes=1)
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1, duration=100))
    e.alloc(2, 16, 100, 2.0, jobspec(nnodes=1, duration=100))
    e.schedule(3.0)
    (c,) = e.cancel(2)
    assert c.payload() == {"id": 2, "type": 3}
    assert e.job(2) is None and e.pending_count == 0


def test_cancel_without_pending_alloc_is_ignored():
    e = engine()
    assert e.cancel(42) == []
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1))
    e.schedule(1.0)
    assert e.cancel(1) == []  # running: no pending alloc
    assert e.job(1).state is JobState.RUNNING


def test_second_alloc_for_a_pending_job_is_ignored():
    e = engine(nodes=1)
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.schedule(1.0)
    assert e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1)) == []
    assert e.pending_count == 1


def test_alloc_for_a_job_holding_resources_is_denied_cleanly():
    e = engine()
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1))
    e.schedule(1.0)
    (deny,) = e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1))
    assert deny.type is ResponseType.DENY
    assert e.job(1).state is JobState.RUNNING


def test_alloc_after_cancel_is_a_new_request():
    e = engine(nodes=1)
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.schedule(1.0)
    e.cancel(2)
    assert e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=10)) == []
    e.free(1)
    assert by_type(e.schedule(11.0).responses, ResponseType.SUCCESS)[0].id == 2


def test_free_releases_resources_and_forgets_the_job():
    e = engine(nodes=2)
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=2))
    e.schedule(1.0)
    assert not e.graph.free().ranks
    assert e.free(1, final=True) == []
    assert e.graph.free() == e.graph.all() and e.job(1) is None


def test_revoked_start_is_a_deny_never_counted_as_a_start():
    # The driver could not commit R (flux-core never saw the start): the
    # job leaves as denied, its nodes are free, and EASY++ takes no run time
    # from it (the user's next job still plans with its walltime).
    e = engine(nodes=2, options=["predict-runtimes=true"])
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=2, duration=100))
    assert by_type(e.schedule(1.0).responses, ResponseType.SUCCESS)
    (deny,) = e.revoke(1, "scheduler could not commit R to the KVS: ENOSPC")
    assert deny.type is ResponseType.DENY and deny.payload()["note"].endswith("ENOSPC")
    assert e.job(1) is None and e.graph.free() == e.graph.all()
    assert (e.stats["started"], e.stats["denied"]) == (0, 1)
    e.schedule(50.0)  # where a run time of a freed job would be measured
    e.alloc(2, 16, 100, 60.0, jobspec(nnodes=2, duration=100))
    assert e.job(2).duration == 100
    assert e.revoke(99, "x") == []  # an unknown job: ignored


def test_free_for_unknown_job_is_ignored():
    e = engine()
    assert e.free(99) == []


def test_partial_free_releases_only_the_ranks_in_R():
    e = engine(nodes=4)
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=4))
    (ok,) = by_type(e.schedule(1.0).responses, ResponseType.SUCCESS)
    e.free(1, {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}]}}, final=False)
    assert e.job(1).state is JobState.RUNNING
    assert str(e.graph.free().ranks) == "0-1"
    e.free(1, {"version": 1, "execution": {"R_lite": [{"rank": "2-3", "children": {"core": "0-3"}}]}}, final=True)
    assert e.graph.free() == e.graph.all()


def test_prioritize_reorders_the_queue_and_ignores_unknown_ids():
    e = engine(nodes=1, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.alloc(2, 16, 100, 2.0, jobspec(nnodes=1, duration=10))
    e.alloc(3, 16, 100, 3.0, jobspec(nnodes=1, duration=10))
    e.schedule(3.0)
    e.prioritize([(3, 100), (77, 5)])
    assert [j.id for j in e.pending()] == [3, 2]
    e.free(1)
    assert by_type(e.schedule(11.0).responses, ResponseType.SUCCESS)[0].id == 3


def test_expiration_moves_a_running_job_end_and_refuses_unknown_jobs():
    e = engine(nodes=1)
    e.alloc(1, 16, 100, 0.0, jobspec(nnodes=1, duration=100))
    e.schedule(0.0)
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    assert e.schedule(1.0).responses[0].annotations["sched"]["t_estimate"] == 100.0
    e.expiration(1, 50.0)
    out = e.schedule(2.0).responses
    assert out[0].annotations["sched"]["t_estimate"] == 50.0
    with pytest.raises(EngineError, match="does not currently have an allocation"):
        e.expiration(2, 10.0)


def test_hello_marks_running_jobs_allocated_minus_freed_ranks():
    g = graph(nodes=4)
    e = Checked(g, ["queue-policy=easy"])
    R = {"version": 1, "execution": {"R_lite": [{"rank": "0-2", "children": {"core": "0-3"}}], "expiration": 500.0}}
    e.hello([{"id": 7, "priority": 16, "userid": 1, "t_submit": 0.0, "R": R, "free": "2"}])
    assert e.job(7).state is JobState.RUNNING
    assert str(g.allocated().ranks) == "0-1"
    e.alloc(8, 16, 1, 1.0, jobspec(nnodes=4, duration=10))
    out = e.schedule(5.0).responses
    assert out[0].annotations["sched"]["t_estimate"] == 500.0


def test_reason_pending_blames_unlimited_jobs_not_down_resources_when_nothing_is_down():
    e = engine(nodes=1)
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1))  # no time limit
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nnodes=1, duration=60))
    (a,) = e.schedule(1.0).responses
    reason = a.annotations["sched"]["reason_pending"]
    assert (
        reason
        == "waiting for 1 node (0 free) — no start time can be estimated: the jobs holding them have no time limit"
    )


def test_resource_down_and_up_change_what_can_start():
    e = engine(nodes=2)
    e.resource_update(down="0-1")
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1))
    out = e.schedule(0.0).responses
    assert not by_type(out, ResponseType.SUCCESS)
    assert "cannot start on the resources that are up" in out[0].annotations["sched"]["reason_pending"]
    e.resource_update(up="1")
    (ok,) = by_type(e.schedule(1.0).responses, ResponseType.SUCCESS)
    assert str(ok.resources.ranks) == "1"


def test_feasibility_check_answers_none_or_a_reason():
    e = engine(nodes=4)
    assert e.feasibility(jobspec(nnodes=4)) is None
    assert e.feasibility(jobspec(nnodes=5))
    assert "invalid jobspec" in e.feasibility({"version": 1})


def test_ready_mode_follows_queue_depth():
    assert engine().ready_mode() == {"mode": "unlimited"}
    assert engine(options=["queue-depth=8"]).ready_mode() == {"mode": "limited", "limit": 8}


@pytest.mark.parametrize(
    "args, text",
    [
        (["queue-policy=sjf"], "queue-policy='sjf'"),
        (["reserve-depth=-1"], "reserve-depth"),
        (["queue-depth=lots"], "queue-depth"),
        (["policy=random"], "policy='random'"),
        (["log-level=chatty"], "log-level"),
        (["frobnicate=1"], "unknown option 'frobnicate'"),
        (["queue-policy"], "expected key=value"),
        (["log_level=debug"], "unknown option 'log_level' (did you mean 'log-level'?)"),
        (["mode=limited=0"], "mode='limited=0'"),
        (["mode=fast"], "mode='fast'"),
    ],
)
def test_bad_options_raise_the_engine_error_with_a_clear_message(args, text):
    with pytest.raises(EngineError, match=re.escape(text)):
        EngineOptions.parse(args)


def test_options_parse():
    o = EngineOptions.parse(["queue-policy=hybrid", "reserve-depth=4", "queue-depth=unlimited", "policy=high"])
    assert (o.queue_policy, o.reserve_depth, o.queue_depth, o.placement) == ("hybrid", 4, None, "high")


def test_sched_simple_mode_spellings_select_the_ready_mode():
    assert engine(options=["mode=limited=8"]).ready_mode() == {"mode": "limited", "limit": 8}
    assert engine(options=["queue-depth=8", "mode=unlimited"]).ready_mode() == {"mode": "unlimited"}


def test_resource_summary_is_in_flux_rlist_style():
    e = engine(nodes=2, cores=4, options=["policy=low"])
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=1))
    e.alloc(2, 16, 1, 0.0, jobspec(nnodes=1))
    e.alloc(3, 16, 1, 0.0, jobspec(nslots=2))
    out = {r.id: r.annotations["sched"]["resource_summary"] for r in e.schedule(0.0).responses}
    assert out == {1: "rank0/core0", 2: "rank1/core[0-3]", 3: "rank0/core[1-2]"}


def test_job_ids_in_annotations_are_written_by_the_job_name_hook():
    e = engine(nodes=1, options=["queue-policy=fcfs", "reserve-depth=1"], job_name=lambda i: f"J{i}")
    for i in (1, 2, 3):
        e.alloc(i, 16, 1, float(i), jobspec(nnodes=1, duration=10))
    out = {r.id: r.annotations["sched"] for r in e.schedule(3.0).responses}
    assert out[3]["reason_pending"] == "waiting for 1 node (0 free) — behind higher-priority job J2"


def test_t_estimate_and_reason_pending_for_a_reserved_job():
    e = engine(nodes=4, options=["queue-policy=easy"], time_format=lambda t: f"t={t:.0f}")
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=2, duration=100))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nnodes=3, duration=100))
    (a,) = e.schedule(1.0).responses
    sched = a.annotations["sched"]
    assert sched["t_estimate"] == 100.0
    assert sched["reason_pending"] == "waiting for 3 nodes (2 free) — reserved to start at t=100"
    assert sched["jobs_ahead"] == 0


def test_reason_pending_says_when_free_resources_are_held_for_reservations_ahead():
    e = engine(nodes=2, options=["queue-policy=conservative"], time_format=lambda t: f"t={t:.0f}")
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nnodes=2, duration=100))  # reserved at t=100, after job 1
    e.alloc(3, 16, 1, 2.0, jobspec(nnodes=1, duration=500))  # fits the free node, but would delay job 2
    out = {r.id: r.annotations["sched"] for r in e.schedule(2.0).responses if r.annotations}
    assert out[3]["t_estimate"] == 200.0
    assert out[3]["reason_pending"] == (
        "waiting for 1 node (1 free), held for jobs reserved ahead of it — reserved to start at t=200"
    )


def test_every_reserved_job_gets_t_estimate_under_conservative():
    e = engine(nodes=2, options=["queue-policy=conservative"])
    for i in range(1, 5):
        e.alloc(i, 16, 1, float(i), jobspec(nnodes=2, duration=10))
    out = e.schedule(5.0).responses
    est = {r.id: r.annotations["sched"].get("t_estimate") for r in out if r.type is ResponseType.ANNOTATE}
    assert est == {2: 15.0, 3: 25.0, 4: 35.0}


def test_annotate_only_when_something_changed():
    e = engine(nodes=1)
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    e.alloc(2, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    assert len(e.schedule(0.0).responses) == 2
    assert e.schedule(0.0).responses == []
    e.alloc(3, 16, 1, 1.0, jobspec(nnodes=1, duration=100))
    out = e.schedule(1.0).responses
    assert [r.id for r in out] == [3]  # job 2's annotations did not change


def test_keys_that_no_longer_apply_are_deleted_with_null():
    e = engine(nodes=1, options=["queue-policy=easy", "annotate-depth=1"])
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    e.alloc(2, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    e.schedule(0.0)
    e.alloc(3, 16, 1, 1.0, jobspec(nnodes=1, duration=100))
    e.prioritize([(3, 1000)])  # job 3 becomes the head: job 2 loses its reservation
    out = {r.id: r.annotations["sched"] for r in e.schedule(1.0).responses}
    assert out[2] == {"t_estimate": None, "reason_pending": None, "jobs_ahead": None}
    assert out[3]["t_estimate"] == 100.0
    e.free(1)
    (ok,) = by_type(e.schedule(50.0).responses, ResponseType.SUCCESS)
    assert ok.id == 3
    assert ok.annotations["sched"]["t_estimate"] is None and ok.annotations["sched"]["reason_pending"] is None


def test_reason_pending_blocked_by_constraint():
    e = engine(nodes=2, properties={"login": "0-1"})
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=1, duration=10, constraints={"properties": ["^login"]}))
    (d,) = e.alloc(1, 16, 1, 0.0, jobspec(nslots=1, duration=10, constraints={"properties": ["^login"]}))
    assert d.type is ResponseType.DENY  # no node satisfies it: denied at alloc
    e = engine(nodes=2, properties={"login": "0"})
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=100))  # takes a node
    e.alloc(2, 16, 1, 0.0, jobspec(nslots=1, duration=10, constraints={"properties": ["^login"]}))
    out = {r.id: r for r in e.schedule(0.0).responses}
    if out[1].resources.ranks == e.graph.ranks.lowest(1):  # job 1 took rank 0 (login): job 2 runs on 1
        assert out[2].type is ResponseType.SUCCESS
    else:
        assert out[2].annotations["sched"]["reason_pending"].startswith("blocked by constraint: properties=^login")


def test_budgeted_pass_yields_and_resumes_to_the_same_outcome():
    ticks = iter(range(10**9))
    e = engine(nodes=4, cores=4, options=["queue-policy=easy"], stopwatch=lambda: next(ticks))
    ref = engine(nodes=4, cores=4, options=["queue-policy=easy"])
    for eng in (e, ref):
        for i in range(1, 200):
            eng.alloc(i, 16, 1, float(i), jobspec(nslots=1, cores=1, duration=10 + i % 7))
    full = ref.schedule(0.0).responses
    got, rounds = [], 0
    while True:
        r = e.schedule(0.0, budget=3)  # a few steps of work per call
        got += r.responses
        rounds += 1
        if not r.more:
            break
    assert rounds > 1
    started = lambda rs: sorted(x.id for x in rs if x.type is ResponseType.SUCCESS)  # noqa: E731
    assert started(got) == started(full) and len(started(full)) == 16


def test_unlimited_duration_job_has_no_expiration_and_blocks_forever():
    e = engine(nodes=1)
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=0))
    (ok,) = e.schedule(0.0).responses
    assert ok.R["execution"]["expiration"] == 0.0 and e.job(1).expiration == math.inf
    e.alloc(2, 16, 1, 0.0, jobspec(nnodes=1, duration=5))
    (a,) = e.schedule(1.0).responses
    assert "t_estimate" not in a.annotations["sched"]


def test_the_engine_never_imports_flux_or_zmq():
    import fluxsched_py.engine as mod

    src = open(mod.__file__).read()
    assert not re.search(r"^\s*(import|from)\s+(flux|zmq)\b", src, re.M)
    assert "time.time(" not in src


def test_queue_annotation_for_named_queues():
    e = engine(nodes=1)
    spec = jobspec(nnodes=1, duration=10)
    spec["attributes"]["system"]["queue"] = "batch"
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=10))
    e.alloc(2, 16, 1, 0.0, spec)
    out = {r.id: r for r in e.schedule(0.0).responses}
    assert out[2].annotations["sched"]["queue"] == "batch"


def test_queue_depth_bounds_the_jobs_a_pass_considers():
    e = engine(nodes=4, options=["queue-policy=easy", "queue-depth=2"])
    for i in range(1, 5):
        e.alloc(i, 16, 1, float(i), jobspec(nnodes=1, duration=10))
    started = [r.id for r in e.schedule(5.0).responses if r.type is ResponseType.SUCCESS]
    assert started == [1, 2]
    started = [r.id for r in e.schedule(6.0).responses if r.type is ResponseType.SUCCESS]
    assert started == []  # nothing changed: no new pass
    e.free(1)
    assert [r.id for r in e.schedule(7.0).responses if r.type is ResponseType.SUCCESS] == [3, 4]


def estimates(responses):
    return {
        r.id: r.annotations["sched"]["t_estimate"]
        for r in responses
        if r.type is ResponseType.ANNOTATE and "t_estimate" in r.annotations["sched"]
    }


def test_fcfs_posts_t_estimate_for_the_jobs_behind_the_head_in_queue_order():
    # sched-fifo's forecast (flux-core t2306): the second job's estimate is after the head's.
    e = engine(nodes=2, cores=2, options=["queue-policy=fcfs"], time_format=lambda t: f"t={t:.0f}")
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=4, duration=3600))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nslots=4, duration=3600))
    e.alloc(3, 16, 1, 2.0, jobspec(nslots=4, duration=3600))
    out = e.schedule(3.0).responses
    assert estimates(out) == {2: 3600.0, 3: 7200.0}
    reasons = {r.id: r.annotations["sched"]["reason_pending"] for r in out}
    assert reasons[2] == "waiting for 4 cores (0 free) — reserved to start at t=3600"
    assert reasons[3] == "waiting for 4 cores (0 free), behind higher-priority job 2 — reserved to start at t=7200"


def test_fcfs_forecast_never_puts_a_job_before_the_one_ahead_of_it():
    e = engine(nodes=2, cores=2, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=2, duration=100))
    e.alloc(2, 16, 1, 0.0, jobspec(nslots=2, duration=1000))
    e.schedule(0.0)
    e.alloc(3, 16, 1, 1.0, jobspec(nslots=4, duration=50))  # the head: waits for job 2
    e.alloc(4, 16, 1, 2.0, jobspec(nslots=1, duration=10))  # would fit at 100, but may not overtake
    e.alloc(5, 16, 1, 3.0, jobspec(nslots=1, duration=10))
    assert estimates(e.schedule(3.0).responses) == {3: 1000.0, 4: 1050.0, 5: 1050.0}


def test_fcfs_forecast_is_bounded_by_reserve_depth():
    e = engine(nodes=1, cores=1, options=["queue-policy=fcfs", "reserve-depth=2"])
    for i in range(1, 6):
        e.alloc(i, 16, 1, float(i), jobspec(nslots=1, duration=10))
    out = e.schedule(5.0).responses
    assert estimates(out) == {2: 15.0, 3: 25.0}  # the head and one behind it


def test_fcfs_forecast_stops_behind_a_job_without_time_limit_and_stale_estimates_are_deleted():
    # flux-core t2306 "forecast stale": an unlimited job becomes the head.
    e = engine(nodes=1, cores=4, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=4, duration=300))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nslots=4, duration=300))
    assert estimates(e.schedule(1.0).responses) == {2: 300.0}
    e.alloc(3, 16, 1, 2.0, jobspec(nslots=4))  # no time limit
    e.prioritize([(3, 20)])
    out = e.schedule(2.0).responses
    sched = {r.id: r.annotations["sched"] for r in out}
    assert sched[3]["t_estimate"] == 300.0
    assert sched[2]["t_estimate"] is None  # deleted: it can never start before job 3 ends


def test_fcfs_forecast_extends_to_new_jobs_and_moves_earlier_when_a_job_ends_early():
    e = engine(nodes=1, cores=1, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=1, duration=100))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nslots=1, duration=50))
    assert estimates(e.schedule(1.0).responses) == {2: 100.0}
    e.alloc(3, 16, 1, 2.0, jobspec(nslots=1, duration=50))
    assert estimates(e.schedule(2.0).responses) == {3: 150.0}  # job 2's forecast is kept
    e.free(1)
    out = e.schedule(40.0).responses
    assert [r.id for r in by_type(out, ResponseType.SUCCESS)] == [2]
    assert estimates(out) == {3: 90.0}


def test_a_job_started_while_a_job_ahead_waits_is_annotated_backfill_with_that_job():
    # sched-backfill's annotation (flux-core t2307): the backfilled job names the head.
    e = engine(nodes=2, cores=2, options=["queue-policy=easy"], job_name=lambda i: f"J{i}")
    e.alloc(1, 16, 1, 0.0, jobspec(nslots=2, duration=3600))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nslots=4))  # the head: waits for job 1
    e.alloc(3, 16, 1, 2.0, jobspec(nslots=1, duration=60))  # ends before the head's start
    e.alloc(4, 16, 1, 3.0, jobspec(nslots=1, duration=4000))  # would delay the head
    out = e.schedule(3.0).responses
    (ok,) = by_type(out, ResponseType.SUCCESS)
    assert ok.id == 3 and ok.annotations["sched"]["backfill"] == "J2"
    # a job that starts in queue order is not a backfill
    e.cancel(2)
    e.cancel(4)
    e.alloc(5, 16, 1, 4.0, jobspec(nslots=1, duration=60))
    (ok,) = by_type(e.schedule(4.0).responses, ResponseType.SUCCESS)
    assert ok.id == 5 and "backfill" not in ok.annotations["sched"]


@pytest.mark.parametrize("policy", ["conservative", "hybrid"])
def test_backfill_annotation_under_conservative_names_the_first_job_waiting_ahead(policy):
    e = engine(nodes=2, cores=1, options=[f"queue-policy={policy}"])
    e.alloc(1, 16, 1, 0.0, jobspec(nnodes=1, duration=100))
    e.schedule(0.0)
    e.alloc(2, 16, 1, 1.0, jobspec(nnodes=2, duration=100))  # reserved at 100
    e.alloc(3, 16, 1, 2.0, jobspec(nnodes=2, duration=100))  # reserved at 200
    e.alloc(4, 16, 1, 3.0, jobspec(nnodes=1, duration=50))  # fits before 100
    (ok,) = by_type(e.schedule(3.0).responses, ResponseType.SUCCESS)
    assert ok.id == 4 and ok.annotations["sched"]["backfill"] == "2"


@pytest.mark.parametrize(("depth", "forecasts"), [([], 8), (["reserve-depth=3"], 3), (["reserve-depth=unlimited"], 12)])
def test_fcfs_reserve_depth_unlimited_forecasts_every_pending_job(depth, forecasts):
    """``reserve-depth=unlimited`` is not the same as leaving it out (fcfs's default is 8)."""
    e = engine(nodes=1, cores=1, options=["queue-policy=fcfs", *depth])
    for i in range(1, 14):
        e.alloc(i, 16, 1, float(i), jobspec(nslots=1, duration=10.0))
    estimates = {}
    for r in e.schedule(0.0).responses:
        est = (r.annotations or {}).get("sched", {}).get("t_estimate")
        if est is not None:
            estimates[r.id] = est
    assert len(estimates) == forecasts
    assert sorted(estimates.values()) == [10.0 * k for k in range(1, forecasts + 1)]


def test_worstfit_spreads_jobs_over_the_least_loaded_nodes_as_sched_simple_does():
    """flux-core's sched-simple sorts nodes by free cores, descending (ties by
    rank), and takes the lowest free core ids; its t2300 expects 1-core jobs
    on two idle nodes at rank0/core0, rank1/core0, rank0/core1, rank1/core1."""
    e = engine(nodes=2, cores=2, options=["policy=worstfit", "queue-policy=fcfs"])
    for i in range(1, 5):
        e.alloc(i, 16, 1, float(i), jobspec(nslots=1))
    out = {r.id: r.annotations["sched"]["resource_summary"] for r in e.schedule(0.0).responses}
    assert out == {1: "rank0/core0", 2: "rank1/core0", 3: "rank0/core1", 4: "rank1/core1"}
    # a multi-slot job fills the most-free node first, then the next
    e = engine(nodes=3, cores=4, options=["policy=worstfit", "queue-policy=fcfs"])
    for i, n in ((1, 1), (2, 6), (3, 1)):
        e.alloc(i, 16, 1, float(i), jobspec(nslots=n))
    out = {r.id: r.annotations["sched"]["resource_summary"] for r in e.schedule(0.0).responses}
    assert out == {1: "rank0/core0", 2: "rank1/core[0-3] rank2/core[0-1]", 3: "rank0/core1"}


def test_hello_recovers_a_job_on_a_down_or_drained_rank():
    """Found by t/test_engine_model.py (alloc, schedule, down rank 0, restart):
    a restarted scheduler dropped a running job whose ranks were down or
    drained at hello, so its nodes looked free while it still ran."""
    R = {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}], "expiration": 0.0}}
    g = graph(nodes=4)
    e = Checked(g, ["queue-policy=easy"])
    g.set_down("0")
    g.drain("1", "maintenance")
    e.hello([{"id": 7, "priority": 16, "userid": 1, "t_submit": 0.0, "R": R}])
    assert e.job(7).state is JobState.RUNNING
    assert str(g.allocated().ranks) == "0-1"
    g.set_up("0")
    g.undrain("1")
    e.alloc(8, 16, 1, 1.0, jobspec(nnodes=4))
    assert not by_type(e.schedule(2.0).responses, ResponseType.SUCCESS)  # job 7 still holds ranks 0-1


def test_partial_free_of_cores_releases_the_whole_node_from_the_job():
    """Found by t/test_engine_model.py (4-node job, partial free of rank 1's
    cores, pass): the job kept rank 1's node in its allocation while the
    graph had freed it, so the next job on rank 1 overlapped it."""
    e = engine(nodes=4, options=["queue-policy=fcfs"])
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=4))
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=5))
    e.schedule(1.0)
    e.free(1, {"version": 1, "execution": {"R_lite": [{"rank": "1", "children": {"core": "0-3"}}]}}, final=False)
    assert str(e.job(1).resources.ranks) == "0,2-3"
    (ok,) = by_type(e.schedule(2.0).responses, ResponseType.SUCCESS)
    assert str(ok.resources.ranks) == "1" and ok.resources.isdisjoint(e.job(1).resources)


def test_a_free_on_a_shrunk_rank_gives_nothing_back(caplog):
    """Found by t/test_engine_model.py (job on rank 3, shrink 3, free it,
    alloc 1 core): the planner counted the shrunk rank's cores as free
    again and matched a job there (the graph refused it)."""
    e = engine(nodes=2, options=["queue-policy=easy", "policy=low"])
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1))
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1))
    e.schedule(1.0)
    assert str(e.job(1).resources.ranks) == "0"
    e.resource_update(shrink="0")
    e.alloc(3, 16, 100, 2.0, jobspec(cores=1, duration=10))
    e.schedule(1.5)  # job 3 waits; the planner's free set is current when the free comes
    e.free(1)
    with caplog.at_level("ERROR", logger="fluxsched_py"):
        out = e.schedule(2.0).responses
    assert not by_type(out, ResponseType.SUCCESS)  # rank 1 is busy, rank 0 is gone
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # nothing matched on rank 0
    e.free(2)
    (ok,) = by_type(e.schedule(3.0).responses, ResponseType.SUCCESS)
    assert str(ok.resources.ranks) == "1"


def test_no_reservation_on_a_shrunk_rank():
    """A running job's end on a shrunk rank frees nothing to plan with."""
    e = engine(nodes=2, options=["queue-policy=conservative", "policy=low"])
    e.alloc(1, 16, 100, 1.0, jobspec(nnodes=1, duration=10))
    e.alloc(2, 16, 100, 1.0, jobspec(nnodes=1, duration=100))
    e.schedule(1.0)
    e.resource_update(shrink="0")
    e.alloc(3, 16, 100, 2.0, jobspec(nnodes=1, duration=10))
    (ann,) = by_type(e.schedule(2.0).responses, ResponseType.ANNOTATE)
    assert ann.annotations["sched"]["t_estimate"] == 101.0  # after job 2 on rank 1, not job 1 on rank 0


def test_expiration_into_a_reservation_keeps_the_running_job_in_the_plan(caplog):
    """Found by t/test_engine_model.py: job 4 ran until 110, job 6 was
    reserved at 110 on its cores; at 110 sched.expiration moved job 4's end
    to 130.  The two spans overlapped in the plan, re-planning job 6 erased
    job 4's hold, and the pass matched job 6 onto job 4's cores (the graph
    refused the allocation)."""
    e = engine(nodes=1, options=["queue-policy=conservative"])
    e.alloc(4, 16, 100, 100.0, jobspec(cores=1, nslots=3, duration=10))
    e.schedule(100.0)
    e.alloc(6, 16, 100, 105.0, jobspec(cores=1, nslots=4))
    (ann,) = e.schedule(105.0).responses
    assert ann.annotations["sched"]["t_estimate"] == 110.0
    e.expiration(4, 130.0)
    with caplog.at_level("ERROR", logger="fluxsched_py"):
        out = e.schedule(110.0).responses
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert not by_type(out, ResponseType.SUCCESS)
    assert by_type(out, ResponseType.ANNOTATE)[0].annotations["sched"]["t_estimate"] == 130.0
