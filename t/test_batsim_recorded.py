"""The main flow, driven from traffic recorded against a real Batsim 4.2.

``t/data/batsim/MANIFEST.json`` says where each recording comes from (Batsim
version, command line, workload slice, queue policy).  Each recording holds
both directions as JSON lines (``fluxsched-py batsim --record``).

* The v4 driver, fed Batsim's messages, must send the very replies it sent
  during the real run (same decisions, same allocations, same times).
* The run completed every job, and every start time equals the offline
  replay's for the same workload and node count (within 0.1 s; DESIGN.md,
  "Schedule quality").
* The batprotocol and legacy drivers, fed the same real event sequence
  transcoded into their protocols, make the same decisions.  For
  batprotocol this complements the traffic recorded from a real Batsim 5
  (``t/test_batsim_batprotocol_recorded.py``): it also covers profiles
  forwarded in ``SimulationBeginsEvent``, which Batsim 3bb38700 cannot do.
  For the legacy protocol it complements the traffic recorded from a real
  Batsim 2.0 (``t/test_batsim_legacy_recorded.py``).
* Over a real ZeroMQ socket, the CLI answers the recorded Batsim side
  identically and exits 0.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fluxsched_py.batsim.batprotocol import BatprotocolDriver
from fluxsched_py.batsim.cli import make_driver
from fluxsched_py.batsim.driver import Host
from fluxsched_py.batsim.legacy import LegacyDriver, load_job_table
from fluxsched_py.engine import EngineOptions
from t.batsim_recordings import (
    BATSIM_DATA,
    assert_every_job_ran,
    assert_starts_equal_replay,
    batsim_side,
    decisions_bp,
    decisions_legacy,
    manifest,
    message_pairs,
    to_batprotocol,
    to_legacy,
    v4_decisions,
    workload_job_number,
)

DATA = BATSIM_DATA
RECORDINGS = manifest(DATA)["recordings"]
IDS = [r["file"] for r in RECORDINGS]


def load(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_v4_driver_sends_the_recorded_replies(rec):
    driver = make_driver("v4", EngineOptions.parse(rec["options"]))
    for i, (msg, reply) in enumerate(load(rec)):
        assert json.loads(driver.handle(msg)) == json.loads(reply), f"reply {i} differs"
    assert driver.finished


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_the_recorded_run_completed_every_job_and_ended_with_an_empty_reply(rec):
    pairs = load(rec)
    submitted, completed = set(), set()
    for msg, _ in pairs:
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_SUBMITTED":
                submitted.add(e["data"]["job_id"])
            elif e["type"] == "JOB_COMPLETED":
                completed.add(e["data"]["job_id"])
    assert_every_job_ran(rec, submitted, completed, v4_decisions(pairs))
    last_in, last_out = pairs[-1]
    assert [e["type"] for e in json.loads(last_in)["events"]][-1] == "SIMULATION_ENDS"
    assert json.loads(last_out)["events"] == []


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_start_times_under_batsim_equal_the_offline_replay(rec):
    assert_starts_equal_replay(rec, DATA / rec["workload"], v4_decisions(load(rec)), workload_job_number)


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_batprotocol_driver_decides_like_v4_on_the_same_real_events(rec):
    pairs = load(rec)
    d = BatprotocolDriver(EngineOptions.parse(rec["options"]))
    replies = [d.handle(m) for m in to_batprotocol(pairs)]
    assert d.finished
    assert decisions_bp(replies) == v4_decisions(pairs)


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_legacy_driver_decides_like_v4_on_the_same_real_events(rec):
    pairs = load(rec)
    table = load_job_table([str(DATA / rec["workload"])])
    hosts = [Host(i, f"h{i}") for i in range(rec["nodes"])]  # like --nodes N
    d = LegacyDriver(EngineOptions.parse(rec["options"]), table, hosts)
    got = decisions_legacy([d.handle(m) for m in to_legacy(pairs)])
    assert d.finished
    want = [(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs)]
    assert got == want


def test_cli_over_zmq_answers_the_recorded_batsim_side_and_exits_0(tmp_path):
    pytest.importorskip("zmq")
    rec = RECORDINGS[0]
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    opts = [f"--{k}={v}" for k, v in rec["options"].items()]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", endpoint, "--timeout", "10", "-q", *opts],
        stderr=subprocess.PIPE,
        text=True,
    )
    with batsim_side(endpoint) as sock:
        for msg, reply in load(rec):
            sock.send(msg)
            assert json.loads(sock.recv()) == json.loads(reply)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
