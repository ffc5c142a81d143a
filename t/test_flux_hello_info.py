"""Best-effort jobs and preemptions in flight across a scheduler restart:
what the Flux driver reads at hello (docs/rfcs/preemption.md, "Scheduler
restart"; docs/rfcs/rfc27-sched-protocol.md, hello).

``t/data/flux/getattr-hello.json`` holds ``job-manager.getattr`` answers
(``attrs: ["jobspec", "eventlog"]``) recorded from flux-core 0.88 (see
t/data/flux/README.md): a best-effort job, a best-effort job with a
``preempt`` exception, and a regular job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluxsched_py.flux.driver import Driver
from fluxsched_py.flux.helloinfo import hello_info

from .recording_transport import RecordingTransport
from .test_flux_driver import R2, Clock, alloc, jobspec, replies

RECORDED = json.loads((Path(__file__).parent / "data" / "flux" / "getattr-hello.json").read_text())


def _pa_preempted(answer):
    info = hello_info(answer)
    return info.preemptible_after, info.preempted


def test_recorded_answers_say_best_effort_and_preempted():
    assert _pa_preempted(RECORDED["besteffort"]) == (0.0, False)
    assert _pa_preempted(RECORDED["preempted"]) == (0.0, True)
    assert _pa_preempted(RECORDED["regular"]) == (None, False)
    assert hello_info(RECORDED["regular"]).jobspec == RECORDED["regular"]["jobspec"]


def test_eventlog_as_kvs_text_and_other_exceptions():
    ans = dict(RECORDED["besteffort"])
    events = [*ans["eventlog"], {"timestamp": 2.0, "name": "exception", "context": {"type": "cancel", "severity": 0}}]
    ans["eventlog"] = "".join(json.dumps(e) + "\n" for e in events)  # job.<id>.eventlog in the KVS
    assert _pa_preempted(ans) == (0.0, False)
    ans["jobspec"] = json.dumps({**RECORDED["besteffort"]["jobspec"]})
    assert _pa_preempted(ans) == (0.0, False)


@pytest.mark.parametrize("bad", [None, 42, {"eventlog": []}, {"jobspec": {"attributes": {}}, "eventlog": 7}])
def test_unreadable_answers_raise(bad):
    with pytest.raises((ValueError, TypeError)):
        hello_info(bad)


def _jobR(rank):
    return {"version": 1, "execution": {"R_lite": [{"rank": rank, "children": {"core": "0-3"}}], "starttime": 1.0}}


def _driver(hellos):
    t = RecordingTransport()
    d = Driver(t, ["queue-policy=easy"], clock=Clock(), budget=None)
    t.driver = d
    d.acquire({"resources": R2, "up": "0-1"})
    for jobid, rank, info in hellos:
        d.hello({"id": jobid, "priority": 16, "userid": 0, "t_submit": 1.0}, _jobR(rank), info)
    d.hello_done()
    d.ready({"count": 0})
    return d, t


def exceptions(t):
    return [x for k, _, x in t.sent if k == "exception"]


def test_a_preempted_job_is_waited_for_and_a_best_effort_job_stays_preemptible():
    d, t = _driver([(1, "0", RECORDED["preempted"]), (2, "1", RECORDED["besteffort"])])
    s = d.stats_get()
    assert (s["hello_jobs"], s["hello_besteffort"], s["hello_preempted"], s["hello_errors"]) == (2, 2, 1, 0)
    alloc(d, t, 10, jobspec(ncores=4, nnodes=1, duration=100))  # the job 1 was preempted for, re-sent
    assert exceptions(t) == []
    (ann,) = replies(t, "alloc-10")
    assert ann["annotations"]["sched"]["reason_pending"] == "waiting for 1 best-effort job preempted: ƒ2"
    d.handle("sched.free", "f1", {"id": 1, "final": True})
    t.run_passes()
    (success,) = [p for p in replies(t, "alloc-10") if p["type"] == 0]
    assert success["R"]["execution"]["R_lite"][0]["rank"] == "0"
    alloc(d, t, 11, jobspec(ncores=4, nnodes=1, duration=100))  # a second regular job preempts job 2
    (exc,) = exceptions(t)
    assert exc["id"] == 2 and exc["type"] == "preempt"


def test_without_what_hello_info_says_a_job_is_regular_and_never_preempted():
    d, t = _driver([(1, "0", OSError(2, "unknown job")), (2, "1", None)])
    assert d.stats_get()["hello_besteffort"] == 0 and d.stats_get()["hello_errors"] == 1
    assert any("taken as a regular job" in text for text in t.errors())
    alloc(d, t, 10, jobspec(ncores=4, nnodes=1, duration=100))
    assert exceptions(t) == []
    assert [p for p in replies(t, "alloc-10") if p["type"] == 0] == []
