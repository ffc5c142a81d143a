"""Preemption in the batprotocol driver (Batsim 5): best-effort fields in,
KillJobsEvent out.

No Batsim of the batprotocol era is built on this machine, so nothing here
is a recording of a batprotocol run.  The encoding is checked against the
protocol's source: Batsim 3bb38700 reads a KillJobsEvent's ``job_ids`` and
nothing else (``src/protocol.cpp`` ``from_kill_jobs``), and forwards of a
workload job only its ``extra_data`` (``src/jobs.cpp``, ``src/protocol.cpp``
``proto_job->set_extra_data``); pybatsim's batprotocol branch writes
``{"event_type": "KillJobsEvent", "event": {"job_ids": [...]}}``.  The
decisions are checked against the real Batsim 4.2.1 preemption recordings,
whose incoming events are transcoded to batprotocol in this test.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fluxsched_py.batsim.batprotocol import FLAG_JSON, BatprotocolDriver, encode_init, encode_message
from fluxsched_py.batsim.cli import Recorder
from fluxsched_py.batsim.errors import ProtocolError

DATA = Path(__file__).parent / "data" / "batsim"
HELLO = {"batprotocol_version": "0.1.0", "batsim_version": "5.0.0-rc1", "batsim_commit": "3bb38700"}


def m(now, *events):
    return encode_message(now, [{"timestamp": t, "event_type": ty, "event": e} for t, ty, e in events])


def out(raw):
    assert raw.endswith(b"\0")
    return json.loads(raw[:-1])


def hosts(n):
    return [{"id": i, "name": f"h{i}", "properties": [], "core_count": 1} for i in range(n)]


def job(t, jid, n, walltime=100.0):
    j = {"walltime": walltime, "profile_id": "w0!p", "rigid": True, "resource_request": n}
    return (t, "JobSubmittedEvent", {"job_id": jid, "job": j, "submission_time": t})


def begun(n=4, workload=None, workload_files=()):
    d = BatprotocolDriver(["queue-policy=easy", "policy=low"], workload_files=workload_files)
    d.handle(encode_init(FLAG_JSON, b"INIT"))
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    begins = {"computation_host_number": n, "computation_hosts": hosts(n), "batsim_execution_context_json": "{}"}
    if workload is not None:
        begins |= {"workloads": [{"name": "w0", "filename": str(workload)}], "profiles": []}
    d.handle(m(0.0, (0.0, "SimulationBeginsEvent", begins)))
    return d


def be_job(t, jid, n, extra):
    ev = job(t, jid, n)
    ev[2]["job"]["extra_data"] = extra
    return ev


def kinds(r):
    return [e["event_type"] for e in r["events"]]


def test_extra_data_makes_a_job_best_effort_and_a_regular_job_kills_in_one_event_first():
    d = begun(4)
    extra = json.dumps({"preemptible-after": 0})
    r = out(d.handle(m(0.0, *(be_job(0.0, f"w0!{i}", 1, extra) for i in range(1, 5)))))
    assert kinds(r) == ["ExecuteJobEvent"] * 4
    r = out(d.handle(m(1.0, job(1.0, "w0!10", 2))))
    assert kinds(r) == ["KillJobsEvent", "ExecuteJobEvent"]
    kill = r["events"][0]
    assert kill == {"timestamp": 1.0, "event_type": "KillJobsEvent", "event": {"job_ids": kill["event"]["job_ids"]}}
    victims = kill["event"]["job_ids"]
    assert len(victims) == 2 and set(victims) < {f"w0!{i}" for i in range(1, 5)}
    assert r["events"][1]["event"]["job_id"] == "w0!10"
    # Batsim then reports the kills: only acknowledged (the hosts were freed already).
    r = out(d.handle(m(1.1, (1.1, "JobsKilledEvent", {"job_ids": victims, "progresses": []}))))
    assert kinds(r) == []
    assert d.scheduler.stats["killed"] == 2 and d.scheduler.engine.stats["preemptions"] == 2


def test_preemptible_after_protects_a_best_effort_job_for_that_long():
    d = begun(2)
    r = out(d.handle(m(0.0, be_job(0.0, "w0!1", 2, '{"preemptible-after": "1m"}'))))
    # It starts, and the driver asks to be called when its protected window ends.
    assert kinds(r) == ["ExecuteJobEvent", "CallMeLaterEvent"]
    assert r["events"][1]["event"]["when"] == {"time": 60000, "time_unit": "Millisecond"}
    r = out(d.handle(m(10.0, job(10.0, "w0!2", 2))))
    assert "KillJobsEvent" not in kinds(r)
    assert d.scheduler.jobs["w0!1"].preemptible_after == 60.0


@pytest.mark.parametrize("extra", ["", "not json", '"a string"', '{"campaign": "c1"}', "[1, 2]", "{broken"])
def test_extra_data_without_the_attribute_is_a_regular_job(extra):
    d = begun(2)
    d.handle(m(0.0, be_job(0.0, "w0!1", 2, extra)))
    assert d.scheduler.jobs["w0!1"].preemptible_after is None


@pytest.mark.parametrize(
    ("extra", "words"),
    [('{"campaign": 3}', "'campaign' must be a name, got 3"), ('{"user": -2}', "'user' must be a uid")],
)
def test_a_bad_field_in_extra_data_is_a_protocol_error_naming_the_job(extra, words):
    d = begun(2)
    with pytest.raises(ProtocolError, match=f"^job w0!1: {words}"):
        d.handle(m(0.0, be_job(0.0, "w0!1", 2, extra)))


def test_a_bad_preemptible_after_is_a_protocol_error():
    d = begun(2)
    with pytest.raises(ProtocolError, match="w0!1: preemptible-after"):
        d.handle(m(0.0, be_job(0.0, "w0!1", 2, '{"preemptible-after": "soon"}')))


def test_preemptible_after_comes_from_the_workload_file_batsim_names(tmp_path):
    wl = tmp_path / "wl.json"
    jobs = [{"id": 1, "res": 1, "profile": "p", "subtime": 0, "preemptible-after": 0}, {"id": 2, "res": 1}]
    wl.write_text(json.dumps({"nb_res": 2, "jobs": jobs, "profiles": {"p": {"type": "delay", "delay": 5}}}))
    d = begun(2, workload=wl)
    d.handle(m(0.0, job(0.0, "w0!1", 1), job(0.0, "w0!2", 1)))
    assert d.scheduler.jobs["w0!1"].preemptible_after == 0.0
    assert d.scheduler.jobs["w0!2"].preemptible_after is None


# -- the real Batsim 4.2.1 preemption runs, transcoded to batprotocol ----------

RECS = json.loads((DATA / "MANIFEST.json").read_text())["preemption"]


def transcode(ev: dict) -> tuple[float, str, dict] | None:
    """A Batsim 4 event as Batsim 3bb38700 would send it (None: not sent)."""
    t, ty, data = ev["timestamp"], ev["type"], ev["data"]
    if ty == "JOB_SUBMITTED":
        j = data["job"]
        extra = {"preemptible-after": j["preemptible-after"]} if "preemptible-after" in j else {}
        body = {"resource_request": j["res"], "walltime": j["walltime"], "profile_id": j["profile"], "rigid": True}
        body["extra_data"] = json.dumps(extra) if extra else ""
        return (t, "JobSubmittedEvent", {"job_id": data["job_id"], "job": body, "submission_time": j["subtime"]})
    if ty == "JOB_COMPLETED":
        return (t, "JobCompletedEvent", {"job_id": data["job_id"], "state": data["job_state"], "return_code": 0})
    if ty == "JOB_KILLED":
        return (t, "JobsKilledEvent", {"job_ids": data["job_ids"], "progresses": []})
    if ty == "REQUESTED_CALL":
        return (t, "RequestedCallEvent", {"call_me_later_id": "x"})
    if ty == "NOTIFY" and data["type"] == "no_more_static_job_to_submit":
        return (t, "AllStaticJobsHaveBeenSubmittedEvent", {})
    return None


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("wl") / "seed1_campaign2000.json"
    p.write_bytes(gzip.decompress((DATA / "seed1_campaign2000.json.gz").read_bytes()))
    return p


@pytest.mark.parametrize("rec", RECS, ids=[r["options"]["queue-policy"] for r in RECS])
def test_batprotocol_driver_kills_and_starts_as_the_v4_driver_did_under_batsim_4(rec, workload):
    """Fed the real Batsim 4.2.1 run's events in batprotocol form, the
    batprotocol driver sends the same kills and starts, in the same replies,
    with one KillJobsEvent per reply, first."""
    msgs = Recorder.load(DATA / rec["file"])
    d = BatprotocolDriver(rec["options"], workload_files=[workload])
    d.handle(encode_init(FLAG_JSON, b"INIT"))
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    n = 0
    for (_, raw_in), (_, raw_out) in zip(msgs[0::2], msgs[1::2], strict=True):
        msg, want = json.loads(raw_in), json.loads(raw_out)
        events = msg["events"]
        if events[0]["type"] == "SIMULATION_BEGINS":
            res = events[0]["data"]["compute_resources"]
            begins = {
                "computation_host_number": len(res),
                "computation_hosts": [
                    {"id": h["id"], "name": h["name"], "properties": [], "core_count": 1} for h in res
                ],
                "workloads": [{"name": "w0", "filename": "/elsewhere/seed1_campaign2000.json"}],
                "profiles": [],
            }
            got = out(d.handle(m(msg["now"], (0.0, "SimulationBeginsEvent", begins))))
        elif events[0]["type"] == "SIMULATION_ENDS":
            got = out(d.handle(m(msg["now"], (msg["now"], "SimulationEndsEvent", {}))))
        else:
            evs = [e for e in map(transcode, events) if e is not None]
            got = out(d.handle(m(msg["now"], *evs)))
        kills = [e["event"]["job_ids"] for e in got["events"] if e["event_type"] == "KillJobsEvent"]
        want_kills = [e["data"]["job_ids"] for e in want["events"] if e["type"] == "KILL_JOB"]
        assert kills == want_kills
        assert kinds(got)[: len(kills)] == ["KillJobsEvent"] * len(kills)
        starts = [
            (e["event"]["job_id"], e["event"]["allocation"]["host_allocation"])
            for e in got["events"]
            if e["event_type"] == "ExecuteJobEvent"
        ]
        want_starts = [
            (e["data"]["job_id"], e["data"]["alloc"].replace(" ", ","))
            for e in want["events"]
            if e["type"] == "EXECUTE_JOB"
        ]
        assert starts == want_starts, f"reply to message at {msg['now']}"
        n += sum(map(len, kills))
    assert d.finished and n == rec["batsim_out_jobs"]["COMPLETED_KILLED"]
