"""A queue policy that raises during a pass: the job it was on is denied with
the error, what the pass started stands, and scheduling goes on.

The fault is injected from t/flux/faults/sitecustomize.py (the same patch
t/flux/test_flux_faults.py puts into a real broker).
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import ResponseType

from .flux.faults.sitecustomize import FAULT_DURATION, install_policy_fault, uninstall
from .test_engine_queues import engine, qjob, started
from .test_flux_driver import alloc, jobspec, make, replies


@pytest.fixture
def fault():
    undo = install_policy_fault()
    yield
    uninstall(undo)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "hybrid"])
def test_the_job_is_denied_with_the_error_and_the_others_are_scheduled(fault, policy):
    e = engine(options=[f"queue-policy={policy}"])  # checks the invariants after every call
    e.alloc(1, 16, 1, 1.0, qjob(nnodes=1, duration=100))
    e.alloc(2, 16, 1, 2.0, qjob(nnodes=1, duration=FAULT_DURATION))
    e.alloc(3, 16, 1, 3.0, qjob(nnodes=2, duration=100))
    res = e.schedule(0.0)
    assert res.more  # the pass was dropped: run another at once
    deny = [r for r in res.responses if r.type is ResponseType.DENY]
    assert [(r.id, r.note) for r in deny] == [(2, "scheduler error: RuntimeError: injected policy fault")]
    assert started(res.responses) == [1]  # started before the fault: stands
    out = e.schedule(0.0).responses
    assert started(out) == [3]
    assert e.job(2) is None and e.stats["denied"] == 1 and e.pending_count == 0


def test_under_the_driver_the_alloc_gets_a_deny_and_the_module_goes_on(fault):
    d, t = make(["queue-policy=easy"])
    alloc(d, t, 1, jobspec(ncores=1, duration=FAULT_DURATION))
    (deny,) = replies(t, "alloc-1")
    assert deny["type"] == 2 and deny["note"] == "scheduler error: RuntimeError: injected policy fault"
    assert any("policy raised" in e for e in t.errors())
    alloc(d, t, 2, jobspec(ncores=1, duration=10))
    (ok,) = replies(t, "alloc-2")
    assert ok["type"] == 0
    assert d.stats_get()["pending_jobs"] == 0
