"""flux/control.py's reserve-* RPCs and flux/reservestore.py, on a RecordingTransport.

Two nodes of four cores (n0, n1), the clock at 1000, easy (as
t/test_flux_control.py).  A reservation ``maint`` of rank 1 over
[1060, 1660) is added by the owner; the KVS key ``sched-py.reservations``
follows every change; a second driver loading that value (a module reload)
gets the same reservations.
"""

from __future__ import annotations

import errno
import os

import pytest

from fluxsched_py.flux import reservestore
from fluxsched_py.flux.control import ROLE_OWNER, ROLE_USER

from .test_flux_control import ask
from .test_flux_driver import alloc, jobspec, make, replies

MAINT = {"name": "maint", "ranks": "1", "start": "+1m", "duration": "10m", "users": [7]}
STORED = {"name": "maint", "ranks": "1", "start": 1060.0, "end": 1660.0, "users": [7]}
STORED |= {"flags": [], "accounts": [], "groups": [], "members": []}
ROW = {**STORED, "nodelist": "n1", "active": False}


@pytest.fixture
def dt():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, {}, owner=0)
    return d, t


def test_add_list_remove_and_the_kvs_follows(dt):
    d, t = dt
    assert ask(d, t, "reserve-add", MAINT) == ROW
    assert t.kvs["sched-py.reservations"] == [STORED]
    assert ask(d, t, "reserve-list", {}, ROLE_USER) == {"now": 1000.0, "reservations": [ROW]}
    assert ask(d, t, "reserve-update", {"name": "maint", "end": 1200})["end"] == 1200.0
    assert t.kvs["sched-py.reservations"][0]["end"] == 1200.0
    assert ask(d, t, "reserve-remove", {"name": "maint"})["name"] == "maint"
    assert t.kvs["sched-py.reservations"] == [] and ask(d, t, "reserve-list", {})["reservations"] == []


def test_a_reload_gets_them_back(dt):
    d, t = dt
    ask(d, t, "reserve-add", MAINT)
    d2, t2 = make(["queue-policy=easy"])
    reservestore.load(d2, t.kvs["sched-py.reservations"], {}, owner=0)
    assert ask(d2, t2, "reserve-list", {})["reservations"] == [ROW]


def test_the_config_declares_them_and_the_kvs_wins():
    conf = {
        "sched-py": {
            "queue-policy": "easy",
            "reservation": [
                {"name": "maint", "ranks": "1", "start": 1060, "duration": "10m", "users": [7]},
                {"name": "old", "ranks": "0", "start": 10, "end": 20},
                {"name": "bad", "ranks": "0", "start": 1100, "end": 1000},
            ],
        }
    }
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, conf, owner=0)
    assert [r["name"] for r in ask(d, t, "reserve-list", {})["reservations"]] == ["maint"]
    assert any("skipping [[sched-py.reservation]] #3: end: must be after start" in text for _, text in t.logs)
    d2, t2 = make(["queue-policy=easy"])
    kept = [{**ROW, "end": 1200.0}]  # shortened since: the KVS holds the latest state
    reservestore.load(d2, kept, conf, owner=0)
    assert [r["end"] for r in ask(d2, t2, "reserve-list", {})["reservations"]] == [1200.0]


def test_a_config_value_that_is_no_array_is_one_error():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, {"sched-py": {"reservation": "[{name='x'}]"}}, owner=0)
    errors = [text for level, text in t.logs if level == 3]
    assert errors == ["reservations: [sched-py] reservation: expected an array of tables ([[sched-py.reservation]])"]


def test_the_config_table_is_no_option():
    from fluxsched_py.flux.siteconf import config_options

    conf = {"sched-py": {"queue-policy": "easy", "reservation": [{"name": "m"}]}}
    assert config_options(conf, "sched-py").queue_policy == "easy"


