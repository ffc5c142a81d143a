"""The v4 feature recordings, decided again by the batprotocol and legacy drivers.

``t/data/batsim/features/`` holds real Batsim 4.2.1 runs of the v4 driver's
options (several queues, run limits and engine options from ``--config``,
advance reservations and their flags, groups and accounts, users,
campaigns).  Here Batsim's side of each run is rewritten in batprotocol and
legacy words (the same events at the same times: :mod:`t.batsim_recordings`),
each driver is built from the recording's own command line plus
``--protocol``, and it must decide what the v4 driver decided in the real
run: the same starts on the same ranks at the same times, the same
rejections, and under batprotocol the same kills.

Where a protocol cannot carry a decision the test says so: Batsim 2.0's
text protocol has no kill stamp, so a job a reservation's end must kill is
a clear error naming the job, not a silent overrun.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fluxsched_py.batsim.batprotocol import encode_message as bp_encode
from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.batsim.errors import ProtocolError
from t.batsim_recordings import (
    BATSIM_DATA,
    by_instant,
    decisions_bp,
    decisions_legacy,
    manifest,
    message_pairs,
    to_batprotocol,
    to_legacy,
    v4_decisions,
)

DATA = BATSIM_DATA / "features"
RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}
#: The recordings of options every protocol takes (``--job-metadata`` and
#: ``--dynamic-jobs`` are v4's; the machine-events run's NOTIFYs become
#: batprotocol's generic external events).
SHARED = [
    "config",
    "queues",
    "reservations",
    "reservation-flags",
    "groups-accounts",
    "users",
    "campaigns",
    "machine-events",
    "reservations-event",
    "sink",
]


def args_of(rec: dict, *extra: str) -> list[str]:
    """The recording's command line, its input files as paths in DATA."""
    return [str(DATA / a) if (DATA / a).is_file() else a for a in rec["args"]] + list(extra)


def plain_workload(rec: dict, tmp: Path) -> Path:
    """The recording's workload file, gunzipped into *tmp* when it is compressed."""
    src = (DATA / rec["workload"]).resolve()
    if src.suffix != ".gz":
        return src
    dst = tmp / src.name.removesuffix(".gz")
    dst.write_bytes(gzip.decompress(src.read_bytes()))
    return dst


@pytest.mark.parametrize("feature", SHARED)
def test_batprotocol_decides_like_the_real_v4_run(feature):
    rec = RECORDINGS[feature]
    pairs = message_pairs(DATA / rec["file"])
    driver = driver_for(args_of(rec, "--protocol", "batprotocol"))
    replies = [driver.handle(m) for m in to_batprotocol(pairs)]
    assert driver.finished
    want = v4_decisions(pairs)
    assert by_instant(decisions_bp(replies)) == by_instant(want)
    kinds = {k for _, k, _, _ in want}
    assert "execute" in kinds


@pytest.mark.parametrize("feature", ["users", "campaigns", "groups-accounts"])
def test_batprotocol_reads_the_fields_from_the_workload_file_batsim_names(feature, tmp_path):
    """Batsim 5 at 3bb38700 forwards no workload field but ``extra_data``:
    without it, the driver reads user, reservation, account and campaign from
    the job's entry in the file ``SimulationBeginsEvent`` names."""
    rec = RECORDINGS[feature]
    pairs = message_pairs(DATA / rec["file"])
    workload = plain_workload(rec, tmp_path)
    driver = driver_for(args_of(rec, "--protocol", "batprotocol", "--workload", str(workload)))
    replies = [driver.handle(m) for m in to_batprotocol(pairs, workloads=[("w0", f"elsewhere/{workload.name}")])]
    assert driver.finished
    assert by_instant(decisions_bp(replies)) == by_instant(v4_decisions(pairs))


def test_without_its_fields_a_job_is_scheduled_as_a_plain_job():
    """The oracle has teeth: the users run decided without the jobs' fields
    (no user, no reservation) is not the recorded one."""
    rec = RECORDINGS["users"]
    pairs = message_pairs(DATA / rec["file"])
    stripped = []
    for msg, reply in pairs:
        m = json.loads(msg)
        for e in m["events"]:
            if e["type"] == "JOB_SUBMITTED":
                e["data"]["job"] = {k: v for k, v in e["data"]["job"].items() if k not in ("user", "reservation")}
        stripped.append((json.dumps(m).encode(), reply))
    driver = driver_for(args_of(rec, "--protocol", "batprotocol"))
    replies = []
    for m in to_batprotocol(stripped):
        try:
            replies.append(driver.handle(m))
        except ProtocolError:
            break  # Batsim's recorded events no longer match the decisions
    assert by_instant(decisions_bp(replies)) != by_instant(v4_decisions(pairs))


def legacy_driver(rec: dict, tmp: Path):
    workload = plain_workload(rec, tmp)
    return driver_for(args_of(rec, "--protocol", "legacy", "--workload", str(workload), "--nodes", str(rec["nodes"])))


@pytest.mark.parametrize(
    "feature", ["config", "queues", "reservations", "reservation-flags", "groups-accounts", "sink"]
)
def test_legacy_decides_like_the_real_v4_run(feature, tmp_path):
    rec = RECORDINGS[feature]
    pairs = message_pairs(DATA / rec["file"])
    driver = legacy_driver(rec, tmp_path)
    got = decisions_legacy([driver.handle(m) for m in to_legacy(pairs)])
    assert driver.finished
    # The text protocol writes times with six decimals.
    assert by_instant(got) == by_instant([(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs)])


