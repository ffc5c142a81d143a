"""``fluxsched-py batsim`` over real sockets, against scripted fake Batsims.

The issue allows scripted fakes for the error cases only: garbage JSON, a
missing ``data`` field, a job id never submitted, out-of-order timestamps,
truncated frames and a peer that disappears.  Each must end the process with
a clear logged error and a non-zero status, never a hang.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

zmq = pytest.importorskip("zmq")

BEGINS = {
    "now": 0.0,
    "events": [
        {
            "timestamp": 0.0,
            "type": "SIMULATION_BEGINS",
            "data": {
                "nb_resources": 2,
                "nb_compute_resources": 2,
                "config": {"redis-enabled": False},
                "compute_resources": [{"id": i, "name": f"n{i}", "state": "idle", "properties": {}} for i in range(2)],
                "workloads": {"w0": "w0.json"},
            },
        }
    ],
}


def start(tmp_path: Path, *args: str, timeout: float = 5.0) -> tuple[subprocess.Popen, str]:
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", endpoint, "--timeout", str(timeout), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, endpoint


def finish(proc: subprocess.Popen, limit: float = 20.0) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("fluxsched-py batsim hung")
    return proc.returncode, err


class FakeBatsim:
    """A REQ socket that speaks only what a test scripts."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, 10000)
        self.sock.connect(endpoint)

    def ask(self, message: dict | bytes) -> dict:
        self.sock.send(message if isinstance(message, bytes) else json.dumps(message).encode())
        return json.loads(self.sock.recv())

    def tell(self, message: dict | bytes) -> None:
        self.sock.send(message if isinstance(message, bytes) else json.dumps(message).encode())

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


def ev(t, ty, data):
    return {"timestamp": t, "type": ty, "data": data}


def submitted(t, jid, res=1):
    return ev(t, "JOB_SUBMITTED", {"job_id": jid, "job": {"id": jid, "res": res, "walltime": 10.0, "profile": "p"}})


def test_a_short_simulation_ends_with_status_0(tmp_path):
    proc, ep = start(tmp_path, "--record", str(tmp_path / "rec.jsonl"), "--stats", str(tmp_path / "stats.json"))
    b = FakeBatsim(ep)
    try:
        assert b.ask(BEGINS) == {"now": 0.0, "events": []}
        r = b.ask({"now": 1.0, "events": [submitted(1.0, "w0!1", 2)]})
        assert r["events"][0]["type"] == "EXECUTE_JOB"
        b.ask({"now": 11.0, "events": [ev(11.0, "JOB_COMPLETED", {"job_id": "w0!1", "job_state": "X"})]})
        assert b.ask({"now": 11.0, "events": [ev(11.0, "SIMULATION_ENDS", {})]}) == {"now": 11.0, "events": []}
    finally:
        b.close()
    status, err = finish(proc)
    assert status == 0, err
    lines = (tmp_path / "rec.jsonl").read_text().splitlines()
    assert [json.loads(x)["dir"] for x in lines] == ["in", "out"] * 4
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["round_trip"]["messages"] == 4 and stats["jobs"]["completed"] == 1


@pytest.mark.parametrize(
    "bad, reason",
    [
        (b"{this is not json", "not valid JSON"),
        (json.dumps(BEGINS).encode()[:57], "not valid JSON"),  # a frame cut short
        ({"now": 1.0, "events": [{"timestamp": 1.0, "type": "JOB_COMPLETED"}]}, "no 'data' object"),
        ({"now": 1.0, "events": [ev(1.0, "JOB_COMPLETED", {"job_id": "w0!404"})]}, "never submitted"),
        ({"now": 2.0, "events": [submitted(2.0, "w0!1"), submitted(1.0, "w0!2")]}, "before the previous"),
        ({"now": 1.0, "events": [ev(1.0, "MAKE_COFFEE", {})]}, "unknown type 'MAKE_COFFEE'"),
    ],
)
def test_bad_messages_exit_non_zero_with_a_clear_error(tmp_path, bad, reason):
    proc, ep = start(tmp_path)
    b = FakeBatsim(ep)
    try:
        if not (isinstance(bad, bytes) and bad.startswith(b'{"now"')):
            b.ask(BEGINS)
        b.tell(bad)
        status, err = finish(proc)
    finally:
        b.close()
    assert status == 1
    assert "protocol error" in err and reason in err


def test_a_peer_that_disappears_is_noticed(tmp_path):
    proc, ep = start(tmp_path, timeout=60.0)
    b = FakeBatsim(ep)
    b.ask(BEGINS)
    b.close()
    status, err = finish(proc)
    # noticed by the socket monitor ("disconnected"), not by the 60 s timeout (which says "within")
    assert status == 1 and "disconnected" in err and "within" not in err


def test_no_batsim_at_all_times_out(tmp_path):
    proc, _ = start(tmp_path, timeout=0.5)
    status, err = finish(proc)
    assert status == 1 and "no first message from Batsim within 0.5 s" in err


def test_options_are_checked_before_listening(tmp_path):
    proc, _ = start(tmp_path, "--workload", "x.json")
    status, err = finish(proc)
    assert status == 2 and "only for --protocol legacy" in err


def test_legacy_truncated_frame_is_an_error(tmp_path):
    path = str(tmp_path / "bat_socket")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"nb_res": 2, "jobs": [{"id": 1, "res": 1, "walltime": 5, "subtime": 0}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", "legacy", "--socket", path]
        + ["--workload", str(wl), "--timeout", "5"],
        stderr=subprocess.PIPE,
        text=True,
    )
    server.settimeout(10)
    conn, _ = server.accept()
    first = b"3:0.000000|0.000000:A"
    conn.sendall(struct.pack("=I", len(first)) + first)
    (n,) = struct.unpack("=I", conn.recv(4))
    assert conn.recv(n) == b"3:0.000000|0.000000:N"
    conn.sendall(struct.pack("=I", 100) + b"3:1.0|1.0:S:w!1")  # says 100 bytes, sends 15
    conn.close()
    server.close()
    status, err = finish(proc)
    assert status == 1 and "truncated frame" in err and "15 of 100" in err


def test_legacy_peer_that_closes_between_messages_is_an_error(tmp_path):
    path = str(tmp_path / "bat_socket")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"nb_res": 2, "jobs": [{"id": 1, "res": 1, "subtime": 0}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", "legacy", "--socket", path]
        + ["--workload", str(wl), "--timeout", "5"],
        stderr=subprocess.PIPE,
        text=True,
    )
    server.settimeout(10)
    conn, _ = server.accept()
    conn.close()
    server.close()
    status, err = finish(proc)
    assert status == 1 and "closed the connection before the simulation ended" in err


def test_a_bad_field_in_a_legacy_workload_is_one_line_naming_the_file_and_job(tmp_path):
    """The legacy driver reads a job's fields from ``--workload``: a bad one
    stops the command before the socket is opened, in one line."""
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"nb_res": 2, "jobs": [{"id": 7, "res": 1, "subtime": 0, "user": 3.5}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", "legacy", "--socket", str(tmp_path / "s")]
        + ["--workload", str(wl), "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(wl) in lines[0] and "job 7" in lines[0] and "'user'" in lines[0], lines[0]
