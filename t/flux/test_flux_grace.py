"""Preemption with notice and checkpoint requeues under a real flux-core (rfcs/preemption.md).

One broker, one node (best-effort jobs take it whole), real execution, ``preempt-grace=5s``.
A best-effort job of campaign ``c1`` that checkpoints on the notice
(``--setattr=user.checkpoint=signal``) traps SIGUSR1 and writes the time it
got it to a file; a second job of the campaign, which does not checkpoint,
waits.  A regular job arrives: the first job gets SIGUSR1 (through
``job-manager.kill``), writes its file, and its ``preempt`` exception comes
only after the 5 s grace time; the regular job is allocated after that.
The module then submits the checkpointing job again (``user.requeued-from``
names it), and when the regular job ends that copy starts before the
campaign's other pending job.
"""

from __future__ import annotations

import time

import pytest

from .instance import Instance

TRAP = (
    "trap 'date +%s.%N > {out}' USR1; "
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


def test_notice_then_preemption_after_the_grace_time_then_requeue_first(inst, tmp_path):
    out = tmp_path / "got-usr1"
    be = ["-N1", "--exclusive", "-S", "preemptible-after=0", "-t", "10m", "--setattr=user.campaign=c1"]
    ckpt = inst.submit(*be, "--setattr=user.checkpoint=signal", "sh", "-c", TRAP.format(out=out))
    inst.wait_event(ckpt, "start", timeout=30)
    other = inst.submit(*be, "sleep", "1")
    time.sleep(1)
    assert inst.run("jobs", "-no", "{state}", other).strip() == "SCHED"
    t0 = time.time()
    regular = inst.submit("-n1", "-t", "1m", "sleep", "3")
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert out.exists(), "the best-effort job never got SIGUSR1"
    signalled = float(out.read_text())
    assert signalled - t0 < 4
    reason = inst.run("jobs", "-no", "{annotations.sched.reason_pending}", regular)
    assert "notice given" in reason, reason
    inst.wait_event(ckpt, "exception", timeout=30)
    (exc,) = [e for e in inst.eventlog(ckpt) if e["name"] == "exception"]
    assert exc["context"]["type"] == "preempt" and regular in exc["context"]["note"]
    assert exc["timestamp"] - signalled >= 4.5, (exc["timestamp"], signalled)
    inst.wait_event(regular, "alloc", timeout=30)
    assert alloc_time(inst, regular) >= exc["timestamp"]
    # The module submitted the checkpointing job again; it starts before the other.
    deadline = time.monotonic() + 30
    requeued = None
    while requeued is None and time.monotonic() < deadline:
        for line in inst.run("jobs", "-a", "-no", "{id} {id.dec}").splitlines():
            jid, dec = line.split()
            spec = inst.json("job", "info", jid, "jobspec")
            if spec.get("attributes", {}).get("user", {}).get("requeued-from") == int(inst.run("job", "id", ckpt)):
                requeued = jid
        time.sleep(0.5)
    assert requeued is not None, "no requeued copy of the checkpointing job"
    inst.wait_event(requeued, "alloc", timeout=60)
    assert inst.run("jobs", "-no", "{state}", other).strip() == "SCHED"
    stats = inst.json("module", "stats", "sched-py")
    assert stats["notices_sent"] >= 1 and stats["requeued"] == 1 and stats["engine"]["preemptions"] == 1
    inst.run("cancel", requeued)
    inst.wait_event(other, "alloc", timeout=60)
    assert alloc_time(inst, other) > alloc_time(inst, requeued)
