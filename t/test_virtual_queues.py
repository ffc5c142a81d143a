"""RFC 33 virtual queues (2026): a job submitted to a virtual queue is
scheduled as part of its parent queue, in one priority order with the
parent's own jobs (``queue-parent``, and under Flux the instance config's
``[queues.NAME] parent``)."""

from __future__ import annotations

import pytest

from fluxsched_py.engine import EngineError, EngineOptions
from fluxsched_py.engine.forecast import forecast
from fluxsched_py.flux.siteconf import config_options

from .test_engine_queues import annotations, engine, qjob, started

PARENTS = ["queue-policy=easy", "queue-policy-per-queue=batch:fcfs,debug:easy", "queue-parent=express:batch"]


def test_a_virtual_queues_jobs_wait_in_the_parents_queue_in_one_order():
    e = engine(nodes=2, options=PARENTS)
    e.alloc(1, 16, 1, 1.0, qjob("batch", 2, duration=100))  # runs until 110
    assert started(e.schedule(10.0).responses) == [1]
    e.alloc(2, 16, 1, 2.0, qjob("batch", 1, duration=50))
    e.alloc(3, 20, 1, 3.0, qjob("express", 2, duration=10))  # more urgent: ahead of job 2
    e.alloc(4, 16, 1, 4.0, qjob("debug", 1, duration=10))
    out = e.schedule(10.0).responses
    assert started(out) == []
    assert set(e.table.queues) == {"batch", "debug"}  # no queue of its own
    ann = annotations(out)
    # one priority order in batch: 3 (express) is the head, 2 is behind it
    assert ann[3]["jobs_ahead"] == 0 and ann[2]["jobs_ahead"] == 1
    assert ann[3]["queue"] == "express"  # the job keeps its queue's name
    assert e.policy_for("express").name == "fcfs"  # the parent's policy
    e.free(1)
    assert started(e.schedule(110.0).responses) == [3]
    # batch is fcfs: 2 waits for 3, and the forecast knows it
    assert [(f.jobid, f.start) for f in forecast(e, 110.0) if f.jobid == 2] == [(2, 120.0)]


def test_without_the_parent_it_is_a_queue_of_its_own():
    e = engine(nodes=2, options=PARENTS[:2])
    e.alloc(1, 16, 1, 1.0, qjob("express", 1))
    e.schedule(1.0)
    assert "express" in e.table.queues and e.policy_for("express").name == "easy"


def test_queue_parent_values():
    assert EngineOptions.parse(["queue-parent=a:b,c:b"]).queue_parent == (("a", "b"), ("c", "b"))
    with pytest.raises(EngineError, match="virtual"):
        EngineOptions.parse(["queue-parent=a:b,b:c"])  # a parent may not be virtual
    with pytest.raises(EngineError, match="bad entries"):
        EngineOptions.parse(["queue-parent=a"])


def test_flux_reads_parents_from_the_queues_tables():
    conf = {"queues": {"batch": {}, "express": {"parent": "batch"}, "x": {"parent": 3}}}
    assert config_options(conf, "sched-py").queue_parent == (("express", "batch"),)
    conf["sched-py"] = {"queue-parent": {"express": "debug"}}  # the module's own table wins
    assert config_options(conf, "sched-py").queue_parent == (("express", "debug"),)
    assert config_options({"queues": {"batch": {}}}, "sched-py").queue_parent == ()


def test_a_config_reload_keeps_the_parents_until_the_module_reloads():
    from .test_flux_driver import make

    d, t = make()
    d.on_config_reload("r1", {"queues": {"express": {"parent": "batch"}}})
    assert d.options.queue_parent == () and any("queue-parent" in text for _, text in t.logs)
