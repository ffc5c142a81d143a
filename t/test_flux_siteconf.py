"""The ``[sched-py]`` table of the instance config, without Flux.

Loading (:func:`config_options`) and ``<module>.config-reload`` (the driver)
on a RecordingTransport; t/flux/test_flux_siteconf.py does the same under a
real flux-core.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from fluxsched_py.flux.siteconf import config_options

from .test_flux_driver import FULL100, alloc, jobspec, make, replies


def test_the_table_gives_the_options():
    o = config_options({"sched-py": {"queue-policy": "easy", "reserve-depth": 3, "policy": "high"}}, "sched-py")
    assert (o.queue_policy, o.reserve_depth, o.placement) == ("easy", 3, "high")


def test_no_table_or_no_config_gives_the_defaults_with_flux_placement():
    for conf in (None, {}, {"resource": {"noverify": True}}):
        o = config_options(conf, "sched-py")
        assert (o.queue_policy, o.placement) == ("fcfs", "low")


def test_module_arguments_override_the_table():
    conf = {"sched-py": {"queue-policy": "easy", "queue-depth": 8}}
    o = config_options(conf, "sched-py", ["queue-policy=conservative"])
    assert (o.queue_policy, o.queue_depth) == ("conservative", 8)


def test_the_table_is_named_after_the_module():
    conf = {"sched-py": {"queue-policy": "easy"}, "sched-b": {"queue-policy": "hybrid"}}
    assert config_options(conf, "sched-b").queue_policy == "hybrid"


def test_per_queue_policy_as_a_table_or_a_string():
    a = config_options({"sched-py": {"queue-policy-per-queue": {"debug": "fcfs", "batch": "easy"}}}, "sched-py")
    b = config_options({"sched-py": {"queue-policy-per-queue": "debug:fcfs,batch:easy"}}, "sched-py")
    assert a.queue_policy_per_queue == b.queue_policy_per_queue == (("debug", "fcfs"), ("batch", "easy"))


@pytest.mark.parametrize(
    "table, words",
    [
        ({"queue-policy": "bogus"}, ["[sched-py]", "queue-policy='bogus'", "choose from"]),
        ({"reserve-depth": -2}, ["[sched-py]", "reserve-depth", "positive integer"]),
        ({"reserve-depth": True}, ["[sched-py] reserve-depth", "not a boolean"]),
        ({"queue-policy": ["easy"]}, ["[sched-py] queue-policy", "not an array"]),
        ({"queue-policy": 1.5}, ["[sched-py] queue-policy", "not a float"]),
        ({"frobnicate": 1}, ["[sched-py]", "unknown option 'frobnicate'"]),
        ({"queue_policy": "easy"}, ["[sched-py]", "did you mean 'queue-policy'"]),
        ({"queue-policy-per-queue": {"debug": "nope"}}, ["[sched-py]", "queue-policy-per-queue", "debug:nope"]),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key_and_the_reason(table, words):
    with pytest.raises(ValueError) as e:
        config_options({"sched-py": table}, "sched-py")
    text = str(e.value)
    assert text.startswith("bad config: ") and "\n" not in text
    for w in words:
        assert w in text


def test_a_table_that_is_not_a_table_is_refused():
    with pytest.raises(ValueError, match=r"\[sched-py\] must be a table, not str"):
        config_options({"sched-py": "easy"}, "sched-py")


def test_a_bad_argument_is_named_as_an_argument():
    with pytest.raises(ValueError, match="^bad module argument: queue-policy='x'"):
        config_options({"sched-py": {"queue-policy": "easy"}}, "sched-py", ["queue-policy=x"])


# -- config-reload ---------------------------------------------------------------


def reload(d, t, conf, msg="reload"):
    d.handle("sched-py.config-reload", msg, conf)
    t.run_passes()
    (reply,) = replies(t, msg)
    return reply


def test_reload_switches_policy_and_replans_at_once_with_no_job_lost():
    d, t = make()  # fcfs
    alloc(d, t, 1, jobspec(ncores=4, nnodes=1, duration=100))  # node 0 until t+100
    alloc(d, t, 2, FULL100)  # the head: both nodes, waits
    alloc(d, t, 3, jobspec(ncores=1, duration=0))  # unlimited: can never backfill
    alloc(d, t, 4, jobspec(ncores=1, duration=50))  # fcfs keeps it behind 2; backfilling starts it

    def started():
        return [p["id"] for p in t.responses() if p and p.get("type") == 0]

    assert started() == [1] and d.engine.pending_count == 3
    assert reload(d, t, {"sched-py": {"queue-policy": "conservative"}}) is None
    assert d.options.queue_policy == "conservative" and d.engine.queue_policy.name == "conservative"
    assert d.stats_get()["options"]["queue-policy"] == "conservative" and d.stats["config_reloads"] == 1
    assert started() == [1, 4]  # the reload's own pass backfilled 4
    assert [j.id for j in d.engine.pending()] == [2, 3] and len(d.engine.running) == 2


def test_a_bad_new_config_is_refused_and_the_old_kept():
    d, t = make(["queue-depth=unlimited"])
    reload(d, t, {"sched-py": {"queue-policy": "easy"}}, msg="ok")
    errnum, text = reload(d, t, {"sched-py": {"queue-policy": "bogus"}})
    assert errnum == errno.EINVAL and text.startswith("sched-py: bad config: [sched-py] queue-policy='bogus'")
    assert d.options.queue_policy == "easy" and d.engine.queue_policy.name == "easy"
    assert any("config reload refused" in e for e in t.errors())


def test_module_arguments_still_win_after_a_reload():
    d, t = make(["queue-policy=hybrid"])
    reload(d, t, {"sched-py": {"queue-policy": "easy", "reserve-depth": 2}})
    assert (d.options.queue_policy, d.options.reserve_depth) == ("hybrid", 2)


def test_removing_the_table_goes_back_to_the_defaults():
    d, t = make()
    reload(d, t, {"sched-py": {"queue-policy": "easy"}}, msg="a")
    reload(d, t, {}, msg="b")
    assert (d.options.queue_policy, d.options.placement) == ("fcfs", "low")


def test_queue_depth_cannot_change_without_a_module_reload():
    d, t = make(["queue-policy=easy"])
    reload(d, t, {"sched-py": {"queue-depth": 4, "reserve-depth": 1}})
    assert d.options.queue_depth is None and d.ready_payload() == {"mode": "unlimited"}
    assert d.options.reserve_depth == 1  # the rest is taken
    assert any("queue-depth=4 takes effect when the module is reloaded" in text for _, text in t.logs)


def test_an_unchanged_config_is_acknowledged_without_a_pass():
    d, t = make()
    before = t.pass_requests
    assert reload(d, t, {"other": {"x": 1}}) is None
    assert t.pass_requests == before and d.stats["config_reloads"] == 0


@pytest.mark.parametrize("payload", [None, [], "text", {"sched-py": 3}])
def test_a_malformed_reload_request_gets_an_error_never_an_exception(payload):
    d, t = make()
    if payload is None:
        assert reload(d, t, payload) is None  # an empty config: defaults
        return
    errnum, text = reload(d, t, payload)
    assert errnum == errno.EINVAL and "bad config" in text


# -- the named flux jobs format ------------------------------------------------------


def test_xdg_path_holds_the_named_flux_jobs_format(capsys):
    import tomllib

    from fluxsched_py.cli import main

    assert main(["xdg-path"]) == 0
    folder = capsys.readouterr().out.strip()
    conf = tomllib.loads((Path(folder) / "flux" / "flux-jobs.toml").read_text())
    fmt = conf["formats"]["sched-py"]
    assert fmt["description"]
    for field in ("{queue", "{annotations.sched.t_estimate", "{annotations.sched.reason_pending}"):
        assert field in fmt["format"]
