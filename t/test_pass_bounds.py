"""Issue 21's cheap bounds on long queues and huge machines, on hand-built cases.

* a backfill pass ends at once when no pending job can fit (``Pass.nothing_fits``),
  and a whole-node candidate for more nodes than are wholly free is held
  without a match (``Pass.fits_free``), with the starts and the
  ``reason_pending`` texts the full walk gives;
* the multiset of pending node bounds (:mod:`fluxsched_py.engine.sizes`);
* the n lowest / highest bits of a mask, against peeling them one by one;
* whole-node feasibility remembered by size, and forgotten when the graph shrinks.
"""

from __future__ import annotations

import random

from fluxsched_py.engine import Engine, ResponseType
from fluxsched_py.engine.sizes import PendingSizes, node_bound
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.planner.matchcache import highest_bits, lowest_bits
from fluxsched_py.replay.platform import nodes_graph


def easy(nodes: int, *options: str) -> Engine:
    return Engine(
        nodes_graph(nodes), ["queue-policy=easy", *options], build_R=False, time_format=lambda t: f"t={t:.0f}s"
    )


def by_type(responses, kind):
    return {r.id: r for r in responses if r.type is kind}


def reasons(responses):
    return {
        r.id: r.annotations["sched"].get("reason_pending") for r in by_type(responses, ResponseType.ANNOTATE).values()
    }


def test_a_pass_ends_without_matching_when_every_waiting_job_needs_more_nodes_than_are_free():
    # 4 one-core nodes; job 1 holds 3 until t=100.  Job 2 (4 nodes) is the
    # head, reserved at 100.  Jobs 3-5 need 2, 3, 2 nodes: 1 node is free,
    # so none can start, by any rule.
    e = easy(4, "annotate-depth=unlimited")
    e.alloc(1, 0, 1, 0.0, node_request(3, 100.0))
    assert list(by_type(e.schedule(0.0).responses, ResponseType.SUCCESS)) == [1]
    for jobid, n in ((2, 4), (3, 2), (4, 3), (5, 2)):
        e.alloc(jobid, 0, 1, 1.0, node_request(n, 10.0))
    before = e.stats["matches"]
    out = e.schedule(1.0).responses
    assert not by_type(out, ResponseType.SUCCESS)
    assert e.stats["matches"] - before == 2  # the head's: fits now? and its earliest start
    why = reasons(out)
    assert why[2].endswith("reserved to start at t=100s")
    for jobid, n in ((3, 2), (4, 3), (5, 2)):
        # what visiting each would have said: a backfill that would delay the head
        assert why[jobid] == f"waiting for {n} nodes (1 free) — cannot start without delaying a reservation"


def test_annotate_depth_bounds_what_the_early_end_looks_at():
    e = easy(4, "annotate-depth=3")
    e.alloc(1, 0, 1, 0.0, node_request(3, 100.0))
    e.schedule(0.0)
    for jobid in range(2, 10):
        e.alloc(jobid, 0, 1, 1.0, node_request(4 if jobid == 2 else 2, 10.0))
    out = e.schedule(1.0).responses
    why = reasons(out)
    assert sorted(why) == [2, 3, 4]  # the first three pending jobs are annotated
    assert why[3].endswith("cannot start without delaying a reservation")
    assert why[4].endswith("cannot start without delaying a reservation")


def test_a_candidate_too_big_for_what_is_free_costs_no_match_and_a_small_one_still_backfills():
    # 4 one-core nodes; job 1 holds 2 until t=100; the head (4 nodes) is
    # reserved at 100.  Job 3 (3 nodes) cannot fit the 2 free nodes: held
    # with no match.  Job 4 (1 node, 50 s) ends before 100: backfilled (rule 1).
    e = easy(4, "annotate-depth=unlimited")
    e.alloc(1, 0, 1, 0.0, node_request(2, 100.0))
    e.schedule(0.0)
    e.alloc(2, 0, 1, 1.0, node_request(4, 10.0))
    e.alloc(3, 0, 1, 1.0, node_request(3, 10.0))
    e.alloc(4, 0, 1, 1.0, node_request(1, 50.0))
    before = e.stats["matches"]
    out = e.schedule(1.0).responses
    assert list(by_type(out, ResponseType.SUCCESS)) == [4]
    assert e.stats["matches"] - before == 3  # head: 2; job 4: 1 (it fits at once); job 3: none
    assert reasons(out)[3] == "waiting for 3 nodes (1 free) — cannot start without delaying a reservation"


