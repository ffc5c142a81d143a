"""``flux sched-py`` under a real flux-core: forecast, when, and who may ask.

On 4 nodes under easy, one job holds every node for 10 minutes and jobs
wait behind it (mock execution: ``system.exec.test.run_duration``).  The command is found as flux finds its own
(``FLUX_EXEC_PATH_PREPEND``); a guest is simulated as flux-core's own tests
do (see test_flux_access.py).
"""

from __future__ import annotations

import json
import time

import pytest

from fluxsched_py.flux.paths import cmd_dir

from .instance import sched_py_instance
from .test_flux_access import GUEST

RPC = """
import json, sys, time
import flux
h = flux.Flux()
out = []
for topic, payload in json.loads(sys.argv[1]):
    t0 = time.monotonic()
    try:
        resp = h.rpc(topic, payload).get()
        out.append({"ok": resp, "seconds": time.monotonic() - t0})
    except OSError as exc:
        out.append({"errno": exc.errno, "error": exc.strerror})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def inst():
    with sched_py_instance(1, 4, 4, "queue-policy=easy", env={"FLUX_EXEC_PATH_PREPEND": str(cmd_dir())}) as i:
        mock = "--setattr=system.exec.test.run_duration=600s"  # mock execution, as long as the walltime allows
        big = i.submit("-N4", "--exclusive", "-t", "10m", mock, "true")
        i.wait_event(big, "alloc")
        i.pending = [
            i.submit(f"-N{n}", "--exclusive", "-t", t, mock, "true")
            for n, t in (("2", "5m"), ("4", "1m"), ("1", "2m"), ("1", "20m"))
        ]
        for j in i.pending:
            i.wait_event(j, "priority")
        time.sleep(1.0)  # a pass has run: the head holds its reservation
        yield i


def rpcs(inst, calls, guest=False):
    script = inst.dir / "rpc.py"
    script.write_text(RPC)
    prefix = f"{GUEST} " if guest else ""
    return json.loads(inst.run(f"{prefix}flux python {script} '{json.dumps(calls)}'"))


def pending_ids(inst):
    return set(inst.run("jobs", "-f", "pending", "-no", "{id}").split())


def test_forecast_lists_every_pending_job_in_start_order(inst):
    before = time.time()
    out = json.loads(inst.run("sched-py", "forecast", "--json"))
    jobs = out["jobs"]
    from_jobs = {int(x) for x in inst.run("jobs", "-f", "pending", "-no", "{id.dec}").split()}
    assert {j["id"] for j in jobs} == from_jobs and len(jobs) == 4
    starts = [j["t_estimate"] for j in jobs]
    assert all(t is not None and t >= out["now"] >= before - 1 for t in starts)
    assert starts == sorted(starts)
    # easy reserves for the head only; its start is the t_estimate flux jobs shows
    kinds = [j["kind"] for j in jobs]
    assert kinds.count("reservation") == 1 and kinds.count("forecast") == 3
    head = next(j for j in jobs if j["kind"] == "reservation")
    shown = inst.run("jobs", "-no", "{annotations.sched.t_estimate}", str(head["id"])).strip()
    assert float(shown) == pytest.approx(head["t_estimate"], abs=1e-3)
    # nothing can start before the 10-minute job ends
    assert min(starts) >= out["now"] + 500


def test_forecast_prints_one_line_per_job(inst):
    lines = inst.run("sched-py", "forecast").splitlines()
    assert lines[0].split()[:6] == ["JOBID", "USER", "QUEUE", "START_TIME", "IN", "KIND"]
    shown = {line.split()[0] for line in lines[1:]}
    assert shown == pending_ids(inst)


def test_when_answers_at_once_and_submits_nothing(inst):
    before = pending_ids(inst)
    jobspec = json.loads(inst.run("submit", "--dry-run", "-N2", "-t", "1m", "true"))
    stats = inst.json("module", "stats", "sched-py")
    (got,) = rpcs(inst, [["sched-py.when", {"jobspec": jobspec}]])
    assert got["seconds"] < 1.0
    w = got["ok"]
    # behind the 10-minute job and every pending job's plan, on 2 nodes
    fc = json.loads(inst.run("sched-py", "forecast", "--json"))["jobs"]
    assert w["t_estimate"] >= min(j["t_estimate"] for j in fc)
    assert len(w["ranks"].replace("-", ",").split(",")) <= 2 and w["nodelist"].startswith("node")
    text = inst.run("sh -c 'flux submit --dry-run -N2 -t 1m true | flux sched-py when -'")
    assert text.startswith("start:") and "nodelist:" in text
    after = inst.json("module", "stats", "sched-py")
    assert pending_ids(inst) == before and after["allocs"] == stats["allocs"]
    assert len(inst.run("jobs", "-a", "-no", "{id}").split()) == len(before) + 1


def test_when_refuses_what_never_fits(inst):
    jobspec = json.loads(inst.run("submit", "--dry-run", "-N8", "true"))
    (got,) = rpcs(inst, [["sched-py.when", {"jobspec": jobspec}]])
    assert got["errno"] == 22 and "jobspec" in got["error"]
    p = inst.try_run("sched-py", "when", "/nonexistent.json")
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "/nonexistent.json" in p.stderr


def test_malformed_payloads_name_the_field_and_the_module_runs_on(inst):
    got = rpcs(
        inst,
        [
            ["sched-py.forecast", {"limit": "ten"}],
            ["sched-py.forecast", {"limt": 3}],
            ["sched-py.when", {}],
            ["sched-py.when", {"jobspec": [1]}],
            ["sched-py.when", {"jobspec": {}, "priority": -1}],
            ["sched-py.status", {"x": 1}],
            ["sched-py.status", None],
        ],
    )
    errors = [g.get("error") for g in got[:-1]]
    for err, field in zip(errors, ["limit", "limt", "jobspec", "jobspec", "priority", "x"], strict=True):
        assert err is not None and f": {field}: " in err, (err, field)
    assert got[-1]["ok"]["pending"] == 4
    assert "sched-py" in inst.modules()


def test_a_guest_may_read_the_forecast(inst):
    p = inst.run(f"{GUEST} flux sched-py forecast --json")
    assert {j["id"] for j in json.loads(p)["jobs"]} == {
        int(x) for x in inst.run("jobs", "-f", "pending", "-no", "{id.dec}").split()
    }
    (got,) = rpcs(inst, [["sched-py.status", {}]], guest=True)
    assert got["ok"]["pending"] == 4


def test_a_guests_change_is_refused(inst):
    # sched-py's one request that changes it: reloading its configuration
    before = inst.json("module", "stats", "sched-py")
    (got,) = rpcs(inst, [["sched-py.config-reload", {"sched-py": {"queue-policy": "fcfs"}}]], guest=True)
    assert got["errno"] == 1  # EPERM
    after = inst.json("module", "stats", "sched-py")
    assert after["config_reloads"] == before["config_reloads"] and after["options"] == before["options"]
