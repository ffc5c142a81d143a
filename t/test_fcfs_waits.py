"""fcfs leaves out the passes that can change nothing: only new jobs came
since its head did not fit, and nothing reads a forecast or a reason
(``QueuePolicy.waits_as_it_did``, ``Engine._waits_as_before``).

The oracle is the same engine made to read what a pass says (forecasts
on, or ``annotate-depth`` above 0), where every pass runs: the starts must
be the same, job for job, and so must the counters of passes and matches.
"""

from __future__ import annotations

import random

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.policy.fcfs import FCFSPolicy
from fluxsched_py.replay.platform import nodes_graph


def fcfs(nodes: int, *options: str, estimates: bool = False) -> Engine:
    return Engine(nodes_graph(nodes), ["queue-policy=fcfs", *options], build_R=False, estimates=estimates)


def policy_runs(monkeypatch) -> list[int]:
    """Counts the passes the fcfs policy itself makes (one entry each)."""
    runs: list[int] = []
    run = FCFSPolicy.run

    def counted(self, ctx):
        runs.append(1)
        return run(self, ctx)

    monkeypatch.setattr(FCFSPolicy, "run", counted)
    return runs


def test_a_pass_after_arrivals_behind_a_head_that_did_not_fit_is_left_out(monkeypatch):
    runs = policy_runs(monkeypatch)
    e = fcfs(4, "annotate-depth=0")
    e.alloc(1, 0, 1, 0.0, node_request(3, 100.0))
    e.alloc(2, 0, 1, 0.0, node_request(2, 50.0))  # the head: 1 node free
    assert [r.id for r in e.schedule(0.0).responses if r.type is ResponseType.SUCCESS] == [1]
    assert len(runs) == 1
    passes, matches = e.stats["passes"], e.stats["matches"]
    e.alloc(3, 0, 1, 5.0, node_request(1, 10.0))  # would fit, but waits behind job 2
    assert not e.schedule(5.0).responses
    assert len(runs) == 1  # no pass of the policy ...
    assert e.stats["passes"] == passes + 1  # ... counted as the pass it stands for
    assert e.stats["matches"] == matches + 1  # and the head's match
    e.free(1, final=True)  # something is freed: the policy passes again
    started = [r.id for r in e.schedule(100.0).responses if r.type is ResponseType.SUCCESS]
    assert started == [2, 3]
    assert len(runs) == 2


def test_no_pass_is_left_out_where_a_forecast_or_a_reason_is_read(monkeypatch):
    runs = policy_runs(monkeypatch)
    for options, estimates in ((("annotate-depth=0",), True), (("annotate-depth=1",), False)):
        runs.clear()
        e = fcfs(4, *options, estimates=estimates)
        e.alloc(1, 0, 1, 0.0, node_request(3, 100.0))
        e.alloc(2, 0, 1, 0.0, node_request(2, 50.0))
        e.schedule(0.0)
        e.alloc(3, 0, 1, 5.0, node_request(1, 10.0))
        e.schedule(5.0)
        assert len(runs) == 2, options


def _replay(e: Engine, jobs: list[tuple[int, float, int, float, float]]) -> dict[int, float]:
    """Feed ``jobs`` (id, submit, nodes, walltime, run time) to ``e`` as the replay does; each job's start."""
    starts: dict[int, float] = {}
    ends: list[tuple[float, int]] = []
    i = 0
    while i < len(jobs) or ends:
        t = min(jobs[i][1] if i < len(jobs) else float("inf"), min(ends)[0] if ends else float("inf"))
        for end in sorted(x for x in ends if x[0] <= t):
            ends.remove(end)
            e.free(end[1], final=True)
        while i < len(jobs) and jobs[i][1] <= t:
            jobid, submit, nodes, wall, _ = jobs[i]
            e.alloc(jobid, 0, 1, submit, node_request(nodes, wall))
            i += 1
        for r in e.schedule(t).responses:
            if r.type is ResponseType.SUCCESS:
                starts[r.id] = t
                ends.append((t + jobs[r.id - 1][4], r.id))
    return starts


def test_seeded_workloads_start_alike_with_and_without_passes_left_out(monkeypatch):
    runs = policy_runs(monkeypatch)
    for seed in range(6):
        rng = random.Random(seed)
        jobs, t = [], 0.0
        for jobid in range(1, 301):
            t += rng.expovariate(1 / 20)
            wall = rng.choice([30.0, 100.0, 400.0, 1500.0])
            jobs.append((jobid, round(t), rng.choice([1, 1, 2, 4, 8, 16, 32]), wall, rng.uniform(1.0, wall)))
        runs.clear()
        lean = fcfs(32, "annotate-depth=0")
        lean_starts = _replay(lean, jobs)
        lean_runs = len(runs)
        runs.clear()
        full = fcfs(32, "annotate-depth=unlimited")
        assert _replay(full, jobs) == lean_starts, seed
        assert len(lean_starts) == len(jobs)
        assert lean_runs < len(runs), seed  # passes were left out ...
        for counter in ("passes", "matches", "started"):
            assert lean.stats[counter] == full.stats[counter], (seed, counter)  # ... and counted alike
