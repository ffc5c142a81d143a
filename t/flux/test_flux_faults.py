"""Fault injection under a real flux-core.

Each fault is injected from outside the package:

* module reload: ``flux module reload sched-py`` with 100 running and 1,000
  pending jobs;
* a policy that raises: t/flux/faults/sitecustomize.py, put on the broker's
  Python path, patches the queue policies inside the broker module to raise
  on a job of 4242 s;
* a KVS commit failure: the content module started with
  ``blob-size-limit=16384`` and an instance R whose opaque ``R.scheduling``
  (copied into every job's R, as sched-simple does) is 20 kB, so committing
  a job's R fails with EFBIG (jobspecs and eventlogs are small and pass);
* a stalled module: SIGSTOP on the sched-py process (Python modules run in
  their own process) for 3 s while jobs are submitted and end;
* resources going down under running jobs: SIGSTOP on the broker of rank 2
  (torpid, then down, as flux-core's t3308 does).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from .instance import Instance, python_path_for_broker, sched_py_instance
from .test_flux_module import fields, nnodes, ranks_of, resource_list, runs, wait_until

FAULTS = Path(__file__).resolve().parent / "faults"

JOBS_SCRIPT = """
import json, sys
import flux, flux.kvs
from flux.job import JobID
h = flux.Flux()
out = {}
for jobid in json.loads(open(sys.argv[1]).read()):
    key = JobID(jobid).kvs
    names = [json.loads(line)["name"] for line in flux.kvs.get(h, key + ".eventlog").splitlines() if line.strip()]
    try:
        R = flux.kvs.get(h, key + ".R")
    except OSError:
        R = None
    out[jobid] = {"events": names, "R": R}
print(json.dumps(out))
"""


def jobs_info(inst: Instance, ids: list[str]) -> dict[str, dict]:
    """Each job's eventlog event names and R, read in one process."""
    (inst.dir / "ids.json").write_text(json.dumps(ids))
    (inst.dir / "jobs.py").write_text(JOBS_SCRIPT)
    return json.loads(inst.run("python", str(inst.dir / "jobs.py"), str(inst.dir / "ids.json"), timeout=300))


def cores_of(R: dict) -> set[tuple[int, int]]:
    from fluxsched_py.ids import IdSet

    out = set()
    for item in R["execution"]["R_lite"]:
        for rank in IdSet.parse(str(item["rank"])):
            for core in IdSet.parse(str(item["children"]["core"])):
                out.add((rank, core))
    return out


def module_pid(inst: Instance, name: str = "sched-py") -> int:
    pids = re.findall(rf"module-python-exec {name} pid=(\d+)", inst.dmesg())
    return int(pids[-1])


def status_cores(inst: Instance, key: str) -> set[tuple[int, int]]:
    st = json.loads(
        inst.run("python", "-c", "import flux,json; print(json.dumps(flux.Flux().rpc('sched.resource-status').get()))")
    )
    R = st.get(key)
    return cores_of(R) if R and R.get("execution") else set()


# -- module reload with 100 running and 1,000 pending jobs -----------------------------


@pytest.fixture(scope="module")
def big():
    with sched_py_instance(1, 25, 4, "queue-policy=easy") as i:
        yield i


def submit_many(inst: Instance, n: int, *args: str) -> list[str]:
    return inst.run("submit", f"--cc=1-{n}", *args, "true", timeout=300).split()


