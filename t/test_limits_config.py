"""Run limits from the instance config, without Flux: the keys, their
precedence, one-line errors naming the key, and ``flux config reload``
through the driver on a RecordingTransport (t/flux/test_flux_limits.py does
it under a real flux-core)."""

from __future__ import annotations

import errno
import os
import pwd

import pytest

from fluxsched_py.engine.runlimits import RunLimits
from fluxsched_py.flux.siteconf import config_limits, config_options

from .test_flux_driver import alloc, jobspec, make, replies

POLICY = {"scheduler": {"limits": {"user": {"nodes": 64, "jobs": 8}, "total": {"cores": 1000}}}}


def test_no_limit_anywhere_is_none():
    for conf in (None, {}, {"sched-py": {"queue-policy": "easy"}}, {"policy": {"limits": {"duration": "1h"}}}):
        assert RunLimits.from_config(conf) is None
    assert RunLimits.from_config({"policy": {"scheduler": {"limits": {"user": {}}}}}) is None


def test_precedence_queue_over_global_per_user_over_user_and_minus_one_lifts():
    conf = {
        "policy": {"scheduler": {"limits": {"user": {"nodes": 64, "jobs": 8}, "users": {"7": {"jobs": 20}}}}},
        "queues": {
            "debug": {"policy": {"scheduler": {"limits": {"user": {"nodes": 2}, "total": {"nodes": 4}}}}},
            "batch": {"policy": {"scheduler": {"limits": {"user": {"jobs": -1}, "users": {"7": {"nodes": 128}}}}}},
            "plain": {"requires": ["batch"]},
        },
    }
    lim = RunLimits.from_config(conf)
    # resources: jobs, nodes, cores, gpus
    assert lim.user_limits(None, 5) == (8, 64, None, None)  # the anonymous queue: the global table
    assert lim.user_limits(None, 7) == (20, 64, None, None)  # users.7 over user, key by key
    assert lim.user_limits("plain", 5) == (8, 64, None, None)  # a queue with no table of its own
    assert lim.user_limits("debug", 5) == (8, 2, None, None)  # the queue's nodes win
    assert lim.user_limits("debug", 7) == (20, 2, None, None)  # the queue's user beats the global users.7
    assert lim.user_limits("batch", 5) == (None, 64, None, None)  # -1 lifts the global jobs limit
    assert lim.user_limits("batch", 7) == (None, 128, None, None)
    assert lim.queue_limits("debug") == (None, 4, None, None) and lim.queue_limits("batch") == (None,) * 4
    assert lim.instance_user_limits(5) == (None,) * 4


def test_the_module_table_holds_the_instance_limits_and_is_no_option():
    conf = {"sched-py": {"queue-policy": "easy", "limits": {"user": {"jobs": 3}, "total": {"gpus": 8}}}}
    assert config_options(conf, "sched-py").queue_policy == "easy"  # "limits" is not an option
    lim = config_limits(conf, "sched-py")
    assert lim.instance_user_limits(1) == (3, None, None, None) and lim.instance_limits() == (None, None, None, 8)
    assert config_limits({"sched-b": {"limits": {"user": {"jobs": 1}}}}, "sched-py") is None  # named after the module


def test_users_by_name_are_looked_up_and_by_digits_are_uids():
    me = pwd.getpwuid(os.getuid()).pw_name
    conf = {"policy": {"scheduler": {"limits": {"users": {me: {"jobs": 1}, "4242": {"jobs": 2}}}}}}
    lim = config_limits(conf, "sched-py")
    assert lim.user_limits(None, os.getuid())[0] == 1 and lim.user_limits(None, 4242)[0] == 2


def nest(path, value):
    """``{"a": {"b": value}}`` from ``"a.b"``."""
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


PSL = "policy.scheduler.limits"


