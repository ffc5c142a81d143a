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
from fluxsched_py.replay.events import read_events
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


# -- absolute dates, placed by the SWF header's UnixStartTime -------------------
#
# 1700000000 is 2023-11-14T22:13:20Z; Stockholm is UTC+1 in November.  The
# window [100, 200) of the schedule above, written as dates: 22:15:00Z to
# 22:16:40Z, i.e. 23:15:00 to 23:16:40 in Stockholm.  The two jobs of user 1
# (SWF lines), 3 nodes each at 0: job 2 (50 s) ends before the window, job 1
# (150 s) waits for its end.

SWF_JOBS = "1 0 -1 150 3 -1 -1 3 150 -1 1 1 1 -1 1 -1 -1 -1\n2 0 -1 50 3 -1 -1 3 50 -1 1 1 1 -1 1 -1 -1 -1\n"


def _swf_replay(tmp_path, capsys, header: str, start: str, end: str) -> tuple[int, dict[str, float], list[str]]:
    wl = tmp_path / "w.swf"
    wl.write_text("; MaxNodes: 4\n" + header + SWF_JOBS)
    resv = tmp_path / "r.yaml"
    resv.write_text(f"- {{name: maint, ranks: '2-3', start: '{start}', end: '{end}'}}\n")
    out = tmp_path / "out"
    argv = [str(wl), "--queue-policy", "easy", "--policy", "low", "--reservations", str(resv), "--output-dir", str(out)]
    rc = replay_cli.main([*argv, "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    if rc != 0:
        return rc, {}, err
    csv = (out / "jobs.csv").read_text().splitlines()
    return rc, {line.split(",")[0]: float(line.split(",")[8]) for line in csv[1:]}, err


@pytest.mark.parametrize(
    "zone, start, end",
    [
        ("; TimeZoneString: Europe/Stockholm\n", "2023-11-14T23:15:00", "2023-11-14T23:16:40"),
        ("", "2023-11-14T22:15:00", "2023-11-14T22:16:40"),  # no zone: UTC
        ("; TimeZoneString: Europe/Stockholm\n", "2023-11-14T22:15:00Z", "2023-11-14T22:16:40+00:00"),
        ("; TimeZoneString: America/Los_Angeles\n", "2023-11-14T14:15:00", "2023-11-14T14:16:40"),
    ],
)
def test_dates_are_placed_by_the_swf_start_time_in_its_zone(tmp_path, capsys, zone, start, end):
    rc, starts, _ = _swf_replay(tmp_path, capsys, "; UnixStartTime: 1700000000\n" + zone, start, end)
    assert rc == 0 and starts == {"1": 200.0, "2": 0.0}


def test_a_date_an_hour_off_moves_the_window(tmp_path, capsys):
    """The same wall-clock time read in UTC instead of Stockholm's zone is an
    hour later: the window [3700, 3800) no longer holds job 1 back."""
    rc, starts, _ = _swf_replay(
        tmp_path, capsys, "; UnixStartTime: 1700000000\n", "2023-11-14T23:15:00", "2023-11-14T23:16:40"
    )
    assert rc == 0 and starts == {"1": 0.0, "2": 150.0}


def test_an_swf_trace_without_a_start_time_names_the_header(tmp_path, capsys):
    rc, _, err = _swf_replay(tmp_path, capsys, "", "2023-11-14T23:15:00", "2023-11-14T23:16:40")
    resv, wl = tmp_path / "r.yaml", tmp_path / "w.swf"
    assert rc == 1 and err == [
        f"fluxsched-py replay: {resv}: reservations[0].start: '2023-11-14T23:15:00': an absolute date needs "
        f"a start date, and the workload {wl} has no UnixStartTime header"
    ]


def test_an_unknown_time_zone_is_named(tmp_path, capsys):
    header = "; UnixStartTime: 1700000000\n; TimeZoneString: Mars/Olympus\n"
    rc, _, err = _swf_replay(tmp_path, capsys, header, "2023-11-14T23:15:00", "2023-11-14T23:16:40")
    assert rc == 1 and len(err) == 1
    assert err[0].endswith(
        "reservations[0].start: '2023-11-14T23:15:00': the trace's TimeZoneString 'Mars/Olympus' "
        "is no known time zone: give a UTC offset"
    )
    # With an offset the zone is not needed.
    rc, starts, _ = _swf_replay(tmp_path, capsys, header, "2023-11-14T22:15:00Z", "2023-11-14T22:16:40Z")
    assert rc == 0 and starts == {"1": 200.0, "2": 0.0}


def test_a_batsim_workload_has_no_start_date(tmp_path, capsys):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    resv = tmp_path / "r.yaml"
    resv.write_text("- {name: maint, ranks: '2-3', start: 100, end: '2026-12-01T08:00:00', users: [7]}\n")
    assert replay_cli.main([str(wl), "--queue-policy", "easy", "--reservations", str(resv)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"fluxsched-py replay: {resv}: reservations[0].end: '2026-12-01T08:00:00': an absolute date needs a "
        f"start date, and the workload {wl} has no start date (only an SWF header's UnixStartTime gives one)"
    ]


def test_the_swf_reader_keeps_the_start_time_and_zone():
    from fluxsched_py.replay.workload import read_swf

    w = read_swf("; UnixStartTime: 1700000000\n; TimeZoneString: Europe/Stockholm\n" + SWF_JOBS)
    assert (w.start_time, w.timezone) == (1700000000.0, "Europe/Stockholm")
    assert (read_swf(SWF_JOBS).start_time, read_swf(SWF_JOBS).timezone) == (None, None)


def test_the_file_takes_slurms_flags():
    """A MAINT window over ``maint`` is taken (without the flag it is
    refused); job 3 of ``maint`` (2 nodes, 50 s at 100 on 2-3) would run into
    the maintenance on 2-3 from 120: it never starts, and is denied when
    ``maint`` ends.  The regular jobs keep off both windows: job 1 waits
    for the maintenance's end (300)."""
    over = {"name": "m", "ranks": "0-3", "start": 120, "end": 300, "users": [9]}
    w = read_batsim({**WORKLOAD, "jobs": WORKLOAD["jobs"][:3]})
    with pytest.raises(ReservationError, match=r"reservations\[1\]\.ranks: ranks 2-3 are in reservation maint"):
        replay(w, nodes_graph(4), {"queue-policy": "easy", "policy": "low"}, reservations=[*MAINT, over])
    r = replay(
        w,
        nodes_graph(4),
        {"queue-policy": "easy", "policy": "low"},
        reservations=[*MAINT, {**over, "flags": ["maint"]}],
    )
    assert {x.job.id: x.start for x in r.records} == {1: 300.0, 2: 0.0, 3: None}
    assert r.records[2].state == "REJECTED" and r.records[2].note == "reservation maint ended or was removed"


ACCESS = {
    "nb_res": 4,
    "jobs": [
        {"id": 1, "subtime": 10, "walltime": 50, "res": 2, "profile": "p50", "user": 8, "reservation": "ops"},
        {"id": 2, "subtime": 10, "walltime": 50, "res": 1, "profile": "p50", "user": 7, "reservation": "ops"},
        {"id": 3, "subtime": 10, "walltime": 50, "res": 2, "profile": "p50", "user": 1, "reservation": "acct"},
        {"id": 4, "subtime": 10, "walltime": 50, "res": 1, "profile": "p50", "user": 1, "reservation": "acct"},
    ],
    "profiles": {"p50": {"type": "delay", "delay": 50}},
}
ACCESS["jobs"][2]["bank"] = "physics"
ACCESS["jobs"][3]["bank"] = "chem"
ACCESS_FILE = """groups: {ops: [8, 9]}
reservations:
  - {name: ops, ranks: '2-3', start: 100, end: 200, groups: [ops]}
  - {name: acct, ranks: '0-1', start: 100, end: 200, accounts: [physics]}
"""


def test_the_file_gives_groups_and_accounts(tmp_path, capsys):
    """User 8 is in the file's group ``ops``: its job starts at 100 on 2-3,
    user 7's is denied; the job of bank physics starts at 100 on 0-1, the
    one of bank chem is denied."""
    wl, resv, out = tmp_path / "w.json", tmp_path / "r.yaml", tmp_path / "out"
    wl.write_text(json.dumps(ACCESS))
    resv.write_text(ACCESS_FILE)
    argv = [str(wl), "--queue-policy", "easy", "--policy", "low", "--reservations", str(resv), "--output-dir", str(out)]
    assert replay_cli.main([*argv, "--json"]) == 0
    capsys.readouterr()
    rows = [line.split(",") for line in (out / "jobs.csv").read_text().splitlines()]
    starts = {r[0]: r[8] for r in rows[1:]}
    assert starts == {"1": "100", "2": "", "3": "100", "4": ""}


def test_a_group_the_file_does_not_give_is_one_error(tmp_path, capsys):
    wl, resv = tmp_path / "w.json", tmp_path / "r.yaml"
    wl.write_text(json.dumps(ACCESS))
    resv.write_text(ACCESS_FILE.replace("groups: [ops]", "groups: [wheel]"))
    assert replay_cli.main([str(wl), "--reservations", str(resv)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fluxsched-py replay: {resv}: reservations[0].groups: no such group: 'wheel'"]
    resv.write_text("groups: {ops: [x]}\nreservations: []\n")
    assert replay_cli.main([str(wl), "--reservations", str(resv)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fluxsched-py replay: {resv}: reservations.groups.ops: expected a list of uids, got ['x']"]


# -- reservations declared again at a time (``--events``: a reservations event) ----


def reservations_event(t: float, entries: list, generic: bool = False) -> str:
    """An events file's line declaring ``entries`` at ``t``: of its own type
    (Batsim 4, ``--forward-unknown-events``) or in a generic event's ``data``
    (Batsim 5)."""
    event = {"type": "reservations", "reservations": entries}
    if generic:
        return json.dumps({"timestamp": t, "type": "generic", "data": json.dumps(event)}) + "\n"
    return json.dumps({"timestamp": t, **event}) + "\n"


@pytest.mark.parametrize("generic", [False, True])
def test_a_reservations_event_removes_or_moves_the_files_reservation(generic):
    """The module's workload under easy.  An event at t=5 that declares no
    reservation removes ``maint``: job 1 starts at 50, when job 2 ends (not
    at the window's end, 200), and jobs 3 and 4, submitted at 10, name a
    reservation there is no more.  One that declares ``maint`` on 0-1
    instead moves it: job 3 runs at 100 on 0-1."""
    options = {"queue-policy": "easy", "policy": "low"}

    def run(line):
        events = read_events(line, 4).events
        r = replay(read_batsim(WORKLOAD), nodes_graph(4), options, reservations=MAINT, events=events)
        return {x.job.id: x for x in r.records}

    gone = run(reservations_event(5, [], generic))
    assert {j: x.start for j, x in gone.items()} == {1: 50.0, 2: 0.0, 3: None, 4: None}
    assert gone[3].note == "reservation maint: no such reservation"
    moved = run(reservations_event(5, [{**MAINT[0], "ranks": "0-1"}], generic))
    assert {j: x.start for j, x in moved.items()} == {1: 200.0, 2: 0.0, 3: 100.0, 4: None}
    assert str(moved[3].ranks) == "0-1"


def test_the_cli_takes_a_reservations_event_and_refuses_a_bad_one_with_its_line(tmp_path, capsys):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    resv = tmp_path / "r.yaml"
    resv.write_text("- {name: maint, ranks: '2-3', start: 100, end: 200, users: [7]}\n")
    events = tmp_path / "events.txt"
    out = tmp_path / "out"
    argv = [str(wl), "--queue-policy", "easy", "--policy", "low", "--reservations", str(resv)]
    argv += ["--events", str(events), "--output-dir", str(out)]
    events.write_text(reservations_event(5, []))
    assert replay_cli.main([*argv, "--json"]) == 0
    capsys.readouterr()
    starts = {line.split(",")[0]: line.split(",")[8] for line in (out / "jobs.csv").read_text().splitlines()[1:]}
    assert starts == {"1": "50", "2": "0", "3": "", "4": ""}
    for text, message in [
        (
            '{"timestamp": 5, "type": "reservations"}\n',
            f"{events}:1: a reservations event needs a 'reservations' list (entries as in --reservations FILE)",
        ),
        (
            reservations_event(5, [{"name": "m", "ranks": "7", "start": 100, "end": 200}]),
            f"{events}:1: reservations[0].ranks: no such rank: 7",
        ),
    ]:
        events.write_text(text)
        assert replay_cli.main(argv) == 1
        assert capsys.readouterr().err.strip().splitlines() == [f"fluxsched-py replay: {message}"]
