"""The caching the engine and planner rely on: request facts computed once,
interned request keys, and shape ids that do not outlive the pending jobs
that use them."""

from __future__ import annotations

import dataclasses

from fluxsched_py.engine import Engine, EngineOptions
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.policy import POLICY_DEFAULT, REGISTRY, make_policy

from .test_engine_rfc27 import graph, jobspec


def _walk_counts(request: Request) -> tuple[int, int, int]:
    """(nodes, cores, gpus) the request needs at least, by walking its tree
    (an oracle independent of Request's own facts)."""

    def walk(vertices, mult):
        n = c = g = 0
        for v in vertices:
            k = mult * v.count.min
            if v.type == "node":
                n += k
            elif v.type == "core":
                c += k
            elif v.type == "gpu":
                g += k
            dn, dc, dg = walk(v.with_, k)
            n, c, g = n + dn, c + dc, g + dg
        return n, c, g

    return walk(request.resources, 1)


def test_request_facts_agree_with_a_walk_of_the_tree():
    for nnodes, cores, nslots in [(0, 1, 1), (0, 4, 3), (2, 1, 1), (3, 2, 2)]:
        r = parse_jobspec(jobspec(nnodes=nnodes, cores=cores, nslots=nslots))
        n, c, _ = _walk_counts(r)
        assert r.nnodes == n
        assert r.nslots * r.slot_size == c
        if nnodes:
            assert r.exclusive and r.lower_bounds == (("node", n),)
        else:
            assert r.lower_bounds == (("core", c),)


def test_facts_are_recomputed_by_replace_and_keys_are_interned():
    core = ResourceRequest("core", Count.fixed(2))
    slot = ResourceRequest("slot", Count.fixed(3), (core,), label="task")
    r = Request((slot,), duration=10.0)
    assert r.slot_shape == (3, 2) and r.whole_nodes == 0
    longer = dataclasses.replace(r, duration=20.0)
    assert longer.key is r.key  # same shape: one key object
    bigger = dataclasses.replace(r, resources=(dataclasses.replace(slot, count=Count.fixed(5)),))
    assert bigger.slot_shape == (5, 2) and bigger.key != r.key and bigger.nslots == 5
    assert parse_jobspec(jobspec(cores=2)).key is parse_jobspec(jobspec(cores=2)).key


def test_shape_ids_are_forgotten_with_their_last_pending_job():
    """A long-running broker sees endless distinct walltimes: only shapes of
    pending jobs are remembered."""
    e = Engine(graph(nodes=1, cores=1), ["queue-policy=fcfs"])
    now = 0.0
    for jobid in range(1, 200):
        e.alloc(jobid, 16, 0, now, jobspec(cores=1, duration=100.0 + jobid))
        e.schedule(now)
        assert len(e.table._shapes) <= 1
        e.free(jobid)
        now += 1.0
    e.alloc(1000, 16, 0, now, jobspec(cores=1, duration=5.0))
    e.alloc(1001, 16, 0, now, jobspec(cores=1, duration=5.0))
    e.alloc(1002, 16, 0, now, jobspec(cores=1, duration=6.0))
    assert e.job(1000).shape_id == e.job(1001).shape_id != e.job(1002).shape_id
    e.schedule(now)  # 1000 starts; 1001 and 1002 wait
    assert len(e.table._shapes) == 2
    e.cancel(1002)
    assert len(e.table._shapes) == 1


def test_policies_come_from_the_registry_and_none_is_unlimited():
    assert tuple(REGISTRY) == ("fcfs", "easy", "conservative", "hybrid")
    assert make_policy("fcfs").reserve_depth == 8
    assert make_policy("fcfs", None).reserve_depth is None
    assert EngineOptions.parse(["reserve-depth=unlimited"]).reserve_depth is None
    assert EngineOptions.parse([]).reserve_depth is POLICY_DEFAULT
    assert EngineOptions.parse(["annotate-depth=unlimited"]).annotate_depth is None
    assert EngineOptions.parse(["annotate-depth=0"]).annotate_depth == 0


def test_annotate_depth_none_annotates_every_pending_job():
    for opt, want in (("annotate-depth=unlimited", 80), ("annotate-depth=5", 5), ("annotate-depth=0", 0)):
        e = Engine(graph(nodes=1, cores=1), ["queue-policy=fcfs", opt])
        for jobid in range(1, 82):
            e.alloc(jobid, 16, 0, float(jobid), jobspec(cores=1, duration=10.0))
        out = e.schedule(100.0).responses
        annotated = {r.id for r in out if r.annotations and "reason_pending" in r.annotations.get("sched", {})}
        assert len(annotated) == want, opt


def test_finished_jobs_and_emptied_queues_leave_no_cycles_for_the_collector():
    """A queue emptied of pending jobs is dropped at the next pass; its stale
    jobs point back at it, so unless it lets go of them, every such queue
    and the jobs it held (with their resource sets) are a reference cycle
    only the cyclic collector frees (in the 100,000-job replay, four
    objects a job, and the collections to find them: issue 15)."""
    import gc

    e = Engine(graph(nodes=4, cores=4), ["queue-policy=fcfs"])
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for jobid in range(1, 41):  # one job at a time: the queue empties and goes every pass
            e.alloc(jobid, 0, 0, float(jobid), jobspec(cores=2))
            assert [r.id for r in e.schedule(float(jobid)).responses] == [jobid]
            e.free(jobid)
        e.schedule(41.0)
        gc.collect()
        left = [o for o in gc.garbage if type(o).__name__ in ("Job", "JobQueue")]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    assert left == []
