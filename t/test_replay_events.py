"""``fluxsched-py replay --events FILE``: Batsim's external events in the replay.

The file format is Batsim's (its ``docs/input-events.rst`` and
``src/events.cpp``): machines become unavailable (no new job; a running job
is not killed) and available again.  The small cases are counted by hand;
the seeded ones check, against the events file itself, that no job starts on
a machine unavailable at that time, and that events which change nothing
leave every start as it was.
"""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.replay.events import EventsError, read_events
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import Workload, WorkloadJob

SCRIPT = Path(sys.executable).with_name("fluxsched-py")

#: Batsim's own example (events/test_events_4hosts.txt in its repository), as its docs show it.
BATSIM_EXAMPLE = """\
{"type": "machine_unavailable", "resources": "0", "timestamp" : 0}
{"type": "machine_available", "resources": "0", "timestamp" : 10}
{"type": "machine_unavailable", "resources": "0-1 3", "timestamp" : 20}
{"type": "machine_available", "resources": "0 1", "timestamp" : 250}
{"type": "machine_available", "resources": "3", "timestamp" : 300}
"""


def event(kind, resources, t):
    return json.dumps({"type": kind, "resources": resources, "timestamp": t})


def batsim_workload(tmp_path, jobs, nb_res):
    p = tmp_path / "w.json"
    profiles = {f"d{d}": {"type": "delay", "delay": d} for d in {j[3] for j in jobs}}
    p.write_text(
        json.dumps(
            {
                "nb_res": nb_res,
                "profiles": profiles,
                "jobs": [
                    {"id": i, "subtime": t, "res": res, "walltime": d, "profile": f"d{d}"} for i, t, res, d in jobs
                ],
            }
        )
    )
    return p


