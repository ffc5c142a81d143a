"""CiGri campaigns: attributes, decayed usage, the order of best-effort jobs,
the campaign predictor (``campaign_eta``, stats) and the sink effect.

Expected values are worked out by hand in the comments (independent of the
code): decayed usage from the half-life formula, orders from the rule
"test campaigns first, then least decayed usage; regular jobs untouched".
"""

from __future__ import annotations

import csv
import json
import math
from types import SimpleNamespace

import pytest

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.engine.campaigns import DecayedUsage, campaign_of, campaign_order
from fluxsched_py.engine.jobs import Job
from fluxsched_py.engine.sink import SinkDetector
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.replay import cli as replay_cli
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1


def jobspec(duration=100.0, campaign=None, kind=None, best_effort=False, after=0):
    system = {"duration": duration}
    if best_effort:
        system["preemptible-after"] = after
    spec = {
        "version": 1,
        "resources": [
            {
                "type": "node",
                "count": 1,
                "exclusive": True,
                "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
            }
        ],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": system},
    }
    user = {}
    if campaign is not None:
        user["campaign"] = campaign
    if kind is not None:
        user["campaign-type"] = kind
    if user:
        spec["attributes"]["user"] = user
    return spec


def engine(nodes=1, **opts):
    g = ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(nodes)], 1))
    return Engine(g, {"queue-policy": "fcfs", "policy": "low", **opts})


def started(e, now):
    out = [(r.id, list(r.resources.ranks)) for r in e.schedule(now).responses if r.type is ResponseType.SUCCESS]
    e.check_invariants()
    return out


# -- pure functions -----------------------------------------------------------


def test_decayed_usage_by_hand():
    u = DecayedUsage(half_life=100.0)
    u.add("a", 50.0, 0.0)
    assert u.at("a", 0.0) == 50.0
    assert u.at("a", 100.0) == pytest.approx(25.0)  # one half-life
    u.add("a", 30.0, 100.0)  # 50 * 1/2 + 30
    assert u.at("a", 100.0) == pytest.approx(55.0)
    assert u.at("a", 300.0) == pytest.approx(55.0 / 4)  # two more half-lives
    assert u.at("b", 300.0) == 0.0


def test_campaign_attributes():
    assert campaign_of(parse_jobspec(jobspec())) == (None, "default")
    assert campaign_of(parse_jobspec(jobspec(campaign="c1", kind="test"))) == ("c1", "test")
    with pytest.raises(ValueError, match="campaign-type='urgent'"):
        campaign_of(parse_jobspec(jobspec(campaign="c1", kind="urgent")))
    assert Job(1, 0, 0, 0.0, parse_jobspec(jobspec(best_effort=True))).preemptible_after == 0
    assert Job(1, 0, 0, 0.0, parse_jobspec(jobspec(campaign="c1"))).preemptible_after is None


def _job(name, campaign, kind=None):
    return SimpleNamespace(name=name, request=parse_jobspec(jobspec(campaign=campaign, kind=kind, best_effort=True)))


def test_campaign_order_test_first_then_least_usage_then_queue_order():
    u = DecayedUsage(100.0)
    u.add("big", 500.0, 0.0)
    u.add("small", 100.0, 0.0)
    jobs = [_job("b1", "big"), _job("s1", "small"), _job("t1", "try", "test"), _job("b2", "big"), _job("n1", None)]
    # try (test) first; then by usage: None 0 < small 100 < big 500; big's jobs in queue order.
    assert [j.name for j in campaign_order(jobs, u, 0.0)] == ["t1", "n1", "s1", "b1", "b2"]
    # Much later small and big have decayed alike: the order between them holds.
    assert [j.name for j in campaign_order(jobs, u, 1000.0)] == ["t1", "n1", "s1", "b1", "b2"]


def test_sink_detector_by_hand():
    s = SinkDetector(3)
    assert s.ended("c", [1], 1.0, 100.0) == []
    assert s.ended("c", [1], 1.0, 100.0) == []
    (d,) = s.ended("c", [1], 9.0, 100.0)  # three under 10 s
    assert list(d.ranks) == [1] and "campaign c" in d.reason and "10s" in d.reason
    assert s.ended("c", [1], 1.0, 100.0) == []  # reported once
    assert s.ended("c", [2], 1.0, 100.0) == [] and s.ended("c", [2], 10.0, 100.0) == []  # 10 s is not under 10 s
    assert SinkDetector(0).ended("c", [1], 0.0, 100.0) == []