def test_legacy_says_which_job_it_cannot_kill_at_a_reservations_end(tmp_path):
    """In the users run, job w0!3 ran into the end of alice's reservation and
    the v4 driver killed it at 250 s; the legacy driver decides the same
    until then, and then stops with the job and the way out named."""
    rec = RECORDINGS["users"]
    pairs = message_pairs(DATA / rec["file"])
    ((job, when),) = rec["killed"].items()
    driver = legacy_driver(rec, tmp_path)
    replies = []
    with pytest.raises(ProtocolError, match=rf"job {job} must be killed .*--protocol v4"):
        for m in to_legacy(pairs):
            replies.append(driver.handle(m))
    before = [(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs) if t < when]
    assert by_instant(decisions_legacy(replies)) == by_instant(before)


def machine_events_session(edit=None) -> tuple[list, list[bytes]]:
    """The machine-events run's pairs and Batsim's side in batprotocol words,
    each external event passed through *edit* (None: dropped)."""
    pairs = message_pairs(DATA / RECORDINGS["machine-events"]["file"])
    out = []
    for raw in to_batprotocol(pairs):
        if b"ExternalEventOccurredEvent" in raw:
            msg = json.loads(raw[:-1])
            events = [e if e["event_type"] != "ExternalEventOccurredEvent" else edit and edit(e) for e in msg["events"]]
            raw = bp_encode(msg["now"], [e for e in events if e])
        out.append(raw)
    return pairs, out


def decide(session: list[bytes]) -> list:
    """What a batprotocol driver of the machine-events run decides on *session*,
    up to the first protocol error (Batsim's recorded events no longer match)."""
    driver = driver_for(args_of(RECORDINGS["machine-events"], "--protocol", "batprotocol"))
    replies = []
    for m in session:
        try:
            replies.append(driver.handle(m))
        except ProtocolError:
            break
    return by_instant(decisions_bp(replies))


def test_without_its_machine_events_batprotocol_decides_otherwise():
    """The oracle has teeth: the same session with its external events
    dropped is not the recorded one."""
    pairs, session = machine_events_session(None)
    assert decide(session) != by_instant(v4_decisions(pairs))


def test_an_external_event_that_is_no_machine_event_is_left_alone():
    def other(e):
        e["event"]["external_event"]["data"] = '{"type": "cooling", "resources": "0-3"}'
        return e

    _, session = machine_events_session(other)
    _, dropped = machine_events_session(None)
    assert decide(session) == decide(dropped)


def test_a_machine_event_with_a_bad_interval_set_is_a_protocol_error_naming_it():
    def bad(e):
        e["event"]["external_event"]["data"] = '{"type": "machine_unavailable", "resources": "3-x"}'
        return e

    _, session = machine_events_session(bad)
    driver = driver_for(args_of(RECORDINGS["machine-events"], "--protocol", "batprotocol"))
    with pytest.raises(ProtocolError, match=r"^external event machine_unavailable at t=[\d.]+: invalid interval set"):
        for m in session:
            driver.handle(m)


def test_legacy_gives_the_engine_each_jobs_campaign_from_the_workload_only_with_campaigns(tmp_path):
    """In the sink run every job is of campaign c1, and the sink effect
    counts a node's quick ends per campaign (``--campaigns``).  The legacy
    driver, reading the campaign from ``--workload``, decides as the real
    run with the option (``test_legacy_decides_like_the_real_v4_run[sink]``)
    and otherwise without it: the field reaches the engine through it."""
    rec = dict(RECORDINGS["sink"])
    assert "--campaigns" in rec["args"]
    rec["args"] = [a for a in rec["args"] if a != "--campaigns"]
    pairs = message_pairs(DATA / rec["file"])
    driver = legacy_driver(rec, tmp_path)
    got = decisions_legacy([driver.handle(m) for m in to_legacy(pairs)])
    assert driver.finished
    assert by_instant(got) != by_instant([(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs)])


def test_batprotocol_without_the_reservations_event_decides_otherwise():
    """The oracle of ``[reservations-event]`` has teeth: the same session with
    its reservations event dropped keeps the reservation on the CPU hosts,
    and the jobs go elsewhere than in the real run."""
    rec = RECORDINGS["reservations-event"]
    pairs = message_pairs(DATA / rec["file"])
    session = []
    for raw in to_batprotocol(pairs):
        if b"ExternalEventOccurredEvent" in raw:
            msg = json.loads(raw[:-1])
            kept = [e for e in msg["events"] if e["event_type"] != "ExternalEventOccurredEvent"]
            assert len(kept) < len(msg["events"])
            raw = bp_encode(msg["now"], kept)
        session.append(raw)
    driver = driver_for(args_of(rec, "--protocol", "batprotocol"))
    replies = []
    for m in session:
        try:
            replies.append(driver.handle(m))
        except ProtocolError:
            break  # Batsim's recorded events no longer match the decisions
    assert by_instant(decisions_bp(replies)) != by_instant(v4_decisions(pairs))
