"""Advance reservations under a real flux-core: issue 24's must-hold.

A 4-node instance under easy (mock execution).  The owner reserves 2 nodes
from 60 s on (``flux sched-py reserve add maint --nodes 2 --start +60s
--duration 2m``).  A 10-minute 3-node job of another user would still run on
a reserved node when the window opens: it stays pending, and its
``reason_pending`` names ``maint``; a 30 s 3-node job starts at once (it ends
before the window).  At the window's start, a job submitted with
``--setattr=system.reservation=maint`` starts on the reserved nodes.  The
reservation is still listed after ``flux module reload sched-py``; a guest's
``reserve add`` is refused with one clear line; malformed payloads are
answered with the field named, and the module stays loaded.

Another user's job: flux-core's job-ingest takes a J signed with the
``none`` mechanism only from the owner role and checks that its signer is
the requester, so without flux-security the test signs the jobspec as uid
4243 itself (flux-core's ``sign_none.c`` format) and submits it with
``FLUX_HANDLE_USERID=4243 FLUX_HANDLE_ROLEMASK=0x1``.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest

from fluxsched_py.flux.paths import cmd_dir

from .instance import Instance, sched_py_instance
from .test_flux_access import GUEST
from .test_flux_ctl import rpcs

OTHER = 4243


def signed_as(jobspec: str, uid: int) -> str:
    """``jobspec`` wrapped as flux-core's sign_none_wrap() does for ``uid``."""
    h = base64.b64encode(f"version\0i1\0userid\0i{uid}\0mechanism\0snone\0".encode()).decode()
    return f"{h}.{base64.b64encode(jobspec.encode()).decode()}.none"


def submit_as(inst, uid: int, *args: str) -> str:
    spec = inst.run("submit", "--dry-run", *args)
    path = inst.dir / f"job-{time.monotonic_ns()}.signed"
    path.write_text(signed_as(spec, uid))
    env = f"FLUX_HANDLE_USERID={uid} FLUX_HANDLE_ROLEMASK=0x1"
    return inst.run(f"{env} flux job submit --flags=signed {path}").strip()


def annotation(inst, job: str, key: str) -> str:
    return inst.run("jobs", "-no", f"{{annotations.sched.{key}}}", job).strip()


def nodelist(inst, job: str) -> str:
    return inst.run("jobs", "-no", "{nodelist}", job).strip()


#: A reservation the instance's config declares, far from the others.
DECLARED = """
[[sched-py.reservation]]
name = "cfg"
ranks = "3"
start = "+3h"
duration = "1h"
users = [4243]
"""


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    env = {"FLUX_EXEC_PATH_PREPEND": str(cmd_dir())}
    conf = tmp_path_factory.mktemp("conf")
    (conf / "sched.toml").write_text(DECLARED)
    with sched_py_instance(1, 4, 4, "queue-policy=easy", env=env, broker_opts=[f"--config-path={conf}"]) as i:
        yield i


def test_the_must_hold(inst):
    t0 = time.time()
    out = inst.run("sched-py", "reserve", "add", "maint", "--nodes", "2", "--start", "+60s", "--duration", "2m")
    assert out.startswith("added reservation maint: node")
    listed = json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]
    (r,) = [x for x in listed if x["name"] == "maint"]
    assert r["start"] == pytest.approx(t0 + 60, abs=5) and r["end"] == pytest.approx(r["start"] + 120)
    mock = "--setattr=system.exec.test.run_duration=600s"

    long = submit_as(inst, OTHER, "-N3", "--exclusive", "-t", "10m", mock, "true")
    short = inst.submit("-N3", "--exclusive", "-t", "30s", "--setattr=system.exec.test.run_duration=30s", "true")
    inst.wait_event(short, "alloc")
    assert inst.run("jobs", "-no", "{userid}", long).strip() == str(OTHER)
    inst.wait_event(long, "priority")
    deadline = time.time() + 10
    while "maint" not in annotation(inst, long, "reason_pending") and time.time() < deadline:
        time.sleep(0.2)
    reason = annotation(inst, long, "reason_pending")
    assert reason.startswith("reservation maint: 2 nodes reserved from "), reason
    assert inst.run("jobs", "-no", "{state}", long).strip() == "SCHED"
    # its estimate is the window's end, at the earliest
    assert float(inst.run("jobs", "-no", "{annotations.sched.t_estimate}", long)) >= r["end"] - 1e-6

    # the reservation's own job: pending until the window opens, then on its nodes
    member = inst.submit("-N2", "--exclusive", "-t", "30s", "--setattr=system.reservation=maint", mock, "true")
    inst.wait_event(member, "priority")
    time.sleep(1.0)
    assert inst.run("jobs", "-no", "{state}", member).strip() == "SCHED"
    assert annotation(inst, member, "reason_pending").startswith("reservation maint: opens at ")
    inst.wait_event(member, "alloc", timeout=max(5.0, r["start"] - time.time() + 15))
    started = float(inst.run("jobs", "-no", "{t_run}", member))
    assert started >= r["start"] - 0.5
    assert nodelist(inst, member) == r["nodelist"]
    assert inst.run("jobs", "-no", "{state}", long).strip() == "SCHED"


