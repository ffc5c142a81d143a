"""The v4 driver's options the replay has too, on traffic from a real Batsim 4.2.1.

``t/data/batsim/features/MANIFEST.json`` says where each recording comes from
and gives the ``fluxsched-py batsim`` arguments it was made with.  Each test
rebuilds the driver from those arguments (:func:`~fluxsched_py.batsim.cli.driver_for`),
so it reads the option's input files as the command did, and holds it to
what the run showed:

* fed Batsim's messages, it sends the very replies it sent in the real run;
* what the option is for happened in that run (no job in a maintenance
  window, the file's queue policy and limits, a user's reservation and
  limits, a campaign's bound, Batsim's ``metadata`` column);
* start times equal the offline replay's on the same inputs (within 0.1 s).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.engine import EngineOptions
from fluxsched_py.engine.reservations import ReservationError, read_entries, read_groups
from fluxsched_py.engine.runlimits import RunLimits
from fluxsched_py.ids import IdSet, user_id
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.events import load_events
from fluxsched_py.replay.platform import load_platform, nodes_graph
from t.batsim_recordings import BATSIM_DATA, batsim_side, driver_command, manifest, message_pairs, workload_job_number

DATA = BATSIM_DATA / "features"
RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}


def args_of(rec: dict, *extra: str) -> list[str]:
    """The recording's command line, its input files as paths in DATA."""
    return [str(DATA / a) if (DATA / a).is_file() else a for a in rec["args"]] + list(extra)


def pairs(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def runs(rec: dict) -> dict[str, tuple[float, float, IdSet]]:
    """Each started job of the recording: (Batsim start, Batsim end, ranks);
    a killed job ends when it was decided (its hosts are free for the jobs
    started in the same reply)."""
    start: dict[str, tuple[float, IdSet]] = {}
    end: dict[str, float] = {}
    for msg, reply in pairs(rec):
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_COMPLETED":
                end.setdefault(e["data"]["job_id"], e["timestamp"])
        r = json.loads(reply)
        for e in r["events"]:
            if e["type"] == "EXECUTE_JOB":
                start[e["data"]["job_id"]] = (r["now"], parse_intervals(e["data"]["alloc"]))
            elif e["type"] == "KILL_JOB":
                end.update(dict.fromkeys(e["data"]["job_ids"], r["now"]))
    return {j: (t, end[j], ranks) for j, (t, ranks) in start.items()}


@pytest.mark.parametrize("feature", sorted(RECORDINGS))
def test_the_driver_built_from_the_command_line_sends_the_recorded_replies(feature):
    rec = RECORDINGS[feature]
    driver = driver_for(args_of(rec))
    for i, (msg, reply) in enumerate(pairs(rec)):
        assert json.loads(driver.handle(msg)) == json.loads(reply), f"reply {i} differs"
    assert driver.finished


# -- --reservations --------------------------------------------------------------


def test_no_job_ran_in_the_maintenance_window_and_the_driver_woke_batsim_for_it():
    rec = RECORDINGS["reservations"]
    (window,) = yaml.safe_load((DATA / rec["reservations"]).read_text())
    held = set(IdSet.parse(window["ranks"]))
    done = runs(rec)
    assert len(done) == rec["jobs"]
    inside = [
        j
        for j, (s, e, ranks) in done.items()
        if set(ranks) & held and s < window["end"] - 0.1 and e > window["start"] + 0.1
    ]
    assert inside == []
    # The window was used up to its start, and from its end: it moved jobs.
    assert any(set(ranks) & held and e <= window["start"] + 0.1 for s, e, ranks in done.values())
    calls = [
        e["data"]["timestamp"]
        for _, reply in pairs(rec)
        for e in json.loads(reply)["events"]
        if e["type"] == "CALL_ME_LATER"
    ]
    assert calls[0] == window["start"]


def test_with_reservations_starts_equal_the_replays_with_the_same_file():
    rec = RECORDINGS["reservations"]
    entries = yaml.safe_load((DATA / rec["reservations"]).read_text())
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        EngineOptions.parse({"queue-policy": "easy"}),
        reservations=entries,
    )
    expected = {r.job.id: r.start for r in ref.records}
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1
    plain = replay(
        load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), EngineOptions.parse({"queue-policy": "easy"})
    )
    assert {r.job.id: r.start for r in plain.records} != expected  # the window changed the schedule


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", f"ipc://{tmp_path}/s", "--timeout", "5", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "text,words",
    [
        ("- {name: m, ranks: 0-3, start: 10}\n", "reservations[0].end: give end or duration"),
        ("- {name: m, ranks: 0-3, start: 10, end: 5, color: red}\n", "reservations[0].color: unknown field"),
        ("{a: [\n", "reservations: not YAML or JSON"),
        ("- {name: m, ranks: x, start: 0, end: 5}\n", "reservations[0].ranks"),
        ("- {name: m, nodes: 2, start: +1h, duration: 1h, users: [3.5]}\n", "reservations[0].users"),
        (
            "- {name: m, ranks: 0-3, start: '2026-12-01T08:00:00', duration: 1h}\n",
            "reservations[0].start: '2026-12-01T08:00:00': an absolute date needs a start date, and a Batsim workload",
        ),
        ("- {name: m, ranks: 0-3, start: 0, duration: 1h, flags: [OVERLAP]}\n", "reservations[0].flags: 'OVERLAP'"),
    ],
)
def test_a_malformed_reservations_file_is_one_line_and_exit_1_before_listening(tmp_path, text, words):
    f, line = _refused(tmp_path, "--reservations", "resv.yaml", text)
    assert line.startswith(f"fluxsched-py batsim: {f}: ") and words in line, line


