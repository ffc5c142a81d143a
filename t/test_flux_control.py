"""flux/control.py: the control RPCs' payload checks and who may use them.

The driver runs on a RecordingTransport (see test_flux_driver.py): two
nodes of four cores, a job holding every core until 1100 (the clock reads
1000), and two jobs waiting behind it.
"""

from __future__ import annotations

import errno

import pytest

from fluxsched_py.flux.control import ROLE_OWNER, ROLE_USER, RPCS, Control, Rpc, RpcError, authorize
from fluxsched_py.flux.wire import bad_payload

from .test_flux_driver import FULL100, alloc, jobspec, make, replies

GUEST = ROLE_USER


@pytest.fixture
def dt():
    d, t = make(["queue-policy=easy"])
    alloc(d, t, 1, FULL100)
    alloc(d, t, 2, jobspec(ncores=4, nnodes=1, duration=50))
    alloc(d, t, 3, jobspec(ncores=1, duration=10))
    return d, t


def ask(d, t, rpc, payload, rolemask=ROLE_OWNER, control=None):
    msg = object()
    (control or d.control).handle(f"sched-py.{rpc}", msg, payload, rolemask)
    (reply,) = replies(t, msg)
    return reply


def test_every_rpc_is_registered_under_the_module_name():
    d, _ = make()
    assert d.control.topics()[:3] == ["sched-py.status", "sched-py.forecast", "sched-py.when"]
    assert {n for n, r in RPCS.items() if r.mutating} == {"reserve-add", "reserve-update", "reserve-remove"}


def test_authorize_lets_the_owner_do_anything_and_a_guest_only_read():
    authorize(ROLE_OWNER, True, "t")
    authorize(ROLE_OWNER, False, "t")
    authorize(GUEST, False, "t")
    with pytest.raises(RpcError) as exc:
        authorize(GUEST, True, "sched-py.x")
    assert exc.value.errnum == errno.EPERM and "only the instance owner" in str(exc.value)
    with pytest.raises(RpcError):
        authorize(0, False, "t")  # no role at all


def test_a_guests_mutating_request_is_refused_before_it_runs(dt):
    d, t = dt
    ran = []
    rpcs = {**RPCS, "poke": Rpc("poke", True, lambda c, f, now: ran.append(now))}
    c = Control(d, rpcs)
    num, text = ask(d, t, "poke", {}, GUEST, c)
    assert num == errno.EPERM and text.startswith("sched-py.poke: ") and not ran
    assert ask(d, t, "poke", {}, ROLE_OWNER, c) is None and ran == [1000.0]


def test_a_guest_reads_the_forecast_as_the_owner_does(dt):
    d, t = dt
    assert ask(d, t, "forecast", None, GUEST) == ask(d, t, "forecast", None, ROLE_OWNER)


def test_forecast_response(dt):
    d, t = dt
    r = ask(d, t, "forecast", {"limit": 10})
    assert r["now"] == 1000.0 and r["limit"] == 10
    got = [(j["id"], j["t_estimate"], j["kind"], j["duration"]) for j in r["jobs"]]
    assert got == [(2, 1100.0, "reservation", 50.0), (3, 1100.0, "forecast", 10.0)]
    assert r["jobs"][0]["nodelist"] == "n0" and r["jobs"][0]["ranks"] == "0"
    assert r["jobs"][1]["reason"] == d.engine.job(3).reply.sent["reason_pending"]


def test_when_response(dt):
    d, t = dt
    r = ask(d, t, "when", {"jobspec": jobspec(ncores=4, nnodes=2, duration=5)})
    assert (r["t_estimate"], r["kind"], r["ranks"], r["nodelist"]) == (1150.0, "forecast", "0-1", "n[0-1]")
    assert d.engine.pending_count == 2 and d.stats["allocs"] == 3


BAD = [
    ("forecast", [1], "payload"),
    ("forecast", "text", "payload"),
    ("forecast", {"limit": "ten"}, "limit"),
    ("forecast", {"limit": 0}, "limit"),
    ("forecast", {"limit": True}, "limit"),
    ("forecast", {"limit": 10**9}, "limit"),
    ("forecast", {"limt": 3}, "limt"),
    ("status", {"x": 1}, "x"),
    ("when", {}, "jobspec"),
    ("when", None, "jobspec"),
    ("when", {"jobspec": [1]}, "jobspec"),
    ("when", {"jobspec": {}, "priority": -1}, "priority"),
    ("when", {"jobspec": {}, "priority": 1.5}, "priority"),
    ("when", {"jobspec": jobspec(), "extra": 1}, "extra"),
]


@pytest.mark.parametrize(("rpc", "payload", "field"), BAD)
def test_a_malformed_payload_is_refused_naming_the_field(dt, rpc, payload, field):
    d, t = dt
    num, text = ask(d, t, rpc, payload)
    assert num == errno.EPROTO and text.startswith(f"sched-py.{rpc}: {field}: ")
    # the module runs on
    assert ask(d, t, "status", {})["pending"] == 2


def test_an_undecodable_payload_is_refused(dt):
    d, t = dt
    num, text = ask(d, t, "forecast", bad_payload("not JSON"))
    assert num == errno.EPROTO and text == "sched-py.forecast: payload: not JSON"


def test_a_jobspec_that_never_fits_is_invalid(dt):
    d, t = dt
    num, text = ask(d, t, "when", {"jobspec": jobspec(nnodes=3)})
    assert num == errno.EINVAL and text.startswith("sched-py.when: jobspec: ") and "node" in text
    num, text = ask(d, t, "when", {"jobspec": {"version": 9}})
    assert num == errno.EINVAL and "invalid jobspec" in text


def test_before_resources_the_rpcs_say_so():
    from fluxsched_py.flux.driver import Driver

    from .recording_transport import RecordingTransport

    t = RecordingTransport()
    d = Driver(t, [], budget=None)
    num, text = ask(d, t, "forecast", {})
    assert num == errno.EAGAIN and "starting" in text
