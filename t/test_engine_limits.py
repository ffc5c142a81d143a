"""Run limits (engine/runlimits.py): what a user or a queue may hold running.

Hand counts on a 4-node, 4-core-per-node machine: which jobs start, which
wait with which ``reason_pending``, and that a held job takes no
reservation and holds back no job behind it.  The last tests replay random
workloads with limits and recount, after every pass, what each user and
queue holds from the running jobs themselves (an oracle independent of the
tally), with the resource invariants checked too.
"""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest

from fluxsched_py import memo
from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.engine.runlimits import RunLimits
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import Workload, WorkloadJob

from .test_engine_rfc27 import Checked, graph, jobspec

A, B, C = 1001, 1002, 1003


def limits(**tables):
    """RunLimits from keyword tables: ``default=`` (policy.scheduler.limits),
    ``instance=`` ([sched-py.limits]), ``queues={name: table}``."""
    conf = {}
    if "default" in tables:
        conf["policy"] = {"scheduler": {"limits": tables["default"]}}
    if "instance" in tables:
        conf["sched-py"] = {"limits": tables["instance"]}
    if "queues" in tables:
        conf["queues"] = {q: {"policy": {"scheduler": {"limits": t}}} for q, t in tables["queues"].items()}
    return RunLimits.from_config(conf, "sched-py")


def queued(spec, queue):
    spec = copy.deepcopy(spec)
    spec["attributes"]["system"]["queue"] = queue
    return spec


def node1(duration=100.0):
    return jobspec(nnodes=1, cores=4, duration=duration)


class Run:
    """An engine, its answers so far, and the jobs' last reason_pending."""

    def __init__(self, lim, policy="easy", **kw):
        options = {"queue-policy": policy, **{k.replace("_", "-"): v for k, v in kw.items()}}
        self.e = Checked(graph(), options, limits=lim)
        self.started: list[int] = []
        self.reason: dict[int, str] = {}
        self.estimate: dict[int, float] = {}
        self.now = 0.0

    def submit(self, jobid, user, spec):
        out = self.e.alloc(jobid, 16, user, float(jobid), spec)
        assert not out, out  # never denied

    def step(self, now=None):
        if now is not None:
            self.now = now
        for r in self.e.schedule(self.now).responses:
            if r.type is ResponseType.SUCCESS:
                self.started.append(r.id)
            elif r.type is ResponseType.ANNOTATE:
                sched = r.annotations["sched"]
                if sched.get("reason_pending"):
                    self.reason[r.id] = sched["reason_pending"]
                if "t_estimate" in sched:
                    self.estimate[r.id] = sched["t_estimate"]
            else:
                raise AssertionError(f"unexpected {r}")

    def free(self, jobid):
        self.e.free(jobid)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "hybrid"])
def test_a_users_third_node_waits_with_the_limit_named_while_another_user_starts(policy):
    r = Run(limits(default={"user": {"nodes": 2}}), policy)
    for jobid, user in ((1, A), (2, A), (3, A), (4, B)):
        r.submit(jobid, user, node1())
    r.step()
    assert r.started == [1, 2, 4]
    assert r.reason[3] == "user limit: 2 of 2 nodes in use"
    assert r.e.usage.user(A) == (2, 2, 8, 0) and r.e.usage.user(B) == (1, 1, 4, 0)
    # a node is free, and job 3 holds no reservation on it
    assert 3 not in r.e.planner and r.e.job(3).estimate is None and 3 not in r.estimate
    r.free(1)
    r.step(10)
    assert r.started == [1, 2, 4, 3]  # eligible at the next pass once A's usage dropped


def test_a_job_limit_and_a_core_limit_count_jobs_and_cores():
    r = Run(limits(default={"user": {"jobs": 2, "cores": 3}}))
    one_core = jobspec(cores=1, duration=100)
    for jobid in (1, 2, 3):
        r.submit(jobid, A, one_core)
    r.submit(4, B, jobspec(cores=2, duration=100))
    r.submit(5, B, jobspec(cores=2, duration=100))  # 4 cores: over B's 3
    r.step()
    assert r.started == [1, 2, 4]
    assert r.reason[3] == "user limit: 2 of 2 running jobs in use"
    assert r.reason[5] == "user limit: 2 of 3 cores in use, job needs 2"
    assert r.e.usage.user(A)[0] == 2 and r.e.usage.user(A)[2] == 2


def test_a_whole_node_job_is_checked_on_every_core_it_would_hold():
    # node[1] exclusive > slot > core[1]: it asks one core and holds the node's 4
    r = Run(limits(default={"user": {"cores": 6}}))
    r.submit(1, A, jobspec(nnodes=1, cores=1, duration=100))
    r.submit(2, A, jobspec(nnodes=1, cores=1, duration=100))
    r.step()
    assert r.started == [1] and r.e.usage.user(A) == (1, 1, 4, 0)
    assert r.reason[2] == "user limit: 4 of 6 cores in use, job needs 4"


