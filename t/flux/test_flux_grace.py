"""Preemption with notice and checkpoint requeues under a real flux-core (docs/rfcs/preemption.md).

One broker, one node (best-effort jobs take it whole), real execution, ``preempt-grace=5s``.
Best-effort jobs trap SIGUSR1 and append the time they got it to a file.
One that does not checkpoint gets it (through ``job-manager.kill``) when a
regular job arrives, and its ``preempt`` exception only after the 5 s grace
time; the regular job is allocated after that.  One that checkpoints
(``--setattr=user.checkpoint=signal``) gets it 2 s after its start
(FIRST_NOTICE), then every 5 s;
preempted, the module submits it again (``user.requeued-from`` names it),
and that copy starts before the campaign's other pending job.  With
``preempt-wait=checkpoint`` one that does not checkpoint is preempted at
once, with no signal.
"""

from __future__ import annotations

import json
import time

import pytest

from .instance import Instance

TRAP = (
    "trap 'date +%s.%N >> {out}' USR1; "
    "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
)  # fmt: skip


@pytest.fixture()
def inst():
    i = Instance(1)  # its own resources: one node, real execution
    try:
        i.use_scheduler(None)
        i.use_scheduler("sched-py", "queue-policy=easy", "preempt-grace=5s")
        yield i
    finally:
        i.stop()


def alloc_time(inst, jobid: str) -> float:
    return next(e["timestamp"] for e in inst.eventlog(jobid) if e["name"] == "alloc")


def signals(out) -> list[float]:
    return [float(x) for x in out.read_text().split()] if out.exists() else []


BE = ["-N1", "--exclusive", "-S", "preemptible-after=0", "-t", "10m", "--setattr=user.campaign=c1"]


