"""The RFC 27 driver without Flux, one test per requirement sentence.

Each test name says the rule it proves; docs/rfcs/rfc27-sched-protocol.md points
here.  The driver runs on a RecordingTransport (lists instead of a broker).
"""

from __future__ import annotations

import errno
import json
import math
import subprocess
import sys

import pytest

from fluxsched_py.flux import paths
from fluxsched_py.flux.driver import Driver, f58, kvs_key, parse_module_args

from .recording_transport import RecordingTransport

R2 = {
    "version": 1,
    "execution": {
        "R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}],
        "nodelist": ["n[0-1]"],
        "starttime": 0.0,
        "expiration": 0.0,
    },
}


def jobspec(ncores=1, nnodes=None, duration=0.0):
    slot = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": ncores}]}
    res = [{"type": "node", "count": nnodes, "with": [slot]}] if nnodes else [slot]
    return {
        "version": 1,
        "resources": res,
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }


#: every core of R2
FULL = jobspec(ncores=4, nnodes=2)
FULL100 = jobspec(ncores=4, nnodes=2, duration=100)


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def make(options=(), up="0-1", R=R2, job_name=None, **kw):
    t = RecordingTransport(**kw)
    d = Driver(t, list(options), clock=Clock(), budget=None, job_name=job_name)
    t.driver = d
    d.acquire({"resources": R, "up": up})
    d.hello_done()
    d.ready({"count": 0})
    return d, t


def alloc(d, t, jobid, spec=None, prio=16, t_submit=None):
    p = {"id": jobid, "priority": prio, "userid": 0, "t_submit": t_submit or float(jobid), "jobspec": spec or jobspec()}
    d.handle("sched.alloc", f"alloc-{jobid}", p)
    t.run_passes()


def replies(t, msg):
    return [p for k, m, p in t.sent if m == msg and k in ("respond", "error")]


# -- module arguments ------------------------------------------------------


def test_module_arguments_are_engine_options():
    o = parse_module_args(["queue-policy=conservative", "reserve-depth=4", "queue-depth=8", "policy=low"])
    assert (o.queue_policy, o.reserve_depth, o.queue_depth, o.placement) == ("conservative", 4, 8, "low")


@pytest.mark.parametrize(
    "arg", ["queue-policy=bogus", "frobnicate=1", "garbage", "mode=foobar", "mode=limited=-1", "log_level=debug"]
)
def test_bad_module_argument_fails_with_a_clear_message(arg):
    with pytest.raises(ValueError) as e:
        parse_module_args([arg])
    assert arg.split("=")[0] in str(e.value) or "key=value" in str(e.value)


def test_sched_simple_mode_spellings_are_accepted():
    assert parse_module_args(["mode=limited=3"]).queue_depth == 3
    assert parse_module_args(["mode=unlimited"]).queue_depth is None


def test_ready_is_limited_with_queue_depth_and_unlimited_without():
    d, _ = make(["queue-depth=5"])
    assert d.ready_payload() == {"mode": "limited", "limit": 5}
    d, _ = make()
    assert d.ready_payload() == {"mode": "unlimited"}


# -- resources -------------------------------------------------------------


def test_every_target_is_down_until_it_is_up():
    d, t = make(up="0")
    alloc(d, t, 1, jobspec(ncores=1, nnodes=2))
    assert replies(t, "alloc-1")[-1]["type"] == 1  # pending, annotated
    d.acquire({"up": "1"})
    t.run_passes()
    assert replies(t, "alloc-1")[-1]["type"] == 0


def test_drain_then_undrain_moves_jobs_off_and_back():
    d, t = make()
    d.acquire({"down": "0-1"})
    alloc(d, t, 1)
    assert all(p["type"] == 1 for p in replies(t, "alloc-1"))
    d.acquire({"up": "1"})
    t.run_passes()
    ok = replies(t, "alloc-1")[-1]
    assert ok["type"] == 0 and ok["R"]["execution"]["R_lite"][0]["rank"] == "1"


def test_bad_acquire_update_is_logged_not_fatal():
    d, t = make()
    d.acquire({"up": "7-9"})
    d.acquire("junk")
    d.acquire({"expiration": "soon"})
    assert len(t.errors()) == 3
    alloc(d, t, 1)
    assert replies(t, "alloc-1")[-1]["type"] == 0


def test_instance_expiration_update_is_taken():
    d, t = make()
    d.acquire({"expiration": 5000.0})
    assert d.engine.instance_expiration == 5000.0