def test_module_reload_with_100_running_and_1000_pending_loses_and_duplicates_nothing(big):
    inst = big
    running = submit_many(inst, 100, "-n1", "-t", "1h", runs(3600))
    wait_until(lambda: inst.json("module", "stats", "sched-py")["running_jobs"] == 100, timeout=120, what="100 run")
    pending = submit_many(inst, 1000, "-n1", "-t", "60s", runs(0.01))
    wait_until(lambda: inst.json("module", "stats", "sched-py")["pending_jobs"] == 1000, timeout=120, what="pending")
    before = jobs_info(inst, running)
    held = [cores_of(before[j]["R"]) for j in running]
    assert sum(len(c) for c in held) == 100 == len(set().union(*held))  # one core each, all different

    inst.run("module", "reload", "sched-py", "queue-policy=easy")
    wait_until(lambda: "hello: 100 running jobs recovered" in inst.dmesg(), timeout=60, what="hello")
    wait_until(lambda: inst.json("module", "stats", "sched-py")["pending_jobs"] == 1000, timeout=120, what="re-sent")
    st = inst.json("module", "stats", "sched-py")
    assert st["running_jobs"] == 100 and st["hello_errors"] == 0 and st["allocs"] == 1000
    # every running allocation recovered exactly: what the scheduler holds is the jobs' R
    assert status_cores(inst, "allocated") == set().union(*held)
    assert all(fields(inst, j, "{status}") == ["SCHED"] for j in pending[:5] + pending[-5:])

    inst.run("cancel", *running)
    inst.run("queue", "drain", "--timeout=600", timeout=660)
    after = jobs_info(inst, running + pending)
    for j in pending:
        ev = after[j]["events"]
        assert ev.count("alloc") == 1 and "exception" not in ev and ev[-1] == "clean", (j, ev)
    for j in running:
        assert after[j]["events"].count("alloc") == 1, j
    st = inst.json("module", "stats", "sched-py")
    assert st["running_jobs"] == 0 and st["pending_jobs"] == 0 and st["commit_errors"] == 0
    assert status_cores(inst, "allocated") == set()


def test_a_stalled_module_loses_no_request(big):
    """SIGSTOP the sched-py process for 3 s: the broker keeps answering (the
    module is its own process) and queues the module's requests; after
    SIGCONT every alloc, free and cancel sent meanwhile is served."""
    inst = big
    long = submit_many(inst, 4, "-n1", "-t", "1h", runs(3600))
    wait_until(lambda: inst.json("module", "stats", "sched-py")["running_jobs"] == 4, what="4 running")
    pid = module_pid(inst)
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.time()
        new = submit_many(inst, 50, "-n1", "-t", "60s", runs(0.01))  # allocs
        inst.run("cancel", long[0])  # a free
        blocked = inst.submit("-N26", "-t", "60s", runs(0.01), "true")  # 26 nodes: denied at alloc (infeasible)
        assert inst.try_run("ping", "--count=1", "broker").returncode == 0  # the broker is not stalled
        time.sleep(max(0.0, 3.0 - (time.time() - t0)))
    finally:
        os.kill(pid, signal.SIGCONT)
    inst.run("cancel", *long[1:])
    inst.run("queue", "drain", "--timeout=300", timeout=360)
    info = jobs_info(inst, new + long + [blocked])
    for j in new:
        assert info[j]["events"].count("alloc") == 1 and info[j]["events"][-1] == "clean", (j, info[j]["events"])
    assert "exception" in info[blocked]["events"] and "alloc" not in info[blocked]["events"]
    assert status_cores(inst, "allocated") == set()


# -- a policy that raises -----------------------------------------------------------------


def test_a_policy_that_raises_denies_the_job_with_the_error_and_the_module_lives_on():
    env = {"FLUX_PYTHONPATH_PREPEND": f"{FAULTS}:{python_path_for_broker()}", "FLUXSCHED_T_FAULT": "policy"}
    with Instance(1, env=env) as inst:
        inst.use_scheduler("sched-py", "queue-policy=easy")
        ok1 = inst.submit("-n1", "-t", "100s", runs(0.1), "true")
        bad = inst.submit("-n1", "-t", "4242s", runs(0.1), "true")
        inst.wait_event(bad, "clean")
        exc = next(e for e in inst.eventlog(bad) if e["name"] == "exception")["context"]
        assert exc["type"] == "alloc" and exc["note"] == "scheduler error: RuntimeError: injected policy fault"
        assert "sched-py" in inst.modules()
        ok2 = inst.submit("-n1", "-t", "100s", runs(0.1), "true")
        for j in (ok1, ok2):
            inst.wait_event(j, "clean")
            assert "exception" not in [e["name"] for e in inst.eventlog(j)]
        assert "policy raised RuntimeError('injected policy fault')" in inst.dmesg()


# -- a KVS commit failure -----------------------------------------------------------------


