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
from fluxsched_py.engine.predict import corrected, predict
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


#: The paper's increments, written out here (not imported): 1, 5, 15, 30 min, 1, 2, 5, 10, 20, 50, 100 h.
PAPER_INCREMENTS = [60, 5 * 60, 15 * 60, 30 * 60, 3600, 2 * 3600, 5 * 3600, 10 * 3600, 20 * 3600, 50 * 3600, 100 * 3600]


def textbook_easypp(
    jobs, nodes: int, correction: str = "increment", min_history: int = 1, sjbf: bool = False
) -> dict[int, float]:
    """jobs: (id, submit, res, walltime, runtime, user) -> {id: start}."""
    jobs = sorted(jobs, key=lambda j: (j[1], j[0]))
    history: dict[int, deque] = {}
    pred: dict[int, float] = {}
    queue: list = []
    running: list = []  # [actual end, planned end, res, id, start, user, walltime end, first prediction, corrections]
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
            if r[1] <= t:  # under-predicted
                if correction == "walltime":
                    r[1] = r[6]
                else:
                    r[8] += 1
                    r[1] = min(r[4] + r[7] + PAPER_INCREMENTS[min(r[8], 11) - 1], r[6])
        while i < len(jobs) and jobs[i][1] <= t:
            j = jobs[i]
            h = history.get(j[5])
            pred[j[0]] = min(max(sum(h) / len(h), 1.0), j[3]) if h and len(h) >= min_history else j[3]
            queue.append(j)
            i += 1

        def run(j, t=t):
            nonlocal free
            queue.remove(j)
            free -= j[2]
            start[j[0]] = t
            running.append([t + min(j[4], j[3]), t + pred[j[0]], j[2], j[0], t, j[5], t + j[3], pred[j[0]], 0])

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
            rest = sorted(queue[1:], key=lambda j: pred[j[0]]) if sjbf else list(queue[1:])
            for j in rest:
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


WALLTIME = {"queue-policy": "easy", "predict-runtimes": "true", "predict-correction": "walltime"}


def test_five_jobs_by_hand():
    assert textbook_easypp(FIVE, 4, "walltime") == FIVE_EASYPP
    w = _workload(FIVE, 4)
    check = Engine.check_invariants
    got = replay(w, nodes_graph(4), WALLTIME, check=check).starts()
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
    assert textbook_easypp(jobs, 2, "walltime") == want
    got = replay(_workload(jobs, 2), nodes_graph(2), WALLTIME)
    assert got.starts() == want


def test_the_walltime_stays_the_kill_time():
    # A (user 1) completes in 10 s; B (user 1) is predicted 10 s but runs 60
    # of its 100: it is not killed at its prediction.
    jobs = [(0, 0, 1, 100, 10, 1), (1, 20, 1, 100, 60, 1)]
    r = replay(_workload(jobs, 1), nodes_graph(1), {"queue-policy": "easy", "predict-runtimes": "true"})
    assert [(rec.start, rec.finish, rec.state) for rec in r.records][1] == (20, 80, "COMPLETED_SUCCESSFULLY")


@pytest.mark.parametrize(
    ("users", "correction", "history", "order"),
    [
        (False, "walltime", 1, "queue"),
        (True, "walltime", 1, "queue"),
        (True, "increment", 1, "queue"),
        (True, "increment", 2, "queue"),
        (True, "increment", 2, "sjbf"),
        (True, "walltime", 1, "sjbf"),
    ],
)
def test_seed1_start_times_equal_textbook_easypp(users, correction, history, order):
    w = load_workload(shared_path("conformance", "batsim", "workloads", "example_workload_hpc_seed1_jobs250.json"))
    if users:  # the workload names no users: give them 7, round-robin, for per-user histories
        for j in w.jobs:
            j.user = j.id % 7
    jobs = [(j.id, j.submit, j.nodes, j.walltime, j.runtime, max(j.user, 0)) for j in w.jobs]
    ref = textbook_easypp(jobs, 128, correction, history, order == "sjbf")
    opts = {
        "queue-policy": "easy",
        "predict-runtimes": "true",
        "predict-correction": correction,
        "predict-history": str(history),
        "backfill-order": order,
    }
    got = replay(w, nodes_graph(128), opts).starts()
    diffs = [(jid, ref[jid], got[jid]) for jid in ref if got[jid] != ref[jid]]
    assert len(ref) == 250 and not diffs, f"{len(diffs)} start times differ, first: {diffs[:5]}"
    plain = replay(w, nodes_graph(128), {"queue-policy": "easy"}).starts()
    assert plain != got  # predictions changed decisions (the test can fail)


def test_off_by_default_changes_nothing():
    w = _workload(FIVE, 4)
    off = replay(w, nodes_graph(4), {"queue-policy": "easy", "predict-runtimes": "false"}).starts()
    assert off == replay(w, nodes_graph(4), {"queue-policy": "easy"}).starts() == FIVE_EASY


