"""EASY++ (``predict-runtimes=true``): the predictor, a hand-computed example,
and start times equal to an independent textbook EASY++ on Batsim's seed-1 HPC
workload.

The textbook below is a node-count simulation written from Tsafrir, Etsion
and Feitelson (IEEE TPDS 2007) and the textbook EASY of
``t/test_policy_textbook.py``, with no planner and no matcher: each job's
prediction is the mean of its user's last two completed run times (at
submission; capped at the walltime; the walltime with no history); the
head's shadow time and extra nodes come from the running jobs' predicted
ends; a running job that reaches its prediction is re-planned to its
walltime, and that moment is an event of its own.
"""

from __future__ import annotations

import math
from collections import deque

import pytest

from fluxsched_py.engine import Engine
from fluxsched_py.engine.predict import predict
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, node_request

from .conftest import shared_path


def test_predict_is_the_mean_of_the_last_two_capped_at_the_walltime():
    assert predict([], 100.0) == 100.0
    assert predict([30.0], 100.0) == 30.0
    assert predict([30.0, 50.0], 100.0) == 40.0
    assert predict([300.0, 500.0], 100.0) == 100.0
    assert predict([0.0, 0.0], 100.0) == 1.0  # never a zero-length plan


def textbook_easypp(jobs, nodes: int) -> dict[int, float]:
    """jobs: (id, submit, res, walltime, runtime, user) -> {id: start}."""
    jobs = sorted(jobs, key=lambda j: (j[1], j[0]))
    history: dict[int, deque] = {}
    pred: dict[int, float] = {}
    queue: list = []
    running: list = []  # [actual end, planned end, res, id, start, user, walltime]
    free = nodes
    start: dict[int, float] = {}
    i = 0
    while i < len(jobs) or running or queue:
        nxt = [jobs[i][1]] if i < len(jobs) else []
        nxt += [r[0] for r in running] + [r[1] for r in running if r[1] < r[6]]
        if not nxt:
            break
        t = min(nxt)
        for r in sorted((r for r in running if r[0] <= t), key=lambda r: (r[0], r[3])):
            running.remove(r)
            free += r[2]
            history.setdefault(r[5], deque(maxlen=2)).append(r[0] - r[4])
        for r in running:
            if r[1] <= t:
                r[1] = r[6]  # under-predicted: plan to the walltime
        while i < len(jobs) and jobs[i][1] <= t:
            j = jobs[i]
            h = history.get(j[5])
            pred[j[0]] = min(max(sum(h) / len(h), 1.0), j[3]) if h else j[3]
            queue.append(j)
            i += 1

        def run(j, t=t):
            nonlocal free
            queue.remove(j)
            free -= j[2]
            start[j[0]] = t
            running.append([t + min(j[4], j[3]), t + pred[j[0]], j[2], j[0], t, j[5], t + j[3]])

        while queue and queue[0][2] <= free:
            run(queue[0])
        if queue:
            head = queue[0]
            avail = free
            shadow, extra = math.inf, 0
            for r in sorted(running, key=lambda r: r[1]):
                avail += r[2]
                if avail >= head[2]:
                    shadow = r[1]
                    break
            if shadow < math.inf:
                extra = free + sum(r[2] for r in running if r[1] <= shadow) - head[2]
            for j in list(queue[1:]):
                if j[2] > free:
                    continue
                if t + pred[j[0]] <= shadow:
                    run(j)
                elif j[2] <= extra:
                    run(j)
                    extra -= j[2]
    return start


# 4 nodes.  (id, submit, nodes, walltime, runtime, user), worked by hand:
# A runs [0, 10]: user 1's history is [10].  B (user 1) is predicted 10 s and
# starts at 20 (plan ends 30, really 32).  C (4 nodes, user 2, no history:
# its walltime) waits: EASY++ puts its shadow at B's predicted end, 30;
# EASY at B's walltime, 120.  D (user 1, predicted 10) would end at 32 > 30
# and there are no extra nodes: it waits under both.  E (user 3, 7 s) ends
# by 30 and backfills at 23 under both.  At 30 E ends and B reaches its
# prediction: its plan moves to its walltime (120), so under EASY++ D
# (planned 10 s, ends 40 <= 120) backfills at 30; under EASY D's walltime
# ends 130 > 120 and it waits.  B ends at 32: under EASY C starts then and D
# after it (37); under EASY++ D holds 2 nodes until 35, when C starts.
FIVE = [
    (0, 0, 4, 100, 10, 1),  # A
    (1, 20, 2, 100, 12, 1),  # B
    (2, 21, 4, 50, 5, 2),  # C
    (3, 22, 2, 100, 5, 1),  # D
    (4, 23, 2, 7, 7, 3),  # E
]
FIVE_EASYPP = {0: 0, 1: 20, 2: 35, 3: 30, 4: 23}
FIVE_EASY = {0: 0, 1: 20, 2: 32, 3: 37, 4: 23}


