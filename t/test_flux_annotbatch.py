"""``annotate-interval``: pending jobs' annotations held and merged during a
burst (fluxsched_py/flux/annotbatch.py).

The oracle is the job-manager's own rule (flux-core job-manager/annotate.c,
jpath_update): each ANNOTATE payload is applied in order, a ``null`` deletes
its key.  Whatever the batcher holds, merges or drops, what the job-manager
holds after a flush must be what it would hold had every diff been sent at
once, for every job still waiting; and the scheduling decisions (the SUCCESS
responses) do not change.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.flux.annotbatch import AnnotationBatcher
from fluxsched_py.flux.wire import split_binding_args

from .test_flux_driver import alloc, jobspec, make


def apply(view: dict[int, dict], jobid: int, payload: dict) -> None:
    """The job-manager's update: keys set in order, ``None`` deletes."""
    for ns, diff in payload.items():
        cur = view.setdefault(jobid, {}).setdefault(ns, {})
        for k, v in diff.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v


def clean(view: dict[int, dict]) -> dict[int, dict]:
    return {j: {ns: d for ns, d in v.items() if d} for j, v in view.items() if any(v.values())}


class Harness:
    def __init__(self, interval: float) -> None:
        self.now = 0.0
        self.sent: list[tuple[int, dict]] = []
        self.armed: list[float] = []
        self.b = AnnotationBatcher(interval, lambda: self.now, lambda j, a: self.sent.append((j, a)), self.armed.append)


def test_without_an_interval_every_diff_goes_at_once():
    h = Harness(0.0)
    h.b.batch([(1, {"sched": {"jobs_ahead": 1}}), (2, {"sched": {"jobs_ahead": 2}})])
    h.b.batch([(1, {"sched": {"jobs_ahead": 0}})])
    assert h.sent == [
        (1, {"sched": {"jobs_ahead": 1}}),
        (2, {"sched": {"jobs_ahead": 2}}),
        (1, {"sched": {"jobs_ahead": 0}}),
    ]
    assert h.armed == []


def test_the_first_batch_goes_at_once_then_batches_are_held_and_merged_until_the_interval_ends():
    h = Harness(1.0)
    h.b.batch([(1, {"sched": {"jobs_ahead": 1, "reason_pending": "a"}})])
    assert h.sent == [(1, {"sched": {"jobs_ahead": 1, "reason_pending": "a"}})]
    h.now = 0.2
    h.b.batch([(1, {"sched": {"jobs_ahead": 0}}), (2, {"sched": {"jobs_ahead": 1, "t_estimate": 5.0}})])
    h.now = 0.4
    h.b.batch([(2, {"sched": {"t_estimate": None}}), (3, {"sched": {"jobs_ahead": 2}})])
    assert len(h.sent) == 1 and h.armed == [pytest.approx(0.8)]  # one timer, to the end of the interval
    assert (h.b.pending, h.b.merged) == (3, 1)
    h.now = 1.0
    h.b.flush()
    assert h.sent[1:] == [
        (1, {"sched": {"jobs_ahead": 0}}),
        (2, {"sched": {"jobs_ahead": 1, "t_estimate": None}}),
        (3, {"sched": {"jobs_ahead": 2}}),
    ]
    h.now = 1.5  # within the interval after that flush: held again
    h.b.batch([(3, {"sched": {"jobs_ahead": 1}})])
    assert len(h.sent) == 4 and h.armed[-1] == pytest.approx(0.5)


def test_a_job_answered_meanwhile_never_gets_its_held_diff():
    h = Harness(1.0)
    h.b.batch([(1, {"sched": {"jobs_ahead": 0}})])
    h.now = 0.1
    h.b.batch([(1, {"sched": {"jobs_ahead": 3}}), (2, {"sched": {"jobs_ahead": 4}})])
    h.b.forget(1)
    h.b.forget(7)  # nothing held: nothing counted
    h.b.flush()
    assert h.sent[1:] == [(2, {"sched": {"jobs_ahead": 4}})]
    assert h.b.dropped == 1


diffs = st.dictionaries(
    st.sampled_from(["jobs_ahead", "reason_pending", "t_estimate", "queue"]),
    st.one_of(st.none(), st.integers(0, 5)),
    min_size=1,
    max_size=3,
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("batch"), st.floats(0, 0.7), st.lists(st.tuples(st.integers(1, 6), diffs), max_size=6)),
        st.tuples(st.just("forget"), st.just(0.0), st.integers(1, 6)),
        st.tuples(st.just("timer"), st.just(0.0), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_after_a_flush_the_job_manager_holds_what_every_diff_sent_at_once_gives(ops):
    h = Harness(1.0)
    direct: dict[int, dict] = {}
    answered: set[int] = set()
    for kind, dt, arg in ops:
        h.now += dt
        if kind == "batch":
            items = [(j, {"sched": d}) for j, d in arg if j not in answered]
            for j, a in items:
                apply(direct, j, a)
            h.b.batch(items)
        elif kind == "forget":
            answered.add(arg)
            h.b.forget(arg)
        elif h.armed:  # the timer fires
            h.b.flush()
    h.b.flush()
    held: dict[int, dict] = {}
    for j, a in h.sent:
        apply(held, j, a)
    live = {j for j in direct if j not in answered}
    assert clean({j: held.get(j, {}) for j in live}) == clean({j: direct[j] for j in live})


def test_binding_arguments_are_split_from_engine_options():
    rest, b = split_binding_args(["queue-policy=easy", "nice=5", "annotate-interval=0.5"])
    assert rest == ["queue-policy=easy"] and (b.nice, b.annotate_interval) == (5, 0.5)
    assert split_binding_args([])[1] == split_binding_args(["nice=0"])[1]
    for bad in (
        "nice=20",
        "nice=-1",
        "nice=x",
        "annotate-interval=-1",
        "annotate-interval=nan",
        "annotate-interval=61",
    ):
        with pytest.raises(ValueError, match=bad.split("=")[0]):
            split_binding_args([bad])


def burst(options):
    """Two running jobs fill R2 (8 cores, 4 each); 12 one-core jobs wait, then
    the running ones end one after the other: every pass moves the queue."""
    d, t = make(options)
    for j in (1, 2):
        alloc(d, t, j, spec=jobspec(ncores=4))
    for j in range(3, 15):
        alloc(d, t, j)
    for j in (1, 2):
        d.handle("sched.free", None, {"id": j, "final": True})
        t.run_passes()
    d.flush_annotations()
    return d, t


def test_the_driver_holds_annotations_and_sends_fewer_without_changing_what_the_job_manager_holds():
    d0, t0 = burst([])
    d1, t1 = burst(["annotate-interval=60"])
    assert t0.flush_requests == [] and len(t1.flush_requests) >= 1

    def view(t):
        v: dict[int, dict] = {}
        success = []
        for kind, _msg, p in t.sent:
            if kind == "respond" and isinstance(p, dict) and "type" in p:
                if p.get("annotations"):
                    apply(v, p["id"], p["annotations"])
                if p["type"] == 0:
                    success.append((p["id"], p["R"]["execution"]["R_lite"]))
        return clean(v), success

    v0, s0 = view(t0)
    v1, s1 = view(t1)
    assert s1 == s0 and len(s0) == 10  # the same decisions
    assert v1 == v0  # the same annotations held by the job-manager at the end
    n0, n1 = d0.stats_get()["annotations"], d1.stats_get()["annotations"]
    st1 = d1.stats_get()
    assert n1 < n0, (n0, n1)
    assert st1["annotations_merged"] + st1["annotations_dropped"] > 0