def _refused(tmp_path, flag: str, name: str, text: str):
    """``flag`` with a file ``name`` of ``text``: the file and the one line the run ends with, status 1,
    before it listens."""
    f = tmp_path / name
    f.write_text(text)
    p = run_cli(tmp_path, flag, str(f))
    (line,) = p.stderr.splitlines()
    assert p.returncode == 1, p.stderr
    assert not (tmp_path / "s").exists()
    return f, line


def test_a_reservation_the_platform_cannot_hold_ends_the_run_with_one_line(tmp_path):
    """Rank 40 of a 32-host platform is known to be missing only when Batsim
    sends SIMULATION_BEGINS: the recorded Batsim side gets no reply."""
    pytest.importorskip("zmq")
    f = tmp_path / "resv.yaml"
    f.write_text("- {name: m, ranks: 40, start: 0, end: 100}\n")
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    proc = subprocess.Popen(
        driver_command(endpoint, "--reservations", str(f)),
        stderr=subprocess.PIPE,
        text=True,
    )
    with batsim_side(endpoint) as sock:
        sock.send(pairs(RECORDINGS["reservations"])[0][0])
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.splitlines() == [f"fluxsched-py batsim: ERROR: {f}: reservations[0].ranks: no such rank: 40"]


# -- --config ----------------------------------------------------------------------


def most_at_once(done: dict, weight: Callable[[str, IdSet], int] = lambda job, ranks: 1) -> int:
    """The most ``weight`` (by default, jobs) running at one instant; at one
    time, the jobs that end go before those that start."""
    steps = sorted((t, n) for j, (s, e, ranks) in done.items() if (w := weight(j, ranks)) for t, n in ((s, w), (e, -w)))
    held = most = 0
    for _, n in steps:
        held += n
        most = max(most, held)
    return most


def most_running(done: dict[str, tuple[float, float, IdSet]]) -> int:
    return most_at_once(done)


def test_the_files_queue_policy_and_limits_made_the_schedule():
    rec = RECORDINGS["config"]
    done = runs(rec)
    assert len(done) == rec["jobs"] and most_running(done) == 4  # user = { jobs = 4 }
    conf = tomllib.loads((DATA / rec["config"]).read_text())
    limits = RunLimits.from_config(conf)
    got = {workload_job_number(j): s for j, (s, _, _) in done.items()}

    def worst(policy: str, limits: RunLimits | None) -> float:
        ref = replay(
            load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), {"queue-policy": policy}, limits=limits
        )
        return max(abs(r.start - got[r.job.id]) for r in ref.records)

    assert worst("conservative", limits) <= 0.1
    assert worst("easy", limits) > 10 and worst("conservative", None) > 10  # both parts of the file count


def test_flags_win_over_the_file():
    rec = RECORDINGS["config"]
    from_file = driver_for(args_of(rec)).scheduler
    flagged = driver_for(args_of(rec, "--queue-policy", "easy", "--annotate-depth", "3")).scheduler
    assert from_file.options.queue_policy == "conservative" and flagged.options.queue_policy == "easy"
    assert flagged.options.annotate_depth == 3 and flagged.limits is not None  # the file's limits stay
    assert driver_for([]).scheduler.options.queue_policy == "easy"  # the driver's default without a file


@pytest.mark.parametrize(
    "text,words",
    [
        ('[sched-py]\nqueue-polcy = "easy"\n', "bad config: [sched-py] unknown option 'queue-polcy'"),
        ('[sched-py]\nqueue-policy = "sjf"\n', "queue-policy='sjf': choose from"),
        ("[sched-py]\nreserve-depth = 1.5\n", "[sched-py] reserve-depth: expected a string or an integer, not a float"),
        ("[policy.scheduler.limits]\nuser = { nodes = -3 }\n", "policy.scheduler.limits.user.nodes: expected"),
        ("[sched-py\n", "not a TOML file"),
    ],
)
def test_a_bad_config_is_one_line_and_exit_1_before_listening(tmp_path, text, words):
    f, line = _refused(tmp_path, "--config", "flux.toml", text)
    assert line.startswith(f"fluxsched-py batsim: --config {f}: ") and words in line, line


