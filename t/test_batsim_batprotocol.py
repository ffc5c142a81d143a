"""Batsim 5 batprotocol, JSON mode: the handshake facts observed at Batsim 3bb38700 (DESIGN.md)."""

from __future__ import annotations

import json

import pytest

from fluxsched_py.batsim.batprotocol import (
    FLAG_BINARY,
    FLAG_JSON,
    BatprotocolDriver,
    decode_init,
    decode_message,
    encode_init,
    encode_message,
)
from fluxsched_py.batsim.errors import ProtocolError

HELLO = {"batprotocol_version": "0.1.0", "batsim_version": "5.0.0-rc1", "batsim_commit": "3bb38700"}


def m(now, *events):
    return encode_message(now, [{"timestamp": t, "event_type": ty, "event": e} for t, ty, e in events])


def out(raw):
    assert raw.endswith(b"\0"), "replies are NUL-terminated, like Batsim's messages"
    return json.loads(raw[:-1])


def hosts(n):
    return [
        {"id": i, "name": f"h{i}", "properties": [{"key": "role", "value": "compute"}], "core_count": 1}
        for i in range(n)
    ]


def started(n=4, sep=","):
    d = BatprotocolDriver(["queue-policy=easy", "policy=low"], host_allocation_sep=sep)
    assert d.handle(encode_init(FLAG_JSON, b"INIT")) == b""
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    begins = {"computation_host_number": n, "computation_hosts": hosts(n), "batsim_execution_context_json": "{}"}
    assert out(d.handle(m(0.0, (0.0, "SimulationBeginsEvent", begins)))) == {"now": 0.0, "events": []}
    return d


def job(t, jid, n, walltime=100.0, old_schema=False):
    j = {"walltime": walltime, "profile_id": "w0!p", "rigid": True}
    if old_schema:
        j |= {"computation_resource_request_type": "HostNumber", "computation_resource_request": {"host_number": n}}
    else:
        j["resource_request"] = n
    return (t, "JobSubmittedEvent", {"job_id": jid, "job": j, "submission_time": t})


def test_init_is_flags_size_data_and_gets_an_empty_reply():
    raw = encode_init(FLAG_JSON, b"my init")
    assert raw[:4] == (2).to_bytes(4, "little") and raw[4:8] == (7).to_bytes(4, "little")
    assert decode_init(raw) == (FLAG_JSON, b"my init")
    d = BatprotocolDriver()
    assert d.handle(raw) == b""
    assert d.init_data == b"my init"


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"\x02\x00\x00", "truncated init"),
        (encode_init(FLAG_JSON, b"abcdef")[:-2], "carries 4"),
        (encode_init(FLAG_BINARY, b""), "flatbuffers"),
        (encode_init(7, b""), "expected 0x2"),
    ],
)
def test_bad_init_messages_are_protocol_errors(raw, reason):
    with pytest.raises(ProtocolError, match=reason):
        BatprotocolDriver().handle(raw)


def test_hello_answer_carries_commit_and_requested_features():
    d = BatprotocolDriver()
    d.handle(encode_init(FLAG_JSON, b""))
    r = out(d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO))))
    (hello,) = r["events"]
    assert hello["event_type"] == "EDCHelloEvent"
    e = hello["event"]
    assert e["batprotocol_version"] == "0.1.0"
    assert e["decision_component_name"] == "fluxsched-py"
    assert isinstance(e["decision_component_commit"], str)
    assert e["requested_simulation_features"]["dynamic_registration"] is False
    assert set(e) >= {"decision_component_version", "scheduling_constraints"}


def test_hello_asks_for_no_forwarding_batsim_3bb38700_aborts_on_it():
    # Real Batsim 3bb38700: "Forwarding profiles simulation begins is unimplemented" (server.cpp), abort.
    d = BatprotocolDriver()
    d.handle(encode_init(FLAG_JSON, b""))
    (hello,) = out(d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO))))["events"]
    features = hello["event"]["requested_simulation_features"]
    assert {k: v for k, v in features.items() if k.startswith("forward_")} == dict.fromkeys(
        [
            "forward_profiles_on_job_submission",
            "forward_profiles_on_jobs_killed",
            "forward_profiles_on_simulation_begins",
            "forward_unknown_external_events",
        ],
        False,
    )