def test_a_job_naming_an_unknown_reservation_is_denied(inst):
    job = inst.submit("-N1", "-t", "1m", "--setattr=system.reservation=nope", "true")
    inst.wait_event(job, "clean")
    (exc,) = [e for e in inst.eventlog(job) if e["name"] == "exception"]
    assert exc["context"]["note"].endswith("reservation nope: no such reservation")


def test_the_list_survives_a_module_reload(inst):
    inst.run("sched-py", "reserve", "add", "later", "--ranks", "0", "--start", "+1h", "--duration", "1h")
    before = json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]
    assert "later" in [r["name"] for r in before]
    inst.run("module", "reload", "sched-py", "queue-policy=easy")
    after = json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]
    assert [(r["name"], r["ranks"], r["start"], r["end"]) for r in after] == [
        (r["name"], r["ranks"], r["start"], r["end"]) for r in before
    ]
    text = inst.run("sched-py", "reserve", "list")
    assert text.splitlines()[0].split() == [
        "NAME",
        "STATE",
        "START",
        "END",
        "NNODES",
        "NODELIST",
        "RANKS",
        "FLAGS",
        "USERS",
    ]
    inst.run("sched-py", "reserve", "remove", "later")
    assert "later" not in inst.run("sched-py", "reserve", "list")


def test_a_guests_add_is_refused_and_its_list_allowed(inst):
    def as_guest(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", f"{GUEST} {command}"], env=inst.env, capture_output=True, text=True)

    done = as_guest("flux sched-py reserve add g --ranks 3 --start +2h --duration 1h")
    assert done.returncode == 1
    assert done.stderr == "flux sched-py: sched-py.reserve-add: only the instance owner may change the scheduler\n"
    assert "g" not in [r["name"] for r in json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]]
    listed = as_guest("flux sched-py reserve list --json")
    assert listed.returncode == 0 and "reservations" in json.loads(listed.stdout)


def test_malformed_payloads_name_the_field_and_the_module_runs_on(inst):
    got = rpcs(
        inst,
        [
            ["sched-py.reserve-add", {"name": "x", "ranks": "0", "start": "soon", "duration": "1h"}],
            ["sched-py.reserve-add", {"name": "x", "nodes": -1, "start": "+1h", "duration": "1h"}],
            ["sched-py.reserve-add", {"name": "x", "ranks": "0", "start": "+1h"}],
            ["sched-py.reserve-remove", {"name": 7}],
            ["sched-py.reserve-list", {"all": True}],
            ["sched-py.reserve-list", {}],
        ],
    )
    for g, field in zip(got[:-1], ["start", "nodes", "end", "name", "all"], strict=True):
        assert g.get("errno") == 71 and f": {field}: " in g["error"], (g, field)  # EPROTO
    assert "reservations" in got[-1]["ok"]
    assert "sched-py" in inst.modules()
    p = inst.try_run("sched-py", "reserve", "add", "y", "--ranks", "0", "--start", "tomorrow", "--duration", "1h")
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "--start: 'tomorrow'" in p.stderr, p.stderr


def test_the_config_declares_reservations(inst):
    listed = json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]
    (cfg,) = [r for r in listed if r["name"] == "cfg"]
    assert (cfg["ranks"], cfg["end"] - cfg["start"], cfg["users"]) == ("3", 3600.0, [OTHER])


