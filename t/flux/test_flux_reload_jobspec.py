"""A reload that forgets nothing, under a real flux-core (issue 37).

Three brokers (three nodes, real execution), two queues: ``batch`` may run
one job at a time (``[queues.batch.policy.scheduler.limits] total``),
``debug`` has no limit.  The scenario, run once straight through and once
with ``flux module reload sched-py`` in the middle:

- job 1 runs in ``batch``; a checkpointing best-effort job (``-S
  preemptible-after=0 --setattr=user.checkpoint=signal``) runs in
  ``debug``; job 2 waits in ``batch``, held by the queue's limit, though a
  node is free;
- (the reload: the module learns the running jobs again at hello, with
  their jobspecs from ``job-manager.getattr``);
- job 2 must stay held by the limit, with the same words;
- a two-node regular job in ``debug`` needs the best-effort job's node: it
  is noticed, preempted and, as a checkpointing job, submitted again by the
  module (``user.requeued-from``) to restart with its remaining work.

Both runs must end the same.  Before the module read the jobspec at hello,
job 2 started at the reload, and the best-effort job was taken as regular.
"""

from __future__ import annotations

import time

import pytest

from .instance import Instance
from .test_flux_limits import reason
from .test_flux_preempt_reload import state, wait_for

ARGS = ("queue-policy=easy", "preempt-grace=3s")
CONF = """
[queues.batch]
[queues.debug]
[queues.batch.policy.scheduler.limits]
total = { jobs = 1 }
[policy.jobspec.defaults.system]
queue = "debug"
duration = "10m"
"""
TRAP = "trap 'date +%s.%N >> {out}' USR1; i=0; while [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done"


@pytest.fixture()
def inst(tmp_path):
    conf = tmp_path / "queues.toml"
    conf.write_text(CONF)
    i = Instance(3, conf=[str(conf)])
    try:
        i.use_scheduler(None)
        i.run("queue", "start", "--all")
        i.use_scheduler("sched-py", *ARGS)
        yield i
    finally:
        i.stop()


def requeued_copy(inst: Instance, first: str) -> str | None:
    origin = int(inst.run("job", "id", first))
    for jid in inst.run("jobs", "-a", "-no", "{id}").split():
        spec = inst.json("job", "info", jid, "jobspec")
        if spec.get("attributes", {}).get("user", {}).get("requeued-from") == origin:
            return jid
    return None


def scenario(inst: Instance, tmp_path, reload: bool) -> dict:
    tmp_path.mkdir(exist_ok=True)
    job1 = inst.submit("-q", "batch", "-N1", "--exclusive", "sleep", "600")
    inst.wait_event(job1, "start", timeout=30)
    out = tmp_path / "usr1"
    be = inst.submit(
        "-q", "debug", "-N1", "--exclusive", "-S", "preemptible-after=0",
        "--setattr=user.checkpoint=signal", "sh", "-c", TRAP.format(out=out),
    )  # fmt: skip
    inst.wait_event(be, "start", timeout=30)
    job2 = inst.submit("-q", "batch", "-N1", "sleep", "1")
    held = wait_for(lambda: "limit" in reason(inst, job2) and reason(inst, job2), 20, "job 2 held by the limit")
    if reload:
        inst.run("module", "reload", "sched-py", *ARGS)
        stats = inst.json("module", "stats", "sched-py")
        assert (stats["hello_jobs"], stats["hello_besteffort"], stats["hello_errors"]) == (2, 1, 0), stats
    time.sleep(2)  # passes run: job 2 would start now if the limit forgot job 1
    after = {"job2": state(inst, job2), "reason": wait_for(lambda: reason(inst, job2), 10, "job 2's reason")}
    regular = inst.submit("-q", "debug", "-N2", "--exclusive", "sleep", "1")
    inst.wait_event(be, "exception", timeout=30)
    (exc,) = [e for e in inst.eventlog(be) if e["name"] == "exception"]
    inst.wait_event(regular, "alloc", timeout=30)
    copy = wait_for(lambda: requeued_copy(inst, be), 30, "the requeued copy")
    stats = inst.json("module", "stats", "sched-py")
    result = {
        **after,
        "held_reason": held,
        "preempt": exc["context"]["type"],
        "signalled": out.exists(),
        "requeued": stats["requeued"],
        "job2_end": state(inst, job2),
        "copy": bool(copy),
    }
    for j in (job1, job2, copy, regular):
        inst.try_run("cancel", j)
    return result


def test_a_reload_keeps_the_queue_limit_and_the_checkpointing_job(inst, tmp_path):
    straight = scenario(inst, tmp_path / "a", reload=False)
    assert straight["job2"] == "SCHED" and straight["reason"] == straight["held_reason"], straight
    assert straight["preempt"] == "preempt" and straight["requeued"] == 1 and straight["copy"], straight
    assert straight["job2_end"] == "SCHED"
    wait_for(lambda: inst.run("jobs", "-no", "{id}").strip() == "", 60, "the first run's jobs to end")
    with_reload = scenario(inst, tmp_path / "b", reload=True)
    assert with_reload == straight