def _begins_naming(d, filename, n=4):
    begins = {
        "computation_host_number": n,
        "computation_hosts": hosts(n),
        "batsim_execution_context_json": "{}",
        "workloads": [{"name": "w0", "filename": str(filename)}],
        "profiles": [],
    }
    d.handle(m(0.0, (0.0, "SimulationBeginsEvent", begins)))


WORKLOAD = {"nb_res": 4, "jobs": [], "profiles": {"p": {"type": "delay", "delay": 10.0}, "q": {"type": "parallel"}}}


def test_run_times_come_from_the_workload_file_batsim_names(tmp_path):
    (tmp_path / "wl.json").write_text(json.dumps(WORKLOAD))
    d = BatprotocolDriver()
    d.handle(encode_init(FLAG_JSON, b""))
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    _begins_naming(d, tmp_path / "wl.json")
    d.handle(m(1.0, job(1.0, "w0!1", 1)))  # profile_id "w0!p", as job() writes it
    j = {"resource_request": 1, "walltime": 100.0, "profile_id": "p"}  # what Batsim 3bb38700 sends
    d.handle(m(1.0, (1.0, "JobSubmittedEvent", {"job_id": "w0!2", "job": j, "submission_time": 1.0})))
    assert d.scheduler.jobs["w0!1"].runtime == 10.0 and d.scheduler.jobs["w0!2"].runtime == 10.0


def test_a_workload_file_given_by_base_name_is_preferred(tmp_path):
    (tmp_path / "wl.json").write_text(json.dumps(WORKLOAD))
    d = BatprotocolDriver(workload_files=[tmp_path / "wl.json"])
    d.handle(encode_init(FLAG_JSON, b""))
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    _begins_naming(d, "/elsewhere/on/batsim/host/wl.json")
    d.handle(m(1.0, job(1.0, "w0!1", 1)))
    assert d.scheduler.jobs["w0!1"].runtime == 10.0


def test_an_unreadable_workload_file_only_costs_the_run_times(tmp_path, caplog):
    d = BatprotocolDriver()
    d.handle(encode_init(FLAG_JSON, b""))
    d.handle(m(0.0, (0.0, "BatsimHelloEvent", HELLO)))
    _begins_naming(d, tmp_path / "missing.json")
    assert "cannot read its profiles" in caplog.text
    r = out(d.handle(m(1.0, job(1.0, "w0!1", 1))))
    assert d.scheduler.jobs["w0!1"].runtime is None and r["events"][0]["event_type"] == "ExecuteJobEvent"


def test_first_event_must_be_the_hello():
    d = BatprotocolDriver()
    d.handle(encode_init(FLAG_JSON, b""))
    with pytest.raises(ProtocolError, match="BatsimHelloEvent first"):
        d.handle(m(0.0, (0.0, "SimulationBeginsEvent", {})))


def test_execute_job_event_has_a_comma_separated_host_allocation():
    d = started(4)
    d.handle(m(1.0, job(1.0, "w0!1", 1), job(1.0, "w0!2", 1), job(1.0, "w0!3", 1)))
    d.handle(m(2.0, (2.0, "JobCompletedEvent", {"job_id": "w0!2", "state": "COMPLETED_SUCCESSFULLY"})))
    r = out(d.handle(m(3.0, job(3.0, "w0!4", 2))))
    (ex,) = r["events"]
    assert ex["event_type"] == "ExecuteJobEvent"
    assert ex["event"]["job_id"] == "w0!4"
    assert ex["event"]["allocation"] == {
        "host_allocation": "1,3",
        "executor_placement_type": "PredefinedExecutorPlacementStrategyWrapper",
        "executor_placement": {"strategy": "SpreadOverHostsFirst"},
    }
    assert ex["event"]["profile_allocation_override"] == [] and ex["event"]["storage_placement"] == []