def test_a_kvs_commit_failure_is_never_reported_success_and_the_job_is_denied_with_the_reason():
    with Instance(1, conf=['modules.content.args=["blob-size-limit=16384"]']) as inst:
        inst.use_scheduler(None)
        R = json.loads(inst.run("R", "encode", "-r0-3", "-c0-3", "-Hnode[0-3]"))
        R["scheduling"] = {"writer": "t/flux fault injection", "pad": "x" * 20000}
        (inst.dir / "R.json").write_text(json.dumps(R))
        # The resource module takes the new R, then fails to store it in the
        # KVS (resource.R is as large as the job R will be): EFBIG, which
        # proves the limit is in force.
        p = inst.try_run("resource", "reload", "-f", str(inst.dir / "R.json"))
        assert p.returncode != 0 and "File too large" in p.stderr
        inst.use_scheduler("sched-py", "queue-policy=easy")
        wait_until(lambda: "resources: 4 ranks, 16 cores" in inst.dmesg(), what="the new R")
        jobs = [inst.submit("-N1", runs(0.1), "true") for _ in range(3)]
        for j in jobs:
            inst.wait_event(j, "clean")
        info = jobs_info(inst, jobs)
        for j in jobs:
            ev = inst.eventlog(j)
            names = [e["name"] for e in ev]
            assert "alloc" not in names and info[j]["R"] is None, names  # never SUCCESS
            note = next(e for e in ev if e["name"] == "exception")["context"]["note"]
            assert note == "scheduler could not commit R to the KVS: [Errno 27] File too large"
        st = inst.json("module", "stats", "sched-py")
        assert st["commit_errors"] >= 1 and st["running_jobs"] == 0
        assert status_cores(inst, "allocated") == set()  # what was held for them is free again


# -- resources going down under running jobs ---------------------------------------------


def test_a_rank_that_goes_down_under_a_running_job_stays_its_until_freed_and_gets_nothing_new():
    with Instance(4) as inst:
        inst.use_scheduler(None)
        inst.set_resources(4, 4)
        inst.use_scheduler("sched-py", "queue-policy=easy")
        config = json.loads(inst.run("config", "get"))
        config["tbon"] = dict(config.get("tbon", {}), torpid_min="1s", torpid_max="6s")
        inst.run("module", "reload", "heartbeat", "period=0.5s")
        inst.run("config", "load", input=json.dumps(config))
        wait_until(lambda: nnodes(inst, "down") == 0, what="every rank up")
        a = inst.submit("-N2", "--exclusive", "-t", "1h", runs(3600), "true")
        inst.wait_event(a, "start")
        assert ranks_of(inst, a) == "0-1"
        pid = int(inst.run("exec", "-r", "1", "flux", "getattr", "broker.pid"))
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: "resource update: down=1" in inst.dmesg(), timeout=30, what="rank 1 down")
            # the job keeps its allocation; the down rank is not handed out
            assert fields(inst, a, "{status}") == ["RUN"]
            assert {r for r, _ in status_cores(inst, "allocated")} == {0, 1}
            assert {r for r, _ in status_cores(inst, "down")} == {1}
            two = inst.submit("-N2", "--exclusive", "-t", "60s", runs(0.1), "true")
            inst.wait_event(two, "clean")
            assert ranks_of(inst, two) == "2-3"
            more = inst.submit("-N3", "--exclusive", "-t", "60s", runs(0.1), "true")  # 3 up nodes: waits for a
            wait_until(lambda: fields(inst, more, "{annotations.sched.reason_pending}"), what="reason")
            inst.run("cancel", a)  # the final free of a down rank: free but still down
            inst.wait_event(more, "clean")
            assert ranks_of(inst, more) == "0,2-3"  # not the down rank a held
            assert resource_list(inst, "down", "{rlist}", "sched.resource-status") == "rank1/core[0-3]"
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until(lambda: nnodes(inst, "down", "sched.resource-status") == 0, timeout=30, what="rank 1 up")
        whole = inst.submit("-N4", "--exclusive", "-t", "60s", runs(0.1), "true")
        inst.wait_event(whole, "clean")
        assert ranks_of(inst, whole) == "0-3"
