"""Power saving in the Flux module (``[sched-py.power]``), on the recording transport.

The driver runs the site's suspend and resume programs through the
transport's ``run_program`` (the broker binding runs them from the reactor;
``t/flux/test_flux_power.py`` does it under a real flux-core); here the test
finishes each program itself, as it succeeds, fails or times out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluxsched_py.flux.driver import Driver
from fluxsched_py.flux.powerctl import POWERED_DOWN, config_power, drain_reasons
from fluxsched_py.flux.siteconf import config_options
from fluxsched_py.ids import IdSet
from t.recording_transport import RecordingTransport

from .test_flux_driver import R2, Clock, alloc, jobspec, replies

FLUX_DATA = Path(__file__).parent / "data" / "flux"

#: The power model, as [sched-py.power] spells it.
TABLE = {"idle-watts": 95.0, "computing-watts": 190.0, "sleeping-watts": 9.75, "off-time": 6.0,
         "off-watts": 101.0, "on-time": 150.0, "on-watts": 125.0}  # fmt: skip


def conf(save: str = "idle", **power) -> dict:
    table = {"suspend-program": "/sbin/node-suspend --now", "resume-program": ["/sbin/node-resume"], **TABLE}
    return {"sched-py": {"power-save": save, "power-idle-time": "10s", "power": {**table, **power}}}


def make(c: dict) -> tuple[Driver, RecordingTransport, Clock]:
    t = RecordingTransport()
    clock = Clock(0.0)
    options = config_options(c, "sched-py")
    d = Driver(t, options, clock=clock, budget=None, power=config_power(c, "sched-py", options))
    t.driver = d
    d.acquire({"resources": R2, "up": "0-1"})
    d.hello_done()
    d.ready({"count": 0})
    return d, t, clock


def suspended(d: Driver, t: RecordingTransport, clock: Clock) -> None:
    """Both nodes idle past power-idle-time: suspended, the program succeeds."""
    t.run_passes()
    clock.t = 10.0
    t.run_passes()
    ((argv, timeout, done),) = t.programs
    assert argv == ["/sbin/node-suspend", "--now", "n[0-1]"] and timeout == 60.0
    assert d.stats_get()["power"] == {"switching_off": "0-1", "sleeping": "", "switching_on": ""}
    clock.t = 16.0
    done(None)
    assert d.stats_get()["power"]["sleeping"] == "0-1"
    t.programs.clear()


def test_an_idle_node_is_suspended_and_a_job_that_needs_it_starts_once_it_is_resumed():
    d, t, clock = make(conf())
    suspended(d, t, clock)
    clock.t = 20.0
    alloc(d, t, 1, jobspec(nnodes=1, duration=100.0))
    assert not [p for p in replies(t, "alloc-1") if p["type"] == 0]  # no SUCCESS while the node sleeps
    ((argv, timeout, done),) = t.programs
    assert argv[0] == "/sbin/node-resume" and argv[1] in ("n0", "n1") and timeout == 600.0
    assert d.stats_get()["power"]["switching_on"] in ("0", "1")
    clock.t = 170.0
    done(None)
    t.run_passes()
    assert [p["type"] for p in replies(t, "alloc-1")][-1] == 0  # SUCCESS once it is back


def test_a_resume_that_fails_leaves_the_node_drained_with_the_reason():
    d, t, clock = make(conf(**{"resume-timeout": "2m"}))
    suspended(d, t, clock)
    alloc(d, t, 1, jobspec(nnodes=2, duration=100.0))
    ((argv, timeout, done),) = t.programs
    assert argv == ["/sbin/node-resume", "n[0-1]"] and timeout == 120.0
    done("/sbin/node-resume still running after 120s (killed)")
    drains = [p for k, _, p in t.sent if k == "drain"]
    assert drains == [
        {"targets": "0-1", "reason": "sched-py: powered down", "mode": "update"},
        {
            "targets": "0-1",
            "reason": "sched-py: n[0-1] did not power on: /sbin/node-resume still running after 120s (killed)",
            "mode": "overwrite",  # the failure replaces the powered-down reason
        },
    ]
    assert "undrain" not in [k for k, _, _ in t.sent]
    assert d.stats_get()["power"] == {"switching_off": "", "sleeping": "", "switching_on": ""}
    assert str(d.engine.graph.down_ranks()) == "0-1"  # down, not allocated to anyone
    assert not [p for p in replies(t, "alloc-1") if p["type"] == 0]


def test_a_node_switched_off_is_drained_as_powered_down_and_undrained_once_it_is_on():
    """flux resource shows a suspended node drained, powered down; flux-core
    then reports it down, which leaves it asleep (not down) for the engine;
    once resumed it is undrained."""
    d, t, clock = make(conf())
    suspended(d, t, clock)
    assert [p for k, _, p in t.sent if k == "drain"] == [
        {"targets": "0-1", "reason": "sched-py: powered down", "mode": "update"}
    ]
    d.acquire({"down": "0-1"})  # what flux-core sends once they are drained
    assert str(d.engine.graph.down_ranks()) == "" and d.stats_get()["power"]["sleeping"] == "0-1"
    clock.t = 20.0
    alloc(d, t, 1, jobspec(nnodes=2, duration=100.0))
    ((_, _, done),) = t.programs
    clock.t = 170.0
    done(None)
    assert [p for k, _, p in t.sent if k == "undrain"] == [{"targets": "0-1"}]
    d.acquire({"up": "0-1"})
    t.run_passes()
    assert [p["type"] for p in replies(t, "alloc-1")][-1] == 0


def test_a_node_an_admin_drained_while_it_slept_stays_drained_and_down_once_it_is_on():
    d, t, clock = make(conf())
    suspended(d, t, clock)
    d.acquire({"down": "0-1"})
    t.drained[1] = "admin: bad DIMM"  # flux resource drain --force 1 "admin: bad DIMM"
    alloc(d, t, 1, jobspec(nnodes=2, duration=100.0))
    ((argv, _, done),) = t.programs
    assert argv[-1] == "n[0-1]"
    clock.t = 170.0
    done(None)
    assert [p for k, _, p in t.sent if k == "undrain"] == [{"targets": "0"}]
    assert str(d.engine.graph.down_ranks()) == "1"
    t.run_passes()
    assert not [p for p in replies(t, "alloc-1") if p["type"] == 0]  # not on the admin's node


def test_a_reload_takes_a_node_still_drained_as_powered_down_as_asleep_not_down():
    stored = {"switching_off": "", "sleeping": "0-1", "switching_on": ""}
    d2, _, _ = make(conf())
    d2.acquire({"down": "0-1"})  # flux-core reports the drained nodes down to a new load
    d2.adopt_power(stored, {0: "sched-py: powered down", 1: "admin: bad DIMM"}, IdSet.parse("0-1"))
    assert d2.stats_get()["power"]["sleeping"] == "0"
    assert 1 in d2.engine.graph.down_ranks()  # drained by someone else: down


def test_a_suspend_that_fails_leaves_the_nodes_on_and_usable():
    d, t, clock = make(conf())
    t.run_passes()
    clock.t = 10.0
    t.run_passes()
    ((_, _, done),) = t.programs
    done("/sbin/node-suspend exited 1: no such node")
    assert d.stats_get()["power"]["switching_off"] == ""
    alloc(d, t, 1, jobspec(nnodes=2, duration=100.0))
    assert [p["type"] for p in replies(t, "alloc-1")][-1] == 0


@pytest.mark.parametrize(
    ("power", "words"),
    [
        ({"resume-program": None}, "resume-program is missing"),
        ({"suspend-program": ""}, "suspend-program: empty command"),
        ({"resume-timeout": "soon"}, "resume-timeout"),
        ({"on-time": -1}, "on-time: -1 is negative"),
    ],
)
def test_a_bad_power_table_is_one_line_naming_the_key(power, words):
    c = conf(**{k: v for k, v in power.items() if v is not None})
    for k, v in power.items():
        if v is None:
            del c["sched-py"]["power"][k]
    with pytest.raises(ValueError, match=r"^bad config: \[sched-py.power\]") as err:
        config_power(c, "sched-py", config_options(c, "sched-py"))
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("option", "needs"), [({"power-save": "idle"}, "power-save=idle"), ({"power-cap": 500}, "power-cap=500")]
)
def test_power_saving_or_a_cap_without_a_power_table_refuses_to_load(option, needs):
    c = conf(save="off")
    del c["sched-py"]["power"]
    c["sched-py"].update(option)
    words = rf"^bad config: \[sched-py.power\] is missing: {needs} needs the nodes' power model$"
    with pytest.raises(ValueError, match=words):
        config_power(c, "sched-py", config_options(c, "sched-py"))
    del c["sched-py"][next(iter(option))]
    assert config_power(c, "sched-py", config_options(c, "sched-py")) is None  # nothing needs it


def test_a_power_cap_alone_needs_no_suspend_or_resume_program():
    c = conf(save="off")
    for key in ("suspend-program", "resume-program"):
        del c["sched-py"]["power"][key]
    c["sched-py"]["power-cap"] = 500
    power = config_power(c, "sched-py", config_options(c, "sched-py"))
    assert power is not None and power.model.idle_watts == 95.0 and power.suspend == power.resume == ()
    c["sched-py"]["power-save"] = "idle"
    with pytest.raises(ValueError, match=r"suspend-program is missing \(power-save switches nodes with it\)$"):
        config_power(c, "sched-py", config_options(c, "sched-py"))


def test_the_drain_reasons_are_read_from_a_real_resource_status_answer():
    """flux-core 0.88's answer after the module powered four nodes down and
    an admin drained rank 3 with its own reason (t/data/flux/README.md)."""
    status = json.loads((FLUX_DATA / "resource-status-powered-down.json").read_text())
    reasons, online = drain_reasons(status)
    assert reasons == {0: POWERED_DOWN, 1: POWERED_DOWN, 2: POWERED_DOWN, 3: "admin: bad DIMM"}
    assert str(online) == "0-3"
    with pytest.raises(ValueError, match="no drain object"):
        drain_reasons({"online": "0-3"})