def test_rule_two_still_backfills_on_nodes_the_head_does_not_need():
    # 6 nodes; job 1 holds 4 until 100: the head (4 nodes) is reserved on
    # job 1's nodes at 100, leaving 2 extra nodes.  Job 3 (2 nodes, 1000 s)
    # runs past 100 on them (rule 2); job 4 (1 node) then finds none free.
    e = easy(6)
    e.alloc(1, 0, 1, 0.0, node_request(4, 100.0))
    e.schedule(0.0)
    e.alloc(2, 0, 1, 1.0, node_request(4, 10.0))
    e.alloc(3, 0, 1, 1.0, node_request(2, 1000.0))
    e.alloc(4, 0, 1, 1.0, node_request(1, 10.0))
    out = e.schedule(1.0).responses
    assert list(by_type(out, ResponseType.SUCCESS)) == [3]
    assert e.pending_count == 2


def test_pending_sizes_keep_the_smallest_bound_as_jobs_come_and_go():
    s = PendingSizes()
    assert s.smallest() is None
    live: list[int] = []
    rng = random.Random(7)
    for _ in range(3000):
        if live and rng.random() < 0.45:
            s.discard(live.pop(rng.randrange(len(live))))
        else:
            n = rng.choice([0, 1, 2, 3, 5, 8, 13, 64])
            s.add(n)
            live.append(n)
        assert s.smallest() == (min(live) if live else None)


def test_node_bound_is_the_node_count_of_an_exclusive_request_only():
    assert node_bound(node_request(7, 10.0)) == 7
    cores = {
        "version": 1,
        "resources": [{"type": "slot", "count": 3, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {}},
    }
    assert node_bound(parse_jobspec(cores)) == 0  # cores only: no node bound


def test_the_n_lowest_and_highest_bits_are_those_peeled_one_by_one():
    def peel(m: int, n: int, high: bool) -> int:
        out = 0
        for _ in range(n):
            bit = 1 << (m.bit_length() - 1) if high else m & -m
            m ^= bit
            out |= bit
        return out

    rng = random.Random(21)
    for _ in range(2000):
        width = rng.choice([1, 7, 64, 300, 5000])
        m = rng.getrandbits(width) | 1 << rng.randrange(width)
        n = rng.randint(1, m.bit_count())
        assert lowest_bits(m, n) == peel(m, n, False)
        assert highest_bits(m, n) == peel(m, n, True)
    m = (1 << 186_624) - 1  # a whole machine of 93,312 one-core nodes' node bits and more
    assert lowest_bits(m, 40_000) == (1 << 40_000) - 1
    assert highest_bits(m, 40_000) == m ^ ((1 << (186_624 - 40_000)) - 1)


def test_whole_node_feasibility_by_size_and_again_after_a_shrink():
    e = easy(4)
    assert e.feasibility(node_request(3, 10.0)) is None
    assert e.feasibility(node_request(2, 10.0)) is None  # fewer than a feasible size
    assert e.feasibility(node_request(5, 10.0)) == "requested 5 nodes, only 4 exist"
    e.resource_update(shrink="0-1")
    assert e.feasibility(node_request(2, 10.0)) is None
    assert e.feasibility(node_request(3, 10.0)) == "requested 3 nodes, only 2 exist"
    assert e.alloc(9, 0, 1, 0.0, node_request(3, 10.0))[0].type is ResponseType.DENY
