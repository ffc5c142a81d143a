"""End-of-campaign copies in the Flux driver (``duplicates``; docs/rfcs/campaigns.md), without Flux.

``t/data/flux/copies.jsonl`` is the module's traffic recorded from
flux-core 0.88 (t/data/flux/README.md): a regular job holds rank 0 while a
campaign's best-effort jobs (10 s, 0.5 s, 0.5 s) run on rank 1; once none
is pending and rank 0 is idle, the module asked for the long job's
jobspec and submitted its copy, whose ``sched.alloc`` follows; the
original ended first and the module cancelled the copy.  It is replayed
here through the driver on a RecordingTransport, which records the copy
it is asked for (built from the recorded ``job-manager.getattr`` answer)
and the exceptions it is asked to raise.  The guest cases replay the same
traffic with the campaign's jobs submitted by another user.  The cases
no recording holds (a pending loser, a guest's job that says it is a
copy) are built by hand with the same payloads.
"""

from __future__ import annotations

import copy

from fluxsched_py.flux.driver import LOG_ERR, Driver, f58
from fluxsched_py.flux.wire import copy_jobspec, requeued_jobspec

from .flux_replay import feed, load, new_replay
from .recording_transport import RecordingTransport
from .test_flux_driver import Clock, jobspec, replies

RECS = load("copies")
ALLOCS = [r["payload"] for r in RECS if r["topic"] == "sched.alloc" and r["dir"] == "rx"]
REGULAR, LONG, SHORT1, SHORT2, COPY = (p["id"] for p in ALLOCS)
#: the job-manager's answer to the module's ``job-manager.getattr`` of LONG's jobspec
GETATTR = next(r["payload"] for r in RECS if r["topic"] == "job-manager.getattr" and r["type"] == "response")
#: the exception the module raised on the copy
RAISED = next(r["payload"] for r in RECS if r["topic"] == "job-manager.raise" and r["type"] == "request")
GUEST = 1001


def replay(recs=RECS, **transport):
    r = new_replay(("queue-policy=easy", "duplicates=1"))
    r.transport.owner = 0
    r.transport.jobspecs[LONG] = GETATTR["jobspec"]
    for k, v in transport.items():
        setattr(r.transport, k, v)
    feed(r, recs)
    return r


def sent(t, kind):
    return [p for k, _, p in t.sent if k == kind]


def up_to_free(jobid):
    """The recording up to the ``sched.free`` of ``jobid``, included."""
    return RECS[: next(i for i, r in enumerate(RECS) if r["topic"] == "sched.free" and r["payload"]["id"] == jobid) + 1]


def without_copy(recs, guest=False):
    """The recording without the copy's messages (as if none had been submitted),
    with the campaign's jobs submitted by GUEST when ``guest``."""
    out = []
    for rec in copy.deepcopy(recs):
        p = rec.get("payload")
        if rec["dir"] == "rx" and rec["topic"].startswith("sched.") and isinstance(p, dict):
            if p.get("id") == COPY:
                continue
            if guest and rec["topic"] == "sched.alloc" and p["id"] in (LONG, SHORT1, SHORT2):
                p["userid"] = GUEST
        out.append(rec)
    return out


def test_a_copy_of_the_long_job_is_submitted_once_none_of_its_campaign_is_pending():
    r = replay(up_to_free(SHORT1))
    assert sent(r.transport, "duplicate") == []  # SHORT2 runs on rank 0 now: no node idle
    r = replay(up_to_free(SHORT2))
    (dup,) = sent(r.transport, "duplicate")
    assert dup["id"] == LONG
    # the copy's jobspec is the one flux-core's job-manager sent in the copy's sched.alloc
    assert dup["jobspec"] == ALLOCS[-1]["jobspec"]
    assert dup["jobspec"]["attributes"]["system"]["duplicate-of"] == LONG
    assert r.driver.stats_get()["copies_submitted"] == 1


def test_when_the_original_ends_first_the_copy_is_cancelled_as_flux_cancel_does():
    r = replay(up_to_free(LONG))
    (exc,) = sent(r.transport, "exception")
    # what the module raised under flux-core (flux_job_cancel(): type cancel, severity 0, the note)
    assert exc == {"id": COPY, "type": "cancel", "severity": 0, "note": RAISED["note"]}
    assert RAISED == {"id": COPY, "type": "cancel", "severity": 0, "note": exc["note"]}
    assert "finished first" in exc["note"]
    r = replay()  # the copy's own free follows: nothing more
    assert len(sent(r.transport, "exception")) == 1
    s = r.driver.stats_get()
    assert (s["copies_submitted"], s["copies_cancelled"], s.get("copies_refused", 0)) == (1, 1, 0)
    assert s["engine"]["duplicates_cancelled"] == 1 and s["running_jobs"] == 0


