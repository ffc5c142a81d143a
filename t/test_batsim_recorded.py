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

from fluxsched_py.batsim.batprotocol import BatprotocolDriver, encode_init
from fluxsched_py.batsim.batprotocol import encode_message as bp_encode
from fluxsched_py.batsim.cli import make_driver
from fluxsched_py.batsim.driver import Host
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.batsim.legacy import LegacyDriver, load_job_table
from fluxsched_py.engine import EngineOptions
from t.batsim_recordings import (
    BATSIM_DATA,
    assert_every_job_ran,
    assert_starts_equal_replay,
    batsim_side,
    manifest,
    message_pairs,
    workload_job_number,
)

DATA = BATSIM_DATA
RECORDINGS = manifest(DATA)["recordings"]
IDS = [r["file"] for r in RECORDINGS]


def load(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def v4_decisions(pairs: list[tuple[bytes, bytes]]) -> list[tuple[float, str, str, frozenset[int] | None]]:
    out = []
    for _, reply in pairs:
        r = json.loads(reply)
        for e in r["events"]:
            if e["type"] == "EXECUTE_JOB":
                out.append((r["now"], "execute", e["data"]["job_id"], frozenset(parse_intervals(e["data"]["alloc"]))))
            elif e["type"] == "REJECT_JOB":
                out.append((r["now"], "reject", e["data"]["job_id"], None))
    return out


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


def to_batprotocol(pairs: list[tuple[bytes, bytes]], nodes: int) -> list[bytes]:
    """Batsim's side of a recorded v4 session, in batprotocol JSON words."""
    out = [
        encode_init(2, b""),
        bp_encode(0.0, [{"timestamp": 0.0, "event_type": "BatsimHelloEvent", "event": {"batprotocol_version": "x"}}]),
    ]
    for msg, _ in pairs:
        m = json.loads(msg)
        evs = []
        for e in m["events"]:
            t, d = e["timestamp"], e["data"]
            if e["type"] == "SIMULATION_BEGINS":
                hosts = [
                    {
                        "id": h["id"],
                        "name": h["name"],
                        "properties": [{"key": k, "value": str(v)} for k, v in h.get("properties", {}).items()],
                    }
                    for h in d["compute_resources"]
                ]
                profiles = [
                    {"id": f"{wl}!{name}", "profile_type": "DelayProfile", "profile": {"delay": p["delay"]}}
                    for wl, profs in d.get("profiles", {}).items()
                    for name, p in profs.items()
                    if p.get("type") == "delay"
                ]
                ev = (
                    "SimulationBeginsEvent",
                    {"computation_host_number": len(hosts), "computation_hosts": hosts, "profiles": profiles},
                )
            elif e["type"] == "JOB_SUBMITTED":
                job = {
                    "resource_request": d["job"]["res"],
                    "walltime": d["job"].get("walltime", -1),
                    "profile_id": d["job"]["profile"],
                }
                ev = ("JobSubmittedEvent", {"job_id": d["job_id"], "job": job, "submission_time": t})
            elif e["type"] == "JOB_COMPLETED":
                ev = ("JobCompletedEvent", {"job_id": d["job_id"], "state": d.get("job_state")})
            elif e["type"] == "NOTIFY":
                ev = ("AllStaticJobsHaveBeenSubmittedEvent", {})
            elif e["type"] == "REQUESTED_CALL":
                ev = ("RequestedCallEvent", {"call_me_later_id": "x"})
            elif e["type"] == "SIMULATION_ENDS":
                ev = ("SimulationEndsEvent", {})
            else:  # pragma: no cover - not in the recordings
                raise AssertionError(e["type"])
            evs.append({"timestamp": t, "event_type": ev[0], "event": ev[1]})
        out.append(bp_encode(m["now"], evs))
    return out


def to_legacy(pairs: list[tuple[bytes, bytes]]) -> list[bytes]:
    """Batsim's side of a recorded v4 session, in legacy text-protocol words (``repr`` keeps times exact)."""
    stamps = {"SIMULATION_BEGINS": "A", "JOB_SUBMITTED": "S", "JOB_COMPLETED": "C", "SIMULATION_ENDS": "Z"}
    out = []
    for msg, _ in pairs:
        m = json.loads(msg)
        parts = [f"3:{m['now']!r}"]
        for e in m["events"]:
            stamp = stamps.get(e["type"], "N")
            job = e["data"].get("job_id")
            parts.append(f"{e['timestamp']!r}:{stamp}" + (f":{job}" if stamp in "SC" else ""))
        out.append("|".join(parts).encode())
    return out


def _decisions_bp(replies: list[bytes]) -> list[tuple[float, str, str, frozenset[int] | None]]:
    out = []
    for raw in replies:
        if not raw:
            continue
        r = json.loads(raw[:-1])
        for e in r["events"]:
            if e["event_type"] == "ExecuteJobEvent":
                alloc = frozenset(parse_intervals(e["event"]["allocation"]["host_allocation"]))
                out.append((r["now"], "execute", e["event"]["job_id"], alloc))
            elif e["event_type"] == "RejectJobEvent":
                out.append((r["now"], "reject", e["event"]["job_id"], None))
    return out


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_batprotocol_driver_decides_like_v4_on_the_same_real_events(rec):
    pairs = load(rec)
    d = BatprotocolDriver(EngineOptions.parse(rec["options"]))
    replies = [d.handle(m) for m in to_batprotocol(pairs, rec["nodes"])]
    assert d.finished
    assert _decisions_bp(replies) == v4_decisions(pairs)


@pytest.mark.parametrize("rec", RECORDINGS, ids=IDS)
def test_legacy_driver_decides_like_v4_on_the_same_real_events(rec):
    pairs = load(rec)
    table = load_job_table([str(DATA / rec["workload"])])
    hosts = [Host(i, f"h{i}") for i in range(rec["nodes"])]  # like --nodes N
    d = LegacyDriver(EngineOptions.parse(rec["options"]), table, hosts)
    got = []
    for m in to_legacy(pairs):
        reply = d.handle(m).decode()
        head, *events = reply.split("|")
        now = float(head.split(":")[1])
        for ev in events:
            _, stamp, *content = ev.split(":", 2)
            if stamp == "J":
                for item in content[0].split(";"):
                    job, alloc = item.split("=")
                    got.append((now, "execute", job, frozenset(parse_intervals(alloc))))
            elif stamp == "R":
                got.append((now, "reject", content[0], None))
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