# -- users ---------------------------------------------------------------------------


def test_batsim_forwards_the_user_field_and_the_driver_gives_names_the_replays_uids():
    rec = RECORDINGS["users"]
    sent = {}
    driver = driver_for(args_of(rec))
    for msg, _ in pairs(rec):
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_SUBMITTED":
                sent[e["data"]["job_id"]] = e["data"]["job"]["user"]
        driver.handle(msg)
    assert sent["w0!0"] == "alice" and sent["w0!2"] == 1001  # Batsim sent the workload's field as it is
    uids = {j.batsim_id: j.user for j in driver.scheduler.jobs.values()}
    assert uids["w0!0"] == user_id("alice") and uids["w0!1"] == user_id("bob") and uids["w0!2"] == 1001


def test_limits_by_user_name_and_uid_and_a_users_reservation_held_in_the_run():
    rec = RECORDINGS["users"]
    done = runs(rec)
    owner = {f"w0!{j['id']}": j["user"] for j in json.loads((DATA / rec["workload"]).read_text())["jobs"]}
    by_user = {u: {j: r for j, r in done.items() if owner[j] == u} for u in ("alice", "bob", 1001)}
    assert most_running(by_user["bob"]) == 1 and most_running(by_user[1001]) == 2
    assert most_running(by_user["alice"]) == 2  # bob's limit is not hers: names are told apart
    # Only alice's jobs ran on ranks 24-31 while her reservations held them.
    windows = yaml.safe_load((DATA / rec["reservations"]).read_text())
    for w in windows:
        for j, (s, e, ranks) in done.items():
            if set(ranks) & set(IdSet.parse(w["ranks"])) and s < w["end"] - 0.1 and e > w["start"] + 0.1:
                assert owner[j] == "alice", (j, w["name"])
    # Job 3 (no walltime) was killed when alice-first ended; job 24 could not fit in alice-nodes.
    kills = {
        i: json.loads(reply)["now"]
        for _, reply in pairs(rec)
        for e in json.loads(reply)["events"]
        if e["type"] == "KILL_JOB"
        for i in e["data"]["job_ids"]
    }
    assert kills.keys() == rec["killed"].keys()
    assert all(abs(kills[j] - t) < 0.1 for j, t in rec["killed"].items())
    rejected = [
        e["data"]["job_id"] for _, reply in pairs(rec) for e in json.loads(reply)["events"] if e["type"] == "REJECT_JOB"
    ]
    assert rejected == rec["rejected"]


def test_with_users_starts_equal_the_replays_of_the_same_workload_config_and_reservations():
    rec = RECORDINGS["users"]
    limits = RunLimits.from_config(tomllib.loads((DATA / rec["config"]).read_text()), uid_of=user_id)
    entries = yaml.safe_load((DATA / rec["reservations"]).read_text())
    for e in entries:  # the replay's file takes uids
        e["users"] = [user_id(u) for u in e["users"]]
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        {"queue-policy": "easy"},
        limits=limits,
        reservations=entries,
    )
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    started = {r.job.id: r.start for r in ref.records if r.start is not None}
    assert got.keys() == started.keys()
    assert max(abs(got[j] - started[j]) for j in got) <= 0.1


def job_submitted_with(user) -> tuple[list[bytes], bytes]:
    """The recorded run's messages up to its first JOB_SUBMITTED, that job's ``user`` replaced."""
    msgs = [m for m, _ in pairs(RECORDINGS["users"])]
    i = next(k for k, m in enumerate(msgs) if b"JOB_SUBMITTED" in m)
    doc = json.loads(msgs[i])
    for e in doc["events"]:
        if e["type"] == "JOB_SUBMITTED":
            e["data"]["job"]["user"] = user
    return msgs[:i], json.dumps(doc).encode()


@pytest.mark.parametrize("user", [3.5, True, -2, "", [1], 2**40])
def test_a_bad_user_field_is_a_protocol_error_naming_the_job(user):
    before, bad = job_submitted_with(user)
    driver = driver_for(["--queue-policy", "easy"])
    for m in before:
        driver.handle(m)
    with pytest.raises(
        ProtocolError,
        match=r"^job w0!0: 'user' must be a uid \(an integer 0\.\.4294967295\), -1 \(unknown\) or a user name, got ",
    ):
        driver.handle(bad)


