"""Best-effort jobs and preemption (docs/rfcs/preemption.md).

The must-hold: Batsim's seed-1 HPC workload (250 jobs, 128 nodes) plus a
campaign of 2,000 one-node best-effort jobs submitted at t=0 with
``preemptible-after: 0``.  Under fcfs, easy and conservative every regular
job starts exactly when it does in a replay of the regular jobs alone (the
oracle is that second replay), utilization is higher, and the campaign's
completed work is reported.  Then small hand-built cases: the victim
choice, the protected window, the handoff (SUCCESS only once every victim
is freed; nobody else takes the resources meanwhile), cancel, and a
malformed attribute.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from fluxsched_py.engine import Engine, JobState, ResponseType
from fluxsched_py.engine.besteffort import choose_victims, lost_work
from fluxsched_py.engine.options import PLACEMENTS
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.match.policy import get_policy
from fluxsched_py.planner import Placement
from fluxsched_py.replay.metrics import summarize
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.records import COMPLETED, PREEMPTED
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import Workload, load_workload

DATA = Path(__file__).parent / "data" / "batsim"
MIX = DATA / "seed1_campaign2000.json.gz"


def _regular_only(w: Workload) -> Workload:
    return Workload([j for j in w.jobs if j.preemptible_after is None], w.nb_res, w.name)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_regular_jobs_lose_nothing_to_a_best_effort_campaign(policy):
    mixed = load_workload(MIX)
    be = [j for j in mixed.jobs if j.preemptible_after is not None]
    assert len(be) >= 2000 and all(j.submit == 0 and j.nodes == 1 and j.preemptible_after == 0 for j in be)
    alone = replay(_regular_only(mixed), nodes_graph(128), {"queue-policy": policy})
    both = replay(mixed, nodes_graph(128), {"queue-policy": policy})
    expected = alone.starts()
    got = both.starts()
    assert len(expected) == 250
    late = {i: (expected[i], got[i]) for i in expected if got[i] is None or abs(got[i] - expected[i]) > 1e-6}
    assert not late, f"{len(late)} regular jobs moved, e.g. {list(late.items())[:3]}"
    # The best-effort jobs did run, were preempted, and their work is reported.
    recs = [r for r in both.records if r.job.preemptible_after is not None]
    assert sum(r.state == COMPLETED for r in recs) > 100
    assert sum(r.state == PREEMPTED for r in recs) > 100
    for r in both.records:  # a regular job is never preempted
        if r.job.preemptible_after is None:
            assert r.state != PREEMPTED and r.preemptions == 0
    s_alone, s_both = summarize(alone), summarize(both)
    assert s_both.utilization == pytest.approx(s_alone.utilization)  # regular work, same window
    assert s_both.utilization_with_besteffort > s_alone.utilization + 0.1
    assert s_both.besteffort == len(be) and s_both.besteffort_completed_nh > 10
    assert s_both.preemptions == both.stats["preemptions"] == sum(r.preemptions for r in recs)


def test_resubmitted_campaign_completes_and_has_a_makespan():
    both = replay(load_workload(MIX), nodes_graph(128), {"queue-policy": "easy"}, resubmit_preempted=True)
    recs = [r for r in both.records if r.job.preemptible_after is not None]
    assert all(r.state == COMPLETED for r in recs)
    s = summarize(both)
    (name, makespan), *_ = s.campaigns
    assert name == "cigri-1" and makespan == pytest.approx(max(r.finish for r in recs))


# -- small cases ---------------------------------------------------------------


def be_request(nodes: int, walltime: float, pa: float = 0.0):
    return dataclasses.replace(node_request(nodes, walltime), preemptible_after=pa)


def engine(n: int, **opts) -> Engine:
    return Engine(nodes_graph(n), {"queue-policy": "easy", **opts}, build_R=False, time_format=lambda t: f"t={t:.0f}s")


def started(result) -> dict[int, set[int]]:
    return {r.id: set(r.resources.ranks) for r in result.responses if r.type is ResponseType.SUCCESS}


def test_best_effort_jobs_fill_idle_nodes_and_say_so():
    e = engine(4)
    for i in range(6):
        e.alloc(100 + i, 0, 0, 0.0, be_request(1, 100.0))
    r = e.schedule(0.0)
    assert set(started(r)) == {100, 101, 102, 103}
    ann = {x.id: x.annotations["sched"] for x in r.responses}
    assert ann[100]["besteffort"].startswith("preemptible from")
    assert ann[104]["reason_pending"].startswith("best-effort")
    assert not r.preempt


def spec(nnodes: int, ncores: int, pa: float | None = None) -> dict:
    """``nnodes`` whole nodes, or ``ncores`` one-core slots; best-effort when ``pa`` is set."""
    if nnodes:
        slot = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 4}]}
        res = [{"type": "node", "count": nnodes, "exclusive": True, "with": [slot]}]
    else:
        res = [{"type": "slot", "count": ncores, "label": "task", "with": [{"type": "core", "count": 1}]}]
    system: dict = {"duration": 100.0}
    if pa is not None:
        system["preemptible-after"] = pa
    tasks = [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}]
    return {"version": 1, "resources": res, "tasks": tasks, "attributes": {"system": {**system}}}


def _placed(placement: str, mode: str, besteffort: list[dict], regular: dict) -> tuple[tuple, list[int]]:
    """Start ``besteffort`` on an idle 4 x 4-core machine, then ``regular``:
    where the regular job went (its containers and pools) and the ids it preempted."""
    e = Engine(
        nodes_graph(4, 4),
        {"queue-policy": "easy", "policy": placement, "preempt-victims": mode},
        build_R=False,
    )
    for i, js in enumerate(besteffort):
        e.alloc(100 + i, 0, 0, 0.0, js)
    assert len(started(e.schedule(0.0))) == len(besteffort)
    e.alloc(1, 0, 0, 1.0, regular)
    r = e.schedule(1.0)
    preempted = [a.id for a in r.preempt]
    if not preempted:
        assert 1 in started(r)
    e.check_invariants()
    rs = e.job(1).resources
    return (str(rs.containers), [(v, t, str(ids)) for v, t, ids in rs.pools()]), preempted


# Each case fits in what the best-effort jobs leave free on 4 nodes x 4 cores.
_IDLE_CASES = [
    ([spec(0, 1, pa=0)], spec(1, 0)),  # the reported case: one core, then a node
    ([spec(0, 1, pa=0)], spec(3, 0)),
    ([spec(0, 1, pa=0)], spec(0, 1)),
    ([spec(0, 1, pa=0)], spec(0, 15)),
    ([spec(0, 1, pa=0), spec(0, 1, pa=0)], spec(0, 14)),
    ([spec(1, 0, pa=0)], spec(3, 0)),
    ([spec(1, 0, pa=0)], spec(0, 12)),
    ([spec(1, 0, pa=0), spec(1, 0, pa=0)], spec(2, 0)),
]


def _cores(js: dict) -> int:
    (r,) = js["resources"]
    return 4 * r["count"] if r["type"] == "node" else r["count"]


@pytest.mark.parametrize("mode", ["plan", "fewest"])
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_preemption_when_free_resources_fit(placement, mode):
    """Best-effort jobs sit at the far end of the placement order, so a
    regular job that fits in what is free never preempts, under every
    placement policy; and (``plan``) it lands exactly where it would on an
    idle machine with no best-effort job at all (the oracle: the same job
    alone)."""
    exclusive = get_policy(placement).node_exclusive
    for besteffort, regular in _IDLE_CASES:
        if exclusive and _cores(regular) > 4 * (4 - len(besteffort)):
            continue  # each best-effort job holds a whole node: this one does not fit
        cores, preempted = _placed(placement, mode, besteffort, regular)
        assert not preempted, (placement, mode, regular["resources"])
        if mode == "plan":
            alone, _ = _placed(placement, mode, [], regular)
            assert cores == alone


def test_handoff_waits_for_every_victim_then_succeeds():
    e = engine(4)
    for i in range(4):
        e.alloc(100 + i, 0, 0, 0.0, be_request(1, 100.0))
    e.schedule(0.0)
    e.alloc(1, 0, 0, 5.0, node_request(2, 50.0))
    r = e.schedule(5.0)
    victims = [a.id for a in r.preempt]
    assert len(victims) == 2 and all(a.for_id == 1 and "1" in a.note for a in r.preempt)
    (ann,) = [x.annotations["sched"] for x in r.responses if x.id == 1]
    assert ann["reason_pending"].startswith("preempting 2 best-effort jobs: ")
    assert e.job(1).state is JobState.STARTING
    # A regular job submitted meanwhile cannot take the victims' nodes.
    e.alloc(2, 0, 0, 5.0, node_request(2, 50.0))
    e.free(victims[0])
    r = e.schedule(6.0)
    assert 1 not in started(r)
    assert all(a.id not in victims for a in r.preempt)  # never preempted twice
    assert 2 not in started(r)  # it may only preempt the two other best-effort jobs
    e.free(victims[1])
    r = e.schedule(7.0)
    s = started(r)
    assert 1 in s and len(s[1]) == 2
    e.check_invariants()
    assert e.stats["preemptions"] >= 2


def rank_R(rank: int) -> dict:
    return {"version": 1, "execution": {"R_lite": [{"rank": str(rank), "children": {"core": "0"}}]}}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_what_a_victim_frees_early_is_the_waiting_jobs_at_once(policy):
    """Found by the model-based test: a victim freed, in a partial free, a
    node of the placement of the job it was preempted for; that node stayed
    free, the next job took it, and both jobs got it in their SUCCESS."""
    e = engine(2, **{"queue-policy": policy})
    e.alloc(100, 0, 0, 0.0, be_request(2, 100.0))
    assert set(started(e.schedule(0.0))) == {100}
    e.alloc(1, 0, 0, 1.0, node_request(1, 50.0))
    assert [a.id for a in e.schedule(1.0).preempt] == [100]
    (mine,) = e.job(1).resources.ranks
    (other,) = set(range(2)) - {mine}
    e.free(100, rank_R(mine), final=False)  # the victim gives back job 1's node first
    assert set(e.graph.allocation(1).ranks) == {mine}, "job 1 holds it at once"
    e.alloc(2, 0, 0, 2.0, node_request(1, 50.0))
    r = e.schedule(2.0)
    assert not started(r) and not r.preempt, "job 2 waits: node mine is job 1's, node other still the victim's"
    e.check_invariants()
    e.free(100)
    s = started(e.schedule(3.0))
    assert s[1] == {mine}
    s.update(started(e.schedule(3.0)))
    assert s == {1: {mine}, 2: {other}}
    e.check_invariants()


@pytest.mark.parametrize("policy", ["first", "low", "worstfit"])
def test_a_node_a_lent_job_gave_back_is_not_lent_any_more(policy, caplog):
    """Found by the long model run (easy, worstfit): after a partial free of a
    lent best-effort job, the regular jobs' view still counted the node it
    gave back as lent, so once a regular job took that node the next one
    was matched onto it too (and its allocation failed)."""
    e = engine(3, policy=policy)
    e.alloc(100, 0, 0, 0.0, be_request(1, 100.0))
    e.alloc(101, 0, 0, 0.0, be_request(2, 100.0))  # two lent jobs: the view is a union
    be = started(e.schedule(0.0))
    assert set(be) == {100, 101}
    # job 101 gives back the node a regular job looks at first (first walks from the top)
    e.free(101, rank_R(max(be[101]) if policy == "first" else min(be[101])), final=False)
    running = {}
    for jobid in (1, 2):
        e.alloc(jobid, 0, 0, 1.0, node_request(1, 50.0))
        r = e.schedule(1.0)
        running.update(started(r))
        for victim in r.preempt:
            e.free(victim.id)
            running.update(started(e.schedule(1.0)))
        e.check_invariants()
    assert sorted(running) == [1, 2] and running[1] != running[2], running
    assert not [rec for rec in caplog.records if rec.levelname == "ERROR"], caplog.records


def test_victims_never_regular_and_never_preempted_twice():
    e = engine(4)
    e.alloc(1, 0, 0, 0.0, node_request(2, 1000.0))  # regular, runs
    e.alloc(100, 0, 0, 0.0, be_request(1, 1000.0))
    e.alloc(101, 0, 0, 0.0, be_request(1, 1000.0))
    e.schedule(0.0)
    e.alloc(2, 0, 0, 1.0, node_request(1, 10.0))
    e.alloc(3, 0, 0, 1.0, node_request(1, 10.0))
    e.alloc(4, 0, 0, 1.0, node_request(1, 10.0))  # nothing left for it but regular jobs
    r = e.schedule(1.0)
    assert sorted(a.id for a in r.preempt) == [100, 101]
    r2 = e.schedule(2.0)
    assert not r2.preempt
    assert e.job(1).state is JobState.RUNNING and e.job(4).state is JobState.PENDING


def test_protected_window_delays_the_regular_job_and_says_until_when():
    e = engine(2)
    e.alloc(100, 0, 0, 0.0, be_request(2, 1000.0, pa=60.0))
    assert set(started(e.schedule(0.0))) == {100}
    e.alloc(1, 0, 0, 10.0, node_request(2, 50.0))
    r = e.schedule(10.0)
    assert not r.preempt
    (ann,) = [x.annotations["sched"] for x in r.responses if x.id == 1]
    assert ann["t_estimate"] == 60.0 and ann["reason_pending"].endswith("reserved to start at t=60s")
    assert e.besteffort.next_wakeup() == 60.0
    assert not e.schedule(59.0).preempt
    r = e.schedule(60.0)
    assert [a.id for a in r.preempt] == [100]
    e.free(100)
    assert 1 in started(e.schedule(60.0))


@pytest.mark.parametrize("fit, starts", [("prefer", {101}), ("require", set())])
def test_best_effort_job_never_delays_a_reservation(fit, starts):
    # prefer: only the job whose unpreemptible window ends before the reservation starts;
    # require (the default): neither, as both are predicted to run 1000 s past it
    e = engine(2, **{"besteffort-fit": fit})
    e.alloc(1, 0, 0, 0.0, node_request(1, 100.0))
    e.schedule(0.0)
    e.alloc(2, 0, 0, 1.0, node_request(2, 100.0))  # reserved at t=100
    e.alloc(100, 0, 0, 1.0, be_request(1, 1000.0, pa=200.0))  # its window would cross t=100
    e.alloc(101, 0, 0, 1.0, be_request(1, 1000.0, pa=50.0))  # fits before t=100
    r = e.schedule(1.0)
    assert set(started(r)) == starts


def test_cancel_of_a_job_waiting_for_victims():
    e = engine(2)
    e.alloc(100, 0, 0, 0.0, be_request(2, 100.0))
    e.schedule(0.0)
    e.alloc(1, 0, 0, 1.0, node_request(1, 50.0))
    r = e.schedule(1.0)
    assert [a.id for a in r.preempt] == [100]
    assert [x.type for x in e.cancel(1)] == [ResponseType.CANCEL]
    e.free(100)
    r = e.schedule(2.0)
    assert not r.preempt and e.graph.free() == e.graph.all()
    e.check_invariants()


def test_malformed_preemptible_after_is_denied_with_a_clear_note():
    e = engine(2)
    js = {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "t", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["x"], "slot": "t", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "preemptible-after": "soon"}},
    }
    (r,) = e.alloc(1, 0, 0, 0.0, js)
    assert r.type is ResponseType.DENY
    assert "preemptible-after" in r.note and "Flux Standard Duration" in r.note
    js["attributes"]["system"]["preemptible-after"] = "5m"
    assert e.alloc(2, 0, 0, 0.0, js) == [] and e.job(2).preemptible_after == 300.0


# -- victim choice ---------------------------------------------------------------


class _J:
    def __init__(self, jobid: int, t_start: float, nodes: int) -> None:
        self.id = jobid
        self.t_start = t_start
        self.resources = type("RS", (), {"ranks": range(nodes)})()


def _match(need: int):
    """A matcher on bits: ``need`` set bits, the lowest ones."""

    def match(avail: int):
        if avail.bit_count() < need:
            return None
        bits, b = 0, avail
        for _ in range(need):
            low = b & -b
            bits |= low
            b &= ~low
        return Placement(None, bits)

    return match


def test_victims_fewest_jobs_first():
    a = _J(1, 0.0, 2)  # 2 nodes, lost 200 node-s at t=100
    b, c = _J(2, 90.0, 1), _J(3, 80.0, 1)  # 1 node each, lost 10 and 20
    cands = [(a, 0b0011), (b, 0b0100), (c, 0b1000)]
    victims, _ = choose_victims(_match(2), 0, cands, 100.0)
    assert [v.id for v in victims] == [1]  # one job, though it loses more


def test_victims_least_lost_work_among_equals():
    a, b, c = _J(1, 0.0, 1), _J(2, 90.0, 1), _J(3, 50.0, 1)
    cands = [(a, 0b001), (b, 0b010), (c, 0b100)]
    victims, got = choose_victims(_match(1), 0, cands, 100.0)
    assert [v.id for v in victims] == [2] and got.bits == 0b010
    victims, _ = choose_victims(_match(2), 0, cands, 100.0)
    assert sorted(v.id for v in victims) == [2, 3]
    assert lost_work(a, 100.0) == 100.0


def test_victims_none_when_free_resources_suffice_and_none_when_impossible():
    a = _J(1, 0.0, 1)
    assert choose_victims(_match(1), 0b10, [(a, 0b01)], 5.0) == ([], Placement(None, 0b10))
    assert choose_victims(_match(3), 0b10, [(a, 0b01)], 5.0) is None


def test_fewest_mode_picks_the_cheapest_victim_in_the_engine():
    e = engine(3, **{"preempt-victims": "fewest"})
    e.alloc(100, 0, 0, 0.0, be_request(1, 1000.0))
    e.schedule(0.0)
    e.alloc(101, 0, 0, 50.0, be_request(1, 1000.0))
    e.schedule(50.0)
    e.alloc(102, 0, 0, 90.0, be_request(1, 1000.0))
    e.schedule(90.0)
    e.alloc(1, 0, 0, 100.0, node_request(1, 10.0))
    r = e.schedule(100.0)
    assert [a.id for a in r.preempt] == [102]  # started last: loses 10 node-s
    assert math.isclose(e.stats["preempted_node_seconds"], 10.0)


def _hello_of(e: Engine, ids, preempted=()) -> list[dict]:
    out = []
    for j in ids:
        job = e.job(j)
        R = job.resources.to_rv1(e.graph, job.t_start, job.expiration, 1)
        out.append({"id": j, "R": R, "preemptible_after": job.preemptible_after, "preempted": j in preempted})
    return out


def test_restart_with_a_preemption_in_flight_preempts_nothing_more():
    """The scheduler restarts after preempting two jobs for job 1 and before
    their free: job 1, re-sent, waits for those two (no new preemption, the
    other two keep running) and starts on their nodes once they are freed."""
    e = engine(4)
    besteffort = [100, 101, 102, 103]
    for j in besteffort:
        e.alloc(j, 0, 0, 0.0, be_request(1, 100.0))
    e.schedule(0.0)
    e.alloc(1, 0, 0, 5.0, node_request(2, 50.0))
    victims = {a.id for a in e.schedule(5.0).preempt}
    assert len(victims) == 2
    victim_ranks = set().union(*(e.job(v).resources.ranks for v in victims))
    hello = _hello_of(e, besteffort, victims)

    e2 = engine(4)
    assert e2.hello(hello) == []
    e2.alloc(1, 0, 0, 5.0, node_request(2, 50.0))  # re-sent by the job-manager
    r = e2.schedule(6.0)
    assert not r.preempt and 1 not in started(r)
    assert e2.job(1).state is JobState.STARTING and e2.besteffort.starting() == {1: victims}
    assert e2.stats["preemptions"] == 0
    for v in sorted(victims):
        assert not e2.schedule(7.0).preempt
        e2.free(v)
    s = started(e2.schedule(8.0))
    assert set(s[1]) == victim_ranks
    assert all(e2.job(j).state is JobState.RUNNING for j in besteffort if j not in victims)
    e2.check_invariants()


def test_restart_with_best_effort_jobs_keeps_them_preemptible():
    e = engine(4)
    for j in (100, 101, 102, 103):
        e.alloc(j, 0, 0, 0.0, be_request(1, 100.0))
    e.schedule(0.0)
    e2 = engine(4)
    e2.hello(_hello_of(e, (100, 101, 102, 103)))
    e2.alloc(1, 0, 0, 5.0, node_request(2, 50.0))
    r = e2.schedule(5.0)
    assert len(r.preempt) == 2 and e2.stats["preemptions"] == 2


_GROW_R = {  # one more node, rank 4, as resource.acquire sends it
    "version": 1,
    "execution": {
        "R_lite": [{"rank": "4", "children": {"core": "0"}}],
        "nodelist": ["node4"],
        "starttime": 0.0,
        "expiration": 0.0,
    },
}


@pytest.mark.parametrize("change, nodes", [({"properties": {0: ["rack1"]}}, 2), ({"grow": _GROW_R}, 3)])
def test_a_regular_job_still_preempts_after_a_resource_change_while_jobs_are_lent(change, nodes):
    """A property change or a grow rebuilds the planner; the new one must see
    the machine as the old one did (what best-effort jobs hold is lent to
    regular jobs), or a regular job waits behind best-effort jobs with no
    start time."""
    e = engine(4)
    for i in range(4):
        e.alloc(100 + i, 0, 0, 0.0, be_request(1, 100.0))
    assert len(started(e.schedule(0.0))) == 4
    e.resource_update(**change)
    e.alloc(1, 0, 0, 5.0, node_request(nodes, 50.0))
    r = e.schedule(5.0)
    assert len(r.preempt) == 2 and all(a.for_id == 1 for a in r.preempt)
    e.check_invariants()
