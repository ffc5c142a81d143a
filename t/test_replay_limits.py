"""``fluxsched-py replay --config FILE``: the instance's limits in the replay.

Tiny workloads whose start times are counted by hand: users from a Batsim
job's ``user`` (a name or a number) and from SWF field 12; the config is the
same TOML a Flux instance reads."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("fluxsched-py")


def run(tmp_path, workload, config, *args):
    conf = tmp_path / "flux.toml"
    conf.write_text(config)
    out = tmp_path / "out"
    p = subprocess.run(
        [str(SCRIPT), "replay", str(workload), "--config", str(conf), "--no-progress", "--output-dir", str(out), *args],
        capture_output=True,
        text=True,
    )
    return p, out / "jobs.csv"


def starts(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {int(r["job_id"]): (float(r["starting_time"]) if r["starting_time"] else None) for r in rows}


def batsim(tmp_path, jobs, nb_res=2):
    p = tmp_path / "w.json"
    profiles = {"p": {"type": "delay", "delay": 100}}
    p.write_text(json.dumps({"nb_res": nb_res, "jobs": jobs, "profiles": profiles}))
    return p


def job(i, t, user, res=1):
    return {"id": i, "subtime": t, "walltime": 100, "res": res, "profile": "p", "user": user}


def test_a_named_users_limit_in_a_batsim_workload(tmp_path):
    # 2 nodes; alice may hold 1: her second job waits for her first (t=100), bob starts at once
    w = batsim(tmp_path, [job(0, 0, "alice"), job(1, 0, "alice"), job(2, 1, "bob")])
    p, jobs = run(tmp_path, w, "[policy.scheduler.limits]\nusers.alice = { nodes = 1 }\n", "--queue-policy", "fcfs")
    assert p.returncode == 0, p.stderr
    assert starts(jobs) == {0: 0.0, 1: 100.0, 2: 1.0}
    # without the config, fcfs starts both of alice's at once and bob waits
    plain = subprocess.run(
        [str(SCRIPT), "replay", str(w), "--queue-policy", "fcfs", "--no-progress", "--output-dir", str(tmp_path / "p")],
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and starts(tmp_path / "p" / "jobs.csv") == {0: 0.0, 1: 0.0, 2: 100.0}


def test_a_numeric_user_and_a_job_that_asks_more_than_its_limit(tmp_path):
    w = batsim(tmp_path, [job(0, 0, 7, res=2), job(1, 0, 7), job(2, 5, 8, res=2)], nb_res=3)
    p, jobs = run(tmp_path, w, "[policy.scheduler.limits]\nuser = { nodes = 1 }\nusers.8 = { nodes = 2 }\n")
    assert p.returncode == 0, p.stderr
    for policy in ("fcfs", "easy", "conservative"):
        got = starts(jobs.parent / policy / "jobs.csv")
        assert got == {0: None, 1: 0.0, 2: 5.0}, policy  # 0 asks 2 nodes of user 7's 1: never started
    assert (
        "fcfs: 1 of 3 jobs never started (ids 0): user limit: job needs 2 nodes, more than the limit of 1 "
        "(held until the limit is raised)"
    ) in p.stderr


def test_swf_users_are_field_12(tmp_path):
    # job submit wait run procs cpu mem req_procs req_time req_mem status user group app queue part prec think
    lines = [
        "1 0 -1 100 1 -1 -1 1 100 -1 1 3 1 1 1 -1 -1 -1",
        "2 0 -1 100 1 -1 -1 1 100 -1 1 3 1 1 1 -1 -1 -1",
        "3 0 -1 100 1 -1 -1 1 100 -1 1 4 1 1 1 -1 -1 -1",
    ]
    w = tmp_path / "w.swf"
    w.write_text("; MaxNodes: 4\n" + "\n".join(lines) + "\n")
    p, jobs = run(tmp_path, w, "[policy.scheduler.limits]\nusers.3 = { jobs = 1 }\n", "--queue-policy", "easy")
    assert p.returncode == 0, p.stderr
    assert starts(jobs) == {1: 0.0, 2: 100.0, 3: 0.0}


def test_the_limits_are_in_the_json_provenance(tmp_path):
    w = batsim(tmp_path, [job(0, 0, "alice")])
    p, _ = run(tmp_path, w, "[sched-py.limits]\nuser = { jobs = 4 }\n", "--queue-policy", "easy", "--json")
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["options"]["limits"] == ["instance: user jobs=4"] and row["options"]["config"].endswith("flux.toml")


def test_a_bad_config_is_one_line_and_exit_1(tmp_path):
    w = batsim(tmp_path, [job(0, 0, "alice")])
    for text, words in (
        ("[policy.scheduler.limits]\nuser = { nodes = -3 }\n", "policy.scheduler.limits.user.nodes: expected"),
        ("[policy.scheduler\n", "not a TOML file"),
        ("[policy.scheduler.limits]\nusers.bob = 3\n", "policy.scheduler.limits.users.bob must be a table"),
    ):
        p, _ = run(tmp_path, w, text)
        assert p.returncode == 1 and p.stdout == "", p.stderr
        (line,) = p.stderr.splitlines()
        assert line.startswith(f"fluxsched-py replay: --config {tmp_path / 'flux.toml'}: ") and words in line, line


def _backfill_case(tmp_path):
    """2 nodes: job 0 holds one until t=100, job 1 asks both, job 2 (one node,
    50 s) arrives at t=1: EASY backfills it at 1, fcfs starts it after job 1, at 200."""
    profiles = {"p": {"type": "delay", "delay": 100}, "q": {"type": "delay", "delay": 50}}
    jobs = [job(0, 0, "alice"), job(1, 0, "alice", res=2), {**job(2, 1, "bob"), "walltime": 50, "profile": "q"}]
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"nb_res": 2, "jobs": jobs, "profiles": profiles}))
    return w


def test_the_files_engine_options_stand_where_no_flag_is_given(tmp_path):
    w = _backfill_case(tmp_path)
    p, jobs = run(tmp_path, w, '[sched-py]\nqueue-policy = "easy"\n', "--json")
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)  # the file's one policy, not the three compared by default
    assert row["policy"] == "easy" and starts(jobs) == {0: 0.0, 1: 100.0, 2: 1.0}


def test_a_flag_wins_over_the_file(tmp_path):
    w = _backfill_case(tmp_path)
    p, jobs = run(tmp_path, w, '[sched-py]\nqueue-policy = "easy"\n', "--queue-policy", "fcfs")
    assert p.returncode == 0, p.stderr
    assert starts(jobs) == {0: 0.0, 1: 100.0, 2: 200.0}
    again = tmp_path / "compare"
    again.mkdir()
    p, jobs = run(again, w, '[sched-py]\nqueue-policy = "easy"\n', "--compare", "fcfs,conservative")
    assert p.returncode == 0, p.stderr
    assert sorted(d.name for d in jobs.parent.iterdir()) == ["conservative", "fcfs"]


def test_the_modules_own_keys_are_noted_not_taken(tmp_path):
    w = batsim(tmp_path, [job(0, 0, "alice")])
    # the module's reservations store and power programs: the replay has --reservations and --platform
    p, _ = run(tmp_path, w, '[[sched-py.reservation]]\nname = "m"\n[sched-py.power]\n', "--queue-policy", "easy")
    assert p.returncode == 0, p.stderr
    assert "[sched-py] power, reservation: the module's, not read here" in p.stderr


def test_a_bad_option_in_the_file_is_one_line_and_exit_1(tmp_path):
    w = batsim(tmp_path, [job(0, 0, "alice")])
    p, _ = run(tmp_path, w, '[sched-py]\nqueue-policy = "sjf"\n')
    assert p.returncode == 1 and p.stdout == "", p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"fluxsched-py replay: --config {tmp_path / 'flux.toml'}: ") and "queue-policy" in line
