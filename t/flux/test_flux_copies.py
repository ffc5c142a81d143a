"""End-of-campaign copies under a real ``flux start`` (flux-core 0.88; docs/rfcs/campaigns.md).

Two fake nodes of four cores, mock execution, sched-py loaded with
``duplicates=1``.  A regular one-node job of 3 s holds one node while the
campaign's three best-effort one-node jobs arrive: one of 10 s, which
starts on the other node, and two of half a second, which run one after
the other once the regular job is over.  No node is idle until the second
short job ends; then no job of the campaign is pending and the module
submits a copy of the long job (its jobspec says ``duplicate-of``, and
carries the original's environment).  The copy runs as long as its original (mock
execution), which started first and ends first: the module then cancels
the copy as ``flux cancel`` does (a ``cancel`` exception, severity 0).
"""

from __future__ import annotations

import time

import pytest

from .instance import Instance, sched_py_instance

BE = ["-N1", "--exclusive", "-S", "preemptible-after=0", "-t", "1m", "--setattr=user.campaign=c"]


def runs(seconds: float) -> str:
    return f"--setattr=system.exec.test.run_duration={seconds}s"


@pytest.fixture()
def inst():
    with sched_py_instance(1, 2, 4, "queue-policy=easy", "duplicates=1") as i:
        yield i


def copies_of(inst: Instance, jobid: int) -> list[str]:
    """The jobs whose jobspec says ``duplicate-of = jobid``."""
    found = []
    for jid in inst.run("jobs", "-a", "-no", "{id}").split():
        spec = inst.json("job", "info", jid, "jobspec")
        if spec.get("attributes", {}).get("system", {}).get("duplicate-of") == jobid:
            found.append(jid)
    return found


def event(inst: Instance, jobid: str, name: str) -> dict:
    return next(e for e in inst.eventlog(jobid) if e["name"] == name)


def test_a_copy_of_the_last_running_job_is_submitted_and_cancelled_when_its_original_ends(inst):
    regular = inst.submit("-N1", "--exclusive", "-t", "1m", runs(3), "true")
    inst.wait_event(regular, "start", timeout=30)
    long_ = inst.submit(*BE, runs(10), "true")
    inst.wait_event(long_, "start", timeout=30)
    short = [inst.submit(*BE, runs(0.5), "true") for _ in range(2)]
    for j in short:
        inst.wait_event(j, "clean", timeout=30)
    assert event(inst, short[1], "alloc")["timestamp"] >= event(inst, short[0], "free")["timestamp"]
    first = int(inst.run("job", "id", long_))
    deadline = time.monotonic() + 20
    while not (found := copies_of(inst, first)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(found) == 1, f"copies of the long job: {found}"
    (copy,) = found
    assert float(inst.run("jobs", "-no", "{t_submit}", copy)) >= event(inst, short[1], "finish")["timestamp"]
    spec = inst.json("job", "info", copy, "jobspec")
    assert spec["attributes"]["system"]["preemptible-after"] == 0
    assert spec["attributes"]["user"]["campaign"] == "c"
    env = inst.json("job", "info", "--original", copy, "jobspec")["attributes"]["system"]["environment"]
    assert env == inst.json("job", "info", "--original", long_, "jobspec")["attributes"]["system"]["environment"]
    inst.wait_event(copy, "start", timeout=30)
    inst.wait_event(long_, "clean", timeout=60)
    inst.wait_event(copy, "exception", timeout=30)
    exc = event(inst, copy, "exception")
    assert exc["context"]["type"] == "cancel" and exc["context"]["severity"] == 0, exc
    assert "finished first" in exc["context"]["note"], exc
    assert exc["timestamp"] >= event(inst, long_, "finish")["timestamp"]
    inst.wait_event(copy, "clean", timeout=30)
    assert inst.run("jobs", "-no", "{result}", long_, copy).split() == ["COMPLETED", "CANCELED"]
    stats = inst.json("module", "stats", "sched-py")
    assert (stats["copies_submitted"], stats["copies_cancelled"], stats.get("copies_refused", 0)) == (1, 1, 0)
    assert stats["engine"]["duplicates_requested"] == stats["engine"]["duplicates_cancelled"] == 1