# -- the engine ---------------------------------------------------------------


def test_a_bad_campaign_type_is_denied_with_the_attribute_named():
    e = engine()
    (r,) = e.alloc(1, 0, 1000, 0.0, jobspec(campaign="c", kind="urgent"))
    assert r.type is ResponseType.DENY and "attributes.user.campaign-type='urgent'" in r.note


def _run_queue(best_effort: bool) -> list[int]:
    """1 node, fcfs.  X (campaign big) runs 0-50: big's usage is 50 node-s.
    Then R1, B1 (big), R2, B2 (test campaign), B3 (small) wait; each runs 10 s.
    Best-effort jobs start after the regular pass, on what no regular job takes."""
    e = engine(**{"campaign-half-life": "1000"})
    order = []
    e.alloc(100, 0, 1, 0.0, jobspec(campaign="big", best_effort=best_effort))
    order += [j for j, _ in started(e, 0.0)]
    specs = [
        (1, jobspec()),
        (2, jobspec(campaign="big", best_effort=best_effort)),
        (3, jobspec()),
        (4, jobspec(campaign="try", kind="test", best_effort=best_effort)),
        (5, jobspec(campaign="small", best_effort=best_effort)),
    ]
    for i, (jobid, spec) in enumerate(specs):
        e.alloc(jobid, 0, 1, 1.0 + i, spec)
    t = 50.0
    running = order[-1]
    while len(order) < 6:
        e.free(running)
        (s,) = started(e, t)
        running = s[0]
        order.append(running)
        t += 10.0
    return order


def test_best_effort_jobs_go_in_campaign_order_and_regular_jobs_keep_theirs():
    # Regular jobs first (R1, R2), then campaign order: try (test), small (0), big (50).
    assert _run_queue(best_effort=True) == [100, 1, 3, 4, 5, 2]
    assert _run_queue(best_effort=False) == [100, 1, 2, 3, 4, 5]  # not best-effort: queue order


def test_campaign_eta_annotation_and_stats():
    # 1 node; campaign c has 4 jobs of 10 s.  At t=20 two completed since the
    # first start at 0: 2 jobs / 20 s; 2 left (one running, one pending) -> eta 20 + 2 * 10 = 40.
    e = engine()
    for jobid in range(1, 5):
        e.alloc(jobid, 0, 1, 0.0, jobspec(campaign="c", best_effort=True))
    assert started(e, 0.0) == [(1, [0])]
    e.free(1)
    assert started(e, 10.0) == [(2, [0])]
    e.free(2)
    res = e.schedule(20.0).responses
    assert [r.id for r in res if r.type is ResponseType.SUCCESS] == [3]
    # At t=10 it was also 40 (10 + 3 left * 10 s / 1 done): the annotation stands unchanged.
    assert e.job(4).reply.sent["campaign_eta"] == pytest.approx(40.0)
    st = e.hooks.stats(20.0)["c"]
    assert (st["pending"], st["running"], st["completed"]) == (1, 1, 2)
    assert st["mean_runtime"] == pytest.approx(10.0) and st["eta"] == pytest.approx(40.0)
    assert st["usage"] == pytest.approx(10.0 * 2 ** (-10.0 / 86400) + 10.0)  # 10 node-s at 10 (decayed 10 s), 10 at 20


def test_a_cancelled_job_leaves_its_campaigns_count():
    e = engine()
    for jobid in range(1, 4):
        e.alloc(jobid, 0, 1, 0.0, jobspec(campaign="c", best_effort=True))
    started(e, 0.0)
    e.free(1)
    started(e, 10.0)
    e.cancel(3)
    st = e.hooks.stats(10.0)["c"]
    assert (st["pending"], st["running"], st["completed"]) == (0, 1, 1)
    assert st["eta"] == pytest.approx(20.0)  # 1 left at 1 job / 10 s
    assert e.table.besteffort.npending == 0