def run(tmp_path, workload, events, policy, *extra):
    ev = tmp_path / "events.txt"
    ev.write_text(events)
    out = tmp_path / policy
    p = subprocess.run(
        [
            str(SCRIPT),
            "replay",
            str(workload),
            "--events",
            str(ev),
            "--queue-policy",
            policy,
            "--no-progress",
            "--output-dir",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    with open(out / "jobs.csv") as f:
        rows = {int(r["job_id"]): r for r in csv.DictReader(f)}
    return p, rows


def start(row):
    return float(row["starting_time"]) if row["starting_time"] else None


def test_batsims_example_file_reads_as_batsim_sorts_it():
    got = read_events(BATSIM_EXAMPLE, 4, "ev")
    assert [(e.time, str(e.ranks), e.available) for e in got.events] == [
        (0.0, "0", False),
        (10.0, "0", True),
        (20.0, "0-1,3", False),
        (250.0, "0-1", True),
        (300.0, "3", True),
    ]


def test_at_one_time_available_comes_before_unavailable_whatever_the_file_order():
    text = "\n".join(
        [
            event("machine_unavailable", "0", 100),
            event("machine_unavailable", "0", 0),
            event("machine_available", "0", 100),
            "",
            event("machine_available", "0", 200),
        ]
    )
    got = read_events(text, 1)
    assert [(e.time, e.available) for e in got.events] == [(0, False), (100, True), (100, False), (200, True)]


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_a_job_waits_for_its_machine_and_a_short_one_backfills_under_easy(tmp_path, policy):
    # 2 machines, machine 1 unavailable from 0 to 100.  Job 0 needs both
    # (50 s): it waits until 100.  Job 1 (1 machine, 10 s) fits on machine 0:
    # fcfs keeps it behind job 0 (starts at 150); easy and conservative
    # backfill it at once (it ends long before machine 1 is back).
    w = batsim_workload(tmp_path, [(0, 0, 2, 50), (1, 0, 1, 10)], 2)
    events = event("machine_unavailable", "1", 0) + "\n" + event("machine_available", "1", 100) + "\n"
    _, rows = run(tmp_path, w, events, policy)
    assert start(rows[0]) == 100.0
    assert start(rows[1]) == (150.0 if policy == "fcfs" else 0.0)


def test_a_running_job_is_not_killed_and_a_new_one_waits_for_the_machine(tmp_path):
    # 1 machine: job 0 (0-100 s) runs on while the machine is unavailable
    # from 50 to 500; job 1, submitted at 10, starts when it is back.
    w = batsim_workload(tmp_path, [(0, 0, 1, 100), (1, 10, 1, 10)], 1)
    events = event("machine_unavailable", "0", 50) + "\n" + event("machine_available", "0", 500) + "\n"
    _, rows = run(tmp_path, w, events, "easy")
    assert (start(rows[0]), float(rows[0]["finish_time"]), rows[0]["final_state"]) == (
        0.0,
        100.0,
        "COMPLETED_SUCCESSFULLY",
    )
    assert start(rows[1]) == 500.0


def test_the_same_time_order_decides_the_start(tmp_path):
    # Down from 0; at 100 the file says unavailable then available, which
    # Batsim applies as available then unavailable: down until 200.
    w = batsim_workload(tmp_path, [(0, 0, 1, 10)], 1)
    events = "\n".join(
        [
            event("machine_unavailable", "0", 0),
            event("machine_unavailable", "0", 100),
            event("machine_available", "0", 100),
            event("machine_available", "0", 200),
        ]
    )
    _, rows = run(tmp_path, w, events, "fcfs")
    assert start(rows[0]) == 200.0


def test_a_job_whose_machines_never_come_back_is_named_as_never_started(tmp_path):
    w = batsim_workload(tmp_path, [(0, 0, 2, 10), (1, 0, 1, 10)], 2)
    p, rows = run(tmp_path, w, event("machine_unavailable", "1", 0) + "\n", "easy")
    assert start(rows[0]) is None and start(rows[1]) == 0.0
    assert "easy: 1 of 2 jobs never started (ids 0)" in p.stderr


def _workload(seed, nodes=16, n=200):
    rnd = random.Random(seed)
    jobs = []
    for i in range(n):
        k = rnd.choice([1, 1, 2, 3, 4, 8])
        wall = rnd.choice([50.0, 100.0, 400.0])
        jobs.append(WorkloadJob(i, str(i), i * 5.0, node_request(k, wall), wall, wall * rnd.uniform(0.2, 1.0), k))
    return Workload(jobs, nodes)


def _random_events(seed, nodes, until):
    rnd = random.Random(seed * 31)
    lines = []
    for _ in range(40):
        lo = rnd.randrange(nodes)
        hi = min(nodes - 1, lo + rnd.randrange(3))
        t = rnd.uniform(0, until)
        lines.append(event("machine_unavailable", f"{lo}-{hi}", t))
        lines.append(event("machine_available", f"{lo}-{hi}", t + rnd.uniform(10, 600)))
    return "\n".join(lines)


def _down_at(events, t):
    """The ranks unavailable just after every event at or before ``t``: from the file, not from the engine."""
    down: set[int] = set()
    for e in events:
        if e.time > t:
            break
        if e.available:
            down -= set(e.ranks)
        else:
            down |= set(e.ranks)
    return down


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_job_starts_on_a_machine_unavailable_then_and_every_job_runs(policy, seed):
    w = _workload(seed)
    events = read_events(_random_events(seed, 16, 1000.0), 16).events
    result = replay(w, nodes_graph(16), {"queue-policy": policy}, check=lambda e: e.check_invariants(), events=events)
    assert all(r.start is not None for r in result.records)  # every machine comes back
    moved = 0
    plain = replay(w, nodes_graph(16), {"queue-policy": policy}).starts()
    for r in result.records:
        assert not (set(r.ranks) & _down_at(events, r.start)), (r.job.id, r.start, r.ranks)
        moved += plain[r.job.id] != r.start
    assert moved > 0  # the events did change the schedule


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_events_that_change_nothing_leave_every_start_as_it_was(policy):
    # "available" for machines already available, at many times: each one
    # makes the engine plan again, and no decision may change.
    w = _workload(4)
    text = "\n".join(event("machine_available", "0-15", t) for t in range(0, 1000, 37))
    events = read_events(text, 16).events
    got = replay(w, nodes_graph(16), {"queue-policy": policy}, events=events)
    plain = replay(w, nodes_graph(16), {"queue-policy": policy})
    assert got.starts() == plain.starts()
    assert [r.ranks for r in got.records] == [r.ranks for r in plain.records]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"type": "machine_unavailable", "resources": "0"', "ev:2: not a JSON object"),
        ("[1, 2]", "ev:2: an event is a JSON object, not list"),
        ('{"resources": "0", "timestamp": 1}', "ev:2: an event needs a 'type' string"),
        ('{"type": "machine_unavailable", "resources": "0", "timestamp": -1}', "ev:2: 'timestamp' must be a number"),
        ('{"type": "machine_unavailable", "resources": "0", "timestamp": "1"}', "ev:2: 'timestamp' must be a number"),
        ('{"type": "reboot", "resources": "0", "timestamp": 1}', "ev:2: unknown event type 'reboot'"),
        ('{"type": "machine_available", "timestamp": 1}', "ev:2: machine_available needs a 'resources' interval set"),
        ('{"type": "machine_available", "resources": "2-x", "timestamp": 1}', "ev:2: invalid interval set '2-x'"),
        ('{"type": "machine_available", "resources": "3-4", "timestamp": 1}', "ev:2: resource 4 does not exist"),
    ],
)
def test_a_bad_line_names_the_file_the_line_and_the_reason(line, reason):
    text = event("machine_unavailable", "0", 0) + "\n" + line + "\n"
    with pytest.raises(EventsError) as exc:
        read_events(text, 4, "ev")
    assert str(exc.value).startswith(reason), str(exc.value)