def test_unusable_instance_R_fails_startup():
    t = RecordingTransport()
    d = Driver(t, [])
    with pytest.raises(ValueError):
        d.acquire({"resources": {"version": 9}, "up": "0"})


# -- alloc -----------------------------------------------------------------


def test_R_is_committed_to_the_kvs_before_success():
    d, t = make(defer_commits=True)
    alloc(d, t, 1)
    assert [k for k, _, _ in t.sent] == ["commit"]
    assert replies(t, "alloc-1") == []
    t.complete_commits()
    ok = replies(t, "alloc-1")[-1]
    assert ok["type"] == 0 and t.kvs[kvs_key(1)] == ok["R"]


def test_each_alloc_is_answered_once_through_its_own_request():
    # The requests live with the engine's jobs (no map in the driver): one
    # waiting for its commit, one pending, one denied at once, one cancelled.
    d, t = make(defer_commits=True)
    alloc(d, t, 1, FULL)
    alloc(d, t, 2, FULL)
    alloc(d, t, 3, jobspec(nnodes=3))  # more nodes than there are
    assert d.stats_get()["alloc_requests"] == 2  # 1 (its commit in flight) and 2
    d.handle("sched.cancel", "cancel-2", {"id": 2})
    t.run_passes()
    t.complete_commits()
    assert [r["type"] for r in replies(t, "alloc-1")] == [0]
    assert [r["type"] for r in replies(t, "alloc-2") if r["type"] != 1] == [3]
    assert [r["type"] for r in replies(t, "alloc-3")] == [2]
    assert d.stats_get()["alloc_requests"] == 0


def test_success_responses_of_one_pass_share_one_commit():
    d, t = make(defer_commits=True)
    for j in range(1, 5):
        p = {"id": j, "priority": 1, "userid": 0, "t_submit": j, "jobspec": jobspec()}
        d.handle("sched.alloc", f"alloc-{j}", p)
    t.run_passes()
    commits = [p for k, _, p in t.sent if k == "commit"]
    assert len(commits) == 1 and len(commits[0]) == 4


def test_failed_commit_denies_and_frees():
    d, t = make(commit_error="No space left on device")
    alloc(d, t, 1, FULL)
    deny = replies(t, "alloc-1")[-1]
    assert deny["type"] == 2 and "commit" in deny["note"]
    alloc(d, t, 2, FULL)  # the resources were given back
    assert replies(t, "alloc-2")[-1]["type"] == 2  # (the commit fails again)
    assert d.engine.job(2) is None and d.graph.free().count("core") == 8
    assert (d.engine.stats["started"], d.engine.stats["denied"]) == (0, 2)  # never a start


def test_infeasible_job_is_denied_with_a_note():
    d, t = make()
    alloc(d, t, 1, jobspec(nnodes=3))
    deny = replies(t, "alloc-1")[-1]
    assert deny["type"] == 2 and deny["note"]


@pytest.mark.parametrize(
    "payload",
    [
        {"id": 9, "priority": "high", "userid": 0, "t_submit": 1.0, "jobspec": jobspec()},
        {"id": 9, "priority": 1, "userid": 0, "t_submit": 1.0},
        {"id": 9, "priority": 1, "userid": 0, "t_submit": 1.0, "jobspec": "x"},
        {"id": 9, "priority": 1, "userid": 0, "t_submit": 1.0, "jobspec": {"version": 1, "resources": 5}},
    ],
)
def test_malformed_alloc_with_an_id_is_denied_never_an_error(payload):
    d, t = make()
    d.handle("sched.alloc", "m", payload)
    t.run_passes()
    (deny,) = replies(t, "m")
    assert deny["type"] == 2 and deny["id"] == 9 and deny["note"]
    assert not [k for k, _, _ in t.sent if k == "error"]


@pytest.mark.parametrize("payload", [None, "text", [], {"jobspec": {}}, {"id": -1}, {"id": "7"}])
def test_alloc_without_an_id_is_logged_and_dropped(payload):
    d, t = make()
    d.handle("sched.alloc", "m", payload)
    assert replies(t, "m") == [] and t.errors()


def test_second_alloc_for_a_pending_job_does_not_duplicate():
    d, t = make()
    alloc(d, t, 1, jobspec(ncores=4, nnodes=2, duration=10))
    alloc(d, t, 2, FULL)
    alloc(d, t, 2, FULL)
    assert d.engine.pending_count == 1


# -- cancel, free, prioritize, expiration -----------------------------------