def test_notice_then_preemption_after_the_grace_time(inst, tmp_path):
    """A job that does not checkpoint gets SIGUSR1 when the regular job
    arrives, and its preempt exception 5 s later; the regular job waits for
    it, says so, and is allocated after it."""
    out = tmp_path / "got-usr1"
    be = inst.submit(*BE, "sh", "-c", TRAP.format(out=out))
    inst.wait_event(be, "start", timeout=30)
    time.sleep(1)
    assert signals(out) == []  # no reservation claims it: no notice yet
    t0 = time.time()
    regular = inst.submit("-n1", "-t", "1m", "sleep", "1")
    deadline = time.monotonic() + 10
    while not signals(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    got = signals(out)
    assert len(got) == 1 and 0 <= got[0] - t0 < 4, (got, t0)
    reason = inst.run("jobs", "-no", "{annotations.sched.reason_pending}", regular)
    assert "notice given" in reason, reason
    inst.wait_event(be, "exception", timeout=30)
    (exc,) = [e for e in inst.eventlog(be) if e["name"] == "exception"]
    assert exc["context"]["type"] == "preempt" and regular in exc["context"]["note"]
    assert exc["timestamp"] - got[0] >= 4.5, (exc["timestamp"], got)
    inst.wait_event(regular, "alloc", timeout=30)
    assert alloc_time(inst, regular) >= exc["timestamp"]


def test_a_checkpointing_job_is_signalled_requeued_and_restarts_first(inst, tmp_path):
    """A job that checkpoints gets SIGUSR1 2 s after it starts (FIRST_NOTICE,
    not at its alloc: the job-manager would refuse it) and every 5 s after
    (each a checkpoint); preempted (not before 5 s after its first signal),
    it is submitted again by the module and starts before the campaign's
    other pending job."""
    out = tmp_path / "got-usr1"
    ckpt = inst.submit(*BE, "--setattr=user.checkpoint=signal", "sh", "-c", TRAP.format(out=out))
    inst.wait_event(ckpt, "start", timeout=30)
    other = inst.submit(*BE, "sleep", "1")
    time.sleep(11)
    assert inst.run("jobs", "-no", "{state}", other).strip() == "SCHED"
    got = signals(out)
    assert len(got) >= 2  # 2 s after its start, and 5 s later
    assert 1.5 <= got[0] - alloc_time(inst, ckpt) < 4, (got, alloc_time(inst, ckpt))
    assert 4.5 <= got[1] - got[0] < 6.5, got
    regular = inst.submit("-n1", "-t", "1m", "sleep", "3")
    inst.wait_event(ckpt, "exception", timeout=30)
    (exc,) = [e for e in inst.eventlog(ckpt) if e["name"] == "exception"]
    assert exc["context"]["type"] == "preempt" and regular in exc["context"]["note"]
    assert exc["timestamp"] - signals(out)[0] >= 4.5
    inst.wait_event(regular, "alloc", timeout=30)
    assert alloc_time(inst, regular) >= exc["timestamp"]
    # The module submitted the checkpointing job again; it starts before the other.
    first = int(inst.run("job", "id", ckpt))
    deadline = time.monotonic() + 30
    requeued = None
    while requeued is None and time.monotonic() < deadline:
        for jid in inst.run("jobs", "-a", "-no", "{id}").split():
            spec = inst.json("job", "info", jid, "jobspec")
            if spec.get("attributes", {}).get("user", {}).get("requeued-from") == first:
                requeued = jid
        time.sleep(0.5)
    assert requeued is not None, "no requeued copy of the checkpointing job"
    # with its environment, from the first job's J (the job-manager's jobspec has none)
    original = inst.json("job", "info", "--original", requeued, "jobspec")
    assert "PATH" in original["attributes"]["system"]["environment"]
    inst.wait_event(requeued, "alloc", timeout=60)
    assert inst.run("jobs", "-no", "{state}", other).strip() == "SCHED"
    stats = inst.json("module", "stats", "sched-py")
    assert stats["notices_sent"] >= 2 and stats["requeued"] == 1 and stats["engine"]["preemptions"] == 1
    inst.run("cancel", requeued)
    inst.wait_event(other, "alloc", timeout=60)
    assert alloc_time(inst, other) > alloc_time(inst, requeued)


#: ``FluxBinding.signal`` (the module's transport) on a handle of its own:
#: job-manager.kill for job argv[1], and what came of it.
SIGNAL = """
import json, sys
import flux
from fluxsched_py.flux.module import FluxBinding

class Binding:  # the two attributes FluxBinding.signal uses
    h = flux.Flux()
    logs = []
    def log(self, level, text):
        self.logs.append(text)

b, refused = Binding(), []
FluxBinding.signal(b, int(sys.argv[1]), 10, refused.append)
b.h.reactor_run()
print(json.dumps({"refused": refused, "logs": b.logs}))
"""


def test_a_notice_before_the_job_runs_is_refused_to_the_driver_and_delivered_when_sent_again(inst, tmp_path):
    """flux-core 0.88's job-manager.kill refuses a job that is not running
    (EINVAL, ``job is not running``): the module's transport hands that to
    the driver's ``refused`` callback (which sends it again 0.5 s later:
    t/test_flux_driver.py::test_a_refused_notice_*), and the same notice
    sent again once the job runs reaches it.  A held job is one the
    job-manager does not run yet."""
    out = tmp_path / "got-usr1"
    job = inst.submit("--urgency=hold", *BE, "sh", "-c", TRAP.format(out=out))
    jobid = inst.run("job", "id", job).strip()
    first = json.loads(inst.run("python", "-c", SIGNAL, jobid))
    assert first == {"refused": ["[Errno 22] job is not running"], "logs": []}, first
    inst.run("job", "urgency", job, "default")
    inst.wait_event(job, "start", timeout=30)
    time.sleep(1)  # the shell traps USR1
    again = json.loads(inst.run("python", "-c", SIGNAL, jobid))
    assert again == {"refused": [], "logs": []}, again
    deadline = time.monotonic() + 10
    while not signals(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(signals(out)) == 1


def test_preempt_wait_checkpoint_preempts_a_victim_that_does_not_checkpoint_at_once(inst, tmp_path):
    """With ``preempt-wait=checkpoint`` the regular job does not wait for a
    victim that does not checkpoint: no signal, its ``preempt`` exception
    at once (well within the 5 s grace time), and the regular job
    allocated after it."""
    inst.use_scheduler(None)
    inst.use_scheduler("sched-py", "queue-policy=easy", "preempt-grace=5s", "preempt-wait=checkpoint")
    out = tmp_path / "got-usr1"
    be = inst.submit(*BE, "sh", "-c", TRAP.format(out=out))
    inst.wait_event(be, "start", timeout=30)
    t0 = time.time()
    regular = inst.submit("-n1", "-t", "1m", "sleep", "1")
    inst.wait_event(be, "exception", timeout=30)
    (exc,) = [e for e in inst.eventlog(be) if e["name"] == "exception"]
    assert exc["context"]["type"] == "preempt" and regular in exc["context"]["note"]
    assert exc["timestamp"] - t0 < 4, (exc["timestamp"], t0)
    inst.wait_event(regular, "alloc", timeout=30)
    assert alloc_time(inst, regular) >= exc["timestamp"]
    assert signals(out) == []  # preempted with no notice
