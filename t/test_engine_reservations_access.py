"""Who may use a reservation: users, groups and accounts (engine/reservations.py).

Slurm's rule (scontrol(1), quoted in docs/rfcs/reservations.md): "A new
reservation must specify at least one access control field ... However,
Users and Groups are mutually exclusive.  If multiple access control
fields are specified, a job must be approved by all of them to use the
reservation."  A job's account is its bank, ``attributes.system.bank``
(flux-accounting's).  4 nodes, ``m`` on ranks 2-3 over [100, 200).
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine.reservations import ReservationError, parse_spec
from fluxsched_py.ids import IdSet

from .test_engine_reservations import denied, spec, started
from .test_engine_rfc27 import engine as make_engine

#: The groups a test's system would have: name or gid -> (name, member uids).
GROUPS = {"ops": ("ops", (8, 9)), "2000": ("ops", (8, 9)), "empty": ("empty", ())}


def group(g):
    return GROUPS[g]


def banked(nnodes, duration, reservation, bank=None):
    js = spec(nnodes, duration, reservation)
    if bank is not None:
        js["attributes"]["system"]["bank"] = bank
    return js


def engine(**access):
    e = make_engine(options=["queue-policy=easy", "policy=low"])
    e.reservations.add("m", 100.0, 200.0, ranks=IdSet.parse("2-3"), now=0.0, **access)
    return e


def admitted(e, jobid, userid, bank=None):
    """None when the job is queued, else the DENY note."""
    out = e.alloc(jobid, 16, userid, 0.0, banked(1, 50.0, "m", bank))
    return denied(out).get(jobid)


def test_accounts_alone_admit_the_jobs_of_those_banks_whoever_submits_them():
    e = engine(accounts=("physics",))
    assert admitted(e, 1, 7, "physics") is None
    assert admitted(e, 2, 1234, "physics") is None
    assert admitted(e, 3, 7, "chem") == "reservation m: bank chem may not use it"
    assert admitted(e, 4, 7) == "reservation m: a job of no bank may not use it"
    # the admitted ones run in the window, on its ranks
    e.schedule(0.0)
    assert started(e.schedule(100.0).responses) == {1: (100.0, 150.0, "2"), 2: (100.0, 150.0, "3")}


def test_users_and_accounts_must_both_admit_the_job():
    e = engine(users=(7,), accounts=("physics",))
    assert admitted(e, 1, 7, "physics") is None
    assert admitted(e, 2, 7, "chem") == "reservation m: bank chem may not use it"
    assert admitted(e, 3, 8, "physics") == "reservation m: user 8 may not use it"


def test_groups_admit_their_members_as_resolved_when_added():
    r = parse_spec({"name": "m", "ranks": "2-3", "start": 100, "end": 200, "groups": "ops"}, 0.0, group=group)
    assert (r["groups"], r["members"]) == (("ops",), (8, 9))
    e = make_engine(options=["queue-policy=easy", "policy=low"])
    e.reservations.add(now=0.0, **r)
    assert admitted(e, 1, 8) is None and admitted(e, 2, 9) is None
    assert admitted(e, 3, 7) == "reservation m: user 7 may not use it"


def test_a_group_by_gid_and_with_an_account():
    r = parse_spec(
        {"name": "m", "ranks": "2-3", "start": 100, "end": 200, "groups": [2000], "accounts": ["b"]}, 0.0, group=group
    )
    e = make_engine(options=["queue-policy=easy", "policy=low"])
    e.reservations.add(now=0.0, **r)
    assert admitted(e, 1, 8, "b") is None
    assert admitted(e, 2, 8, "c") == "reservation m: bank c may not use it"
    assert admitted(e, 3, 7, "b") == "reservation m: user 7 may not use it"


def test_an_empty_group_admits_no_one_and_no_field_admits_the_owner_only():
    r = parse_spec({"name": "m", "ranks": "2-3", "start": 100, "end": 200, "groups": ["empty"]}, 0.0, group=group)
    e = make_engine(options=["queue-policy=easy", "policy=low"])
    e.reservations.owner = 0
    e.reservations.add(now=0.0, **r)
    assert admitted(e, 1, 0) == "reservation m: user 0 may not use it"
    e2 = engine()
    e2.reservations.owner = 0
    assert admitted(e2, 1, 0) is None and admitted(e2, 2, 7) == "reservation m: user 7 may not use it"


@pytest.mark.parametrize(
    ("extra", "message", "resolver"),
    [
        ({"users": [7], "groups": ["ops"]}, "groups: give users or groups, not both (as Slurm)", group),
        ({"groups": ["nope"]}, "groups: no such group: 'nope'", group),
        ({"groups": ["ops"]}, "groups: groups are not supported here", None),
        ({"groups": [True]}, "groups: expected a group name or gid, got True", group),
        ({"accounts": [""]}, "accounts: expected a bank name, got ''", None),
        ({"accounts": 3}, "accounts: expected a list of accounts, got int", None),
    ],
)
def test_bad_access_fields_are_named(extra, message, resolver):
    with pytest.raises(ReservationError) as exc:
        parse_spec({"name": "m", "ranks": "0", "start": 5, "duration": 5, **extra}, 0.0, group=resolver)
    assert str(exc.value) == message


def test_a_batsim_jobs_bank_becomes_its_attribute():
    from fluxsched_py.replay.workload import read_batsim

    jobs = [
        {"id": 1, "subtime": 0, "walltime": 50, "res": 1, "profile": "p", "bank": "physics", "checkpoint": "signal"}
    ]
    w = read_batsim({"nb_res": 4, "jobs": jobs, "profiles": {"p": {"type": "delay", "delay": 50}}})
    assert w.jobs[0].request.attributes == {"system": {"bank": "physics"}, "user": {"checkpoint": "signal"}}