def _workload(jobs, nodes):
    return Workload([WorkloadJob(i, str(i), s, node_request(n, w), w, r, n, "", u) for i, s, n, w, r, u in jobs], nodes)


def test_five_jobs_by_hand():
    assert textbook_easypp(FIVE, 4) == FIVE_EASYPP
    w = _workload(FIVE, 4)
    check = Engine.check_invariants
    got = replay(w, nodes_graph(4), {"queue-policy": "easy", "predict-runtimes": "true"}, check=check).starts()
    assert got == FIVE_EASYPP
    assert replay(w, nodes_graph(4), {"queue-policy": "easy"}, check=check).starts() == FIVE_EASY


def test_a_correction_is_an_event_of_its_own():
    # 2 nodes.  A (user 1) runs [0, 10]: history [10].  B (user 1, 1 node,
    # predicted 10, really 50) starts at 20.  C (2 nodes, walltime 100) waits
    # with its shadow at 30.  D (1 node, user 2, 15 s) cannot backfill at 22
    # (ends 37 > 30).  Nothing happens at 30 but B outliving its prediction:
    # the pass then moves C's shadow to 120 and D starts at 30.
    jobs = [(0, 0, 2, 100, 10, 1), (1, 20, 1, 100, 50, 1), (2, 21, 2, 100, 5, 3), (3, 22, 1, 15, 15, 2)]
    want = {0: 0, 1: 20, 2: 70, 3: 30}
    assert textbook_easypp(jobs, 2) == want
    got = replay(_workload(jobs, 2), nodes_graph(2), {"queue-policy": "easy", "predict-runtimes": "true"})
    assert got.starts() == want


def test_the_walltime_stays_the_kill_time():
    # A (user 1) completes in 10 s; B (user 1) is predicted 10 s but runs 60
    # of its 100: it is not killed at its prediction.
    jobs = [(0, 0, 1, 100, 10, 1), (1, 20, 1, 100, 60, 1)]
    r = replay(_workload(jobs, 1), nodes_graph(1), {"queue-policy": "easy", "predict-runtimes": "true"})
    assert [(rec.start, rec.finish, rec.state) for rec in r.records][1] == (20, 80, "COMPLETED_SUCCESSFULLY")


@pytest.mark.parametrize("users", [False, True])
def test_seed1_start_times_equal_textbook_easypp(users):
    w = load_workload(shared_path("conformance", "batsim", "workloads", "example_workload_hpc_seed1_jobs250.json"))
    if users:  # the workload names no users: give them 7, round-robin, for per-user histories
        for j in w.jobs:
            j.user = j.id % 7
    ref = textbook_easypp([(j.id, j.submit, j.nodes, j.walltime, j.runtime, max(j.user, 0)) for j in w.jobs], 128)
    got = replay(w, nodes_graph(128), {"queue-policy": "easy", "predict-runtimes": "true"}).starts()
    diffs = [(jid, ref[jid], got[jid]) for jid in ref if got[jid] != ref[jid]]
    assert len(ref) == 250 and not diffs, f"{len(diffs)} start times differ, first: {diffs[:5]}"
    plain = replay(w, nodes_graph(128), {"queue-policy": "easy"}).starts()
    assert plain != got  # predictions changed decisions (the test can fail)


def test_off_by_default_changes_nothing():
    w = _workload(FIVE, 4)
    off = replay(w, nodes_graph(4), {"queue-policy": "easy", "predict-runtimes": "false"}).starts()
    assert off == replay(w, nodes_graph(4), {"queue-policy": "easy"}).starts() == FIVE_EASY
