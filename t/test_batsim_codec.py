"""Batsim 3/4 JSON codec: envelope rules, events, interval sets."""

from __future__ import annotations

import json

import pytest

from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.batsim.intervals import format_intervals, parse_intervals
from fluxsched_py.batsim.v4 import MessageDecoder, encode_message, execute_job, parse_job
from fluxsched_py.ids import IdSet


def msg(now, *events):
    return json.dumps({"now": now, "events": [{"timestamp": t, "type": ty, "data": d} for t, ty, d in events]})


def test_interval_sets_accept_space_and_comma_separators():
    assert parse_intervals("0-3 7 9-10") == IdSet.parse("0-3,7,9-10")
    assert parse_intervals("0-3,7") == IdSet.parse("0-3,7")
    assert format_intervals(IdSet.parse("0-3,7,9-10")) == "0-3 7 9-10"
    assert format_intervals(IdSet.parse("0-3,7"), sep=",") == "0-3,7"


@pytest.mark.parametrize("text", ["0-", "a", "3-1", None])
def test_bad_interval_sets_are_protocol_errors(text):
    with pytest.raises(ProtocolError):
        parse_intervals(text)


def test_decoder_returns_events_in_order():
    d = MessageDecoder()
    now, events = d.decode(msg(10.0, (5.0, "JOB_SUBMITTED", {"job_id": "w0!1"}), (10.0, "REQUESTED_CALL", {})))
    assert now == 10.0
    assert [e.type for e in events] == ["JOB_SUBMITTED", "REQUESTED_CALL"]


def test_trailing_nul_is_tolerated():
    now, events = MessageDecoder().decode(msg(1.0).encode() + b"\0")
    assert now == 1.0 and events == []


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[]", "JSON object"),
        (json.dumps({"events": []}), "no 'now'"),
        (json.dumps({"now": 1, "events": {}}), "'events' must be an array"),
        (json.dumps({"now": "x", "events": []}), "'now' must be a finite number"),
        (msg(1.0, (2.0, "JOB_SUBMITTED", {})), "after now"),
        (msg(5.0, (3.0, "REQUESTED_CALL", {}), (2.0, "REQUESTED_CALL", {})), "before the previous"),
        (msg(5.0, (3.0, "BOGUS_EVENT", {})), "unknown type 'BOGUS_EVENT'"),
        (json.dumps({"now": 1, "events": [{"timestamp": 1, "type": "JOB_COMPLETED"}]}), "no 'data' object"),
    ],
)
def test_envelope_violations_are_protocol_errors(raw, reason):
    with pytest.raises(ProtocolError, match=reason):
        MessageDecoder().decode(raw)


def test_time_never_goes_backwards_between_messages():
    d = MessageDecoder()
    d.decode(msg(10.0))
    with pytest.raises(ProtocolError, match="backwards"):
        d.decode(msg(9.0))


def test_job_submitted_parses_res_and_walltime():
    _, (ev,) = MessageDecoder().decode(
        msg(3.0, (3.0, "JOB_SUBMITTED", {"job_id": "w0!7", "job": {"id": "w0!7", "res": 4, "walltime": 120.5}}))
    )
    job = parse_job(ev)
    assert (job.id, job.res, job.walltime, job.subtime) == ("w0!7", 4, 120.5, 3.0)


@pytest.mark.parametrize("walltime", [None, -1])
def test_missing_or_negative_walltime_means_unlimited(walltime):
    job = {"id": "w0!1", "res": 1} | ({} if walltime is None else {"walltime": walltime})
    _, (ev,) = MessageDecoder().decode(msg(0.0, (0.0, "JOB_SUBMITTED", {"job_id": "w0!1", "job": job})))
    assert parse_job(ev).walltime is None


@pytest.mark.parametrize("job", [{"res": 0}, {"res": "4"}, {}, None])
def test_bad_jobs_are_protocol_errors(job):
    data = {"job_id": "w0!1"} if job is None else {"job_id": "w0!1", "job": job}
    _, (ev,) = MessageDecoder().decode(msg(0.0, (0.0, "JOB_SUBMITTED", data)))
    with pytest.raises(ProtocolError, match="w0!1"):
        parse_job(ev)


def test_replies_encode_interval_set_allocations():
    out = json.loads(encode_message(5.0, [execute_job(5.0, "w0!1", IdSet.parse("0-3,7"))]))
    assert out == {
        "now": 5.0,
        "events": [{"timestamp": 5.0, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "0-3 7"}}],
    }


def test_job_submitted_uses_the_forwarded_subtime_for_queue_order():
    # Batsim 4 delivers a submission ~0.6 ms after the workload's subtime, which it forwards.
    job = {"id": "w0!0", "res": 8, "walltime": 300, "subtime": 57.245384}
    _, (ev,) = MessageDecoder().decode(msg(57.245984, (57.245984, "JOB_SUBMITTED", {"job_id": "w0!0", "job": job})))
    assert parse_job(ev).subtime == 57.245384
