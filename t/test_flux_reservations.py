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
from .test_flux_driver import alloc, jobspec, make

MAINT = {"name": "maint", "ranks": "1", "start": "+1m", "duration": "10m", "users": [7]}
ROW = {"name": "maint", "ranks": "1", "start": 1060.0, "end": 1660.0, "users": [7], "nodelist": "n1", "active": False}


@pytest.fixture
def dt():
    d, t = make(["queue-policy=easy"])
    reservestore.load(d, None, {}, owner=0)
    return d, t


def test_add_list_remove_and_the_kvs_follows(dt):
    d, t = dt
    assert ask(d, t, "reserve-add", MAINT) == ROW
    assert t.kvs["sched-py.reservations"] == [{k: ROW[k] for k in ("name", "ranks", "start", "end", "users")}]
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