def test_a_bad_user_field_ends_the_cli_with_one_line(tmp_path):
    pytest.importorskip("zmq")
    before, bad = job_submitted_with(3.5)
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    cmd = [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", endpoint, "--timeout", "10", "-q"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    with batsim_side(endpoint) as sock:
        for m in before:
            sock.send(m)
            sock.recv()
        sock.send(bad)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.splitlines() == [
        "fluxsched-py batsim: ERROR: protocol error: job w0!0: 'user' must be a uid (an integer 0..4294967295), "
        "-1 (unknown) or a user name, got 3.5"
    ]


# -- --campaigns ---------------------------------------------------------------------


def test_with_campaigns_the_bound_on_a_campaign_held_in_the_run():
    rec = RECORDINGS["campaigns"]
    done = runs(rec)
    jobs = json.loads((DATA / rec["workload"]).read_text())["jobs"]
    of_campaign = {f"w0!{j['id']}" for j in jobs if j.get("campaign") == rec["campaign"]}
    assert len(done) == rec["jobs"] and len(of_campaign) == 20
    assert most_running({j: r for j, r in done.items() if j in of_campaign}) == rec["bound"]


def test_without_campaigns_the_driver_sees_no_campaign_and_decides_otherwise():
    rec = RECORDINGS["campaigns"]
    off = [a for a in args_of(rec) if a != "--campaigns"]
    driver = driver_for(off)
    differs = False
    for msg, reply in pairs(rec):
        if json.loads(driver.handle(msg)) != json.loads(reply):
            differs = True
            break
    assert differs
    assert all(j.attributes is None for j in driver.scheduler.jobs.values())


def test_with_campaigns_starts_equal_the_replays_with_the_campaign_in_each_request():
    rec = RECORDINGS["campaigns"]
    w = load_workload(DATA / rec["workload"])
    for j in w.jobs:  # what --campaigns does; the replay's Batsim reader keeps the campaign out of the request
        if j.campaign:
            j.request = dataclasses.replace(j.request, attributes={"user": {"campaign": j.campaign}})
    options = {"queue-policy": "easy", "campaign-max-running": f"{rec['campaign']}:{rec['bound']}"}
    ref = replay(w, nodes_graph(rec["nodes"]), options)
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert max(abs(got[r.job.id] - r.start) for r in ref.records) <= 0.1


# -- --job-metadata ------------------------------------------------------------------


def metadata_events(rec: dict) -> list[tuple[int, int, str, str]]:
    """Every SET_JOB_METADATA of the recording: (reply number, place in it, job id, metadata)."""
    return [
        (i, k, e["data"]["job_id"], e["data"]["metadata"])
        for i, (_, reply) in enumerate(pairs(rec))
        for k, e in enumerate(json.loads(reply)["events"])
        if e["type"] == "SET_JOB_METADATA"
    ]


def test_batsim_wrote_the_last_metadata_sent_in_out_jobs_csv():
    rec = RECORDINGS["metadata"]
    last: dict[str, str] = {}
    for _, _, job, text in metadata_events(rec):
        assert last.get(job) != text  # sent only when it changed
        last[job] = text
    with (DATA / rec["out_jobs"]).open(newline="") as f:
        rows = {f"w0!{r['job_id']}": r for r in csv.DictReader(f)}
    assert len(rows) == rec["jobs"]
    assert {j: r["metadata"] for j, r in rows.items() if r["metadata"]} == last
    killed = {j for j, r in rows.items() if r["final_state"] == "COMPLETED_KILLED"}
    assert len(killed) == rec["batsim_out_jobs"]["COMPLETED_KILLED"]
    assert {j for j, text in last.items() if text.startswith("preemptions=1;")} == killed
    waited = [t for t in last.values() if t.startswith("preemptions=0;reason_pending=waiting for ")]
    assert len(waited) > 10  # the reasons of jobs that waited, from the engine's texts


def replay_metadata_workload(out, *extra):
    """``fluxsched-py replay`` of the metadata recording's workload on its hosts under easy, jobs.csv in ``out``."""
    rec = RECORDINGS["metadata"]
    w, nodes = str(DATA / rec["workload"]), str(rec["nodes"])
    args = ["replay", w, "--nodes", nodes, "--queue-policy", "easy", "--output-dir", str(out), "--no-progress", *extra]
    return subprocess.run([str(Path(sys.executable).with_name("fluxsched-py")), *args], capture_output=True, text=True)


def test_the_replays_metadata_column_is_batsims(tmp_path):
    # The same workload replayed offline with --job-metadata: its jobs.csv
    # says, job for job, what Batsim's own out_jobs.csv of the real run says,
    # but for the times in the reasons, which the replay writes to the
    # second (t=561s where Batsim's run said t=561.026: its starts are
    # within 0.021 s of the replay's, the manifest's note).
    rec = RECORDINGS["metadata"]
    p = replay_metadata_workload(tmp_path, "--job-metadata")
    assert p.returncode == 0, p.stderr
    with (tmp_path / "jobs.csv").open(newline="") as f:
        ours = {r["job_id"]: r["metadata"] for r in csv.DictReader(f)}
    with (DATA / rec["out_jobs"]).open(newline="") as f:
        batsims = {r["job_id"]: r["metadata"] for r in csv.DictReader(f)}
    assert ours.keys() == batsims.keys()
    when = re.compile(r"t=([0-9.]+)s?")
    for job, text in batsims.items():
        assert when.sub("t=T", ours[job]) == when.sub("t=T", text), job
        for a, b in zip(when.findall(ours[job]), when.findall(text), strict=True):
            assert abs(float(a) - float(b)) <= 0.5 + 0.021, (job, a, b)
    assert sum(1 for t in ours.values() if t.startswith("preemptions=1;")) == rec["batsim_out_jobs"]["COMPLETED_KILLED"]
    assert sum(1 for t in ours.values() if t) == 40


def test_without_job_metadata_the_replays_jobs_csv_has_batsims_columns_and_no_metadata(tmp_path):
    rec = RECORDINGS["metadata"]
    script = str(Path(sys.executable).with_name("fluxsched-py"))
    w = str(DATA / rec["workload"])
    p = replay_metadata_workload(tmp_path)
    assert p.returncode == 0, p.stderr
    with (tmp_path / "jobs.csv").open(newline="") as f:
        assert "metadata" not in next(csv.reader(f))
    alone = subprocess.run([script, "replay", w, "--job-metadata", "--no-progress"], capture_output=True, text=True)
    assert alone.returncode == 2
    assert alone.stderr.strip().splitlines() == [
        "fluxsched-py replay: --job-metadata writes a column of jobs.csv: give --output-dir"
    ]


def test_a_victims_metadata_goes_before_its_kill_and_the_rest_after_the_starts():
    rec = RECORDINGS["metadata"]
    for _, reply in pairs(rec):
        events = json.loads(reply)["events"]
        kinds = [e["type"] for e in events]
        killed = {j for e in events if e["type"] == "KILL_JOB" for j in e["data"]["job_ids"]}
        for k, e in enumerate(events):
            if e["type"] != "SET_JOB_METADATA":
                continue
            if e["data"]["job_id"] in killed:
                assert k < kinds.index("KILL_JOB")
            else:
                assert "EXECUTE_JOB" not in kinds[k:] and "KILL_JOB" not in kinds[k:]


def test_without_job_metadata_the_same_decisions_and_no_metadata():
    rec = RECORDINGS["metadata"]
    driver = driver_for([a for a in args_of(rec) if a != "--job-metadata"])
    for msg, reply in pairs(rec):
        want = json.loads(reply)
        want["events"] = [e for e in want["events"] if e["type"] != "SET_JOB_METADATA"]
        assert json.loads(driver.handle(msg)) == want


def test_annotate_depth_0_leaves_the_preemptions_and_no_queue_reason():
    rec = RECORDINGS["metadata"]
    driver = driver_for(args_of(rec, "--annotate-depth", "0"))
    sent = []
    for msg, _ in pairs(rec):
        sent += [e["data"] for e in json.loads(driver.handle(msg))["events"] if e["type"] == "SET_JOB_METADATA"]
    victims = [d for d in sent if d["metadata"] == "preemptions=1;reason_pending="]
    assert len(victims) == rec["batsim_out_jobs"]["COMPLETED_KILLED"]
    # What is left: the regular jobs that preempted them, which the engine
    # annotates whatever the depth (engine/besteffort.py); no queue reasons.
    rest = {d["metadata"].split(":")[0] for d in sent if d not in victims}
    assert rest == {
        "preemptions=0;reason_pending=preempting 4 best-effort jobs",
        "preemptions=0;reason_pending=preempting 8 best-effort jobs",
    }
    assert len(sent) < len(metadata_events(rec)) / 4


def test_the_metadata_text_is_one_batsim_accepts():
    from fluxsched_py.batsim.metadata import job_metadata

    assert job_metadata(2, 'waiting for "big" job\nnow') == "preemptions=2;reason_pending=waiting for 'big' job now"
    assert job_metadata(0, None) == "preemptions=0;reason_pending="


# -- machine events (batsim --events) ---------------------------------------------------


def test_no_job_started_on_a_machine_while_batsims_events_had_it_unavailable():
    """The NOTIFY events the driver got say so, and the file Batsim read says so too."""
    rec = RECORDINGS["machine-events"]
    events = load_events(DATA / rec["events"], rec["nodes"]).events
    notified = [
        (e["data"]["type"], e["data"]["resources"])
        for msg, _ in pairs(rec)
        for e in json.loads(msg)["events"]
        if e["type"] == "NOTIFY" and e["data"]["type"].startswith("event_machine_")
    ]
    assert notified == [("event_machine_" + ("" if e.available else "un") + "available", str(e.ranks)) for e in events]
    done = runs(rec)
    assert len(done) == rec["jobs"]
    pairs_of = list(zip(events[::2], events[1::2], strict=True))  # each machine set down, then up
    assert all(not a.available and b.available and a.ranks == b.ranks for a, b in pairs_of)
    windows = [(a.ranks, a.time, b.time) for a, b in pairs_of]
    for job, (start, _, ranks) in done.items():
        for down, since, until in windows:
            assert not (set(ranks) & set(down) and since - 0.1 < start < until), (job, start, ranks)
    # The machines were used again once back: the events moved jobs.
    assert any(set(ranks) & set(windows[0][0]) and s >= windows[0][2] for s, _, ranks in done.values())


def test_with_machine_events_starts_equal_the_replays_with_the_same_file():
    """The replay's ``--events`` takes the file Batsim took; a pass at a machine's
    return runs at the event's time, not at the time of the pass before it."""
    rec = RECORDINGS["machine-events"]
    events = load_events(DATA / rec["events"], rec["nodes"]).events
    options = EngineOptions.parse({"queue-policy": "easy"})
    ref = replay(load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), options, events=events)
    expected = {r.job.id: r.start for r in ref.records}
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1
    plain = replay(load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), options)
    assert sum(abs(r.start - expected[r.job.id]) > 1 for r in plain.records) >= 10


