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

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.batsim.intervals import parse_intervals
from fluxsched_py.engine import EngineOptions
from fluxsched_py.engine.runlimits import RunLimits
from fluxsched_py.ids import IdSet
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from t.batsim_recordings import BATSIM_DATA, batsim_side, manifest, message_pairs, workload_job_number

DATA = BATSIM_DATA / "features"
RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}


def args_of(rec: dict, *extra: str) -> list[str]:
    """The recording's command line, its input files as paths in DATA."""
    return [str(DATA / a) if (DATA / a).is_file() else a for a in rec["args"]] + list(extra)


def pairs(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def runs(rec: dict) -> dict[str, tuple[float, float, IdSet]]:
    """Each started job of the recording: (Batsim start, Batsim end, ranks)."""
    start: dict[str, tuple[float, IdSet]] = {}
    end: dict[str, float] = {}
    for msg, reply in pairs(rec):
        for e in json.loads(msg)["events"]:
            if e["type"] == "JOB_COMPLETED":
                end[e["data"]["job_id"]] = e["timestamp"]
        r = json.loads(reply)
        for e in r["events"]:
            if e["type"] == "EXECUTE_JOB":
                start[e["data"]["job_id"]] = (r["now"], parse_intervals(e["data"]["alloc"]))
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
    ],
)
def test_a_malformed_reservations_file_is_one_line_and_exit_1_before_listening(tmp_path, text, words):
    f = tmp_path / "resv.yaml"
    f.write_text(text)
    p = run_cli(tmp_path, "--reservations", str(f))
    (line,) = p.stderr.splitlines()
    assert p.returncode == 1 and line.startswith(f"fluxsched-py batsim: {f}: ") and words in line, p.stderr
    assert not (tmp_path / "s").exists()


def test_a_reservation_the_platform_cannot_hold_ends_the_run_with_one_line(tmp_path):
    """Rank 40 of a 32-host platform is known to be missing only when Batsim
    sends SIMULATION_BEGINS: the recorded Batsim side gets no reply."""
    pytest.importorskip("zmq")
    f = tmp_path / "resv.yaml"
    f.write_text("- {name: m, ranks: 40, start: 0, end: 100}\n")
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fluxsched_py",
            "batsim",
            "--socket",
            endpoint,
            "--timeout",
            "10",
            "-q",
            "--reservations",
            str(f),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    with batsim_side(endpoint) as sock:
        sock.send(pairs(RECORDINGS["reservations"])[0][0])
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.splitlines() == [f"fluxsched-py batsim: ERROR: {f}: reservations[0].ranks: no such rank: 40"]


# -- --config ----------------------------------------------------------------------


def most_running(done: dict[str, tuple[float, float, IdSet]]) -> int:
    edges = sorted([(s, 1) for s, _, _ in done.values()] + [(e, -1) for _, e, _ in done.values()])
    running = most = 0
    for _, d in edges:
        running += d
        most = max(most, running)
    return most


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
    f = tmp_path / "flux.toml"
    f.write_text(text)
    p = run_cli(tmp_path, "--config", str(f))
    (line,) = p.stderr.splitlines()
    assert p.returncode == 1 and line.startswith(f"fluxsched-py batsim: --config {f}: ") and words in line, p.stderr
    assert not (tmp_path / "s").exists()