def test_reservations_survive_an_instance_restart(tmp_path):
    env = {"FLUX_EXEC_PATH_PREPEND": str(cmd_dir())}
    opts = [f"-Sstatedir={tmp_path}"]
    with Instance(1, env=env, broker_opts=opts) as first:
        first.use_scheduler(None)
        first.use_scheduler("sched-py", "queue-policy=easy")
        first.run("sched-py", "reserve", "add", "kept", "--ranks", "0", "--start", "+1h", "--duration", "1h")
        before = json.loads(first.run("sched-py", "reserve", "list", "--json"))["reservations"]
    with Instance(1, env=env, broker_opts=opts) as second:
        second.use_scheduler(None)
        second.use_scheduler("sched-py", "queue-policy=easy")
        after = json.loads(second.run("sched-py", "reserve", "list", "--json"))["reservations"]
    assert [r["name"] for r in before] == ["kept"]
    assert [(r["name"], r["start"], r["end"]) for r in after] == [(r["name"], r["start"], r["end"]) for r in before]


def test_config_reload_applies_the_declared_reservations_and_keeps_rpc_ones(tmp_path):
    env = {"FLUX_EXEC_PATH_PREPEND": str(cmd_dir())}
    entry = '[[sched-py.reservation]]\nname = "{}"\nranks = "{}"\nstart = "2099-01-01T08:00:00"\nduration = "1h"\n'
    conf = tmp_path / "sched.toml"
    conf.write_text(entry.format("a", "0"))
    with Instance(1, env=env, broker_opts=["-c", str(tmp_path)]) as i:
        i.use_scheduler(None)
        i.use_scheduler("sched-py", "queue-policy=easy")

        def names():
            return [
                (r["name"], r["ranks"])
                for r in json.loads(i.run("sched-py", "reserve", "list", "--json"))["reservations"]
            ]

        assert names() == [("a", "0")]
        i.run("sched-py", "reserve", "add", "mine", "--ranks", "0", "--start", "+1h", "--duration", "1h")
        conf.write_text(entry.format("b", "0"))  # a dropped, b new
        i.run("config", "reload")
        assert names() == [("mine", "0"), ("b", "0")]
        conf.write_text(entry.format("b", "0") + entry.format("c", "9"))  # no rank 9: refused, nothing changes
        p = i.try_run("config", "reload")
        assert p.returncode != 0 and "[[sched-py.reservation]] #2: ranks: no such rank: 9" in p.stderr, p.stderr
        assert names() == [("mine", "0"), ("b", "0")]
        conf.write_text("")
        i.run("config", "reload")
        assert names() == [("mine", "0")]


def test_config_reload_that_changes_only_requires_picks_the_nodes_again(tmp_path):
    """A ``nodes = 1`` entry under ``requires = {properties = ["lyon"]}``
    holds a lyon node (rank 0 under ``policy=low``); ``flux config reload``
    of the same entry under ``nancy`` picks a nancy node (rank 2): the name,
    the count and the window are the same, only the constraint changed."""
    env = {"FLUX_EXEC_PATH_PREPEND": str(cmd_dir())}
    entry = (
        '[[sched-py.reservation]]\nname = "r"\nnodes = 1\nrequires = {{ properties = ["{}"] }}\n'
        'start = "2099-01-01T08:00:00"\nduration = "1h"\n'
    )
    conf = tmp_path / "sched.toml"
    conf.write_text(entry.format("lyon"))
    with Instance(1, env=env, broker_opts=["-c", str(tmp_path)]) as i:
        i.use_scheduler(None)
        i.set_resources(4, 2, properties={"lyon": "0-1", "nancy": "2-3"})
        i.use_scheduler("sched-py", "queue-policy=easy", "policy=low")

        def held():
            return [
                (r["name"], r["ranks"])
                for r in json.loads(i.run("sched-py", "reserve", "list", "--json"))["reservations"]
            ]

        assert held() == [("r", "0")]
        conf.write_text(entry.format("nancy"))
        i.run("config", "reload")
        assert held() == [("r", "2")]
        i.run("module", "reload", "sched-py", "queue-policy=easy", "policy=low")
        i.run("config", "reload")  # the same config: the KVS kept the constraint, nothing moves
        assert held() == [("r", "2")]