def test_jobs_behind_a_held_job_backfill_and_it_blocks_no_one_under_fcfs():
    for policy in ("fcfs", "easy"):
        r = Run(limits(default={"user": {"nodes": 1}, "users": {str(B): {"nodes": 3}}}), policy)
        r.submit(1, A, node1())
        r.submit(2, A, node1())  # held: A has its one node
        r.submit(3, B, jobspec(nnodes=3, cores=4, duration=50))
        r.step()
        assert r.started == [1, 3], policy
        assert r.reason[2] == "user limit: 1 of 1 node in use"


def test_a_held_job_loses_its_reservation_and_the_next_job_reserves():
    # conservative: 4 nodes busy until t=100; A's 2-node job 5 gets a reservation,
    # then a reload lowers A's limit below what 5 would hold: 5 loses it.
    r = Run(None, "conservative")
    for jobid in (1, 2, 3, 4):
        r.submit(jobid, B, node1(100))
    r.submit(5, A, jobspec(nnodes=2, cores=4, duration=100))
    r.submit(6, C, jobspec(nnodes=2, cores=4, duration=100))
    r.step()
    assert r.started == [1, 2, 3, 4] and r.estimate[5] == 100.0 and r.estimate[6] == 100.0
    r.e.set_limits(limits(default={"users": {str(A): {"nodes": 1}}}))
    r.step(1)
    assert 5 not in r.e.planner and r.e.job(5).estimate is None
    assert r.reason[5] == "user limit: job needs 2 nodes, more than the limit of 1 (held until the limit is raised)"
    assert r.e.job(6).estimate == 100.0
    for jobid in (1, 2, 3, 4):
        r.free(jobid)
    r.step(100)
    assert r.started == [1, 2, 3, 4, 6]  # 5 can never start under this limit; it is not denied
    assert r.e.job(5) is not None and r.e.pending_count == 1
    r.e.set_limits(None)
    r.step(101)
    assert r.started == [1, 2, 3, 4, 6, 5]


def test_queue_totals_and_per_queue_user_limits():
    lim = limits(default={"user": {"jobs": 10}}, queues={"batch": {"total": {"nodes": 2}, "user": {"jobs": 1}}})
    r = Run(lim)
    r.submit(1, A, queued(node1(), "batch"))
    r.submit(2, A, queued(node1(), "batch"))  # A's second in batch: over batch's per-user jobs=1
    r.submit(3, B, queued(node1(), "batch"))
    r.submit(4, C, queued(node1(), "batch"))  # batch holds its 2 nodes
    r.submit(5, C, queued(node1(), "debug"))  # debug has no total
    r.step()
    assert sorted(r.started) == [1, 3, 5]
    assert r.reason[2] == "queue batch user limit: 1 of 1 running job in use"
    assert r.reason[4] == "queue batch limit: 2 of 2 nodes in use"
    assert r.e.usage.queue("batch") == (2, 2, 8, 0) and r.e.usage.queue("debug") == (1, 1, 4, 0)
    r.free(3)
    r.step(5)
    assert sorted(r.started) == [1, 3, 4, 5]  # C's job 4 takes batch's freed node; A's 2 still waits
    assert r.reason[2] == "queue batch user limit: 1 of 1 running job in use"


def test_instance_limits_count_a_user_over_every_queue():
    r = Run(limits(instance={"user": {"jobs": 2}}))
    r.submit(1, A, queued(node1(), "batch"))
    r.submit(2, A, queued(node1(), "debug"))
    r.submit(3, A, queued(node1(), "debug"))
    r.submit(4, B, node1())
    r.step()
    assert sorted(r.started) == [1, 2, 4]
    assert r.reason[3] == "user limit: 2 of 2 running jobs in use"


def test_a_per_user_override_and_a_queue_that_lifts_the_global_limit():
    lim = limits(
        default={"user": {"nodes": 1}, "users": {str(B): {"nodes": 3}}},
        queues={"big": {"user": {"nodes": -1}}},
    )
    r = Run(lim)
    for jobid in (1, 2):
        r.submit(jobid, A, node1())
    r.submit(3, B, node1())
    r.submit(4, B, node1())
    r.submit(5, C, queued(node1(), "big"))
    r.step()
    assert sorted(r.started) == [1, 3, 4, 5]
    assert r.reason[2] == "user limit: 1 of 1 node in use"