def test_cancel_answers_the_pending_alloc_with_cancel():
    d, t = make()
    alloc(d, t, 1, FULL)
    alloc(d, t, 2, FULL)
    d.handle("sched.cancel", "c", {"id": 2})
    assert replies(t, "c") == []  # no direct response
    assert replies(t, "alloc-2")[-1] == {"id": 2, "type": 3}


def test_cancel_of_an_unknown_or_running_job_is_ignored():
    d, t = make()
    alloc(d, t, 1)
    n = len(t.sent)
    d.handle("sched.cancel", "c", {"id": 1})
    d.handle("sched.cancel", "c", {"id": 77})
    assert len(t.sent) == n


def test_free_releases_and_starts_the_next_job():
    d, t = make()
    alloc(d, t, 1, FULL)
    alloc(d, t, 2, FULL)
    R = replies(t, "alloc-1")[-1]["R"]
    d.handle("sched.free", "f", {"id": 1, "R": R, "final": True})
    t.run_passes()
    assert replies(t, "f") == []
    assert replies(t, "alloc-2")[-1]["type"] == 0


def test_partial_free_releases_only_those_ranks():
    d, t = make()
    alloc(d, t, 1, jobspec(ncores=4, nnodes=2))
    R = replies(t, "alloc-1")[-1]["R"]
    part = json.loads(json.dumps(R))
    part["execution"]["R_lite"] = [{"rank": "0", "children": {"core": "0-3"}}]
    d.handle("sched.free", "f", {"id": 1, "R": part, "final": False})
    assert d.graph.free().count("core") == 4 and str(d.graph.allocated().ranks) == "1"
    rest = json.loads(json.dumps(R))
    rest["execution"]["R_lite"] = [{"rank": "1", "children": {"core": "0-3"}}]
    d.handle("sched.free", "f", {"id": 1, "R": rest, "final": True})
    assert d.graph.free().count("core") == 8 and d.engine.job(1) is None


@pytest.mark.parametrize(
    "payload", [{"id": 424242, "R": R2, "final": True}, {"id": 1, "final": False}, "junk", {"id": 1, "R": 5}]
)
def test_free_of_unknown_job_or_garbage_never_errors(payload):
    d, t = make()
    d.handle("sched.free", "f", payload)
    assert replies(t, "f") == []


def test_prioritize_reorders_the_queue():
    d, t = make(["queue-policy=fcfs"])
    alloc(d, t, 1, FULL)
    alloc(d, t, 2, FULL)
    alloc(d, t, 3, FULL)
    d.handle("sched.prioritize", "p", {"jobs": [[3, 100], ["bad"], [99, 1]]})
    d.handle("sched.free", "f", {"id": 1, "R": replies(t, "alloc-1")[-1]["R"], "final": True})
    t.run_passes()
    assert replies(t, "alloc-3")[-1]["type"] == 0
    assert replies(t, "alloc-2")[-1]["type"] == 1
    assert replies(t, "p") == []


def test_expiration_answers_empty_and_moves_the_reservation():
    d, t = make(["queue-policy=easy"])
    alloc(d, t, 1, FULL100)
    alloc(d, t, 2, FULL100)
    est = replies(t, "alloc-2")[-1]["annotations"]["sched"]["t_estimate"]
    assert est == 1100.0
    d.handle("sched.expiration", "e", {"id": 1, "expiration": 1500.0})
    t.run_passes()
    assert replies(t, "e") == [None]
    assert replies(t, "alloc-2")[-1]["annotations"]["sched"]["t_estimate"] == 1500.0


@pytest.mark.parametrize(
    "payload,err",
    [({"id": 5, "expiration": 10.0}, errno.EINVAL), ({"id": 1}, errno.EPROTO), ("x", errno.EPROTO)],
)
def test_expiration_errors(payload, err):
    d, t = make()
    d.handle("sched.expiration", "e", payload)
    (e,) = replies(t, "e")
    assert e[0] == err and e[1]


# -- other services ----------------------------------------------------------


def test_feasibility_check():
    d, t = make()
    d.handle("feasibility.check", "ok", {"jobspec": jobspec()})
    d.handle("feasibility.check", "no", {"jobspec": jobspec(nnodes=3)})
    d.handle("feasibility.check", "bad", {"jobspec": {"version": 1}})
    d.handle("feasibility.check", "junk", {})
    assert replies(t, "ok") == [None]
    assert replies(t, "no")[0][0] == errno.EOVERFLOW
    assert replies(t, "bad")[0][0] == errno.EINVAL
    assert replies(t, "junk")[0][0] == errno.EPROTO