def test_waiting_for_two_completed_jobs():
    assert predict([30.0], 100.0, min_history=2) == 100.0
    assert predict([30.0, 50.0], 100.0, min_history=2) == 40.0
    assert predict([30.0], 100.0, min_history=1) == 30.0


def test_the_paper_increments_by_hand():
    # first prediction 10 s: + 1 min, + 5 min, + 15 min ... + 100 h from the 11th on
    assert [corrected(10.0, k, 1e9) for k in (1, 2, 3, 4, 5)] == [70.0, 310.0, 910.0, 1810.0, 3610.0]
    assert corrected(10.0, 11, 1e9) == corrected(10.0, 30, 1e9) == 10.0 + 100 * 3600
    assert corrected(10.0, 2, 200.0) == 200.0  # never past the walltime


# 2 nodes.  A (user 1) runs [0, 10]: history [10].  B (user 1, 1 node,
# walltime 1000, really 200) starts at 20, predicted 10.  C (2 nodes) waits,
# its shadow at B's predicted end, 30.  D (1 node, 45 s) ends at 67 > 30: it
# waits.  At 30 B outlives its prediction: the paper's rule plans it to
# 20 + 10 + 60 = 90 (the walltime rule: 1020), so D (ends 75 <= 90) starts
# at 30.  E (1 node, 100 s, from 31) finds a free node when D ends at 75:
# 175 > 90, and no extra node, so it waits until B's second correction at 90
# (plan 20 + 10 + 300 = 330), and starts then; under the walltime rule it
# starts at 75.  C starts when B really ends, 220.
INCREMENT_CASE = [
    (0, 0, 1, 100, 10, 1),  # A
    (1, 20, 1, 1000, 200, 1),  # B
    (2, 21, 2, 100, 5, 3),  # C
    (3, 22, 1, 45, 45, 2),  # D
    (4, 31, 1, 100, 100, 4),  # E
]


@pytest.mark.parametrize(
    ("correction", "want"),
    [("increment", {0: 0, 1: 20, 2: 220, 3: 30, 4: 90}), ("walltime", {0: 0, 1: 20, 2: 220, 3: 30, 4: 75})],
)
def test_an_exceeded_prediction_grows_by_the_paper_increments(correction, want):
    assert textbook_easypp(INCREMENT_CASE, 2, correction) == want
    opts = {"queue-policy": "easy", "predict-runtimes": "true", "predict-correction": correction}
    got = replay(_workload(INCREMENT_CASE, 2), nodes_graph(2), opts, check=Engine.check_invariants)
    assert got.starts() == want


def test_a_job_over_its_walltime_is_killed_there_whatever_its_prediction():
    # A (user 1) completes in 10 s; B (user 1) is predicted 10 s, runs 80 of a
    # 50 s walltime: corrected at 30 (plan 20 + 10 + 60, capped at 70), killed at 70.
    jobs = [(0, 0, 1, 100, 10, 1), (1, 20, 1, 50, 80, 1)]
    r = replay(_workload(jobs, 1), nodes_graph(1), {"queue-policy": "easy", "predict-runtimes": "true"})
    assert [(rec.start, rec.finish, rec.state) for rec in r.records][1] == (20, 70, "COMPLETED_WALLTIME_REACHED")


# 3 nodes, walltimes exact (no predictions: each job plans with its walltime).
# X (1 node, 10 s) and A (2 nodes, 100 s) start at 0.  B (3 nodes, 50 s) is
# the head from 1, its shadow at 100.  C (1 node, 90 s) and D (1 node, 30 s)
# wait for X's node, free at 10.  Queue order tries C first: 10 + 90 <= 100,
# it starts, and D waits until B ends at 150.  SJBF tries D first (30 < 90):
# it starts at 10; C, then 40 + 90 > 100 with no extra node, waits for B:
# B starts at 100, C at 150.
SJBF_CASE = [
    (0, 0, 1, 10, 10, 1),  # X
    (1, 0, 2, 100, 100, 2),  # A
    (2, 1, 3, 50, 50, 3),  # B
    (3, 2, 1, 90, 90, 4),  # C
    (4, 3, 1, 30, 30, 5),  # D
]


@pytest.mark.parametrize(
    ("order", "want"),
    [("queue", {0: 0, 1: 0, 2: 100, 3: 10, 4: 150}), ("sjbf", {0: 0, 1: 0, 2: 100, 3: 150, 4: 10})],
)
def test_backfill_order_shortest_first(order, want):
    assert textbook_easypp(SJBF_CASE, 3, sjbf=order == "sjbf") == want
    got = replay(_workload(SJBF_CASE, 3), nodes_graph(3), {"queue-policy": "easy", "backfill-order": order})
    assert got.starts() == want
