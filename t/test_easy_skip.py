"""EASY's shortcuts over its backfill candidates give the answers of the full walk.

Behind its head, an EASY pass leaves out, beyond ``annotate-depth``, the
whole-node jobs that cannot start: those with more nodes than are wholly
free, and, when only new jobs arrived since the last pass, those that failed
to backfill around the same reservation then (``Pass.skip_unfit``,
``Pass.settle``).  ``annotate-depth=unlimited`` turns both off (every job's
``reason_pending`` is read), so the same engine with it is the full walk.

On random workloads, job by job: the same start times and nodes, the same
``backfill`` annotation at each start, and after every pass the same
annotations for every job the shortcut run annotates.  For whole-node jobs,
the start times are also those of the textbook EASY of
``t/test_policy_textbook.py`` (an independent node-count simulation).
"""

from __future__ import annotations

import heapq
import random

import pytest

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.replay.platform import nodes_graph

from .test_policy_textbook import textbook


def cores_request(ncores: int, walltime: float):
    """``ncores`` cores anywhere: not a whole-node job (never left out)."""
    return parse_jobspec(
        {
            "version": 1,
            "resources": [{"type": "slot", "count": ncores, "label": "task", "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": walltime}},
        }
    )


def workload(seed: int, nodes: int, n: int, partial: bool):
    """(id, submit, request, nodes, walltime, runtime): bursts of arrivals
    between ends, sizes up to the whole machine, run times up to the walltime."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for jobid in range(1, n + 1):
        t += rng.choice((0.0, 0.0, 1.0, rng.expovariate(1 / 40)))
        size = min(nodes, rng.choice((1, 1, 2, 3, 4, nodes // 4, nodes // 2, rng.randint(1, nodes))))
        walltime = float(rng.choice((10, 30, 60, 100, 300, 1000)))
        runtime = walltime if rng.random() < 0.3 else float(rng.randint(1, int(walltime)))
        if partial and rng.random() < 0.15:
            req = cores_request(size, walltime)
        else:
            req = node_request(size, walltime)
        jobs.append((jobid, round(t), req, size, walltime, runtime))
    return jobs


def simulate(jobs, nodes: int, depth: str, cores: int = 1):
    """Run the engine over ``jobs``: starts {id: (time, ranks, backfill)},
    each job's annotations after every pass [(time, {id: annotations})],
    and the engine's match count."""
    e = Engine(
        nodes_graph(nodes, cores),
        ["queue-policy=easy", f"annotate-depth={depth}"],
        build_R=False,
        time_format=lambda t: f"t={t:.0f}s",
    )
    runtime = {j[0]: j[5] for j in jobs}
    arrivals = sorted(jobs, key=lambda j: (j[1], j[0]))
    ends: list[tuple[float, int]] = []
    starts: dict[int, tuple[float, tuple[int, ...], str | None]] = {}
    state: dict[int, dict] = {}
    seen = []
    i = 0
    while i < len(arrivals) or ends:
        t = min(arrivals[i][1] if i < len(arrivals) else float("inf"), ends[0][0] if ends else float("inf"))
        while ends and ends[0][0] <= t:
            e.free(heapq.heappop(ends)[1])
        while i < len(arrivals) and arrivals[i][1] <= t:
            jobid, submit, req = arrivals[i][:3]
            assert not e.alloc(jobid, 0, 1, submit, req)
            i += 1
        for r in e.schedule(t).responses:
            sched = (r.annotations or {}).get("sched") or {}
            if r.type is ResponseType.SUCCESS:
                starts[r.id] = (t, tuple(sorted(r.resources.ranks)), sched.get("backfill"))
                heapq.heappush(ends, (t + runtime[r.id], r.id))
                state.pop(r.id, None)
            elif r.type is ResponseType.ANNOTATE:
                ann = state.setdefault(r.id, {})
                for k, v in sched.items():
                    if v is None:
                        ann.pop(k, None)
                    else:
                        ann[k] = v
        seen.append((t, {k: dict(v) for k, v in state.items() if v}))
    return starts, seen, e.stats["matches"]


@pytest.mark.parametrize("seed", range(12))
def test_the_shortcuts_start_the_same_jobs_on_the_same_nodes_and_say_the_same(seed):
    nodes = 16 if seed % 2 else 24
    jobs = workload(seed, nodes, 220, partial=seed % 3 == 0)
    cores = 2 if seed % 4 == 1 else 1
    full, full_ann, full_matches = simulate(jobs, nodes, "unlimited", cores)
    short, short_ann, short_matches = simulate(jobs, nodes, "3", cores)
    assert len(full) == len(jobs)
    assert short == full
    assert [t for t, _ in short_ann] == [t for t, _ in full_ann]
    for (t, got), (_, want) in zip(short_ann, full_ann, strict=True):
        for jobid, ann in got.items():
            if "jobs_ahead" in ann:  # within annotate-depth: all of it as the full walk says
                assert ann == want[jobid], (t, jobid)
            else:  # beyond it: a reservation's estimate only
                assert ann == {"t_estimate": want[jobid]["t_estimate"]}, (t, jobid)
        assert sorted(j for j, a in got.items() if "jobs_ahead" in a) == sorted(
            j for j, a in want.items() if a["jobs_ahead"] < 3
        )
    assert short_matches <= full_matches


@pytest.mark.parametrize("seed", range(12, 20))
def test_whole_node_starts_are_textbook_easy(seed):
    nodes = 32
    jobs = workload(seed, nodes, 300, partial=False)
    starts, _, _ = simulate(jobs, nodes, "0")
    want = textbook([(j[0], j[1], j[3], j[4], j[5]) for j in jobs], nodes, easy=True)
    assert {k: v[0] for k, v in starts.items()} == want


def test_after_arrivals_only_the_new_job_is_tried_around_the_same_reservation():
    # 8 one-core nodes; job 1 holds 6 until t=100.  Job 2 (8 nodes) is the
    # head, reserved at 100 on every node: no node is extra.  Jobs 3-6 fit in
    # the 2 free nodes but run past t=100: none can backfill.  No one of them
    # is as small and as short as another (each is matched: fits now? fits if
    # the head moved? can the head move?).  At t=2 only job 7 arrives.
    def run(depth: str) -> tuple[int, dict[int, float]]:
        e = Engine(nodes_graph(8), ["queue-policy=easy", f"annotate-depth={depth}"], build_R=False)
        e.alloc(1, 0, 1, 0.0, node_request(6, 100.0))
        e.schedule(0.0)
        for jobid, n, d in ((2, 8, 10.0), (3, 2, 1000.0), (4, 1, 2000.0), (5, 2, 500.0), (6, 1, 1500.0)):
            e.alloc(jobid, 0, 1, 1.0, node_request(n, d))
        assert not [r for r in e.schedule(1.0).responses if r.type is ResponseType.SUCCESS]
        before = e.stats["matches"]
        e.alloc(7, 0, 1, 2.0, node_request(1, 1200.0))
        assert not [r for r in e.schedule(2.0).responses if r.type is ResponseType.SUCCESS]
        return e.stats["matches"] - before, {j.id: j.estimate for j in e.pending()}

    full, full_estimates = run("unlimited")
    assert full == 1 + 5 * 3  # the head: fits now?  Then 3 matches for each of jobs 3-7
    short, short_estimates = run("0")
    assert short == 1 + 3  # jobs 3-6 failed around the same reservation with nothing freed since
    assert short_estimates == full_estimates == {2: 100.0, 3: None, 4: None, 5: None, 6: None, 7: None}