def test_a_reload_that_lowers_a_limit_leaves_running_jobs_alone():
    r = Run(limits(default={"user": {"nodes": 4}}))
    for jobid in (1, 2, 3):
        r.submit(jobid, A, node1())
    r.step()
    assert r.started == [1, 2, 3]
    r.submit(4, A, node1())
    r.e.set_limits(limits(default={"user": {"nodes": 2}}))
    r.step(1)
    assert len(r.e.running) == 3 and r.started == [1, 2, 3]  # nothing killed, nothing re-answered
    assert r.reason[4] == "user limit: 3 of 2 nodes in use"
    r.free(1)
    r.step(2)
    assert r.reason[4] == "user limit: 2 of 2 nodes in use" and r.started == [1, 2, 3]
    r.free(2)
    r.step(3)
    assert r.started == [1, 2, 3, 4]


def test_sjbf_backfill_does_not_start_two_jobs_past_a_limit():
    # sjbf sorts every candidate before it starts any: the start itself checks again
    r = Run(limits(default={"user": {"nodes": 2}, "users": {str(B): {"nodes": 8}}}), backfill_order="sjbf")
    r.submit(1, B, node1(100))  # runs until 100: 3 nodes free
    r.submit(2, B, jobspec(nnodes=4, cores=4, duration=100))  # the head: reserved at 100
    r.submit(3, A, node1(50))
    r.submit(4, A, node1(40))
    r.submit(5, A, node1(30))
    r.step()
    assert r.started == [1, 5, 4]
    assert r.reason[3] == "user limit: 2 of 2 nodes in use"
    assert r.estimate[2] == 100.0


def test_best_effort_jobs_are_neither_counted_nor_held():
    r = Run(limits(default={"user": {"jobs": 1}}))
    spec = node1()
    be = copy.deepcopy(spec)
    be["attributes"]["system"]["preemptible-after"] = 0
    r.submit(1, A, be)
    r.submit(2, A, be)
    r.submit(3, A, spec)
    r.step()
    assert sorted(r.started) == [1, 2, 3] and r.e.usage.user(A) == (1, 1, 4, 0)


def test_no_limit_means_no_observer():
    e = Engine(graph(), {"queue-policy": "easy"})
    before = list(e.table.observers)
    assert e.limits is None and e.usage is None
    e.set_limits(limits(default={"user": {"jobs": 1}}))
    assert e.usage in e.table.observers and len(e.table.observers) == len(before) + 1
    e.set_limits(None)
    assert e.usage is None and e.table.observers == before


def test_usage_counts_the_jobs_running_when_limits_are_first_set():
    r = Run(None)
    r.submit(1, A, node1())
    r.submit(2, A, node1())
    r.step()
    r.e.set_limits(limits(default={"user": {"nodes": 2}}))
    r.submit(3, A, node1())
    r.step(1)
    assert r.reason[3] == "user limit: 2 of 2 nodes in use"


def test_a_partial_free_lowers_usage():
    r = Run(limits(default={"user": {"nodes": 2}}))
    r.submit(1, A, jobspec(nnodes=2, cores=4, duration=100))
    r.submit(2, A, node1())
    r.step()
    assert r.started == [1]
    ranks = sorted(r.e.job(1).resources.ranks)
    R = r.e.job(1).resources.restrict(type(r.e.job(1).resources.ranks)([ranks[0]])).to_rv1(r.e.graph, 0, 100)
    r.e.free(1, R, final=False)
    assert r.e.usage.user(A)[1] == 1
    r.step(1)
    assert r.started == [1, 2]


# -- replays: the tally against a recount -----------------------------------------------


def _recount(e):
    """(user, queue) -> (jobs, nodes) of the running regular jobs, counted afresh."""
    out = {}
    for j in e.running:
        if j.preemptible_after is not None:
            continue
        key = (j.userid, j.request.queue or None)
        jobs, nodes = out.get(key, (0, 0))
        out[key] = (jobs + 1, nodes + len(j.resources.ranks))
    return out


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_replays_never_cross_a_limit_and_the_tally_matches_a_recount(policy, seed):
    rnd = random.Random(seed)
    nodes = 16
    jobs = []
    for i in range(150):
        n = rnd.choice([1, 1, 2, 3, 4, 8])
        wall = rnd.choice([50.0, 100.0, 400.0])
        run = wall * rnd.uniform(0.2, 1.0)
        jobs.append(WorkloadJob(i, str(i), i * 7.0, node_request(n, wall), wall, run, n, "", rnd.randrange(4)))
    w = Workload(jobs, nodes)
    lim = limits(default={"user": {"nodes": 6, "jobs": 3}, "users": {"2": {"nodes": 2}}, "total": {"nodes": 14}})
    cap = {0: 6, 1: 6, 2: 2, 3: 6}
    seen = {"passes": 0, "busy": 0}

    def check(e):
        e.check_invariants()
        counts = _recount(e)
        for (user, _), (njobs, nnodes) in counts.items():
            assert nnodes <= cap[user] and njobs <= 3
            assert e.usage.user(user)[:2] == (njobs, nnodes)
        assert sum(n for _, n in counts.values()) <= 14
        seen["passes"] += 1
        seen["busy"] += any(n == cap[u] for (u, _), (_, n) in counts.items())

    result = replay(w, nodes_graph(nodes), {"queue-policy": policy}, check=check, limits=lim)
    started = [r for r in result.records if r.start is not None]
    # jobs bigger than their user's node limit can never start; every other job does
    never = {j.id for j in jobs if j.nodes > cap[j.user]}
    assert {r.job.id for r in result.records if r.start is None} == never
    assert len(started) == len(jobs) - len(never)
    assert seen["busy"] > 0  # the limits did bind


