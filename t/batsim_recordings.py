"""What the tests of recorded Batsim traffic share.

Each folder under ``t/data/batsim/`` holds recordings made with
``fluxsched-py batsim --record`` against a real Batsim, and a
``MANIFEST.json`` saying where each comes from.  The tests read a recording
as ``[(Batsim's message, the reply)]`` and hold every protocol's run to the
same two checks: every job ran (or was rejected as the manifest says), and
every start time equals the offline replay's.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fluxsched_py.batsim.batprotocol import encode_init
from fluxsched_py.batsim.batprotocol import encode_message as bp_encode
from fluxsched_py.batsim.cli import Recorder
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph

BATSIM_DATA = Path(__file__).parent / "data" / "batsim"

Decision = tuple[float, str, str, "frozenset[int] | None"]


def manifest(folder: Path) -> dict:
    return json.loads((folder / "MANIFEST.json").read_text())


def recordings(folder: Path) -> tuple[list[dict], list[str]]:
    """A folder's recordings and their test ids (file names without ``.jsonl.gz``)."""
    recs = manifest(folder)["recordings"]
    return recs, [r["file"].removesuffix(".jsonl.gz") for r in recs]


@contextmanager
def batsim_side(endpoint: str) -> Iterator:
    """A ZeroMQ REQ socket connected to *endpoint*, as Batsim's side (10 s receive timeout)."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(0)
        ctx.term()


def message_pairs(path: Path) -> list[tuple[bytes, bytes]]:
    """``[(Batsim's message, the reply)]`` of one recording."""
    msgs = Recorder.load(path)
    assert [d for d, _ in msgs] == ["in", "out"] * (len(msgs) // 2), "a recording alternates in/out"
    return [(msgs[i][1], msgs[i + 1][1]) for i in range(0, len(msgs), 2)]


def plain_workloads(folder: Path, recordings: Iterable[dict], tmp: Path) -> dict[str, Path]:
    """Each recording's workload as a plain file under the base name Batsim gave it (gunzipped into *tmp*)."""
    out = {}
    for rec in recordings:
        src = folder / rec["workload"]
        if src.suffix == ".gz":
            dst = tmp / src.name.removesuffix(".gz")
            dst.write_bytes(gzip.decompress(src.read_bytes()))
        else:
            dst = src
        out[rec["file"]] = dst
    return out


def assert_every_job_ran(rec: dict, submitted: set, completed: set, decisions: list[Decision]) -> None:
    """Every submitted job was started and completed, or rejected as the manifest says."""
    started = {job for _, kind, job, _ in decisions if kind == "execute"}
    rejected = {job for _, kind, job, _ in decisions if kind == "reject"}
    assert len(submitted) == rec["jobs"]
    assert rejected == set(rec.get("rejected", [])) and not started & rejected
    assert started | rejected == submitted and completed == started


def assert_starts_equal_replay(
    rec: dict, workload: Path, decisions: list[Decision], job_number: Callable[[str], int]
) -> None:
    """The run's start times equal the offline replay's within 0.1 s (DESIGN.md, "Schedule quality")."""
    ref = replay(load_workload(workload), nodes_graph(rec["nodes"]), EngineOptions.parse(rec["options"]))
    expected = {r.job.id: r.start for r in ref.records if r.start is not None}
    started = {job_number(job): t for t, kind, job, _ in decisions if kind == "execute"}
    assert started.keys() == expected.keys()
    rejected = {job_number(job) for _, kind, job, _ in decisions if kind == "reject"}
    assert rejected == {r.job.id for r in ref.records if r.state == "REJECTED"}
    worst = max(abs(started[j] - expected[j]) for j in started)
    assert worst <= 0.1, f"a start time differs from the replay's by {worst:.6f} s"


def workload_job_number(job: str) -> int:
    """``w0!7`` -> 7: the workload's own job id."""
    return int(job.rsplit("!", 1)[1])


def driver_command(endpoint: str, *options: str) -> list[str]:
    """``fluxsched-py batsim`` on ``endpoint``, quiet, giving up after 10 s, with ``options``."""
    return [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", endpoint, "--timeout", "10", "-q", *options]


# -- one real session in each protocol's words ------------------------------
#
# The batprotocol and legacy drivers are held to the v4 recordings: Batsim's
# side of a recorded session is rewritten in the other protocol's words (the
# same events at the same times), and the decisions each driver sends are
# compared with the ones the v4 driver sent to the real Batsim.

#: The v4 job fields that are workload-entry fields (:mod:`fluxsched_py.batsim.entry`),
#: not the request itself.
_V4_JOB_KEYS = frozenset({"id", "res", "walltime", "subtime", "profile"})


def by_instant(decisions: list[Decision]) -> list[Decision]:
    """Decisions grouped by instant, each group in a fixed order: a reply's
    events in one protocol may come in another order in the other (all of a
    batprotocol reply's kills go first, in one event)."""
    return sorted(decisions, key=lambda d: (d[0], d[1], d[2]))


def v4_decisions(pairs: list[tuple[bytes, bytes]]) -> list[Decision]:
    """``(now, "execute" | "reject" | "kill", job, ranks | None)`` of the v4 driver's replies."""
    out: list[Decision] = []
    for _, reply in pairs:
        r = json.loads(reply)
        for e in r["events"]:
            if e["type"] == "EXECUTE_JOB":
                out.append((r["now"], "execute", e["data"]["job_id"], frozenset(parse_intervals(e["data"]["alloc"]))))
            elif e["type"] == "REJECT_JOB":
                out.append((r["now"], "reject", e["data"]["job_id"], None))
            elif e["type"] == "KILL_JOB":
                out.extend((r["now"], "kill", j, None) for j in e["data"]["job_ids"])
    return out


def _bp_begins(d: dict, workloads: Iterable[tuple[str, str]] | None) -> dict:
    hosts = [
        {
            "id": h["id"],
            "name": h["name"],
            "properties": [{"key": k, "value": str(v)} for k, v in h.get("properties", {}).items()],
        }
        for h in d["compute_resources"]
    ]
    out: dict = {"computation_host_number": len(hosts), "computation_hosts": hosts}
    if workloads is None:
        out["profiles"] = [
            {"id": f"{wl}!{name}", "profile_type": "DelayProfile", "profile": {"delay": p["delay"]}}
            for wl, profs in d.get("profiles", {}).items()
            for name, p in profs.items()
            if p.get("type") == "delay"
        ]
    else:
        out["workloads"] = [{"name": name, "filename": filename} for name, filename in workloads]
    return out


def _bp_notify(d: dict) -> tuple[str, dict]:
    """A v4 NOTIFY in batprotocol words: machine events travel as a generic
    external event whose ``data`` is the object Batsim 5 documents for them;
    an event Batsim 4 forwarded whole (``--forward-unknown-events``) as that
    event's object, less the ``timestamp`` Batsim 5 gives the event itself."""
    kind = d["type"]
    if kind == "no_more_static_job_to_submit":
        return "AllStaticJobsHaveBeenSubmittedEvent", {}
    if kind == "no_more_external_event_to_occur":
        return "AllStaticExternalEventsHaveBeenInjectedEvent", {}
    if kind.startswith("event_"):
        data = json.dumps({"type": kind.removeprefix("event_"), "resources": d["resources"]})
    else:
        data = json.dumps({k: v for k, v in d.items() if k != "timestamp"})
    event = {"external_event_type": "GenericExternalEvent", "external_event": {"data": data}}
    return "ExternalEventOccurredEvent", event


def to_batprotocol(pairs: list[tuple[bytes, bytes]], workloads: Iterable[tuple[str, str]] | None = None) -> list[bytes]:
    """Batsim's side of a recorded v4 session, in batprotocol JSON words.

    Without *workloads*, profiles are forwarded in ``SimulationBeginsEvent``
    and a job's entry fields (user, reservation, campaign...) travel as a JSON
    object in its ``extra_data``; with ``[(name, file)]``, Batsim names the
    workload files instead, and the driver reads profiles and fields there.
    """
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
                ev = ("SimulationBeginsEvent", _bp_begins(d, workloads))
            elif e["type"] == "JOB_SUBMITTED":
                v4job = d["job"]
                job = {"resource_request": v4job["res"], "walltime": v4job.get("walltime", -1)}
                job["profile_id"] = v4job["profile"]
                fields = {k: v for k, v in v4job.items() if k not in _V4_JOB_KEYS}
                if fields and workloads is None:
                    job["extra_data"] = json.dumps(fields)
                ev = ("JobSubmittedEvent", {"job_id": d["job_id"], "job": job, "submission_time": t})
            elif e["type"] == "JOB_COMPLETED":
                ev = ("JobCompletedEvent", {"job_id": d["job_id"], "state": d.get("job_state")})
            elif e["type"] == "JOB_KILLED":
                ev = ("JobsKilledEvent", {"job_ids": d["job_ids"]})
            elif e["type"] == "NOTIFY":
                ev = _bp_notify(d)
            elif e["type"] == "REQUESTED_CALL":
                ev = ("RequestedCallEvent", {"call_me_later_id": "x"})
            elif e["type"] == "SIMULATION_ENDS":
                ev = ("SimulationEndsEvent", {})
            elif e["type"] == "ANSWER":
                continue  # to the v4 driver's QUERY, which batprotocol has not
            else:  # pragma: no cover - not in the recordings
                raise AssertionError(e["type"])
            evs.append({"timestamp": t, "event_type": ev[0], "event": ev[1]})
        out.append(bp_encode(m["now"], evs))
    return out


def decisions_bp(replies: list[bytes]) -> list[Decision]:
    """What the batprotocol driver decided, as :func:`v4_decisions` gives it."""
    out: list[Decision] = []
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
            elif e["event_type"] == "KillJobsEvent":
                out.extend((r["now"], "kill", j, None) for j in e["event"]["job_ids"])
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


def decisions_legacy(replies: Iterable[bytes]) -> list[Decision]:
    """What the legacy driver decided (its ``J`` and ``R`` stamps), as :func:`v4_decisions` gives it."""
    out: list[Decision] = []
    for raw in replies:
        head, *events = raw.decode().split("|")
        now = float(head.split(":")[1])
        for ev in events:
            _, stamp, *content = ev.split(":", 2)
            if stamp == "J":
                for item in content[0].split(";"):
                    job, alloc = item.split("=")
                    out.append((now, "execute", job, frozenset(parse_intervals(alloc))))
            elif stamp == "R":
                out.append((now, "reject", content[0], None))
    return out
