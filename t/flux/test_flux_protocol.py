"""RFC 20/27 changes since 2024 that a real flux-core 0.88 can provoke
(docs/rfcs/rfc20-R.md and docs/rfcs/rfc27-sched-protocol.md, "Changes since 2024").

One broker, 4 fake nodes of 2 cores; ranks 2-3 carry the instance-local
property ``+batch`` (what RFC 33's ``queues.NAME.hosts`` makes for a queue,
2026) and ranks 1-3 the property ``fast``.
"""

from __future__ import annotations

import json
import time

import pytest

from .instance import sched_py_instance


@pytest.fixture(scope="module")
def inst():
    with sched_py_instance(1, 4, 2, properties={"+batch": "2-3", "fast": "1-3"}) as i:
        yield i


def job_R(inst, *args):
    job = inst.submit(*args, "true")
    inst.wait_event(job, "clean")
    return json.loads(inst.run("job", "info", job, "R"))["execution"]


def test_instance_local_properties_are_matched_but_left_out_of_job_R(inst):
    # RFC 20 cfd3836: a scheduler SHALL omit +properties from the R it allocates
    ex = job_R(inst, "-N2", "--requires=+batch")
    assert ex["R_lite"][0]["rank"] == "2-3"
    assert ex["properties"] == {"fast": "2-3"}


def test_job_R_carries_nslots(inst):
    # RFC 20 8da980e: the total number of slots of the allocation
    ex = job_R(inst, "-N2", "-n4", "-c1")
    assert ex["nslots"] == 4


def test_the_forecast_is_made_in_the_background_and_served_with_its_age(inst):
    # flux/control.py: slices after passes; forecast serves the latest complete one
    mock = "--setattr=system.exec.test.run_duration=600s"
    big = inst.submit("-N4", "-t", "10m", mock, "true")
    inst.wait_event(big, "alloc")
    waiting = [inst.submit("-N1", "-t", "5m", mock, "true") for _ in range(3)]
    for j in waiting:
        inst.wait_event(j, "priority")
    deadline = time.monotonic() + 20
    while True:  # the jobs' pass, then its forecast slices, run as the reactor gets to them
        out = json.loads(inst.run("sched-py", "forecast", "--json"))
        if all(j["t_estimate"] is not None for j in out["jobs"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    status = json.loads(inst.run("sched-py", "status", "--json"))
    assert out["source"] == "background" and 0 <= out["age"] == out["now"] - out["as_of"]
    assert len(out["jobs"]) == 3 and all(j["t_estimate"] >= out["now"] for j in out["jobs"])
    assert status["forecast_slices"] >= 1 and status["forecast_age"] is not None
    inst.run("cancel", "--all")