def test_no_limit_replays_the_same_as_before():
    rnd = random.Random(7)
    jobs = []
    for i in range(80):
        n = rnd.choice([1, 2, 4])
        jobs.append(WorkloadJob(i, str(i), i * 5.0, node_request(n, 100.0), 100.0, 60.0, n, "", rnd.randrange(3)))
    w = Workload(jobs, 8)
    a = replay(w, nodes_graph(8), {"queue-policy": "easy"})
    b = replay(w, nodes_graph(8), {"queue-policy": "easy"}, limits=RunLimits.from_config({}))
    c = replay(w, nodes_graph(8), {"queue-policy": "easy"}, limits=limits(default={"user": {"nodes": 1000}}))
    assert a.starts() == b.starts() == c.starts()


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_random_replays_with_queues_keep_queue_and_instance_limits(policy):
    rnd = random.Random(11)
    jobs = []
    for i in range(150):
        n = rnd.choice([1, 1, 2, 3, 4])
        wall = rnd.choice([50.0, 100.0, 400.0])
        request = node_request(n, wall)
        if i % 2:
            request = dataclasses.replace(request, queue="batch")
        run = wall * rnd.uniform(0.2, 1.0)
        jobs.append(WorkloadJob(i, str(i), i * 5.0, request, wall, run, n, "", rnd.randrange(3)))
    lim = limits(
        instance={"user": {"nodes": 8}},
        queues={"batch": {"total": {"nodes": 6}, "user": {"jobs": 2}}},
    )
    seen = {"batch full": 0}

    def check(e):
        e.check_invariants()
        counts = _recount(e)
        for user in range(3):
            assert sum(n for (u, _), (_, n) in counts.items() if u == user) <= 8
            assert counts.get((user, "batch"), (0, 0))[0] <= 2
        batch = sum(n for (_, q), (_, n) in counts.items() if q == "batch")
        assert batch <= 6 and e.usage.queue("batch")[1] == batch
        seen["batch full"] += batch == 6

    result = replay(Workload(jobs, 16), nodes_graph(16), {"queue-policy": policy}, check=check, limits=lim)
    assert all(r.start is not None for r in result.records)  # no job is bigger than a limit
    assert seen["batch full"] > 0


def _annotated_run(policy, seed):
    """Every response of a seeded run (starts and annotations, in order):
    three users on 4 nodes under ``annotate-depth=3``, a backlog mostly held
    by user limits, jobs ending, cancelled and re-prioritized."""
    rng = random.Random(seed)
    lim = limits(default={"user": {"jobs": 2, "nodes": 3}, "users": {str(C): {"jobs": 1}}})
    e = Checked(graph(), {"queue-policy": policy, "annotate-depth": 3}, limits=lim)
    out = []
    running: list[int] = []
    pending: set[int] = set()
    now = 0.0
    for jobid in range(1, 241):
        now += rng.choice([0, 0, 1, 5])
        spec = jobspec(nnodes=rng.choice([1, 1, 2, 3]), cores=4, duration=rng.choice([50.0, 200.0]))
        assert not e.alloc(jobid, 16, rng.choice([A, A, B, C]), now, spec)
        pending.add(jobid)
        if running and rng.random() < 0.4:
            out += e.free(running.pop(rng.randrange(len(running))))
        if rng.random() < 0.05:
            out += e.cancel(victim := rng.choice(sorted(pending)))
            pending.discard(victim)
        if rng.random() < 0.03:
            out += e.prioritize([(rng.choice(sorted(pending)), rng.randint(0, 31))])
        for r in e.schedule(now).responses:
            out.append(r)
            if r.type is ResponseType.SUCCESS:
                running.append(r.id)
                pending.discard(r.id)
    return [(r.type, r.id, r.annotations) for r in out]


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_held_stretches_passed_over_change_no_start_and_no_annotation(monkeypatch, policy):
    # What Pass.jobs passes over whole (memo "held") against each job checked.
    for seed in (1, 2):
        monkeypatch.setenv(memo.ENV, "-held")
        reference = _annotated_run(policy, seed)
        monkeypatch.delenv(memo.ENV)
        assert _annotated_run(policy, seed) == reference