# -- a reservations event: requires changed alone, at a time ------------------------------

GPU_RANKS = IdSet(range(24, 32))  # cluster_gpu32.xml's gpu=a100 hosts
WINDOW = (600.0, 1800.0)  # resv-requires.yaml's


def in_window(start: float, end: float) -> bool:
    return start < WINDOW[1] and end > WINDOW[0]


def test_a_reservations_event_picks_the_nodes_again_when_only_requires_changes():
    """resv-requires.yaml holds 8 CPU hosts (``^gpu=a100``) over [600, 1800);
    the events file's reservations event at t=300 declares the same entry
    under ``gpu=a100``, and Batsim forwarded it (``--forward-unknown-events``).
    In the run no job was on a GPU host during the window (Batsim's own
    out_jobs.csv), while the replay without the event puts jobs there; with
    the same events file the replay gives every job the start and the hosts
    Batsim ran it on."""
    rec = RECORDINGS["reservations-event"]
    with open(DATA / rec["out_jobs"], newline="") as f:
        out = list(csv.DictReader(f))
    assert len(out) == rec["jobs"] and all(r["final_state"] == "COMPLETED_SUCCESSFULLY" for r in out)
    assert not [
        r["job_id"]
        for r in out
        if in_window(float(r["starting_time"]), float(r["finish_time"]))
        and parse_intervals(r["allocated_resources"]) & GPU_RANKS
    ]
    entries = read_entries((DATA / rec["args"][3]).read_text(), "reservations")
    options = EngineOptions.parse({"queue-policy": "easy"})
    platform = DATA / rec["platform"]

    def replayed(events=()):
        res = replay(
            load_workload(DATA / rec["workload"]), load_platform(platform), options, reservations=entries, events=events
        )
        return {r.job.id: (r.start, r.finish, r.ranks) for r in res.records}

    without = replayed()
    assert any(in_window(s, e) and ranks & GPU_RANKS for s, e, ranks in without.values())
    expected = replayed(load_events(DATA / rec["events"], rec["nodes"]).events)
    got = {workload_job_number(j): (s, ranks) for j, (s, _, ranks) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert all(abs(got[j][0] - expected[j][0]) <= 0.1 and got[j][1] == expected[j][2] for j in got)


def test_a_bad_reservations_event_is_refused_whole_and_the_run_goes_on(caplog):
    """The same session with the event's entry asking for 99 nodes of a
    32-host platform: the driver logs one error naming the event and the field, keeps
    the file's reservation (as a bad config reload is refused under Flux),
    and decides on: up to the event's time as in the real run, and after it
    as the replay without the event does (the jobs go back to the GPU
    hosts)."""
    rec = RECORDINGS["reservations-event"]
    session = []
    for msg, reply in pairs(rec):
        m = json.loads(msg)
        for e in m["events"]:
            if e["type"] == "NOTIFY" and e["data"]["type"] == "reservations":
                e["data"]["reservations"][0]["nodes"] = 99
        session.append((json.dumps(m).encode(), reply))
    driver = driver_for(args_of(rec))
    sent = []
    with caplog.at_level("ERROR", logger="fluxsched_py"):
        for msg, _ in session:
            try:
                sent.append(json.loads(driver.handle(msg)))
            except ProtocolError:
                break  # Batsim's recorded events no longer match the decisions
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "reservations event at t=300.000600 refused; the reservations stay as they were: "
        "reservations[0].nodes: fewer than 99 up nodes outside other reservations and running jobs "
        "(flag IGNORE_JOBS takes those) meet requires"
    ]
    assert len(sent) > 20
    recorded = [json.loads(reply) for _, reply in pairs(rec)]
    first_after = next(i for i, r in enumerate(recorded) if r["now"] > 300.0)
    assert sent[:first_after] == recorded[:first_after]
    assert any(
        e["type"] == "EXECUTE_JOB" and 600 <= r["now"] < 1800 and parse_intervals(e["data"]["alloc"]) & GPU_RANKS
        for r in sent
        for e in r["events"]
    )


