"""The batprotocol driver, driven from traffic recorded against a real Batsim 5.

``t/data/batsim/batprotocol/MANIFEST.json`` says where each recording comes
from: Batsim commit 3bb38700 (batprotocol era, JSON mode), the command
lines, the workload slice and the queue policy.  Every ZeroMQ message of the
run is there, both directions, in order: the binary init frame, its empty
reply, then NUL-terminated JSON.

* Fed Batsim's messages, the driver sends the very bytes it sent during the
  real run, which Batsim accepted (same decisions, allocations, times).
* The run completed every job (or rejected the too-big ones) and ended with
  an empty reply; every start time equals the offline replay's within 0.1 s
  (DESIGN.md, "Schedule quality").
* The same workload slice on the same hosts under the real Batsim 4.2.1
  (``t/data/batsim/v4-*``) got the same decisions, in the same order.
* Over a real ZeroMQ socket, ``fluxsched-py batsim --protocol batprotocol``
  answers the recorded Batsim side identically and exits 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.batsim.batprotocol import BatprotocolDriver
from fluxsched_py.batsim.cli import Recorder
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.engine import EngineOptions
from t.batsim_recordings import (
    BATSIM_DATA,
    assert_every_job_ran,
    assert_starts_equal_replay,
    batsim_side,
    message_pairs,
    plain_workloads,
    recordings,
    workload_job_number,
)

DATA = BATSIM_DATA / "batprotocol"
RECORDINGS, IDS = recordings(DATA)


@pytest.fixture(scope="module")
def workloads(tmp_path_factory) -> dict[str, Path]:
    return plain_workloads(DATA, RECORDINGS, tmp_path_factory.mktemp("workloads"))


def load(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def events(raw: bytes) -> tuple[float, list[dict]]:
    assert raw.endswith(b"\0"), "batprotocol JSON messages are NUL-terminated, both ways"
    msg = json.loads(raw[:-1])
    return msg["now"], msg["events"]


def decisions(pairs: list[tuple[bytes, bytes]]) -> list[tuple[float, str, str, frozenset[int] | None]]:
    out = []
    for _, reply in pairs[1:]:
        now, evs = events(reply)
        for e in evs:
            if e["event_type"] == "ExecuteJobEvent":
                alloc = frozenset(parse_intervals(e["event"]["allocation"]["host_allocation"]))
                out.append((now, "execute", e["event"]["job_id"], alloc))
            elif e["event_type"] == "RejectJobEvent":
                out.append((now, "reject", e["event"]["job_id"], None))
    return out


def _without_version(reply: bytes) -> bytes:
    # The hello names this package's version and commit, which move on; nothing else may.
    now, evs = events(reply)
    for e in evs:
        if e["event_type"] == "EDCHelloEvent":
            e["event"]["decision_component_version"] = e["event"]["decision_component_commit"] = "*"
    return json.dumps({"now": now, "events": evs}).encode()


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_batprotocol_driver_sends_the_bytes_batsim_accepted(rec, workloads):
    d = BatprotocolDriver(EngineOptions.parse(rec["options"]), workload_files=[workloads[rec["file"]]])
    pairs = load(rec)
    init, init_reply = pairs[0]
    assert init == (2).to_bytes(4, "little") + (4).to_bytes(4, "little") + b"INIT" and init_reply == b""
    assert d.handle(init) == b""
    hello, hello_reply = pairs[1]
    assert _without_version(d.handle(hello)) == _without_version(hello_reply)
    for i, (msg, reply) in enumerate(pairs[2:], 2):
        assert d.handle(msg) == reply, f"reply {i} differs"
    assert d.finished


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_the_real_run_completed_every_job_and_ended_with_an_empty_reply(rec):
    pairs = load(rec)
    submitted, completed, kinds = set(), set(), set()
    for msg, _ in pairs[1:]:
        for e in events(msg)[1]:
            kinds.add(e["event_type"])
            if e["event_type"] == "JobSubmittedEvent":
                submitted.add(e["event"]["job_id"])
            elif e["event_type"] == "JobCompletedEvent":
                assert e["event"]["state"] == "COMPLETED_SUCCESSFULLY"
                completed.add(e["event"]["job_id"])
    assert_every_job_ran(rec, submitted, completed, decisions(pairs))
    assert "AllStaticJobsHaveBeenSubmittedEvent" in kinds
    last_in, last_out = pairs[-1]
    assert [e["event_type"] for e in events(last_in)[1]] == ["SimulationEndsEvent"]
    assert events(last_out)[1] == []


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_start_times_under_real_batsim5_equal_the_offline_replay(rec, workloads):
    assert_starts_equal_replay(rec, workloads[rec["file"]], decisions(load(rec)), workload_job_number)


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if "v4_twin" in r], ids=lambda r: r["file"])
def test_real_batsim5_and_real_batsim4_runs_got_the_same_decisions(rec):
    v4 = Recorder.load(DATA / rec["v4_twin"])
    want = []
    for direction, raw in v4:
        if direction != "out":
            continue
        reply = json.loads(raw)
        for e in reply["events"]:
            if e["type"] == "EXECUTE_JOB":
                want.append(
                    (reply["now"], "execute", e["data"]["job_id"], frozenset(parse_intervals(e["data"]["alloc"])))
                )
            elif e["type"] == "REJECT_JOB":
                want.append((reply["now"], "reject", e["data"]["job_id"], None))
    got = decisions(load(rec))
    assert [g[1:] for g in got] == [w[1:] for w in want]
    # Batsim 4 prints times with 6 decimals; Batsim 5 with all of a double's digits.
    assert max(abs(g[0] - w[0]) for g, w in zip(got, want, strict=True)) < 1e-6


def test_cli_over_zmq_answers_the_recorded_batsim5_side_and_exits_0(tmp_path, workloads):
    pytest.importorskip("zmq")
    rec = next(r for r in RECORDINGS if r.get("rejected"))
    endpoint = f"ipc://{tmp_path}/edc.sock"
    opts = [f"--{k}={v}" for k, v in rec["options"].items()]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", "batprotocol", "--socket", endpoint]
        + ["--workload", str(workloads[rec["file"]]), "--timeout", "10", "-q", *opts]
        + ["--record", str(tmp_path / "rec.jsonl")],
        stderr=subprocess.PIPE,
        text=True,
    )
    pairs = load(rec)
    with batsim_side(endpoint) as sock:
        for i, (msg, reply) in enumerate(pairs):
            sock.send(msg)
            got = sock.recv()
            if i == 1:
                assert _without_version(got) == _without_version(reply)
            else:
                assert got == reply, f"reply {i} differs"
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    # Recorded like the committed file: init frame as hex, NULs kept.
    again = Recorder.load(tmp_path / "rec.jsonl")
    assert [raw for d, raw in again if d == "in"] == [m for m, _ in pairs]