def test_expected_duration_is_the_campaign_mean_capped_at_the_walltime():
    e = engine()
    e.alloc(1, 0, 1, 0.0, jobspec(duration=100.0, campaign="c", best_effort=True))
    e.alloc(2, 0, 1, 0.0, jobspec(duration=5.0, campaign="c", best_effort=True))
    e.alloc(3, 0, 1, 0.0, jobspec(duration=100.0, campaign="c", best_effort=True))
    started(e, 0.0)
    assert e.hooks.expected_duration(e.job(2)) == 5.0  # no history: the walltime
    e.free(1)
    started(e, 30.0)  # job 1 ran 30 s
    assert e.hooks.expected_duration(e.job(3)) == pytest.approx(30.0)
    assert e.hooks.expected_duration(e.job(2)) == 5.0  # capped


def _sink_run(sink_jobs: str):
    """2 nodes, policy low.  Four long jobs (100 s) of campaign s run on both
    nodes; then H (regular) holds rank 0 and s's jobs go to rank 1, each
    ending after 1 s.  Median 100 s: a tenth is 10 s.  Returns each pass's
    drains and where job 14 started (None: it waits)."""
    e = engine(nodes=2, **{"sink-jobs": sink_jobs})
    drains = []
    for jobid in (1, 2, 3, 4):
        e.alloc(jobid, 0, 1, 0.0, jobspec(campaign="s"))
    assert started(e, 0.0) == [(1, [0]), (2, [1])]
    e.free(1), e.free(2)
    assert started(e, 100.0) == [(3, [0]), (4, [1])]
    e.free(3), e.free(4)
    e.alloc(10, 0, 1, 200.0, jobspec(duration=1000.0))
    t = 200.0
    for jobid in (11, 12, 13, 14):
        e.alloc(jobid, 0, 1, t, jobspec(campaign="s"))
        result = e.schedule(t)
        e.check_invariants()
        got = [(r.id, list(r.resources.ranks)) for r in result.responses if r.type is ResponseType.SUCCESS]
        drains.append(result.drains)
        if jobid == 14:
            return drains, got
        assert got[-1] == (jobid, [1])
        e.free(jobid)
        t += 1.0
    raise AssertionError("unreachable")


def test_the_sink_effect_drains_the_node_after_n_short_jobs():
    drains, got = _sink_run("3")
    # Freed: 11 (seen at 201), 12 (202), 13 (203, the third short one on rank 1).
    assert [len(d) for d in drains] == [0, 0, 0, 1]
    (d,) = drains[3]
    assert list(d.ranks) == [1]
    assert "the last 3 jobs of campaign s" in d.reason and "median run time (100s)" in d.reason
    # The pass that finds it starts nothing there (the driver drains it after
    # the pass): job 14 waits for H's node.
    assert got == []


def test_the_sink_effect_can_be_turned_off():
    drains, got = _sink_run("0")
    assert all(not d for d in drains)
    assert got == [(14, [1])]


def _best_effort_sink_run(sink_jobs: str) -> list[tuple[int, list[int]]]:
    """As :func:`_sink_run` with campaign s best-effort: where job 14 starts."""
    e = engine(nodes=2, **{"sink-jobs": sink_jobs})
    for jobid in (1, 2, 3, 4):
        e.alloc(jobid, 0, 1, 0.0, jobspec(campaign="s", best_effort=True))
    assert sorted(started(e, 0.0)) == [(1, [1]), (2, [0])]
    e.free(1), e.free(2)
    assert sorted(started(e, 100.0)) == [(3, [1]), (4, [0])]
    e.free(3), e.free(4)
    e.alloc(10, 0, 1, 200.0, jobspec(duration=1000.0))
    assert started(e, 200.0) == [(10, [0])]
    for t, jobid in ((201.0, 11), (202.0, 12), (203.0, 13)):
        e.alloc(jobid, 0, 1, t, jobspec(campaign="s", best_effort=True))
        assert started(e, t) == [(jobid, [1])]
        e.free(jobid)
    e.alloc(14, 0, 1, 204.0, jobspec(campaign="s", best_effort=True))
    return started(e, 204.0)


def test_no_best_effort_job_starts_on_a_node_the_pass_finds_sinking():
    assert _best_effort_sink_run("3") == []
    assert _best_effort_sink_run("0") == [(14, [1])]


def test_campaign_half_life_and_sink_jobs_reject_bad_values():
    from fluxsched_py.engine import EngineError, EngineOptions

    for opt, bad in (("campaign-half-life", "0"), ("campaign-half-life", "x"), ("sink-jobs", "-1")):
        with pytest.raises(EngineError, match=f"^{opt}="):
            EngineOptions.parse({opt: bad})
    assert math.isclose(EngineOptions.parse({"campaign-half-life": "60"}).campaign_half_life, 60.0)