# -- reservations for groups and accounts ------------------------------------------------


def rejected(rec: dict) -> list[str]:
    return [
        e["data"]["job_id"] for _, reply in pairs(rec) for e in json.loads(reply)["events"] if e["type"] == "REJECT_JOB"
    ]


def test_a_groups_reservation_takes_its_members_jobs_and_an_accounts_its_banks():
    """Uid 8 is in the file's group ``ops``: its jobs ran on ops' ranks in its
    window, uid 7's was rejected; the jobs of bank ``physics`` ran on acct's
    ranks, the one of bank ``chem`` was rejected.  Users and banks are the
    workload's own fields, which Batsim forwards."""
    rec = RECORDINGS["groups-accounts"]
    doc = yaml.safe_load((DATA / rec["reservations"]).read_text())
    members = set(doc["groups"]["ops"])
    window = {r["name"]: (set(IdSet.parse(r["ranks"])), r["start"], r["end"]) for r in doc["reservations"]}
    jobs = {j["id"]: j for j in json.loads((DATA / rec["workload"]).read_text())["jobs"]}
    named = {i: j["reservation"] for i, j in jobs.items() if "reservation" in j}
    allowed = {
        i
        for i, name in named.items()
        if (name == "ops" and jobs[i]["user"] in members) or (name == "acct" and jobs[i]["bank"] == "physics")
    }
    assert allowed and allowed != set(named)  # both kinds of job are there
    assert sorted(workload_job_number(j) for j in rejected(rec)) == sorted(set(named) - allowed)
    done = {workload_job_number(j): v for j, v in runs(rec).items()}
    for i in allowed:
        ranks, start, end = window[named[i]]
        s, e, got = done[i]
        assert set(got) <= ranks and start - 0.1 <= s and e <= end + 0.1, (i, s, e, got)
    for i, (s, e, got) in done.items():  # every other job kept off both windows
        if i not in named:
            for ranks, start, end in window.values():
                assert not (set(got) & ranks and s < end - 0.1 and e > start + 0.1), (i, s, e, got)


