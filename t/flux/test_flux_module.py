"""sched-py as flux-core's scheduler: what a site and its users see.

One instance with four fake nodes of four cores (``flux resource reload``)
and mock execution (``system.exec.test.run_duration``), sched-py loaded with
``queue-policy=easy policy=low``.  Each test leaves the instance idle.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from .instance import MODPROBE_DIR, Instance, sched_py_instance

ARGS = ("queue-policy=easy", "policy=low")


def runs(seconds: float) -> str:
    return f"--setattr=system.exec.test.run_duration={seconds}s"


def wait_until(fn, timeout=20.0, what="condition"):
    t0 = time.time()
    while True:
        v = fn()
        if v:
            return v
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def inst():
    with sched_py_instance(4, 4, 4, *ARGS) as i:
        yield i


@pytest.fixture
def idle(inst):
    yield inst
    inst.run("cancel", "--all", check=False)
    inst.run("queue", "drain", "--timeout=30")


def fields(inst: Instance, jobid: str, fmt: str) -> list[str]:
    return inst.run("jobs", "-no", fmt, jobid).split()


def estimate(inst: Instance, jobid: str) -> float | None:
    out = fields(inst, jobid, "{annotations.sched.t_estimate}")
    return float(out[0]) if out else None


def R_of(inst: Instance, jobid: str) -> dict:
    return json.loads(inst.run("job", "info", jobid, "R"))


def sched_status(inst: Instance) -> dict:
    return json.loads(
        inst.run("python", "-c", "import flux,json; print(json.dumps(flux.Flux().rpc('sched.resource-status').get()))")
    )


def nnodes(inst: Instance, state: str, rpc: str | None = None) -> int:
    return int(resource_list(inst, state, "{nnodes}", rpc) or 0)


def resource_list(inst: Instance, state: str, fmt: str, rpc: str | None = None) -> str:
    cmd = f"flux resource list -s {state} -no {fmt}"
    if rpc:
        cmd = f"FLUX_RESOURCE_LIST_RPC={rpc} {cmd}"
    return inst.run(cmd).strip()


def ranks_of(inst: Instance, jobid: str) -> str:
    return ",".join(it["rank"] for it in R_of(inst, jobid)["execution"]["R_lite"])


# -- loading ------------------------------------------------------------------


def test_bad_module_argument_fails_the_load_with_a_clear_message(idle):
    inst = idle
    inst.run("module", "remove", "sched-py")
    try:
        p = inst.try_run("module", "load", "sched-py", "queue-policy=bogus")
        assert p.returncode != 0
        assert "bad module argument: queue-policy='bogus'" in inst.dmesg()
        assert "sched-py" not in inst.modules()
    finally:
        inst.run("module", "load", "sched-py", *ARGS)


def _nice(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[16])


def test_nice_and_annotate_interval_module_arguments(idle):
    """``nice=N``: the module's process runs N nice levels below the broker.
    ``annotate-interval=S``: the annotations of a burst's passes are held
    and merged; once the interval ends, every waiting job shows the
    ``reason_pending`` and ``jobs_ahead`` of its place in the queue."""
    inst = idle
    p = inst.try_run("module", "reload", "sched-py", *ARGS, "nice=20")
    assert p.returncode != 0 and "nice=20: expected an integer from 0 to 19" in inst.dmesg()
    try:
        inst.run("module", "load", "sched-py", *ARGS, "nice=7", "annotate-interval=0.5")
        pid = int(re.findall(r"module-python-exec sched-py pid=(\d+)", inst.dmesg())[-1])
        broker = int(inst.run("getattr", "broker.pid").strip())
        assert _nice(pid) == _nice(broker) + 7
        st = inst.json("module", "stats", "sched-py")
        assert st["annotate_interval"] == 0.5 and st["options"]["queue-policy"] == "easy"
        a = inst.submit("-N4", "--exclusive", runs(60), "true")
        inst.wait_event(a, "start")
        waiting = [inst.submit("-N1", runs(1), "true") for _ in range(4)]

        def placed():
            got = [fields(inst, j, "{annotations.sched.jobs_ahead}") for j in waiting]
            return got == [[str(i)] for i in range(len(waiting))]

        wait_until(placed, what="jobs_ahead of every waiting job")
        assert all(fields(inst, j, "{annotations.sched.reason_pending}") for j in waiting)
        inst.run("cancel", a)
        for j in waiting:
            inst.wait_event(j, "clean")
        assert inst.json("module", "stats", "sched-py")["annotations"] >= len(waiting)
    finally:
        inst.use_scheduler("sched-py", *ARGS)


def test_stats_get(idle):
    st = idle.json("module", "stats", "sched-py")
    assert st["options"]["queue-policy"] == "easy" and "pending_jobs" in st and "engine" in st


def test_reload_with_running_jobs_recovers_allocations_without_double_allocation(idle):
    inst = idle
    a = inst.submit("-N2", "--exclusive", runs(60), "true")
    inst.wait_event(a, "start")
    ranks_a = R_of(inst, a)["execution"]["R_lite"][0]["rank"]
    inst.run("module", "reload", "sched-py", *ARGS)
    wait_until(lambda: "hello: 1 running jobs recovered" in inst.dmesg(), what="hello")
    assert nnodes(inst, "allocated", "sched.resource-status") == 2
    b = inst.submit("-N2", "--exclusive", runs(60), "true")
    inst.wait_event(b, "start")
    ranks_b = R_of(inst, b)["execution"]["R_lite"][0]["rank"]
    assert {ranks_a, ranks_b} == {"0-1", "2-3"}
    c = inst.submit("-N1", runs(1), "true")
    wait_until(lambda: estimate(inst, c) or fields(inst, c, "{annotations.sched.reason_pending}"), what="annotation")
    assert fields(inst, c, "{status}") == ["SCHED"]
    st = inst.json("module", "stats", "sched-py")
    assert st["running_jobs"] == 2 and st["pending_jobs"] == 1


def test_unload_and_load_again_while_jobs_run(idle):
    inst = idle
    a = inst.submit("-N4", "--exclusive", runs(60), "true")
    inst.wait_event(a, "start")
    inst.run("module", "remove", "sched-py")
    b = inst.submit("-N1", runs(1), "true")  # waits: no scheduler
    inst.run("module", "load", "sched-py", *ARGS)
    wait_until(lambda: fields(inst, b, "{annotations.sched.reason_pending}"), what="annotation")
    assert fields(inst, b, "{status}") == ["SCHED"]
    inst.run("cancel", a)
    inst.wait_event(b, "clean")


# -- what users see -------------------------------------------------------------


def test_flux_jobs_shows_t_estimate_and_reason_pending(idle):
    inst = idle
    a = inst.submit("-N4", "--exclusive", "-t", "100s", runs(30), "true")
    inst.wait_event(a, "start")
    t_start = R_of(inst, a)["execution"]["starttime"]
    b = inst.submit("-N2", "--exclusive", "-t", "60s", runs(1), "true")
    wait_until(lambda: estimate(inst, b), what="t_estimate")
    out = inst.run("jobs", "-no", "{id} {status} {annotations.sched.t_estimate} {annotations.sched.reason_pending}", b)
    jobid, status, t_est, *reason = out.split()
    assert status == "SCHED"
    assert abs(float(t_est) - (t_start + 100)) < 1.0
    assert "waiting for 2 nodes" in " ".join(reason)


def test_job_R_equals_what_the_scheduler_allocated(idle):
    inst = idle
    a = inst.submit("-N2", "-n4", runs(30), "true")
    inst.wait_event(a, "start")
    R = R_of(inst, a)
    summary = fields(inst, a, "{annotations.sched.resource_summary}")[0]
    lite = R["execution"]["R_lite"]
    assert R["execution"]["nslots"] == 4 and R["execution"]["nodelist"]

    def ids(t):
        return t if t.isdigit() else f"[{t}]"

    # flux-core's rlist style, as `flux resource list -o {rlist}` prints it
    assert summary == " ".join(f"rank{ids(x['rank'])}/core{ids(x['children']['core'])}" for x in lite)
    alloc = sched_status(inst)["allocated"]["execution"]["R_lite"]
    assert alloc == lite


def test_flux_resource_list_agrees_with_the_scheduler(idle):
    inst = idle
    a = inst.submit("-N3", "--exclusive", runs(30), "true")
    inst.wait_event(a, "start")
    for state in ("allocated", "free"):
        assert nnodes(inst, state) == nnodes(inst, state, "sched.resource-status")
    assert nnodes(inst, "allocated") == 3


def test_infeasible_job_is_denied_with_a_note(idle):
    inst = idle
    j = inst.submit("-N5", "true")
    inst.wait_event(j, "exception")
    exc = next(e for e in inst.eventlog(j) if e["name"] == "exception")
    assert exc["context"]["type"] == "alloc"
    assert "5 nodes" in exc["context"]["note"]


def test_cancel_of_a_pending_job(idle):
    inst = idle
    a = inst.submit("-N4", "--exclusive", runs(30), "true")
    inst.wait_event(a, "start")
    b = inst.submit("-N1", runs(1), "true")
    wait_until(lambda: fields(inst, b, "{annotations.sched.reason_pending}"), what="annotation")
    inst.run("cancel", b)
    inst.wait_event(b, "clean")
    assert "alloc" not in [e["name"] for e in inst.eventlog(b)]
    assert "0 alloc requests pending to scheduler" in inst.run("queue", "status", "-v")


def test_urgency_reorders_the_queue(idle):
    inst = idle
    a = inst.submit("-N4", "--exclusive", runs(60), "true")
    inst.wait_event(a, "start")
    p1 = inst.submit("-N4", "--exclusive", runs(0.2), "true")
    p2 = inst.submit("-N4", "--exclusive", runs(0.2), "true")
    inst.run("job", "urgency", p2, "31")
    inst.run("cancel", a)  # only now: on a loaded machine a short job ended before the urgency
    for j in (p1, p2):
        inst.wait_event(j, "clean")
    t = {j: next(e["timestamp"] for e in inst.eventlog(j) if e["name"] == "alloc") for j in (p1, p2)}
    assert t[p2] < t[p1]


def test_update_duration_moves_reservations(idle):
    inst = idle
    a = inst.submit("-N4", "--exclusive", "-t", "100s", runs(30), "true")
    inst.wait_event(a, "start")
    t_start = R_of(inst, a)["execution"]["starttime"]
    b = inst.submit("-N4", "--exclusive", "-t", "10s", runs(1), "true")
    wait_until(lambda: estimate(inst, b), what="t_estimate")
    assert abs(estimate(inst, b) - (t_start + 100)) < 1.0
    inst.run("update", a, "duration=300s")
    wait_until(lambda: abs(estimate(inst, b) - (t_start + 300)) < 1.0, what="moved t_estimate")
    assert abs(R_of(inst, a)["execution"]["expiration"] - (t_start + 300)) < 1.0


def test_drain_and_undrain(idle):
    inst = idle
    inst.run("resource", "drain", "2-3", "testing")
    try:
        j = inst.submit("-N3", "--exclusive", runs(0.2), "true")
        wait_until(lambda: fields(inst, j, "{annotations.sched.reason_pending}"), what="annotation")
        assert fields(inst, j, "{status}") == ["SCHED"]
        k = inst.submit("-N2", "--exclusive", runs(0.2), "true")
        inst.wait_event(k, "clean")  # the two undrained nodes still run jobs
        assert R_of(inst, k)["execution"]["R_lite"][0]["rank"] == "0-1"
    finally:
        inst.run("resource", "undrain", "2-3")
    inst.wait_event(j, "clean")


def test_a_rank_that_goes_down_gets_no_jobs_until_it_is_up_again(idle):
    """A broker that stops answering (SIGSTOP, as flux-core's t3308 does) is
    torpid: resource.acquire says ``down``; SIGCONT makes it lively: ``up``.
    Not a drain: the rank is down for the resource module too."""
    inst = idle
    config = inst.run("config", "get")
    fast = json.loads(config)
    # keepalives every second, torpid after 6 s of silence (flux-core's t3308
    # uses 2 s, which flaps on a loaded machine)
    fast["tbon"] = dict(fast.get("tbon", {}), torpid_min="1s", torpid_max="6s")
    inst.run("module", "reload", "heartbeat", "period=0.5s")
    inst.run("config", "load", input=json.dumps(fast))
    wait_until(lambda: nnodes(inst, "down") == 0, what="every rank up")
    pid = int(inst.run("exec", "-r", "2", "flux", "getattr", "broker.pid"))
    os.kill(pid, signal.SIGSTOP)
    try:
        # Wait for rank 2 alone to be down, as both the scheduler and the
        # resource module see it: on a loaded machine another rank may be
        # torpid for a moment too, and a count of one could name that one.
        def only_rank2_down() -> bool:
            return (
                resource_list(inst, "down", "{rlist}", "sched.resource-status")
                == "rank2/core[0-3]"
                == (resource_list(inst, "down", "{rlist}"))
            )

        wait_until(only_rank2_down, timeout=60, what="rank 2 down, alone")
        assert "resource update: down=2" in inst.dmesg()  # resource.acquire's down key
        whole = inst.submit("-N4", "--exclusive", runs(0.1), "true")
        wait_until(lambda: fields(inst, whole, "{annotations.sched.reason_pending}"), what="reason_pending")
        reason = inst.run("jobs", "-no", "{annotations.sched.reason_pending}", whole)
        assert "cannot start on the resources that are up now" in reason
        three = inst.submit("-N3", "--exclusive", runs(0.1), "true")
        inst.wait_event(three, "clean")
        assert ranks_of(inst, three) == "0-1,3"
        assert fields(inst, whole, "{status}") == ["SCHED"]
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: nnodes(inst, "down", "sched.resource-status") == 0, what="rank 2 up")
    assert "resource update: up=2" in inst.dmesg()
    assert resource_list(inst, "down", "{rlist}") == ""
    inst.wait_event(whole, "clean")
    assert ranks_of(inst, whole) == "0-3"
    inst.run("config", "load", input=config)
    inst.run("module", "reload", "heartbeat")


def test_partial_release_by_housekeeping(idle):
    inst = idle
    script = inst.dir / "hk.sh"
    script.write_text('#!/bin/sh\ntest "$(flux getattr rank)" = 1 && sleep 3\nexit 0\n')
    script.chmod(0o755)
    inst.run("config", "load", input=f'[job-manager.housekeeping]\ncommand = ["{script}"]\nrelease-after = "0"\n')
    try:
        a = inst.submit("-N2", "--exclusive", runs(0.1), "true")
        inst.wait_event(a, "clean")
        assert R_of(inst, a)["execution"]["R_lite"][0]["rank"] == "0-1"
        # rank 0 came back at once; rank 1 is held by the housekeeping straggler
        wait_until(lambda: nnodes(inst, "allocated", "sched.resource-status") == 1, what="partial release")
        b = inst.submit("-N3", "--exclusive", runs(0.1), "true")
        inst.wait_event(b, "alloc", timeout=2.5)
        assert R_of(inst, b)["execution"]["R_lite"][0]["rank"] in ("0,2-3", "0,2-3")
        wait_until(lambda: nnodes(inst, "allocated", "sched.resource-status") == 0, timeout=10, what="final free")
    finally:
        inst.run("config", "load", input="")


# -- making it the default --------------------------------------------------------


def test_modprobe_alternative_makes_sched_py_the_scheduler():
    conf = ['modules.alternatives.sched="sched-py"', 'modules.sched-py.args=["queue-policy=conservative"]']
    with Instance(2, conf=conf, env={"FLUX_MODPROBE_PATH_APPEND": str(MODPROBE_DIR)}) as i:
        assert i.sched_module() == "sched-py"
        assert "sched-simple" not in i.modules()
        i.run("run", "-n1", "true")
        assert i.json("module", "stats", "sched-py")["options"]["queue-policy"] == "conservative"
        # a lost rank (overlay disconnect) is down and shrunk: a 2-node job is now infeasible
        i.run("overlay", "disconnect", "1")
        wait_until(lambda: "shrink=1" in i.dmesg(), what="shrink")
        j = i.submit("-N2", "true")
        i.wait_event(j, "exception")
        assert "node" in next(e for e in i.eventlog(j) if e["name"] == "exception")["context"]["note"]