def test_a_guest_may_list_but_not_change(dt):
    d, t = dt
    for rpc, payload in (("reserve-add", MAINT), ("reserve-remove", {"name": "maint"})):
        num, text = ask(d, t, rpc, payload, ROLE_USER)
        assert num == errno.EPERM and text == f"sched-py.{rpc}: only the instance owner may change the scheduler"
    assert ask(d, t, "reserve-list", {}, ROLE_USER)["reservations"] == []


def test_a_pass_is_armed_and_the_hold_is_planned(dt):
    d, t = dt
    # a 2-node job of 2 minutes would still run on rank 1 at 1060: it waits for 1660
    ask(d, t, "reserve-add", {**MAINT, "users": []})
    before = t.pass_requests
    alloc(d, t, 5, jobspec(ncores=4, nnodes=2, duration=120))
    assert t.pass_requests > before
    assert d.engine.job(5).estimate == 1660.0
    assert d.engine.job(5).reply.sent["reason_pending"].startswith("reservation maint: 1 node reserved from ")
    ask(d, t, "reserve-remove", {"name": "maint"})
    t.run_passes()
    assert d.engine.job(5) is None or d.engine.job(5).state.value == "running"


def test_user_names_are_resolved(dt):
    d, t = dt
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    assert ask(d, t, "reserve-add", {**MAINT, "users": [me]})["users"] == [os.getuid()]


BAD = [
    ("reserve-add", None, EPROTO := errno.EPROTO, "name"),
    ("reserve-add", [1], EPROTO, "payload"),
    ("reserve-add", {**MAINT, "name": ""}, EPROTO, "name"),
    ("reserve-add", {**MAINT, "ranks": "x-"}, EPROTO, "ranks"),
    ("reserve-add", {**MAINT, "start": "tomorrow"}, EPROTO, "start"),
    ("reserve-add", {**MAINT, "duration": 0}, EPROTO, "duration"),
    ("reserve-add", {**MAINT, "users": ["no-such-user-here"]}, EPROTO, "users"),
    ("reserve-add", {**MAINT, "nodes": 1}, EPROTO, "ranks"),
    ("reserve-add", {**MAINT, "colour": 1}, EPROTO, "colour"),
    ("reserve-add", {**MAINT, "ranks": "5"}, errno.EINVAL, "ranks"),
    ("reserve-add", {**MAINT, "start": 10, "duration": 5}, errno.EINVAL, "end"),
    ("reserve-remove", {}, EPROTO, "name"),
    ("reserve-remove", {"name": 3}, EPROTO, "name"),
    ("reserve-remove", {"name": "maint", "x": 1}, EPROTO, "x"),
    ("reserve-remove", {"name": "nope"}, errno.ENOENT, "name"),
    ("reserve-update", {"name": "maint"}, EPROTO, "end"),
    ("reserve-update", {"name": "maint", "end": "soon"}, EPROTO, "end"),
    ("reserve-update", {"name": "maint", "end": 900}, errno.EINVAL, "end"),
    ("reserve-list", {"x": 1}, EPROTO, "x"),
]


@pytest.mark.parametrize(("rpc", "payload", "num", "field"), BAD)
def test_a_malformed_or_refused_request_names_the_field(dt, rpc, payload, num, field):
    d, t = dt
    if rpc != "reserve-add":
        ask(d, t, "reserve-add", MAINT)
    got, text = ask(d, t, rpc, payload)
    assert got == num and text.startswith(f"sched-py.{rpc}: {field}: "), text
    assert ask(d, t, "status", {})["pending"] == 0  # the module runs on


def test_overlap_is_refused_naming_the_other(dt):
    d, t = dt
    ask(d, t, "reserve-add", MAINT)
    num, text = ask(d, t, "reserve-add", {**MAINT, "name": "other", "ranks": "0-1"})
    assert num == errno.EINVAL and text == "sched-py.reserve-add: ranks: ranks 1 are in reservation maint at that time"
    assert ask(d, t, "reserve-add", {**MAINT, "name": "two", "ranks": "0"}, ROLE_OWNER)["ranks"] == "0"


# -- flux config reload ------------------------------------------------------------