def test_with_groups_and_accounts_starts_equal_the_replays_with_the_same_file():
    rec = RECORDINGS["groups-accounts"]
    text = (DATA / rec["reservations"]).read_text()
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        EngineOptions.parse({"queue-policy": "easy"}),
        reservations=read_entries(text, "reservations"),
        groups=read_groups(text, "reservations"),
    )
    expected = {r.job.id: r.start for r in ref.records if r.start is not None}
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1


def test_a_bad_bank_field_is_a_protocol_error_naming_the_job():
    from fluxsched_py.batsim.v4 import Event, parse_job

    event = Event(0.0, "JOB_SUBMITTED", {"job_id": "w0!1", "job": {"res": 1, "bank": ""}})
    with pytest.raises(ProtocolError, match=r"^job w0!1: 'bank' must be a name, got \"\"$"):
        parse_job(event)


# -- reservation flags (Slurm's MAINT, IGNORE_JOBS, FLEX) --------------------------------


def test_slurms_flags_held_in_the_run(tmp_path):
    """MAINT lets maint overlap ops and acct (without it the driver refuses the
    file when Batsim names the machines); no job runs on its ranks while it
    is open; acct's job that would run into it waits for its end; ops is
    FLEX, so its member's job ran on ranks outside it."""
    rec = RECORDINGS["reservation-flags"]
    entries = yaml.safe_load((DATA / rec["reservations"]).read_text())
    by_name = {e["name"]: e for e in entries}
    unflagged = tmp_path / "resv.yaml"
    unflagged.write_text(
        yaml.safe_dump([{**e, "flags": ["IGNORE_JOBS"]} if e["name"] == "maint" else e for e in entries])
    )
    driver = driver_for(["--queue-policy", "easy", "--reservations", str(unflagged)])
    with pytest.raises(ReservationError, match=r"reservations\[2\]\.ranks: ranks .* are in reservation"):
        driver.handle(pairs(rec)[0][0])
    done = {workload_job_number(j): v for j, v in runs(rec).items()}
    maint = by_name["maint"]
    held = set(IdSet.parse(maint["ranks"]))
    inside = [
        i for i, (s, e, r) in done.items() if set(r) & held and s < maint["end"] - 0.1 and e > maint["start"] + 0.1
    ]
    assert inside == []
    assert abs(done[22][0] - maint["end"]) <= 0.1  # acct's job waited for the maintenance's end
    ops = set(IdSet.parse(by_name["ops"]["ranks"]))
    assert not set(done[15][2]) <= ops  # a FLEX reservation's job, outside it