def test_space_separator_for_later_release_candidates():
    d = started(4, sep=" ")
    d.handle(m(1.0, job(1.0, "w0!1", 1), job(1.0, "w0!2", 1), job(1.0, "w0!3", 1)))
    d.handle(m(2.0, (2.0, "JobCompletedEvent", {"job_id": "w0!2"})))
    r = out(d.handle(m(3.0, job(3.0, "w0!4", 2))))
    assert r["events"][0]["event"]["allocation"]["host_allocation"] == "1 3"


def test_older_schema_host_number_request_is_accepted():
    d = started(4)
    r = out(d.handle(m(1.0, job(1.0, "w0!1", 3, old_schema=True))))
    assert r["events"][0]["event"]["allocation"]["host_allocation"] == "0-2"


def test_infeasible_job_is_rejected():
    d = started(2)
    r = out(d.handle(m(1.0, job(1.0, "w0!1", 3))))
    assert r["events"] == [{"timestamp": 1.0, "event_type": "RejectJobEvent", "event": {"job_id": "w0!1"}}]


def test_jobs_killed_and_all_static_jobs_submitted():
    d = started(2)
    d.handle(m(1.0, job(1.0, "w0!1", 2), job(1.0, "w0!2", 2)))
    d.handle(m(1.0, (1.0, "AllStaticJobsHaveBeenSubmittedEvent", {})))
    assert d.scheduler.no_more_static_jobs
    r = out(d.handle(m(2.0, (2.0, "JobsKilledEvent", {"job_ids": ["w0!1"], "progresses": []}))))
    assert [e["event_type"] for e in r["events"]] == ["ExecuteJobEvent"]


def test_simulation_ends_gets_an_empty_nul_terminated_reply():
    d = started(2)
    assert d.handle(m(5.0, (5.0, "SimulationEndsEvent", {}))) == b'{"now":5.0,"events":[]}\0'
    assert d.finished


def test_call_me_later_is_a_one_shot_in_whole_milliseconds():
    from fluxsched_py.batsim.driver import CallMeLater

    d = started(2)
    d.scheduler.decide = lambda now: [CallMeLater(12.3456)]
    r = out(d.handle(m(1.0)))
    (e,) = r["events"]
    assert e["event_type"] == "CallMeLaterEvent"
    assert e["event"]["when_type"] == "OneShot"
    assert e["event"]["when"] == {"time": 12346, "time_unit": "Millisecond"}
    assert e["event"]["call_me_later_id"]


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"{garbage\0", "not valid JSON"),
        (encode_message(1.0, [{"timestamp": 1.0, "event_type": "WhatEvent", "event": {}}]), "unknown event_type"),
        (encode_message(1.0, [{"timestamp": 2.0, "event_type": "JobCompletedEvent", "event": {}}]), "after now"),
        (m(1.0, (1.0, "JobCompletedEvent", {"job_id": "w0!99"})), "never submitted"),
        (m(1.0, (1.0, "JobSubmittedEvent", {"job_id": "w0!1", "job": {}})), "resource_request"),
    ],
)
def test_bad_messages_are_protocol_errors(raw, reason):
    d = started(2)
    with pytest.raises(ProtocolError, match=reason):
        d.handle(raw)


def test_decoder_checks_the_envelope_and_time_order():
    assert decode_message(m(3.0, (1.0, "RequestedCallEvent", {"call_me_later_id": "x"})))[0] == 3.0
    with pytest.raises(ProtocolError, match="backwards"):
        decode_message(m(1.0), last_now=2.0)
    with pytest.raises(ProtocolError, match="before the previous"):
        decode_message(m(3.0, (2.0, "RequestedCallEvent", {}), (1.0, "RequestedCallEvent", {})))