def test_a_generic_event_is_counted_and_left():
    got = read_events('{"type": "generic", "timestamp": 5.3, "data": "some data"}\n', 2)
    assert got.events == () and got.generic == 1


def test_a_generic_event_carrying_batsim_5s_machine_event_is_that_event():
    """Batsim 5 has only generic events; its docs give machine events as
    ``data`` (the object batprotocol's driver applies): the same file in
    Batsim 4's words and in Batsim 5's reads the same."""
    v4 = event("machine_unavailable", "0-1 3", 10) + "\n" + event("machine_available", "1", 20) + "\n"
    v5 = "".join(
        json.dumps(
            {
                "type": "generic",
                "timestamp": e["timestamp"],
                "data": json.dumps({k: e[k] for k in ("type", "resources")}),
            }
        )
        + "\n"
        for e in map(json.loads, v4.splitlines())
    )
    assert read_events(v5, 4) == read_events(v4, 4)
    with pytest.raises(EventsError, match="^ev:1: resource 7 does not exist"):
        read_events(v5.replace("0-1 3", "7"), 4, "ev")


def test_the_cli_gives_one_line_for_a_bad_file(tmp_path):
    ev = tmp_path / "ev.txt"
    ev.write_text(event("machine_unavailable", "9", 0) + "\n")
    p = subprocess.run(
        [str(SCRIPT), "replay", "--nodes", "4", "--events", str(ev), "--no-progress"], capture_output=True, text=True
    )
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"fluxsched-py replay: {ev}:1: resource 9 does not exist (the machine has 0-3)"
    ]
    missing = subprocess.run(
        [str(SCRIPT), "replay", "--events", str(tmp_path / "none.txt"), "--no-progress"], capture_output=True, text=True
    )
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "none.txt: cannot read" in missing.stderr


def test_idset_of_a_batsim_interval_set_is_what_the_replay_marks_down():
    got = read_events(event("machine_unavailable", "1-2 5", 0), 8).events
    assert got[0].ranks == IdSet.parse("1-2,5")