def test_flags_are_given_with_flags_and_shown_by_list(inst):
    out = inst.run(
        "sched-py",
        "reserve",
        "add",
        "fl",
        "--ranks",
        "2",
        "--start",
        "+4h",
        "--duration",
        "1h",
        "--flags",
        "maint,ignore_jobs",
    )
    assert out.startswith("added reservation fl: ")
    (r,) = [
        x for x in json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"] if x["name"] == "fl"
    ]
    assert r["flags"] == ["IGNORE_JOBS", "MAINT"]
    (row,) = [line.split() for line in inst.run("sched-py", "reserve", "list").splitlines() if line.startswith("fl ")]
    assert row[-2] == "IGNORE_JOBS,MAINT"  # FLAGS, then USERS
    inst.run("sched-py", "reserve", "remove", "fl")
    p = inst.try_run(
        "sched-py", "reserve", "add", "y", "--ranks", "0", "--start", "+4h", "--duration", "1h", "--flags", "OVERLAP"
    )
    assert p.returncode == 1 and p.stderr == (
        "flux sched-py: --flags: 'OVERLAP' is not a flag this scheduler implements (FLEX, IGNORE_JOBS, MAINT)\n"
    )


def test_groups_and_accounts_are_given_on_the_command_line(inst):
    import grp
    import os
    import pwd

    mine = grp.getgrgid(pwd.getpwuid(os.getuid()).pw_gid).gr_name
    add = ["sched-py", "reserve", "add", "ga", "--ranks", "1", "--start", "+5h", "--duration", "1h"]
    inst.run(*add, "--groups", mine, "--accounts", "physics")
    (r,) = [
        x for x in json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"] if x["name"] == "ga"
    ]
    assert (r["groups"], r["accounts"], r["users"]) == ([mine], ["physics"], []) and os.getuid() in r["members"]
    (row,) = [line.split() for line in inst.run("sched-py", "reserve", "list").splitlines() if line.startswith("ga ")]
    assert row[-1] == f"group:{mine},bank:physics"
    inst.run("sched-py", "reserve", "remove", "ga")
    p = inst.try_run(*add, "--groups", "no-such-group-x")
    assert (
        p.returncode == 1
        and p.stderr == "flux sched-py: sched-py.reserve-add: groups: no such group: 'no-such-group-x'\n"
    )
    p = inst.try_run(*add, "--groups", mine, "--users", "root")
    assert p.returncode == 2 and "not allowed with argument" in p.stderr


def test_a_job_charged_to_a_bank_of_the_accounts_runs_in_the_window(inst):
    """The bank is the job's ``attributes.system.bank`` (``--setattr``, as
    flux-accounting's plugin sets it): a job of another bank is denied.
    The other tests' jobs are cancelled first: its node must be free (no
    IGNORE_JOBS)."""
    inst.run("cancel", "--all", "--user=all")
    deadline = time.time() + 30
    while inst.run("jobs", "-A", "-n", "-o", "{id}").strip() and time.time() < deadline:
        time.sleep(0.2)
    inst.run(
        "sched-py",
        "reserve",
        "add",
        "acct",
        "--nodes",
        "1",
        "--start",
        "+2s",
        "--duration",
        "1m",
        "--accounts",
        "physics",
    )
    bad = inst.submit("-N1", "-t", "10s", "--setattr=system.reservation=acct", "--setattr=system.bank=chem", "true")
    inst.wait_event(bad, "clean")
    (exc,) = [e for e in inst.eventlog(bad) if e["name"] == "exception"]
    assert exc["context"]["note"].endswith("reservation acct: bank chem may not use it")
    good = inst.submit(
        "-N1",
        "-t",
        "10s",
        "--setattr=system.reservation=acct",
        "--setattr=system.bank=physics",
        "--setattr=system.exec.test.run_duration=1s",
        "true",
    )
    inst.wait_event(good, "alloc", timeout=30)
    listed = json.loads(inst.run("sched-py", "reserve", "list", "--json"))["reservations"]
    (acct,) = [x for x in listed if x["name"] == "acct"]
    assert nodelist(inst, good) == acct["nodelist"]
    inst.wait_event(good, "clean", timeout=30)
    inst.run("sched-py", "reserve", "remove", "acct")
