"""``fluxsched-py replay --reservations FILE``: the engine's advance
reservations in simulated time, hand-counted on 4 nodes (placement low).

The workload (Batsim JSON, whole nodes): job 1 of user 1, 3 nodes for 150 s
at 0; job 2 of user 1, 3 nodes for 50 s at 0; job 3 of user 7 in ``maint``,
2 nodes for 50 s at 10; job 4 of user 7 in ``maint``, 1 node for 200 s at 10
(longer than the window: denied at submission).  ``maint`` holds ranks 2-3
over [100, 200) for user 7.  Under easy: job 2 starts at 0 on 0-2 (it ends
before the window); job 1 would still run at 100, so it waits for the
window's end, 200; job 3 starts at 100 on 2-3 though nothing ends then.
"""

from __future__ import annotations

import json

import pytest

from fluxsched_py.engine.reservations import ReservationError
from fluxsched_py.replay import cli as replay_cli
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import read_batsim

WORKLOAD = {
    "nb_res": 4,
    "jobs": [
        {"id": 1, "subtime": 0, "walltime": 150, "res": 3, "profile": "p150", "user": 1},
        {"id": 2, "subtime": 0, "walltime": 50, "res": 3, "profile": "p50", "user": 1},
        {"id": 3, "subtime": 10, "walltime": 50, "res": 2, "profile": "p50", "user": 7, "reservation": "maint"},
        {"id": 4, "subtime": 10, "walltime": 200, "res": 1, "profile": "p150", "user": 7, "reservation": "maint"},
    ],
    "profiles": {"p150": {"type": "delay", "delay": 150}, "p50": {"type": "delay", "delay": 50}},
}
MAINT = [{"name": "maint", "ranks": "2-3", "start": 100, "end": 200, "users": [7]}]


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_jobs_are_planned_around_the_window_and_its_jobs_run_in_it(policy):
    r = replay(read_batsim(WORKLOAD), nodes_graph(4), {"queue-policy": policy, "policy": "low"}, reservations=MAINT)
    got = {x.job.id: (x.start, x.finish, str(x.ranks) if x.ranks is not None else None) for x in r.records}
    assert got == {1: (200.0, 350.0, "0-2"), 2: (0.0, 50.0, "0-2"), 3: (100.0, 150.0, "2-3"), 4: (None, None, None)}
    rec4 = r.records[3]
    assert rec4.state == "REJECTED" and rec4.note == "reservation maint: walltime longer than the reservation"


def test_without_the_reservation_job_1_starts_after_job_2():
    w = read_batsim({**WORKLOAD, "jobs": WORKLOAD["jobs"][:2]})
    r = replay(w, nodes_graph(4), {"queue-policy": "easy", "policy": "low"})
    assert [(x.start, x.finish) for x in r.records] == [(0.0, 150.0), (150.0, 200.0)]


def test_a_bad_reservation_is_refused_naming_its_field():
    with pytest.raises(ReservationError, match=r"reservations\[0\]\.ranks: no such rank: 9"):
        replay(read_batsim(WORKLOAD), nodes_graph(4), {}, reservations=[{**MAINT[0], "ranks": "9"}])


def test_the_cli_reads_the_file(tmp_path, capsys):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    resv = tmp_path / "r.yaml"
    resv.write_text("reservations:\n  - {name: maint, ranks: '2-3', start: 100, duration: 100s, users: [7]}\n")
    out = tmp_path / "out"
    argv = [str(wl), "--queue-policy", "easy", "--policy", "low", "--reservations", str(resv), "--output-dir", str(out)]
    assert replay_cli.main([*argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["jobs"] == 4 and row["rejected"] == 1
    csv = (out / "jobs.csv").read_text().splitlines()
    starts = {line.split(",")[0]: line.split(",")[8] for line in csv[1:]}
    assert {k: float(v) for k, v in starts.items() if v} == {"1": 200.0, "2": 0.0, "3": 100.0}


@pytest.mark.parametrize(
    "text, message",
    [
        ("- {name: m, ranks: '0', start: 1}\n", "reservations[0].end: give end or duration (one of them)"),
        ("[1, 2]\n", "reservations: expected a list of reservations, or {reservations: [...]}"),
        (
            "- {name: m, ranks: '0-1', start: 0, end: 50}\n- {name: n, ranks: '1', start: 10, end: 20}\n",
            "reservations[1].ranks: ranks 1 are in reservation m at that time",
        ),
    ],
)
def test_the_cli_error_is_one_line(tmp_path, capsys, text, message):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    resv = tmp_path / "r.yaml"
    resv.write_text(text)
    assert replay_cli.main([str(wl), "--queue-policy", "easy", "--reservations", str(resv)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"fluxsched-py replay: {resv}: {message}"