def test_every_job_starts_where_it_started_under_flux_core_the_copy_included():
    r = replay()
    ours = {p["id"]: p["R"]["execution"]["R_lite"] for _, p in r.ours_for("sched.alloc") if p["type"] == 0}
    theirs = {p["id"]: p["R"]["execution"]["R_lite"] for _, p in r.theirs_for("sched.alloc") if p["type"] == 0}
    assert ours == theirs and set(ours) == {REGULAR, LONG, SHORT1, SHORT2, COPY}
    assert ours[COPY][0]["rank"] == "0" and ours[LONG][0]["rank"] == "1"


def test_a_guests_campaign_is_never_copied_and_that_is_logged_once():
    r = replay(without_copy(RECS, guest=True))
    assert sent(r.transport, "duplicate") == [] and sent(r.transport, "exception") == []
    s = r.driver.stats_get()
    assert s["copies_refused"] == 1 and s.get("copies_submitted", 0) == 0
    said = [text for _, text in r.transport.logs if "no copies" in text]
    assert said == [
        f"campaign c of user {GUEST}: no copies; the module submits them as the instance owner, "
        "so only the owner's jobs are copied"
    ]
    assert r.driver.engine.copies(r.clock.now) == []  # the engine was told: it does not ask again


def test_a_failed_submit_is_logged_and_the_job_is_not_asked_again():
    why = "job-manager.getattr: [Errno 2] No such file or directory"
    r = replay(without_copy(up_to_free(SHORT2)), duplicate_error=why)
    assert [d["id"] for d in sent(r.transport, "duplicate")] == [LONG]
    assert r.transport.errors() == [f"copy of job {f58(LONG)} not submitted: {why}"]
    r.transport.run_passes()  # the pass the failure armed: no second try
    assert len(sent(r.transport, "duplicate")) == 1
    feed(r, without_copy(RECS)[len(without_copy(up_to_free(SHORT2))) :])
    s = r.driver.stats_get()
    assert (s["copies_failed"], s.get("copies_submitted", 0), s["running_jobs"]) == (1, 0, 0)
    assert sent(r.transport, "exception") == []


# -- by hand, with the payloads of the recording ----------------------------------------


R3 = {"version": 1, "execution": {"R_lite": [{"rank": "0-2", "children": {"core": "0-3"}}], "starttime": 0.0}}


def driver(R=R3, up="0-2"):
    t = RecordingTransport()
    t.owner = 0
    clock = Clock()
    d = Driver(t, ["queue-policy=easy", "duplicates=1"], clock=clock, budget=None)
    t.driver = d
    d.acquire({"resources": R, "up": up})
    d.hello_done()
    d.ready({"count": 0})
    return d, t, clock


def best_effort(campaign, duration=600.0):
    spec = jobspec(ncores=4, nnodes=1, duration=duration)
    spec["attributes"]["system"]["preemptible-after"] = 0
    spec["attributes"]["user"] = {"campaign": campaign}
    return spec


def alloc(d, t, jobid, spec, userid=0, run=True):
    t.jobspecs[jobid] = spec  # what job-manager.getattr would answer
    p = {"id": jobid, "priority": 16, "userid": userid, "t_submit": float(jobid), "jobspec": spec}
    d.handle("sched.alloc", f"alloc-{jobid}", p)
    if run:
        t.run_passes()


def free(d, t, jobid):
    R = t.kvs[f"job.{jobid >> 48:04x}.{(jobid >> 32) & 0xFFFF:04x}.{(jobid >> 16) & 0xFFFF:04x}.{jobid & 0xFFFF:04x}.R"]
    d.handle("sched.free", None, {"id": jobid, "R": R, "final": True})
    t.run_passes()


def submit_copy(d, t, of, jobid):
    """flux-core's part: the copy the driver asked for arrives as a sched.alloc of the owner."""
    (spec,) = [p["jobspec"] for p in sent(t, "duplicate") if p["id"] == of]
    alloc(d, t, jobid, spec)


