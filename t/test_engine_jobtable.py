"""The job table is the one door for job transitions, and each alloc request
has one reply (engine/jobtable.py, engine/reply.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fluxsched_py.engine import TRANSITIONS, Engine, EngineError, JobState, ResponseType
from fluxsched_py.engine.reply import Reply

from .test_engine_rfc27 import graph, jobspec

ENGINE = Path(__file__).resolve().parent.parent / "fluxsched_py" / "engine"

#: What only the job table may assign, on a job or a queue: states, counts,
#: what a job holds and until when, and its estimate (its reservation's start).
TABLE_FIELDS = {"state", "npending", "shape_id", "resources", "t_start", "expiration", "estimate"}


def _assignments(path: Path) -> list[str]:
    """``x.f = ...`` / ``x.f += ...`` of a field in TABLE_FIELDS, with ``x`` not ``self``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in TABLE_FIELDS:
                if not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                    found.append(f"{path.name}:{node.lineno} .{t.attr}")
    return found


def test_only_the_job_table_changes_job_states_and_pending_counts():
    uses = [u for p in sorted(ENGINE.glob("*.py")) if p.name != "jobtable.py" for u in _assignments(p)]
    assert uses == []
    # ... and the check sees the table's own assignments (it can fail).
    assert any(".state" in u for u in _assignments(ENGINE / "jobtable.py"))
    assert any(".npending" in u for u in _assignments(ENGINE / "jobtable.py"))


def test_every_transition_names_known_effects_in_order():
    from fluxsched_py.engine.jobtable import EFFECTS

    for (state, event), (new, effects) in TRANSITIONS.items():
        assert set(effects) <= set(EFFECTS), (state, event)
        assert list(effects) == [e for e in EFFECTS if e in effects], (state, event)
        assert ("forget" in effects) == (new is None), (state, event)


def test_an_event_the_table_does_not_allow_raises():
    e = Engine(graph(nodes=1, cores=1), ["queue-policy=fcfs"])
    e.alloc(1, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    with pytest.raises(EngineError, match="free-final is not valid in state JobState.PENDING"):
        e.table.apply(e.job(1), "free-final")
    assert e.job(1).state is JobState.PENDING and e.pending_count == 1


def test_pending_counts_follow_the_jobs_through_every_door():
    """Hand counts: 2 queues and a best-effort job; starts, a cancel, a deny."""
    e = Engine(graph(nodes=2, cores=1), ["queue-policy=fcfs"])
    spec = jobspec(cores=1, duration=10.0)
    named = {**spec, "attributes": {"system": {"duration": 10.0, "queue": "batch"}}}
    be = {**spec, "attributes": {"system": {"duration": 10.0, "preemptible-after": 5.0}}}
    e.alloc(1, 16, 0, 0.0, spec)
    e.alloc(2, 16, 0, 1.0, spec)
    e.alloc(3, 16, 0, 2.0, named)
    e.alloc(4, 16, 0, 3.0, be)
    t = e.table
    assert (e.pending_count, t.queues[None].npending, t.queues["batch"].npending, t.besteffort.npending) == (4, 2, 1, 1)
    e.cancel(2)
    assert (e.pending_count, t.queues[None].npending) == (3, 1)
    e.schedule(5.0)  # jobs 1 and 3 take the two cores; job 4 waits
    assert e.job(1).state is JobState.RUNNING and e.job(3).state is JobState.RUNNING
    assert e.pending_count == 1 and t.besteffort.npending == 1
    e.free(1)
    e.schedule(6.0)
    assert e.job(4).state is JobState.RUNNING and e.pending_count == 0
    assert [q.npending for q in t.queues.values()] == [0] * len(t.queues)


def test_observers_see_each_event_with_the_state_it_leaves():
    seen = []

    class Watch:
        def job_event(self, job, event, old, now, preempted):
            seen.append((job.id, event, old, job.state, now))

    e = Engine(graph(nodes=1, cores=1), ["queue-policy=fcfs"])
    e.table.observers.append(Watch())
    e.alloc(1, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    e.alloc(2, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    e.schedule(1.0)
    e.cancel(2)
    e.free(1)
    P, R = JobState.PENDING, JobState.RUNNING
    assert seen == [
        (1, "alloc", None, P, None),  # told before the effects: job.state is the new job's default
        (2, "alloc", None, P, None),
        (1, "start", P, P, 1.0),
        (2, "cancel", P, P, None),
        (1, "free-final", R, R, None),
    ]


def test_a_reply_sends_what_changed_and_nothing_after_its_end():
    r = Reply()
    assert r.annotate({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert r.annotate({"a": 1, "b": 2}) is None
    assert r.annotate({"a": 3}) == {"a": 3, "b": None}
    assert r.success({"resource_summary": "rank0"}) == {"a": None, "resource_summary": "rank0"}
    assert r.done and r.sent == {}
    assert r.annotate({"a": 4}) is None  # after SUCCESS: ignored


def test_success_clears_every_annotation_the_pending_job_held():
    e = Engine(graph(nodes=1, cores=1), ["queue-policy=easy"])
    e.alloc(1, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    e.schedule(0.0)
    e.alloc(2, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    r = e.schedule(0.0).responses
    (ann,) = [x for x in r if x.id == 2 and x.type is ResponseType.ANNOTATE]
    held = set(ann.annotations["sched"])
    assert {"t_estimate", "reason_pending", "jobs_ahead"} <= held
    e.free(1)
    (ok,) = [x for x in e.schedule(10.0).responses if x.id == 2]
    assert ok.type is ResponseType.SUCCESS
    sched = ok.annotations["sched"]
    assert {k for k, v in sched.items() if v is None} == held
    assert e.job(2).reply.done and e.job(2).reply.sent == {} and 2 not in e.table.annotated


def test_a_cancelled_request_ends_its_reply():
    e = Engine(graph(nodes=1, cores=1), ["queue-policy=easy"])
    e.alloc(1, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    e.alloc(2, 16, 0, 0.0, jobspec(cores=1, duration=10.0))
    e.schedule(0.0)
    job = e.job(2)
    assert job.reply.sent and 2 in e.table.annotated
    assert [x.type for x in e.cancel(2)] == [ResponseType.CANCEL]
    assert job.reply.done and 2 not in e.table.annotated
    assert e.table.annotate(job, {"reason_pending": "late"}) is None
