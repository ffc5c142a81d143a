"""The legacy text-protocol driver, driven from traffic recorded against a real legacy Batsim.

``t/data/batsim/legacy/MANIFEST.json`` says where each recording comes from:
Batsim commit d1e34905 (``batsim --version`` 2.0, January 2017, the last
Batsim before the switch to JSON over ZeroMQ) on SimGrid 3.15-DEVEL, with
Redis, the command lines, the workload slice and the queue policy.  Every
message of the run is there, both directions, in order (the 32-bit length
prefix of each frame is the byte length of the text).

* Fed Batsim's messages, the driver sends the very bytes it sent during the
  real run, which Batsim accepted.
* The run completed every job (or rejected the too-big ones) and ended with
  ``Z`` answered by ``N``; every start time equals the offline replay's
  within 0.1 s (DESIGN.md, "Schedule quality").
* The same workload slice on the same hosts under the real Batsim 4.2.1
  (``t/data/batsim/v4-*``) got the same decisions, in the same order.
* Over a real Unix socket, ``fluxsched-py batsim --protocol legacy`` answers
  the recorded Batsim side identically and exits 0.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.batsim.cli import Recorder
from fluxsched_py.batsim.driver import Host
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.batsim.legacy import LegacyDriver, load_job_table
from fluxsched_py.engine import EngineOptions
from t.batsim_recordings import (
    BATSIM_DATA,
    assert_every_job_ran,
    assert_starts_equal_replay,
    message_pairs,
    plain_workloads,
    recordings,
)

DATA = BATSIM_DATA / "legacy"
RECORDINGS, IDS = recordings(DATA)


@pytest.fixture(scope="module")
def workloads(tmp_path_factory) -> dict[str, Path]:
    return plain_workloads(DATA, RECORDINGS, tmp_path_factory.mktemp("workloads"))


def load(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def stamps(raw: bytes) -> tuple[float, list[tuple[float, str, str]]]:
    head, *events = raw.decode().split("|")
    version, now = head.split(":")
    assert version == "3"
    out = []
    for ev in events:
        t, stamp, *content = ev.split(":", 2)
        out.append((float(t), stamp, content[0] if content else ""))
    return float(now), out


def decisions(pairs: list[tuple[bytes, bytes]]) -> list[tuple[float, str, str, frozenset[int] | None]]:
    """``(now, kind, job number, hosts)``: Batsim 2.0 names the workload sha1(path)[:6], so jobs by number."""
    out = []
    for _, reply in pairs:
        now, evs = stamps(reply)
        for _, stamp, content in evs:
            if stamp == "J":
                for item in content.split(";"):
                    job, alloc = item.split("=")
                    out.append((now, "execute", job.rsplit("!", 1)[1], frozenset(parse_intervals(alloc))))
            elif stamp == "R":
                out.append((now, "reject", content.rsplit("!", 1)[1], None))
    return out


def driver(rec: dict, workload: Path) -> LegacyDriver:
    hosts = [Host(i, f"host{i}") for i in range(rec["nodes"])]  # as --nodes N
    return LegacyDriver(EngineOptions.parse(rec["options"]), load_job_table([str(workload)]), hosts)


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_legacy_driver_sends_the_bytes_batsim_accepted(rec, workloads):
    d = driver(rec, workloads[rec["file"]])
    for i, (msg, reply) in enumerate(load(rec)):
        assert d.handle(msg) == reply, f"reply {i} differs"
    assert d.finished


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_the_real_run_completed_every_job_and_ended_with_z(rec):
    pairs = load(rec)
    submitted, completed = set(), set()
    for msg, _ in pairs:
        for _, stamp, content in stamps(msg)[1]:
            if stamp == "S":
                submitted.add(content.rsplit("!", 1)[1])
            elif stamp == "C":
                completed.add(content.rsplit("!", 1)[1])
    assert_every_job_ran(rec, submitted, completed, decisions(pairs))
    assert stamps(pairs[0][0])[1] == [(0.0, "A", "")]
    last_in, last_out = pairs[-1]
    assert stamps(last_in)[1][-1][1] == "Z" and [s for _, s, _ in stamps(last_out)[1]] == ["N"]


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_start_times_under_real_legacy_batsim_equal_the_offline_replay(rec, workloads):
    assert_starts_equal_replay(rec, workloads[rec["file"]], decisions(load(rec)), int)


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if "v4_twin" in r], ids=lambda r: r["file"])
def test_real_legacy_batsim_and_real_batsim4_runs_got_the_same_decisions(rec):
    want = []
    for direction, raw in Recorder.load(DATA / rec["v4_twin"]):
        if direction != "out":
            continue
        reply = json.loads(raw)
        for e in reply["events"]:
            job = e["data"].get("job_id", "").rsplit("!", 1)[-1]
            if e["type"] == "EXECUTE_JOB":
                want.append((reply["now"], "execute", job, frozenset(parse_intervals(e["data"]["alloc"]))))
            elif e["type"] == "REJECT_JOB":
                want.append((reply["now"], "reject", job, None))
    got = decisions(load(rec))
    assert [g[1:] for g in got] == [w[1:] for w in want]
    # The two Batsims charge slightly different latencies per message.
    assert max(abs(g[0] - w[0]) for g, w in zip(got, want, strict=True)) < 0.01


def test_cli_over_a_unix_socket_answers_the_recorded_legacy_side_and_exits_0(tmp_path, workloads):
    rec = next(r for r in RECORDINGS if r.get("rejected"))
    path = str(tmp_path / "bat_socket")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(10)
    opts = [f"--{k}={v}" for k, v in rec["options"].items()]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", "legacy", "--socket", path, "-q"]
        + ["--workload", str(workloads[rec["file"]]), "--nodes", str(rec["nodes"]), "--timeout", "10", *opts],
        stderr=subprocess.PIPE,
        text=True,
    )
    conn, _ = server.accept()
    conn.settimeout(10)

    def recv_exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            assert chunk, "scheduler closed early"
            buf += chunk
        return buf

    try:
        for i, (msg, reply) in enumerate(load(rec)):
            conn.sendall(struct.pack("=I", len(msg)) + msg)
            (n,) = struct.unpack("=I", recv_exact(4))
            assert recv_exact(n) == reply, f"reply {i} differs"
    finally:
        conn.close()
        server.close()
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