@pytest.mark.parametrize(
    "path, value, key, words",
    [
        (f"{PSL}.user.nodes", "64", None, "not the string '64'"),
        (f"{PSL}.user.nodes", -2, None, "or -1 for unlimited, not -2"),
        (f"{PSL}.user.nodes", True, None, "not a boolean"),
        (f"{PSL}.user.nodes", 1.5, None, "not the float 1.5"),
        (f"{PSL}.user.nodes", 2**31, None, "not 2147483648"),
        (f"{PSL}.user.node", 1, None, "unknown key (expected one of jobs, nodes, cores, gpus)"),
        (f"{PSL}.per-user", {}, None, "unknown key (expected one of user, users, total)"),
        ("policy.scheduler.limit", {}, None, "unknown key (sched-py reads only policy.scheduler.limits)"),
        (f"{PSL}.user", 4, None, "must be a table, not int"),
        ("policy.scheduler", "fast", None, "must be a table, not the string 'fast'"),
        (f"{PSL}.users", {"no-such-user-xyz": {"jobs": 1}}, f"{PSL}.users.no-such-user-xyz", "no such user"),
        (f"{PSL}.users", {"12": {"jobs": 1}, "012": {"jobs": 2}}, f"{PSL}.users.012", "user 12 is given twice"),
        ("queues.batch.policy.scheduler.limits.total.gpus", "x", None, "expected an integer"),
        ("queues.batch", 3, None, "must be a table"),
        ("sched-py.limits.user.cpus", 4, None, "unknown key"),
    ],
)
def test_a_bad_limit_is_one_line_naming_the_key(path, value, key, words):
    with pytest.raises(ValueError) as e:
        config_limits(nest(path, value), "sched-py")
    text = str(e.value)
    assert text.startswith(f"bad config: {key or path}") and "\n" not in text, text
    assert words in text, text


# -- config-reload ---------------------------------------------------------------

NODE = jobspec(ncores=4, nnodes=1, duration=100)


def reload(d, t, conf, msg):
    d.handle("sched-py.config-reload", msg, conf)
    t.run_passes()
    (reply,) = replies(t, msg)
    return reply


def started(t):
    return [p["id"] for p in t.responses() if p and p.get("type") == 0]


def reasons(t):
    out = {}
    for p in t.responses():
        if p and p.get("type") == 1 and p["annotations"]["sched"].get("reason_pending"):
            out[p["id"]] = p["annotations"]["sched"]["reason_pending"]
    return out


def limit_conf(jobs):
    return {"sched-py": {"queue-policy": "easy"}, "policy": {"scheduler": {"limits": {"user": {"jobs": jobs}}}}}


def test_a_reload_sets_lowers_and_removes_limits_and_keeps_running_jobs():
    d, t = make(["queue-policy=easy"])  # 2 nodes of 4 cores
    assert reload(d, t, limit_conf(1), "a") is None
    assert d.stats_get()["limits"]["set"] == ["every queue: user jobs=1"]
    alloc(d, t, 1, NODE)
    alloc(d, t, 2, NODE)
    assert started(t) == [1] and reasons(t)[2] == "user limit: 1 of 1 running job in use"
    assert d.stats_get()["limits"]["users"] == {"0": {"jobs": 1, "nodes": 1, "cores": 4, "gpus": 0}}
    assert reload(d, t, limit_conf(2), "b") is None
    assert started(t) == [1, 2] and d.stats["config_reloads"] == 2
    alloc(d, t, 3, jobspec(ncores=1, duration=100))
    assert reload(d, t, limit_conf(1), "c") is None  # lowered below what runs: both keep running
    assert len(d.engine.running) == 2 and started(t) == [1, 2]
    assert reasons(t)[3] == "user limit: 2 of 1 running job in use"
    assert reload(d, t, {"sched-py": {"queue-policy": "easy"}}, "d") is None  # no limit any more
    assert "limits" not in d.stats_get() and d.engine.usage is None


def test_a_bad_limit_at_reload_is_refused_and_the_old_limits_kept():
    d, t = make(["queue-policy=easy"])
    reload(d, t, limit_conf(1), "ok")
    bad = {"policy": {"scheduler": {"limits": {"user": {"jobs": "one"}}}}}
    errnum, text = reload(d, t, bad, "bad")
    assert errnum == errno.EINVAL
    assert text.startswith("sched-py: bad config: policy.scheduler.limits.user.jobs: expected an integer")
    assert any("config reload refused" in e for e in t.errors())
    assert d.engine.limits.user_limits(None, 0)[0] == 1
    assert d.options.queue_policy == "easy"  # the options of the refused config were not taken either


def test_the_limits_of_the_config_at_load_are_the_engines():
    from fluxsched_py.flux.driver import Driver
    from fluxsched_py.flux.siteconf import config_limits as cl

    from .test_flux_driver import R2, Clock, RecordingTransport

    t = RecordingTransport()
    d = Driver(t, ["queue-policy=easy"], clock=Clock(), budget=None, limits=cl(limit_conf(1), "sched-py"))
    t.driver = d
    d.acquire({"resources": R2, "up": "0-1"})
    d.hello_done()
    d.ready({"count": 0})
    alloc(d, t, 1, NODE)
    alloc(d, t, 2, NODE)
    assert started(t) == [1] and reasons(t)[2] == "user limit: 1 of 1 running job in use"