def config(*entries):
    return {"sched-py": {"queue-policy": "easy", "reservation": list(entries)}}


DECLARED = {"name": "maint", "ranks": "1", "start": 1060, "duration": "10m", "users": [7]}
LATE = {"name": "late", "ranks": "0", "start": 2000, "end": 2060}
EXTRA = {"name": "extra", "ranks": "0", "start": "+1m", "duration": "1m"}  # [1060, 1120), by RPC


def reload(d, t, conf, msg):
    d.handle("sched-py.config-reload", msg, conf)
    t.run_passes()
    (reply,) = [p for k, m, p in t.sent if m == msg and k in ("respond", "error")]
    return reply


def windows(d, t):
    return [(r["name"], r["ranks"], r["start"], r["end"]) for r in ask(d, t, "reserve-list", {})["reservations"]]


def test_a_reload_adds_updates_and_removes_what_the_config_declares_and_keeps_rpc_ones():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, config(DECLARED), owner=0)
    ask(d, t, "reserve-add", EXTRA)
    shorter = {k: v for k, v in DECLARED.items() if k != "duration"} | {"end": 1200}
    assert reload(d, t, config(shorter, LATE), "b") is None
    assert windows(d, t) == [
        ("extra", "0", 1060.0, 1120.0),
        ("maint", "1", 1060.0, 1200.0),
        ("late", "0", 2000.0, 2060.0),
    ]
    flags = {x["name"]: x.get("config") for x in t.kvs["sched-py.reservations"]}
    assert flags == {"extra": None, "maint": True, "late": True}
    assert any("config reload: reservations: updated maint, added late" in text for _, text in t.logs)
    # a module reload: the KVS says which the config declared; the next config reload removes them
    d2, t2 = make(["queue-policy=easy"])
    reservestore.load(d2, t.kvs["sched-py.reservations"], config(), owner=0)
    assert [w[0] for w in windows(d2, t2)] == ["extra", "maint", "late"]
    assert reload(d2, t2, {"sched-py": {"queue-policy": "easy"}}, "c") is None
    assert windows(d2, t2) == [("extra", "0", 1060.0, 1120.0)]
    assert [x["name"] for x in t2.kvs["sched-py.reservations"]] == ["extra"]


def test_an_unchanged_config_changes_nothing():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, config(DECLARED), owner=0)
    commits = [s for s in t.sent if s[0] == "commit"]
    assert reload(d, t, config(DECLARED), "a") is None
    assert windows(d, t) == [("maint", "1", 1060.0, 1660.0)]
    assert d.stats["config_reloads"] == 0 and [s for s in t.sent if s[0] == "commit"] == commits


def test_a_reload_that_changes_only_requires_picks_the_nodes_again():
    """A ``nodes = 1`` entry under ``requires = {ranks = ["0"]}`` holds rank 0;
    the same entry under ``ranks = ["1"]`` picks rank 1 at the reload
    (logged as updated, one KVS commit with the new ``requires``); the same
    config again changes nothing, even after a module reload (the KVS keeps
    the constraint it was picked under)."""
    d, t = make(["queue-policy=easy"])
    entry = {"name": "n", "nodes": 1, "start": 1060, "duration": "10m", "requires": {"ranks": ["0"]}}
    reservestore.load(d, None, config(entry), owner=0)
    assert windows(d, t) == [("n", "0", 1060.0, 1660.0)]
    moved = {**entry, "requires": {"ranks": ["1"]}}
    assert reload(d, t, config(moved), "a") is None
    assert windows(d, t) == [("n", "1", 1060.0, 1660.0)]
    assert any("config reload: reservations: updated n" in text for _, text in t.logs)
    (kept,) = t.kvs["sched-py.reservations"]
    assert kept["requires"] == {"ranks": ["1"]} and kept["config"] is True
    commits = [s for s in t.sent if s[0] == "commit"]
    assert reload(d, t, config(moved), "b") is None
    assert [s for s in t.sent if s[0] == "commit"] == commits
    d2, t2 = make(["queue-policy=easy"])
    reservestore.load(d2, t.kvs["sched-py.reservations"], config(moved), owner=0)
    assert reload(d2, t2, config(moved), "c") is None
    assert windows(d2, t2) == [("n", "1", 1060.0, 1660.0)] and d2.stats["config_reloads"] == 0