def _cores(n: int, **kw) -> dict:
    """``jobspec(**kw)`` asking for one slot of ``n`` cores (on one node)."""
    spec = jobspec(**kw)
    spec["resources"] = [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": n}]}]
    return spec


def _placed_with_history(runtime: float, predictor: str = "true") -> list[int]:
    """2 nodes x 2 cores, easy, policy first: regular jobs take the node with
    the most cores available, best-effort jobs the far end (low ids first).
    Campaign c first completes one job that ran ``runtime`` s.  At t=1000: L
    holds a core of rank 1 until 9000, A a core of rank 0 until 1100; H needs
    2 cores on one node and is reserved at 1100 on rank 0 (the node with the
    most cores available then); the free core of rank 1 is never reserved.
    X (best-effort, one core, campaign c, preemptible-after 10: its protected
    window) has a walltime of 5000 s.  Returns X's ranks."""
    e = Engine(
        ResourceGraph.from_rv1(hosts_rv1([f"n{i}" for i in range(2)], 2)),
        {"queue-policy": "easy", "policy": "first", "campaign-predictor": predictor},
    )
    e.alloc(1, 0, 1, 0.0, _cores(1, duration=5000.0, campaign="c"))
    started(e, 0.0)
    e.free(1)
    started(e, runtime)
    t = 1000.0
    e.alloc(2, 0, 1, t, _cores(1, duration=8000.0))
    e.alloc(3, 0, 1, t, _cores(1, duration=100.0))
    assert started(e, t) == [(2, [1]), (3, [0])]
    e.alloc(4, 0, 1, t, _cores(2, duration=100.0))
    assert started(e, t) == []
    assert e.planner.span(4).start == 1100.0
    assert list(e.planner.codec.decode(e.planner.reserved_during(t, 1100.0 + 1)).ranks) == [0]
    e.alloc(5, 0, 1, t, _cores(1, duration=5000.0, campaign="c", best_effort=True, after=10))
    ((jobid, ranks),) = started(e, t)
    assert jobid == 5
    return ranks


def test_best_effort_jobs_go_where_their_predicted_run_ends_before_a_reservation():
    # Expected 200 s > the 10 s window: rank 0 is reserved for H from 1100,
    # rank 1 never is: X goes to rank 1 (it would be preempted on rank 0).
    assert _placed_with_history(200.0) == [1]
    # The same with the predictor off: the far end's first free core, on rank 0.
    assert _placed_with_history(200.0, predictor="false") == [0]
    # Expected 5 s < the window: no preference, the far end's first free core.
    assert _placed_with_history(5.0) == [0]


def test_a_preempted_job_counts_as_usage_not_as_a_campaign_run_time():
    # 2 nodes.  Campaign c's two best-effort jobs (preemptible at once) run
    # from 0; at 50 a regular 2-node job preempts both.  Their 2 x 50
    # node-s count as c's usage; c has no completed job, so no mean run time.
    e = engine(nodes=2, **{"queue-policy": "easy"})
    for jobid in (1, 2):
        e.alloc(jobid, 0, 1, 0.0, jobspec(campaign="c", best_effort=True))
    assert started(e, 0.0) == [(1, [1]), (2, [0])]  # best-effort jobs take the high end first
    spec = jobspec()
    spec["resources"][0]["count"] = 2
    e.alloc(3, 0, 1, 50.0, spec)
    res = e.schedule(50.0)
    assert sorted(a.id for a in res.preempt) == [1, 2]
    for jobid in (1, 2):
        e.free(jobid)
    assert started(e, 50.0) == [(3, [0, 1])]
    st = e.hooks.stats(50.0)["c"]
    assert (st["pending"], st["running"], st["completed"], st["mean_runtime"]) == (0, 0, 0, None)
    assert st["usage"] == pytest.approx(100.0)
    assert e.hooks.expected_duration(e.job(3)) == 100.0  # no campaign history: the walltime


def _campaign_workload(path) -> None:
    """2 one-core nodes, fcfs, every job one node, all submitted at 0.  Job
    0 (regular) holds one node for 10,000 s; campaign s's jobs 1-6 (100 s
    each) then 7-11 (1 s each) run one after the other on the other; job
    12 and 13 (campaign s, 100 s) come last.  After job 11 ends at 605 s,
    s's last five jobs there each took 1 s, under a tenth of its median
    (100 s over jobs 1-11)."""
    jobs = [(0, 10000.0, None)] + [(i, 100.0, "s") for i in range(1, 7)]
    jobs += [(i, 1.0, "s") for i in range(7, 12)] + [(12, 100.0, "s"), (13, 100.0, "s")]
    lines = ["nb_res: 2", "jobs:"]
    for jobid, runtime, campaign in jobs:
        spec = jobspec(duration=20000.0, campaign=campaign)
        lines.append(f"  - {{id: {jobid}, submit: 0, runtime: {runtime}, jobspec: {json.dumps(spec)}}}")
    path.write_text("\n".join(lines) + "\n")


def _jobs_csv(out) -> dict[int, dict[str, str]]:
    with (out / "jobs.csv").open() as f:
        return {int(r["job_id"]): r for r in csv.DictReader(f)}


def test_the_replay_drains_a_sink_node_and_places_no_job_there_after(tmp_path, capsys):
    _campaign_workload(tmp_path / "w.yaml")
    out = tmp_path / "out"
    argv = [str(tmp_path / "w.yaml"), "--queue-policy", "fcfs", "--no-progress", "--output-dir", str(out)]
    assert replay_cli.main(argv) == 0
    err = capsys.readouterr().err
    rows = _jobs_csv(out)
    held, sink = rows[0]["allocated_resources"], {rows[i]["allocated_resources"] for i in range(1, 12)}
    assert sink == {"1" if held == "0" else "0"}  # the campaign ran on the node job 0 left
    (sink_rank,) = sink
    assert f"fcfs: t=605s: drained rank {sink_rank}: sink effect: the last 5 jobs of campaign s" in err
    starts = [float(rows[i]["starting_time"]) for i in range(12)]
    assert starts == [0, 0, 100, 200, 300, 400, 500, 600, 601, 602, 603, 604]
    # The drain is found by the pass after job 11's end, which starts
    # nothing there: jobs 12 and 13 wait for job 0's node.
    assert [float(rows[i]["starting_time"]) for i in (12, 13)] == [10000.0, 10100.0]
    assert rows[12]["allocated_resources"] == rows[13]["allocated_resources"] == held
    # with sink-jobs=0 nothing is drained, and both follow on the sink
    assert replay_cli.main([*argv, "--sink-jobs", "0"]) == 0
    assert "drained" not in capsys.readouterr().err
    rows = _jobs_csv(out)
    assert [float(rows[i]["starting_time"]) for i in (12, 13)] == [605.0, 705.0]
    assert rows[12]["allocated_resources"] == rows[13]["allocated_resources"] == sink_rank


def test_affinity_places_a_campaigns_jobs_on_its_site_through_the_replay_driver(tmp_path, capsys):
    # 4 one-core nodes: lyon ranks 0-1, grenoble ranks 2-3.  Campaign g's
    # three one-node jobs all start at 0.  The replay places from the top
    # rank down (3, 2, 1); with affinity=g:lyon the first two run on lyon,
    # the third on grenoble (it falls back, and starts at once).
    R = hosts_rv1([f"n{i}" for i in range(4)], 1)
    R["execution"]["properties"] = {"lyon": "0-1", "grenoble": "2-3"}
    (tmp_path / "R.json").write_text(json.dumps(R))
    spec = json.dumps(jobspec(campaign="g"))
    lines = ["jobs:"] + [f"  - {{id: {i}, submit: 0, runtime: 100, jobspec: {spec}}}" for i in (1, 2, 3)]
    (tmp_path / "w.yaml").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    argv = [str(tmp_path / "w.yaml"), "--platform", str(tmp_path / "R.json"), "--queue-policy", "fcfs"]
    argv += ["--no-progress", "--output-dir", str(out)]

    def placed(*extra: str) -> dict[int, tuple[float, str]]:
        assert replay_cli.main([*argv, *extra]) == 0
        capsys.readouterr()
        return {i: (float(r["starting_time"]), r["allocated_resources"]) for i, r in _jobs_csv(out).items()}

    assert placed() == {1: (0.0, "3"), 2: (0.0, "2"), 3: (0.0, "1")}
    site = placed("--affinity", "g:lyon")
    assert sorted(site[i][1] for i in (1, 2)) == ["0", "1"]
    assert site[3][1] in ("2", "3")
    assert {t for t, _ in site.values()} == {0.0}  # where, never when