def test_resource_status_is_all_allocated_down():
    d, t = make(up="0")
    alloc(d, t, 1)
    d.handle("sched.resource-status", "s", None)
    (st,) = replies(t, "s")
    assert set(st) == {"all", "allocated", "down"}
    assert st["down"]["execution"]["R_lite"][0]["rank"] == "1"


def test_stats_get():
    d, t = make()
    d.handle("sched-py.stats-get", "s", None)
    (st,) = replies(t, "s")
    assert st["pending_jobs"] == 0 and "engine" in st


# -- hello -------------------------------------------------------------------


def _hello_driver(hellos):
    t = RecordingTransport()
    d = Driver(t, [], clock=Clock(), budget=None)
    t.driver = d
    d.acquire({"resources": R2, "up": "0-1"})
    for payload, R in hellos:
        d.hello(payload, R)
    d.hello_done()
    return d, t


def _jobR(rank, cores):
    return {"version": 1, "execution": {"R_lite": [{"rank": rank, "children": {"core": cores}}], "starttime": 1.0}}


def test_hello_marks_running_jobs_allocated_so_no_double_allocation():
    d, t = _hello_driver([({"id": 1, "priority": 1, "userid": 0, "t_submit": 1.0}, json.dumps(_jobR("0", "0-3")))])
    assert d.graph.free().count("core") == 4
    alloc(d, t, 2, jobspec(ncores=4))
    R = replies(t, "alloc-2")[-1]["R"]
    assert R["execution"]["R_lite"][0]["rank"] == "1"


def test_hello_with_free_ranks_holds_only_the_rest():
    p = {"id": 1, "priority": 1, "userid": 0, "t_submit": 1.0, "free": "0"}
    R = {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], "starttime": 1.0}}
    d, t = _hello_driver([(p, R)])
    assert str(d.graph.allocated().ranks) == "1"


def test_hello_with_unparsable_R_holds_its_ranks():
    p = {"id": 1, "priority": 1, "userid": 0, "t_submit": 1.0}
    bad = {"version": 1, "execution": {"R_lite": [{"rank": "1", "children": {"core": "0-99"}}]}}
    d, t = _hello_driver([(p, bad)])
    assert t.errors() and d.graph.free().count("core") == 4
    assert str(d.graph.allocated().ranks) == "1"
    d.handle("sched.free", "f", {"id": 1, "R": bad, "final": True})
    assert d.graph.free().count("core") == 8


@pytest.mark.parametrize("R", ["{not json", 42, OSError(2, "No such file or directory")])
def test_hello_with_unreadable_R_raises_a_job_exception(R):
    p = {"id": 1, "priority": 1, "userid": 0, "t_submit": 1.0}
    d, t = _hello_driver([(p, R)])
    (exc,) = [x for k, _, x in t.sent if k == "exception"]
    assert exc["id"] == 1 and exc["severity"] == 0
    assert d.graph.free().count("core") == 8


# -- passes --------------------------------------------------------------------


def test_long_pass_yields_to_the_reactor():
    t = RecordingTransport()
    ticks = iter(range(10**6))
    d = Driver(t, [], clock=Clock(), budget=0.0)
    t.driver = d
    d.acquire({"resources": R2, "up": "0-1"})
    d.hello_done()
    d.ready({"count": 0})
    d.engine._stopwatch = lambda: next(ticks)  # every check says the budget is spent
    for j in range(1, 40):
        d.handle("sched.alloc", j, {"id": j, "priority": 1, "userid": 0, "t_submit": j, "jobspec": jobspec()})
    n = t.pass_requests
    more = d.run_pass()
    assert more and t.pass_requests == n + 1
    t.run_passes()
    assert d.stats["sched_yields"] >= 1
    assert len([p for k, _, p in t.sent if k == "respond" and p.get("type") == 0]) == 8


def test_changes_arm_one_pass():
    d, t = make()
    t.run_passes()
    n = t.pass_requests
    for j in range(1, 6):
        d.handle("sched.alloc", j, {"id": j, "priority": 1, "userid": 0, "t_submit": j, "jobspec": jobspec()})
    assert t.pass_requests == n + 1


# -- packaging -------------------------------------------------------------------


