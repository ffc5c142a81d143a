"""A notice to a job whose shells have not started yet, under a real flux-core (issue 37).

flux-core 0.88's ``job-manager.kill`` takes a signal for any job in RUN
and publishes it as the event ``shell-<id>.kill``, which only a running
job shell listens to.  A job in RUN whose shells have not started (a
job-manager prolog runs: the perilog plugin holds its start) loses it.
So the module waits for ``shell.start`` in the job's exec eventlog
(``guest.exec.eventlog``, watched through ``job-info.eventlog-watch``)
before it sends a notice; the preemption still comes a grace time after
the notice was given.  A victim taken again by a second regular job keeps
that deadline too (no second signal, no later preemption).

One broker, one node, real execution, a 3 s job-manager prolog
(``perilog.so``, ``[job-manager.prolog] command = ["sleep", "3"]``),
``preempt-grace=10s``.  The best-effort job traps SIGUSR1 and appends
the time it got it to a file (as t/flux/test_flux_grace.py's).
"""

from __future__ import annotations

import json
import time

import pytest

from .instance import Instance
from .test_flux_grace import BE, TRAP, signals

PROLOG = 3.0
GRACE = 10.0

CONF = f"""
[job-manager]
plugins = [ {{ load = "perilog.so" }} ]

[job-manager.prolog]
command = [ "sleep", "{PROLOG:g}" ]
"""


@pytest.fixture()
def inst(tmp_path):
    conf = tmp_path / "prolog.toml"
    conf.write_text(CONF)
    i = Instance(1, conf=[str(conf)])
    try:
        i.use_scheduler(None)
        i.use_scheduler("sched-py", "queue-policy=easy", f"preempt-grace={GRACE:g}s")
        yield i
    finally:
        i.stop()


def event(inst, jobid: str, name: str) -> dict:
    return next(e for e in inst.eventlog(jobid) if e["name"] == name)


def test_a_notice_given_during_the_prolog_reaches_the_job_once_its_shells_start(inst, tmp_path):
    """The regular job arrives while the best-effort job's prolog runs: the
    victim gets its notice then (the module counts it held), its trap gets
    SIGUSR1 once its shells start (after ``shell.start``), and its
    ``preempt`` exception comes a grace time after the notice, not after
    the signal.  Before, the signal went out during the prolog and the
    job never got it."""
    out = tmp_path / "got-usr1"
    be = inst.submit(*BE, "sh", "-c", TRAP.format(out=out))
    inst.wait_event(be, "prolog-start", timeout=30)
    t0 = time.time()
    regular = inst.submit("-n1", "-t", "1m", "sleep", "1")
    inst.wait_event(be, "exception", timeout=30 + GRACE)
    exc = event(inst, be, "exception")
    assert exc["context"]["type"] == "preempt" and regular in exc["context"]["note"]
    shells = inst.run("job", "eventlog", "-f", "json", "-p", "guest.exec.eventlog", be)
    shell_start = next(e["timestamp"] for e in map(json.loads, shells.splitlines()) if e["name"] == "shell.start")
    got = signals(out)
    assert len(got) == 1, (got, shell_start)
    assert shell_start <= got[0] < exc["timestamp"], (shell_start, got, exc["timestamp"])
    assert got[0] - t0 >= PROLOG - 1, (got, t0)  # not before the prolog's end
    # the kill time is the notice's: a grace time after it, not after the (late) signal
    assert GRACE - 0.5 <= exc["timestamp"] - t0 < GRACE + 2, (exc["timestamp"], t0)
    stats = inst.json("module", "stats", "sched-py")
    assert stats["notices_sent"] == 1 and stats["notices_held"] == 1, stats
    inst.wait_event(regular, "alloc", timeout=30)


def test_a_victim_taken_again_after_a_cancel_keeps_the_deadline_of_its_first_notice(inst, tmp_path):
    """A regular job arrives (the victim gets SIGUSR1: its deadline is a
    grace time later) and is cancelled; a second one arrives 4 s after the
    first and takes the same victim: no second signal, and the ``preempt``
    exception comes a grace time after the first notice, not after the
    second job's arrival."""
    out = tmp_path / "got-usr1"
    be = inst.submit(*BE, "sh", "-c", TRAP.format(out=out))
    inst.wait_event(be, "start", timeout=30)
    time.sleep(1)  # its shells run, its trap is set
    t0 = time.time()
    first = inst.submit("-n1", "-t", "1m", "sleep", "1")
    deadline = time.monotonic() + 5
    while not signals(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(signals(out)) == 1
    inst.run("cancel", first)
    inst.wait_event(first, "clean", timeout=30)
    time.sleep(max(0.0, t0 + 4 - time.time()))
    t1 = time.time()
    second = inst.submit("-n1", "-t", "1m", "sleep", "1")
    inst.wait_event(be, "exception", timeout=30 + GRACE)
    exc = event(inst, be, "exception")
    assert exc["context"]["type"] == "preempt" and second in exc["context"]["note"]
    assert GRACE - 0.5 <= exc["timestamp"] - t0 < GRACE + 2, (exc["timestamp"], t0, t1)
    assert exc["timestamp"] - t1 < GRACE - 2, (exc["timestamp"], t1)  # not a grace time after the second
    assert len(signals(out)) == 1  # noticed once
    inst.wait_event(second, "alloc", timeout=30)
