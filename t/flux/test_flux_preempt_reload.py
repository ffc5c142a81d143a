"""Preemption across ``flux module reload sched-py`` under a real flux-core.

Four fake nodes, mock execution, best-effort jobs (``-S
preemptible-after=0``) on all of them.  A job-manager epilog (perilog.so)
sleeps 8 s after a best-effort job, so a victim's ``sched.free`` comes
about 8 s after its exception: a reload inside that
time finds the preemption in flight.  After it: no job is preempted twice,
no more jobs are preempted than before the reload, the regular job starts
once its victims are freed, every job ends or keeps running, and ``flux
resource list`` (the scheduler's view) agrees with the running jobs'
ranks.  Without a preemption in flight, a reload keeps the best-effort jobs
preemptible.  docs/rfcs/preemption.md, "Scheduler restart".
"""

from __future__ import annotations

import time

import pytest

from fluxsched_py.ids import IdSet

from .instance import Instance, sched_py_instance

ARGS = ("queue-policy=easy",)
EPILOG = 'command = ["sh", "-c", "flux job info $FLUX_JOB_ID jobspec | grep -q preemptible-after && sleep 8; exit 0"]'


@pytest.fixture()
def inst(tmp_path):
    conf = tmp_path / "epilog.toml"
    conf.write_text(f'[job-manager]\nplugins = [ {{ load = "perilog.so" }} ]\n[job-manager.epilog]\n{EPILOG}\n')
    with sched_py_instance(1, 4, 4, *ARGS, conf=[str(conf)]) as i:
        yield i


def fill(inst: Instance) -> list[str]:
    ids = [
        inst.submit(
            "-N1", "--exclusive", "-S", "preemptible-after=0", "-t", "1h",
            "--setattr=system.exec.test.run_duration=3600s", "true",
        )
        for _ in range(4)
    ]  # fmt: skip
    for j in ids:
        inst.wait_event(j, "alloc", timeout=30)
    return ids


def events(inst: Instance, jobid: str, name: str) -> list[dict]:
    return [e for e in inst.eventlog(jobid) if e["name"] == name]


def preempts(inst: Instance, jobid: str) -> int:
    return sum(1 for e in events(inst, jobid, "exception") if e["context"]["type"] == "preempt")


def state(inst: Instance, jobid: str) -> str:
    return inst.run("jobs", "-no", "{state}", jobid).strip()


def regular(inst: Instance) -> str:
    return inst.submit("-N2", "--exclusive", "-t", "100s", "--setattr=system.exec.test.run_duration=3s", "true")


def wait_for(pred, timeout: float, what: str):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def ranks_of_running_jobs(inst: Instance) -> IdSet:
    """The ranks job-list says running jobs hold."""
    got = IdSet()
    for ranks in inst.run("jobs", "-no", "{ranks}").split():
        got = got | IdSet.parse(ranks)
    return got


def allocated_ranks(inst: Instance) -> IdSet:
    """The ranks ``flux resource list`` (the scheduler's sched.resource-status) says are allocated."""
    return IdSet.parse(inst.run("resource", "list", "-s", "allocated", "-no", "{ranks}").strip())


def preempted(inst: Instance, jobs: list[str], n: int) -> list[str] | None:
    """The jobs of ``jobs`` with a preempt exception, once there are ``n`` or more
    (the job-manager posts one victim's exception at a time)."""
    victims = [j for j in jobs if preempts(inst, j)]
    return victims if len(victims) >= n else None


def test_a_reload_while_a_preemption_is_in_flight_loses_nothing_and_preempts_nothing_twice(inst):
    besteffort = fill(inst)
    reg = regular(inst)
    victims = wait_for(lambda: preempted(inst, besteffort, 2), 10, "the preemptions")
    assert len(victims) == 2, victims
    # In flight: the victims' free waits for the epilog; the regular job waits for them.
    assert all(not events(inst, v, "free") for v in victims)
    assert not events(inst, reg, "alloc")
    inst.run("module", "reload", "sched-py", *ARGS)
    stats = inst.json("module", "stats", "sched-py")
    assert stats["hello_jobs"] == 4 and stats["hello_errors"] == 0, stats
    assert stats["hello_besteffort"] == 4 and stats["hello_preempted"] == 2, stats
    assert all(not events(inst, v, "free") for v in victims), "the reload was not inside the preemption"

    inst.wait_event(reg, "alloc", timeout=30)
    started = events(inst, reg, "alloc")[0]["timestamp"]
    assert all(events(inst, v, "free")[0]["timestamp"] <= started for v in victims)
    inst.wait_event(reg, "clean", timeout=30)
    assert inst.json("module", "stats", "sched-py")["engine"]["preemptions"] == 0  # nothing preempted again
    for j in besteffort:
        assert preempts(inst, j) == (1 if j in victims else 0), (j, inst.eventlog(j))
    others = [j for j in besteffort if j not in victims]
    assert [state(inst, j) for j in others] == ["RUN", "RUN"]
    assert inst.run("resource", "list", "-s", "allocated", "-no", "{nnodes}").strip() == "2"
    assert allocated_ranks(inst) == ranks_of_running_jobs(inst)
    for j in others:
        inst.run("cancel", j)
    for j in others:
        inst.wait_event(j, "clean", timeout=30)
    assert all(state(inst, j) == "INACTIVE" for j in [*besteffort, reg])
    assert inst.run("resource", "list", "-s", "free", "-no", "{nnodes}").strip() == "4"


def test_after_a_reload_a_regular_job_still_preempts_best_effort_jobs(inst):
    besteffort = fill(inst)
    inst.run("module", "reload", "sched-py", *ARGS)
    stats = inst.json("module", "stats", "sched-py")
    assert stats["hello_besteffort"] == 4 and stats["hello_preempted"] == 0, stats
    t0 = time.monotonic()
    reg = regular(inst)
    wait_for(lambda: preempted(inst, besteffort, 2), 10, "the preemptions")
    inst.wait_event(reg, "alloc", timeout=30)
    assert time.monotonic() - t0 < 30
    victims = [j for j in besteffort if preempts(inst, j)]  # every exception is posted before the alloc
    assert len(victims) == 2 and all(preempts(inst, j) == 1 for j in victims), victims
    assert inst.json("module", "stats", "sched-py")["engine"]["preemptions"] == 2
    inst.wait_event(reg, "clean", timeout=30)
    assert allocated_ranks(inst) == ranks_of_running_jobs(inst)