def test_core_and_driver_import_without_libflux():
    code = (
        "import sys; import fluxsched_py, fluxsched_py.engine, fluxsched_py.flux, fluxsched_py.flux.driver, "
        "fluxsched_py.flux.paths; assert 'flux' not in sys.modules and '_flux' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_path_and_modprobe_path(capsys):
    assert paths.main(["module-path"]) == 0
    mp = capsys.readouterr().out.strip()
    assert (paths.module_dir() / "sched-py.py").exists() and mp == str(paths.module_dir())
    assert paths.main(["modprobe-path"]) == 0
    mpp = capsys.readouterr().out.strip()
    toml = paths.modprobe_dir() / "modprobe.d" / "sched-py.toml"
    assert mpp == str(paths.modprobe_dir()) and toml.exists()
    text = toml.read_text()
    assert 'provides = ["sched", "feasibility"]' in text and 'name = "sched-py"' in text
    assert paths.main(["bogus"]) == 2


def test_cmd_path_holds_an_executable_flux_sched_py(capsys):
    """flux runs ``flux-NAME`` from FLUX_EXEC_PATH only if it may execute it
    (flux-core's ``src/cmd/flux.c``: ``access (path, R_OK|X_OK)``); pip keeps
    the mode of console scripts, not of package files."""
    import os

    assert paths.main(["cmd-path"]) == 0
    folder = capsys.readouterr().out.strip()
    script = paths.cmd_dir() / "flux-sched-py"
    assert folder == str(paths.cmd_dir()) and os.access(script, os.X_OK), script


def test_entry_file_defines_mod_main():
    src = (paths.module_dir() / "sched-py.py").read_text()
    compile(src, "sched-py.py", "exec")
    assert "def mod_main(h, *args)" in src


def test_opaque_R_scheduling_is_ignored_with_a_warning_and_copied_into_job_R():
    """As sched-simple does (flux-core t2300 'allocated R contains R.scheduling')."""
    R = dict(R2, scheduling={"test": "data"})
    d, t = make(R=R)
    assert any("ignoring R.scheduling" in text for _, text in t.logs)
    alloc(d, t, 1)
    assert replies(t, "alloc-1")[-1]["type"] == 0
    assert t.kvs[kvs_key(1)]["scheduling"] == {"test": "data"}


@pytest.mark.parametrize(
    "scheduling",
    [{"graph": {"nodes": [], "edges": []}}, {"blob": "x" * (65 * 1024)}, "not an object"],
    ids=["jgf", "too-large", "not-an-object"],
)
def test_jgf_or_large_R_scheduling_is_not_copied_into_job_R(scheduling):
    d, t = make(R=dict(R2, scheduling=scheduling))
    alloc(d, t, 1)
    assert replies(t, "alloc-1")[-1]["type"] == 0
    assert "scheduling" not in t.kvs[kvs_key(1)]


def test_resource_summary_is_in_flux_rlist_style():
    d, t = make(["policy=low"])
    alloc(d, t, 1, jobspec(ncores=1))
    alloc(d, t, 2, jobspec(ncores=2, nnodes=2))
    assert replies(t, "alloc-1")[-1]["annotations"]["sched"]["resource_summary"] == "rank0/core0"
    assert replies(t, "alloc-2")[-1]["annotations"]["sched"]["resource_summary"].startswith("rank")


def test_infeasible_note_uses_flux_wording_and_missing_duration_is_denied():
    d, t = make()
    alloc(d, t, 1, jobspec(nnodes=3))
    assert replies(t, "alloc-1")[-1]["note"].startswith("unsatisfiable request: ")
    spec = jobspec()
    del spec["attributes"]
    alloc(d, t, 2, spec)
    assert replies(t, "alloc-2")[-1]["note"] == "invalid jobspec: getting duration: Object item not found: attributes"


def test_job_ids_in_reason_pending_are_shown_as_flux_shows_them():
    from fluxsched_py.flux.driver import f58

    assert f58(13019119616) == "ƒLqTPgb"  # `flux job id --to=f58 13019119616`
    d, t = make(["queue-policy=fcfs"])
    alloc(d, t, 13019119616, FULL)
    alloc(d, t, 13019119617, FULL)
    alloc(d, t, 13019119618, FULL)
    reasons = [p["annotations"]["sched"].get("reason_pending", "") for p in replies(t, "alloc-13019119618")]
    assert not any("13019119" in r for r in reasons) and any("ƒLqTPg" in r for r in reasons)


def test_the_module_can_write_job_ids_its_own_way():
    # the module passes flux-core's encoder: "fLqTPgb" in a C locale, as `flux job id` writes it
    d, t = make(["queue-policy=fcfs"], job_name=lambda i: "f" + f58(i)[1:])
    alloc(d, t, 13019119616, FULL)
    alloc(d, t, 13019119617, FULL)
    alloc(d, t, 13019119618, FULL)
    reasons = [p["annotations"]["sched"].get("reason_pending", "") for p in replies(t, "alloc-13019119618")]
    assert any("job fLqTPgc" in r for r in reasons), reasons


def test_requests_before_resources_are_known_do_not_crash():
    t = RecordingTransport()
    d = Driver(t, [])
    d.handle("feasibility.check", "f", {"jobspec": jobspec()})
    d.handle("sched.alloc", "a", {"id": 1})
    d.handle("sched-py.stats-get", "s", None)
    assert replies(t, "f")[0][0] == errno.EAGAIN
    assert replies(t, "a") == [] and replies(t, "s")[0]["pending_jobs"] == 0


# -- the sink effect -----------------------------------------------------------


def test_the_sink_effect_sends_resource_drain_and_stats_show_campaigns():
    # 2 ranks of 4 cores, sink-jobs=2.  Campaign s: two 100 s jobs on rank 0
    # (policy low), then rank 1 swallows two jobs in 1 s each.  The median of
    # (100, 100, 1, 1) is 50.5: 1 s is under a tenth -> drain rank 1.
    d, t = make(["sink-jobs=2", "policy=low"])
    spec = jobspec(ncores=4, nnodes=1, duration=1000)
    spec["attributes"]["user"] = {"campaign": "s"}
    clock = d.clock
    for jobid in (1, 2):
        alloc(d, t, jobid, spec)
        R = t.kvs[kvs_key(jobid, "R")]
        assert R["execution"]["R_lite"][0]["rank"] == "0"
        clock.t += 100
        d.handle("sched.free", "f", {"id": jobid, "R": R, "final": True})
        t.run_passes()
    alloc(d, t, 9, jobspec(ncores=4, nnodes=1, duration=1000))  # holds rank 0
    for jobid in (3, 4):
        alloc(d, t, jobid, spec)
        R = t.kvs[kvs_key(jobid, "R")]
        assert R["execution"]["R_lite"][0]["rank"] == "1"
        clock.t += 1
        d.handle("sched.free", "f", {"id": jobid, "R": R, "final": True})
        t.run_passes()
    drains = [p for k, _, p in t.sent if k == "drain"]
    assert len(drains) == 1 and drains[0]["targets"] == "1"
    assert "the last 2 jobs of campaign s" in drains[0]["reason"]
    stats = d.stats_get()
    assert stats["campaigns"]["s"]["completed"] == 4
    assert stats["options"]["sink-jobs"] == 2
    # resource.drain is a round trip: until Flux reports rank 1 down, the
    # engine already keeps it out, so a job that needs a node waits for rank 0.
    alloc(d, t, 5, jobspec(ncores=4, nnodes=1, duration=1000))
    assert kvs_key(5, "R") not in t.kvs
    assert not [p for p in replies(t, "sched.alloc") if p.get("id") == 5 and p.get("type") == 0]
    d.acquire({"down": "1"})  # Flux's resource.acquire update for the drain: nothing changes
    t.run_passes()
    assert kvs_key(5, "R") not in t.kvs
    R = t.kvs[kvs_key(9, "R")]
    d.handle("sched.free", "f", {"id": 9, "R": R, "final": True})
    t.run_passes()
    assert t.kvs[kvs_key(5, "R")]["execution"]["R_lite"][0]["rank"] == "0"


def test_easypp_arms_a_pass_for_the_prediction_and_corrects_there():
    d, t = make(["predict-runtimes=true", "policy=low"])
    clock = d.clock
    spec = jobspec(ncores=4, nnodes=1, duration=100)
    alloc(d, t, 1, spec)
    R = t.kvs[kvs_key(1, "R")]
    clock.t += 10
    d.handle("sched.free", "f", {"id": 1, "R": R, "final": True})
    t.run_passes()
    assert t.pass_requests and d.engine.wakeup() == math.inf
    alloc(d, t, 2, spec)  # predicted 10 s (job 1's run time), walltime 100
    start = clock.t
    assert d.engine.planner.span(2).end == start + 10
    assert d.engine.wakeup() == start + 10
    n = t.pass_requests
    d.run_pass()  # nothing to do: the pass (re-)arms the wakeup
    assert t.pass_requests == n + 1
    clock.t = start + 10
    d.run_pass()  # the timer fires: job 2 outlived its prediction, which grows by the first increment, 1 min
    assert d.engine.planner.span(2).end == start + 10 + 60
    assert d.engine.wakeup() == start + 70  # the next correction
    clock.t = start + 70
    d.run_pass()  # then by 5 min from the first prediction: past the walltime, so the walltime
    assert d.engine.planner.span(2).end == start + 100
    assert t.kvs[kvs_key(2, "R")]["execution"]["expiration"] == start + 100  # the kill time never moved


# -- best-effort jobs and preemption (docs/rfcs/preemption.md) ------------------


def _besteffort(ncores, after=0):
    spec = jobspec(ncores=ncores)
    spec["attributes"]["system"]["preemptible-after"] = after
    return spec


def test_preemption_raises_a_preempt_exception_naming_the_job_and_succeeds_after_the_free():
    d, t = make(job_name=lambda i: f"f{i}")
    for i in range(1, 9):  # 8 one-core best-effort jobs fill both nodes
        alloc(d, t, i, _besteffort(1))
    assert all("R" in replies(t, f"alloc-{i}")[-1] for i in range(1, 9))
    alloc(d, t, 20, jobspec(ncores=4, nnodes=1))
    raised = [p for k, _, p in t.sent if k == "exception"]
    assert len(raised) == 4 and {p["type"] for p in raised} == {"preempt"}
    assert all(p["severity"] == 0 and "f20" in p["note"] for p in raised)
    assert not any("R" in p for p in replies(t, "alloc-20"))  # no SUCCESS before the frees
    for p in raised:
        R = replies(t, f"alloc-{p['id']}")[-1]["R"]
        d.handle("sched.free", f"free-{p['id']}", {"id": p["id"], "R": R, "final": True})
        t.run_passes()
    assert "R" in replies(t, "alloc-20")[-1]
    stats = d.stats_get()
    assert stats["engine"]["preemptions"] == 4 and stats["preempt_raised"] == 4


def test_malformed_preemptible_after_is_denied_by_the_module():
    d, t = make()
    alloc(d, t, 1, _besteffort(1, after="later"))
    (deny,) = replies(t, "alloc-1")
    assert deny["type"] == 2 and "preemptible-after" in deny["note"]


def test_a_pass_is_armed_for_the_end_of_a_protected_window():
    # Both nodes filled with best-effort jobs protected for 60 s; a regular
    # job then waits until they become preemptible.  Nothing else happens:
    # the driver must still run a pass then, and the preemption goes out.
    d, t = make(job_name=lambda i: f"f{i}")
    start = d.clock.t
    for i in range(1, 9):
        alloc(d, t, i, _besteffort(1, after=60))
    alloc(d, t, 20, jobspec(ncores=4, nnodes=1))
    assert not [p for k, _, p in t.sent if k == "exception"]
    assert d.engine.wakeup() == start + 60
    n = t.pass_requests
    d.run_pass()  # nothing to do: the pass (re-)arms the wakeup
    assert t.pass_requests == n + 1
    d.clock.t = start + 60
    d.run_pass()  # the timer fires
    raised = [p for k, _, p in t.sent if k == "exception"]
    assert len(raised) == 4 and all("f20" in p["note"] for p in raised)


def _checkpointing(ncores):
    spec = _besteffort(ncores)
    spec["attributes"]["user"] = {"checkpoint": "signal"}
    return spec


def kills(t):
    return [p["id"] for k, _, p in t.sent if k == "kill"]


def test_a_refused_notice_is_sent_again_until_the_job_runs():
    """flux-core's job-manager.kill answers EINVAL ``job is not running``
    while it has not the job's alloc response: the driver sends the notice
    again SIGNAL_RETRY seconds later, on a pass it arms for it, until it is
    taken.  A checkpointing job's first notice is due FIRST_NOTICE (2 s)
    after its start, then every grace time (10 s)."""
    d, t = make(["preempt-grace=10"])
    start = d.clock.t
    alloc(d, t, 1, _checkpointing(1))
    assert "R" in replies(t, "alloc-1")[-1] and kills(t) == []
    assert d.engine.wakeup() == start + 2
    t.not_running.add(1)
    d.clock.t = start + 2
    d.run_pass()
    assert kills(t) == [1] and d.stats_get()["notices_retried"] == 1
    assert t.pass_delays[-1] == pytest.approx(0.5)  # armed for the retry, before the next notice (t+12)
    d.clock.t = start + 2.5
    d.run_pass()  # still refused
    assert kills(t) == [1, 1] and d.stats_get()["notices_retried"] == 2
    t.not_running.clear()
    d.clock.t = start + 3
    d.run_pass()
    assert kills(t) == [1, 1, 1] and d.stats_get()["notices_retried"] == 2  # taken
    assert t.pass_delays[-1] == pytest.approx(9)  # the next notice, 10 s after the first
    d.clock.t = start + 8
    d.run_pass()
    assert kills(t) == [1, 1, 1] and t.errors() == []


def test_a_refused_notice_is_given_up_after_signal_tries_or_when_the_job_ended():
    d, t = make(["preempt-grace=10"])
    start = d.clock.t
    alloc(d, t, 1, _checkpointing(1))
    alloc(d, t, 2, _checkpointing(1))
    t.not_running.update({1, 2})
    d.clock.t = start + 2
    d.run_pass()
    assert sorted(kills(t)) == [1, 2]
    R = replies(t, "alloc-2")[-1]["R"]
    d.handle("sched.free", "free-2", {"id": 2, "R": R, "final": True})  # job 2 ended: not tried again
    for i in range(1, 20):  # until t=11.5 (its next notice is due at t=12)
        d.clock.t = start + 2 + 0.5 * i
        d.run_pass()
    assert kills(t).count(2) == 1
    assert kills(t).count(1) == 20  # SIGNAL_TRIES: then logged, and not tried again
    d.clock.t = start + 11.9
    d.run_pass()
    assert kills(t).count(1) == 20
    (err,) = t.errors()
    assert "signal 10 to job 1 failed: job is not running" in err


def test_a_notice_waits_for_the_jobs_shells_and_its_kill_time_does_not_move():
    """A job-manager prolog runs: the job is in RUN (job-manager.kill would
    take the signal) but its shells have not started, and a signal taken
    then reaches no one.  The notice waits for the shells
    (``transport.watch_shells``: ``shell.start`` in the exec eventlog) and
    goes out when they start; the preemption still comes a grace time
    after the notice, not after the signal."""
    d, t = make(["preempt-grace=10"], job_name=lambda i: f"f{i}")
    start = d.clock.t
    for i in (1, 2):
        t.shells_pending.add(i)
        alloc(d, t, i, _besteffort(4))  # one node each
    alloc(d, t, 20, FULL100)  # needs both nodes: both get their notice now
    assert sorted(t.shell_watches) == [1, 2] and kills(t) == []
    stats = d.stats_get()
    assert stats["notices_sent"] == 2 and stats["notices_held"] == 2
    d.clock.t = start + 4
    t.start_shells(1)  # its shells run: the notice goes out
    assert kills(t) == [1]
    d.clock.t = start + 9.5
    t.start_shells(2)
    assert kills(t) == [1, 2]
    d.run_pass()
    assert not [p for k, _, p in t.sent if k == "exception"]
    assert d.engine.wakeup() == start + 10  # a grace time after the notice, not after its signal
    d.clock.t = start + 10
    d.run_pass()
    assert sorted(p["id"] for k, _, p in t.sent if k == "exception") == [1, 2]
    assert t.errors() == []


def test_notices_held_for_the_shells_go_once_and_later_ones_at_once():
    """A checkpointing job's notices (its first 2 s after its start, then
    every 10 s) while its shells do not run are held as one signal; once
    they run, later notices go out at once, with no new watch; its final
    free forgets them."""
    d, t = make(["preempt-grace=10"])
    start = d.clock.t
    t.shells_pending.add(1)
    alloc(d, t, 1, _checkpointing(1))
    for now in (2, 12):
        d.clock.t = start + now
        d.run_pass()
    assert d.stats_get()["notices_sent"] == 2 and kills(t) == [] and t.shell_watches == [1]
    t.start_shells(1)
    assert kills(t) == [1]
    d.clock.t = start + 22
    d.run_pass()
    assert kills(t) == [1, 1] and t.shell_watches == [1]
    R = replies(t, "alloc-1")[-1]["R"]
    d.handle("sched.free", "free-1", {"id": 1, "R": R, "final": True})
    assert 1 not in d._shells_up


def test_a_held_notice_is_dropped_when_the_job_ends_first_and_sent_when_the_watch_fails():
    d, t = make(["preempt-grace=10"])
    start = d.clock.t
    t.shells_pending.update({1, 2})
    alloc(d, t, 1, _checkpointing(1))
    alloc(d, t, 2, _checkpointing(1))
    d.clock.t = start + 2
    d.run_pass()
    R = replies(t, "alloc-1")[-1]["R"]
    d.handle("sched.free", "free-1", {"id": 1, "R": R, "final": True})  # it ended in its prolog
    t.start_shells(1, "its exec eventlog ended without shell.start")
    assert kills(t) == [] and d.stats_get()["notices_dropped"] == 1
    t.start_shells(2, "watching its exec eventlog failed: Function not implemented")
    assert kills(t) == [2]  # still running: sent anyway, the watch could not tell
    assert any("sending its notice anyway" in text for _, text in t.logs) and t.errors() == []