@pytest.mark.parametrize(
    ("entries", "text"),
    [
        ((DECLARED, {**LATE, "ranks": "9"}), "[[sched-py.reservation]] #2: ranks: no such rank: 9"),
        ((DECLARED, {**LATE, "start": "soon"}), "[[sched-py.reservation]] #2: start: 'soon'"),
        ((LATE, {**LATE, "ranks": "1"}), "[[sched-py.reservation]] #2: name: reservation late is declared twice"),
        # a new entry over the RPC's reservation: refused after the first entry was taken, which is undone
        ((LATE, {**DECLARED, "name": "new", "ranks": "0"}), "#2: ranks: ranks 0 are in reservation extra at that time"),
    ],
)
def test_a_bad_entry_at_reload_is_refused_with_one_error_and_nothing_changes(entries, text):
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, config(DECLARED), owner=0)
    ask(d, t, "reserve-add", EXTRA)
    before, kvs = windows(d, t), t.kvs["sched-py.reservations"]
    num, got = reload(d, t, {"sched-py": {"queue-policy": "fcfs", "reservation": list(entries)}}, "bad")
    assert num == errno.EINVAL and got.startswith("sched-py: reservations: ") and text in got, got
    assert "\n" not in got
    assert windows(d, t) == before and t.kvs["sched-py.reservations"] == kvs
    assert d.options.queue_policy == "easy"  # the refused config's options were not taken either
    assert d.engine.reservations.declared == {"maint"}


def test_a_pending_job_of_a_reservation_the_config_removed_is_denied():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, config({**DECLARED, "users": [0]}), owner=0)
    spec = jobspec(ncores=4, nnodes=1, duration=60)
    spec["attributes"]["system"]["reservation"] = "maint"
    alloc(d, t, 5, spec)
    assert d.engine.job(5).state.value == "pending"
    assert reload(d, t, config(), "r") is None
    denied = [p for p in t.responses() if p and p.get("id") == 5 and p.get("type") == 2]
    assert denied and "reservation maint ended or was removed" in denied[0]["note"]


# -- Slurm's flags ------------------------------------------------------------------


def test_flags_go_through_the_rpc_the_kvs_a_module_reload_and_the_config(dt):
    d, t = dt
    got = ask(d, t, "reserve-add", {**MAINT, "flags": ["maint", "IGNORE_JOBS"]})
    assert got == {**ROW, "flags": ["IGNORE_JOBS", "MAINT"]}
    assert t.kvs["sched-py.reservations"][0]["flags"] == ["IGNORE_JOBS", "MAINT"]
    # a MAINT reservation over it, then a module reload keeps both as they were
    assert ask(d, t, "reserve-add", {**MAINT, "name": "over", "ranks": "0-1", "flags": "FLEX"})["flags"] == ["FLEX"]
    d2, t2 = make(["queue-policy=easy"])
    reservestore.load(d2, t.kvs["sched-py.reservations"], {}, owner=0)
    kept = ask(d2, t2, "reserve-list", {})["reservations"]
    assert [(r["name"], r["flags"]) for r in kept] == [("maint", ["IGNORE_JOBS", "MAINT"]), ("over", ["FLEX"])]
    d3, t3 = make(["queue-policy=easy"])
    reservestore.load(d3, None, config({**DECLARED, "flags": ["FLEX"]}), owner=0)
    assert [r["flags"] for r in ask(d3, t3, "reserve-list", {})["reservations"]] == [["FLEX"]]
    # a config reload that changes only the flags replaces the reservation
    assert reload(d3, t3, config({**DECLARED, "flags": ["MAINT"]}), "f") is None
    assert [r["flags"] for r in ask(d3, t3, "reserve-list", {})["reservations"]] == [["MAINT"]]