def test_with_flags_starts_equal_the_replays_with_the_same_file():
    rec = RECORDINGS["reservation-flags"]
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        EngineOptions.parse({"queue-policy": "easy"}),
        reservations=yaml.safe_load((DATA / rec["reservations"]).read_text()),
    )
    expected = {r.job.id: r.start for r in ref.records if r.start is not None}
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1


# -- queues (the workload's queue field) -------------------------------------------------


def queue_nodes_at_once(done: dict, queue_of: dict[int, str], queue: str) -> int:
    """The most nodes the jobs of ``queue`` held at one instant."""
    return most_at_once(done, lambda job, ranks: len(ranks) if queue_of[workload_job_number(job)] == queue else 0)


def test_each_job_goes_to_its_queue_with_the_queues_policy_and_limit():
    """The workload names a queue per job; the config gives debug fcfs and a
    total of 8 nodes, batch the file's easy.  Under Batsim debug never held
    more than 8 nodes; without the limit the replay gives it 12, and without
    the queue fields the same config makes another schedule."""
    rec = RECORDINGS["queues"]
    jobs = json.loads((DATA / rec["workload"]).read_text())["jobs"]
    queue_of = {j["id"]: j["queue"] for j in jobs}
    done = runs(rec)
    assert len(done) == rec["jobs"]
    conf = tomllib.loads((DATA / rec["config"]).read_text())
    limit = conf["queues"]["debug"]["policy"]["scheduler"]["limits"]["total"]["nodes"]
    assert queue_nodes_at_once(done, queue_of, "debug") == limit
    options = EngineOptions.parse(conf["sched-py"])
    unlimited = replay(load_workload(DATA / rec["workload"]), nodes_graph(rec["nodes"]), options)
    free = {f"w0!{r.job.id}": (r.start, r.start + r.job.runtime, range(r.nranks)) for r in unlimited.records}
    assert queue_nodes_at_once(free, queue_of, "debug") > limit
    got = {workload_job_number(j): s for j, (s, _, _) in done.items()}
    plain = replay(
        load_workload(BATSIM_DATA / "seed1_first30.json"),
        nodes_graph(rec["nodes"]),
        options,
        limits=RunLimits.from_config(conf),
    )
    assert sum(abs(r.start - got[r.job.id]) > 1 for r in plain.records) >= 5


def test_with_queues_starts_equal_the_replays_with_the_same_config():
    rec = RECORDINGS["queues"]
    conf = tomllib.loads((DATA / rec["config"]).read_text())
    ref = replay(
        load_workload(DATA / rec["workload"]),
        nodes_graph(rec["nodes"]),
        EngineOptions.parse(conf["sched-py"]),
        limits=RunLimits.from_config(conf),
    )
    expected = {r.job.id: r.start for r in ref.records}
    got = {workload_job_number(j): s for j, (s, _, _) in runs(rec).items()}
    assert got.keys() == expected.keys()
    assert max(abs(got[j] - expected[j]) for j in got) <= 0.1


def test_a_bad_queue_field_is_a_protocol_error_naming_the_job():
    from fluxsched_py.batsim.v4 import Event, parse_job

    event = Event(0.0, "JOB_SUBMITTED", {"job_id": "w0!1", "job": {"res": 1, "queue": 3}})
    with pytest.raises(ProtocolError, match=r"^job w0!1: 'queue' must be a name, got 3$"):
        parse_job(event)


def test_under_a_real_batsim_a_node_that_swallows_jobs_gets_no_more_after_the_sink_effect():
    """``node0`` of ``cluster_sink8.xml`` computes 1000 times faster than
    the others, so each of the campaign's 100 s jobs sent there ended in
    0.1 s under Batsim.  After five (``sink-jobs``' default), each under a
    tenth of the campaign's median run time, the engine reported the node
    a sink: no job of the run started there after the fifth ended.  With the
    check off, the driver fed the same messages sends a sixth job there."""
    rec = RECORDINGS["sink"]
    ran = runs(rec)
    on_sink = sorted((start, end) for start, end, ranks in ran.values() if 0 in ranks)
    assert len(on_sink) == 5 and all(end - start < 1.0 for start, end in on_sink)
    assert all(end - start > 99.0 for start, end, ranks in ran.values() if 0 not in ranks)
    last = on_sink[-1][1]
    later = [ranks for start, _, ranks in ran.values() if start >= last]
    assert later and all(0 not in ranks for ranks in later)
    assert len(ran) == rec["jobs"]
    driver = driver_for(args_of(rec, "--sink-jobs", "0"))
    for msg, reply in pairs(rec):
        got = json.loads(driver.handle(msg))["events"]
        if got != json.loads(reply)["events"]:
            sent = [parse_intervals(e["data"]["alloc"]) for e in got if e["type"] == "EXECUTE_JOB"]
            assert any(0 in ranks for ranks in sent), got
            break
    else:
        raise AssertionError("with sink-jobs 0 the driver decided as with the sink effect")