def test_a_refused_copy_leaves_the_idle_node_to_the_owners_campaign():
    # Both start in one pass.  The guest's job (campaign g) has the longer walltime: its copy is
    # asked for first, on the one idle node.  Refused, the engine is told and a pass is armed:
    # the owner's job gets the node.
    d, t, clock = driver()
    alloc(d, t, 1, best_effort("g", duration=1200), userid=GUEST, run=False)
    alloc(d, t, 2, best_effort("o"), run=False)
    armed = t.pass_requests
    t.run_passes()
    assert sent(t, "duplicate") == [] and d.stats["copies_refused"] == 1
    assert t.pass_requests == armed + 1  # the refusal armed a pass
    d.run_pass()  # the reactor runs it
    assert [p["id"] for p in sent(t, "duplicate")] == [2]
    assert d.stats_get()["copies_refused"] == 1  # the guest's job is not asked again


def test_a_pending_loser_is_cancelled_too_and_its_cancel_answered():
    # Two nodes.  Job 1 (campaign o) runs; its copy is asked for on the idle node, which a
    # regular job takes before the copy arrives: the copy waits.  Job 1 ends first: the
    # pending copy is cancelled; the job-manager's sched.cancel then gets it answered CANCEL.
    R2 = {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}], "starttime": 0.0}}
    d, t, clock = driver(R2, "0-1")
    alloc(d, t, 1, best_effort("o"))
    assert [p["id"] for p in sent(t, "duplicate")] == [1]
    alloc(d, t, 5, jobspec(ncores=4, nnodes=1, duration=600))
    assert replies(t, "alloc-5")[-1]["type"] == 0
    submit_copy(d, t, 1, 10)
    assert all(p["type"] == 1 for p in replies(t, "alloc-10"))  # pending
    clock.t += 100
    free(d, t, 1)
    (exc,) = sent(t, "exception")
    assert (exc["id"], exc["type"], exc["severity"]) == (10, "cancel", 0)
    d.handle("sched.cancel", None, {"id": 10})
    assert replies(t, "alloc-10")[-1]["type"] == 3
    assert d.stats_get()["copies_cancelled"] == 1


def test_a_guests_job_that_says_it_is_a_copy_is_an_ordinary_job():
    # The owner's job 2 and its copy 3 run; a guest's best-effort job says it is a copy of job 2
    # too.  Were it taken for one, its end would win the group and get job 2 and its copy
    # cancelled, as the owner.  It is an ordinary job: only job 2's own end cancels copy 3.
    d, t, clock = driver()
    alloc(d, t, 2, best_effort("o"))
    submit_copy(d, t, 2, 3)
    assert replies(t, "alloc-3")[-1]["type"] == 0
    claim = best_effort("o")
    claim["attributes"]["system"]["duplicate-of"] = 2
    alloc(d, t, 4, claim, userid=GUEST)
    assert replies(t, "alloc-4")[-1]["type"] == 0
    assert f"job {f58(4)} of user {GUEST}: duplicate-of ignored (a guest's job)" in [x for _, x in t.logs]
    clock.t += 10
    free(d, t, 4)
    assert sent(t, "exception") == []
    clock.t += 10
    free(d, t, 2)
    assert [(x["id"], x["type"]) for x in sent(t, "exception")] == [(3, "cancel")]
    assert not [x for level, x in t.logs if level <= LOG_ERR]


def test_copy_jobspec_keeps_the_original_and_adds_the_environment():
    spec = GETATTR["jobspec"]
    before = copy.deepcopy(spec)
    out = copy_jobspec(spec, LONG, {"PATH": "/usr/bin"})
    assert spec == before  # not changed
    system = out["attributes"]["system"]
    assert (system["duplicate-of"], system["preemptible-after"]) == (LONG, 0)
    assert system["environment"] == {"PATH": "/usr/bin"}
    assert {k: v for k, v in system.items() if k not in ("duplicate-of", "environment")} == spec["attributes"]["system"]
    assert out["attributes"]["user"] == {"campaign": "c"} and out["tasks"] == spec["tasks"]


def test_requeued_jobspec_names_the_first_job_and_adds_the_environment():
    """A preempted checkpointing job is submitted again as a copy is: with its
    environment from J (the job-manager's jobspec has none), and
    ``requeued-from`` naming the first job even when it was a requeue itself."""
    spec = GETATTR["jobspec"]
    before = copy.deepcopy(spec)
    out = requeued_jobspec(spec, LONG, {"PATH": "/usr/bin"})
    assert spec == before
    assert out["attributes"]["user"] == {"campaign": "c", "requeued-from": LONG}
    assert out["attributes"]["system"]["environment"] == {"PATH": "/usr/bin"}
    assert "duplicate-of" not in out["attributes"]["system"]
    again = requeued_jobspec(out, 99, {"PATH": "/bin"})
    assert again["attributes"]["user"]["requeued-from"] == LONG