def test_a_bad_flag_is_named_and_busy_ranks_are_refused_without_ignore_jobs(dt):
    d, t = dt
    num, text = ask(d, t, "reserve-add", {**MAINT, "flags": ["OVERLAP"]})
    assert num == errno.EPROTO and text == (
        "sched-py.reserve-add: flags: 'OVERLAP' is not a flag this scheduler implements (FLEX, IGNORE_JOBS, MAINT)"
    )
    alloc(d, t, 5, jobspec(ncores=4, nnodes=2, duration=600))  # both nodes until 1600, past 1060
    assert d.engine.job(5).state.value == "running"
    num, text = ask(d, t, "reserve-add", MAINT)
    assert num == errno.EINVAL
    assert (
        text
        == "sched-py.reserve-add: ranks: ranks 1 have running jobs past its start (flag IGNORE_JOBS takes them anyway)"
    )
    assert ask(d, t, "reserve-add", {**MAINT, "flags": ["IGNORE_JOBS"]})["flags"] == ["IGNORE_JOBS"]


# -- groups and accounts ------------------------------------------------------------


def test_groups_are_resolved_with_the_system_when_added_and_accounts_kept(dt):
    import grp
    import pwd

    d, t = dt
    me = pwd.getpwuid(os.getuid())
    mine = grp.getgrgid(me.pw_gid).gr_name  # my primary group: I am among its members
    got = ask(d, t, "reserve-add", {**MAINT, "users": [], "groups": [mine], "accounts": "physics,chem"})
    assert got["groups"] == [mine] and os.getuid() in got["members"]
    assert (got["users"], got["accounts"]) == ([], ["chem", "physics"])
    assert t.kvs["sched-py.reservations"][0]["members"] == got["members"]
    by_gid = ask(d, t, "reserve-add", {**MAINT, "name": "g2", "ranks": "0", "users": [], "groups": [str(me.pw_gid)]})
    assert by_gid["groups"] == [mine]
    num, text = ask(
        d, t, "reserve-add", {**MAINT, "name": "x", "ranks": "0", "users": [], "groups": ["no-such-group-x"]}
    )
    assert num == errno.EPROTO and text == "sched-py.reserve-add: groups: no such group: 'no-such-group-x'"
    num, text = ask(d, t, "reserve-add", {**MAINT, "name": "x", "ranks": "0", "groups": [mine]})  # users [7] too
    assert num == errno.EPROTO and text == "sched-py.reserve-add: groups: give users or groups, not both (as Slurm)"


def test_a_job_with_a_bank_of_the_accounts_may_use_it():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, config({**DECLARED, "users": [], "accounts": ["physics"]}), owner=0)
    assert ask(d, t, "reserve-list", {})["reservations"][0]["accounts"] == ["physics"]
    for jobid, bank in ((5, "physics"), (6, "chem"), (7, None)):
        spec = jobspec(ncores=4, nnodes=1, duration=60)
        spec["attributes"]["system"]["reservation"] = "maint"
        if bank:
            spec["attributes"]["system"]["bank"] = bank
        alloc(d, t, jobid, spec)
    assert d.engine.job(5).state.value == "pending"
    denies = {m: r["note"] for m in ("alloc-5", "alloc-6", "alloc-7") for r in replies(t, m) if r["type"] == 2}
    assert denies == {
        "alloc-6": "unsatisfiable request: reservation maint: bank chem may not use it",
        "alloc-7": "unsatisfiable request: reservation maint: a job of no bank may not use it",
    }


def test_a_kvs_value_from_before_the_flags_loads_with_none():
    d, t = make(["queue-policy=easy"])
    old = [{"name": "maint", "ranks": "1", "start": 1060.0, "end": 1660.0, "users": [7]}]
    reservestore.load(d, old, {}, owner=0)
    assert ask(d, t, "reserve-list", {})["reservations"] == [ROW]
