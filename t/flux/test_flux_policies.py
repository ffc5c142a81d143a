"""fcfs, easy, conservative and hybrid under a real flux-core, each with its exact start order.

Four fake nodes, mock execution (``system.exec.test.run_duration``).  The
jobs are submitted with the queue stopped, then the queue is started, so the
scheduler sees them all in submit order.  Walltimes (``-t``) drive the
reservations; the mock run durations are shorter, so the jobs end early,
as real jobs do.  They run for seconds, so that the waiting jobs can be
seen waiting even on a loaded machine.

====  =====  ========  ====  ===============================================
job   nodes  walltime  runs  why it is there
====  =====  ========  ====  ===============================================
A     3      100 s     4 s   starts at once
B     2      100 s     2 s   the head job: waits for A
C     4      100 s     2 s   reserved after B (fcfs, conservative)
D     1      250 s     6 s   EASY backfills it on the node B does not need
                             at its reservation; conservative cannot (it
                             would delay C)
E     1      50 s      2 s   conservative backfills it before B's start;
                             EASY has given the free node to D
====  =====  ========  ====  ===============================================
"""

from __future__ import annotations

import pytest

from .instance import Instance

JOBS = [
    ("A", 3, "100s", "4s"),
    ("B", 2, "100s", "2s"),
    ("C", 4, "100s", "2s"),
    ("D", 1, "250s", "6s"),
    ("E", 1, "50s", "2s"),
]

EXPECTED = {
    "fcfs": "ABCDE",
    "easy": "ADBEC",
    "conservative": "AEBCD",
}


#: job -> the job ahead of it that waited when it started
BACKFILLED = {
    "fcfs": {},
    "easy": {"D": "B", "E": "C"},  # C is the head once B runs
    "conservative": {"E": "B"},
}


@pytest.fixture(scope="module")
def inst():
    i = Instance(1)
    try:
        i.use_scheduler(None)
        i.set_resources(4, 4)
        yield i
    finally:
        i.stop()


def start_order(inst: Instance, ids: dict[str, str]) -> str:
    t_alloc = {}
    for name, jobid in ids.items():
        inst.wait_event(jobid, "clean", timeout=30)
        ev = {e["name"]: e for e in inst.eventlog(jobid)}
        assert "alloc" in ev, f"job {name} never started: {list(ev)}"
        t_alloc[name] = ev["alloc"]["timestamp"]
    return "".join(sorted(t_alloc, key=t_alloc.get))


def submit_all(inst: Instance, *options: str) -> dict[str, str]:
    """Load sched-py with ``options``, submit :data:`JOBS` with the queue
    stopped, start the queue; the job ids by name."""
    inst.use_scheduler("sched-py", *options)
    inst.run("queue", "stop")
    ids = {}
    for name, nodes, walltime, runs in JOBS:
        ids[name] = inst.submit(
            f"-N{nodes}",
            "--exclusive",
            "-t",
            walltime,
            f"--setattr=system.exec.test.run_duration={runs}",
            f"--job-name={name}",
            "true",
        )
    inst.run("queue", "start")
    return ids


@pytest.mark.parametrize(
    ("policy", "nodes"),
    [("fcfs", "pinned"), ("easy", "pinned"), ("conservative", "pinned"), ("conservative", "counted")],
)
def test_start_order(inst, policy, nodes):
    """With ``reservation-nodes=counted`` the order is the same: here no
    job waits for nodes that pins, not counts, hold back."""
    ids = submit_all(inst, f"queue-policy={policy}", "policy=low", f"reservation-nodes={nodes}")
    if policy in ("conservative", "fcfs"):
        # every waiting job holds a reservation: t_estimate is posted for C and D too;
        # under fcfs each is forecast no earlier than the job ahead of it
        inst.wait_event(ids["A"], "alloc")
        out = inst.run("jobs", "-no", "{name} {status} {annotations.sched.t_estimate}", "--filter=pending")
        est = {line.split()[0]: float(line.split()[2]) for line in out.splitlines() if len(line.split()) == 3}
        assert {"B", "C", "D"} <= set(est), out
        assert est["B"] < est["C"] < est["D"]
        if policy == "fcfs":
            assert est["D"] == est["E"], out  # E starts with D, on another node
    assert start_order(inst, ids) == EXPECTED[policy]
    # a job started while a job ahead of it waited names that job, as sched-backfill does
    backfill = {n: inst.run("jobs", "-no", "{annotations.sched.backfill}", j).strip() for n, j in ids.items()}
    assert backfill == {n: ids[BACKFILLED[policy][n]] if n in BACKFILLED[policy] else "" for n in ids}


@pytest.mark.parametrize(("depth", "like"), [(1, "easy"), (2, "conservative")])
def test_hybrid_reserves_as_deep_as_its_reserve_depth(inst, depth, like):
    """``queue-policy=hybrid``: conservative up to ``reserve-depth``.  With
    depth 1 only B, the head, is reserved (on ranks 0-1, ``policy=low``), so D
    starts on rank 3, which B's reservation does not hold, and E waits, as
    under EASY; with depth 2, C's reservation stops D and E backfills before
    B's start, as under conservative (depth 2 covers every job that waits)."""
    ids = submit_all(inst, "queue-policy=hybrid", f"reserve-depth={depth}", "policy=low")
    assert start_order(inst, ids) == EXPECTED[like]
    backfill = {n: inst.run("jobs", "-no", "{annotations.sched.backfill}", j).strip() for n, j in ids.items()}
    assert backfill == {n: ids[BACKFILLED[like][n]] if n in BACKFILLED[like] else "" for n in ids}
