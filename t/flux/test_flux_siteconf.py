"""Site configuration under a real flux-core: the ``[sched-py]`` table.

The instance is started with ``flux start -c DIR``; ``DIR/sched.toml``
holds the ``[sched-py]`` table and a default job duration
(``[policy.jobspec.defaults.system]``).  Four fake nodes of four cores, mock
execution, sched-py loaded with no arguments: every option comes from the
file.  Each test rewrites the file and runs ``flux config reload``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from fluxsched_py.flux import paths

from .instance import Instance
from .test_flux_module import R_of, estimate, fields, runs, wait_until

DEFAULTS = '[policy.jobspec.defaults.system]\nduration = "1m"\n'


def write_conf(inst: Instance, table: str) -> None:
    (inst.confdir / "sched.toml").write_text(f"[sched-py]\n{table}\n{DEFAULTS}")


def options(inst: Instance) -> dict:
    return inst.json("module", "stats", "sched-py")["options"]


@pytest.fixture(scope="module")
def inst():
    confdir = Path(tempfile.mkdtemp(prefix="fluxsched-conf-"))
    (confdir / "sched.toml").write_text(f'[sched-py]\nqueue-policy = "easy"\n{DEFAULTS}')
    i = Instance(4, broker_opts=["-c", str(confdir)])
    i.confdir = confdir
    try:
        i.use_scheduler(None)
        i.set_resources(4, 4)
        i.use_scheduler("sched-py")  # no arguments: the file decides
        yield i
    finally:
        i.stop()
        shutil.rmtree(confdir, ignore_errors=True)


@pytest.fixture
def idle(inst):
    yield inst
    inst.run("cancel", "--all", check=False)
    inst.run("queue", "drain", "--timeout=30")
    write_conf(inst, 'queue-policy = "easy"')
    inst.run("config", "reload")


def blocked_head(inst: Instance) -> tuple[str, str]:
    """A holds 3 nodes for 100 s; B (the head) wants all 4."""
    a = inst.submit("-N3", "--exclusive", "-t", "100s", runs(100), "true")
    inst.wait_event(a, "start")
    b = inst.submit("-N4", "--exclusive", "-t", "10s", runs(0.1), "true")
    wait_until(lambda: estimate(inst, b), what="the head's t_estimate")
    return a, b


def test_queue_policy_from_the_config_file_takes_effect_at_load(idle):
    inst = idle
    o = options(inst)
    assert (o["queue-policy"], o["policy"]) == ("easy", "low")
    a, b = blocked_head(inst)
    c = inst.submit("-N1", "-t", "50s", runs(0.1), "true")  # ends before B's reservation: easy backfills it
    inst.wait_event(c, "clean")
    assert fields(inst, b, "{status}") == ["SCHED"]


def test_config_reload_switches_policy_and_replans_at_once_with_no_job_lost(idle):
    inst = idle
    write_conf(inst, 'queue-policy = "fcfs"')
    inst.run("config", "reload")
    assert options(inst)["queue-policy"] == "fcfs"
    a, b = blocked_head(inst)
    c = inst.submit("-N1", "-t", "50s", runs(0.1), "true")
    wait_until(lambda: fields(inst, c, "{annotations.sched.reason_pending}"), what="c's reason")
    assert fields(inst, c, "{status}") == ["SCHED"]  # fcfs: behind B
    write_conf(inst, 'queue-policy = "easy"')
    inst.run("config", "reload")
    inst.wait_event(c, "alloc", timeout=10)  # no other event: the reload itself re-planned
    assert options(inst)["queue-policy"] == "easy"
    # behind B, easy gives no t_estimate; conservative gives one to every waiting job
    later = [inst.submit("-N4", "--exclusive", "-t", "10s", runs(0.1), "true") for _ in range(3)]
    wait_until(lambda: all(fields(inst, j, "{annotations.sched.reason_pending}") for j in later), what="reasons")
    assert [estimate(inst, j) for j in later] == [None, None, None]
    write_conf(inst, 'queue-policy = "conservative"')
    inst.run("config", "reload")
    wait_until(lambda: all(estimate(inst, j) for j in later), timeout=10, what="every t_estimate")
    st = inst.json("module", "stats", "sched-py")
    assert st["options"]["queue-policy"] == "conservative" and st["pending_jobs"] == 4 and st["running_jobs"] == 1
    inst.run("cancel", a)
    jobs = [b, c, *later]
    for j in jobs:
        inst.wait_event(j, "clean", timeout=60)
    for j in jobs:  # none lost, none allocated twice
        names = [e["name"] for e in inst.eventlog(j)]
        assert names.count("alloc") == 1 and "exception" not in names, (j, names)


def test_a_bad_new_config_is_refused_and_the_old_one_kept(idle):
    inst = idle
    write_conf(inst, 'queue-policy = "conservative"\nreserve-depth = 4')
    inst.run("config", "reload")
    write_conf(inst, 'queue-policy = "bogus"')
    p = inst.try_run("config", "reload")
    assert p.returncode != 0
    assert "[sched-py] queue-policy='bogus': choose from" in p.stderr
    o = options(inst)
    assert (o["queue-policy"], o["reserve-depth"]) == ("conservative", 4)
    # flux-core reverted the whole instance config
    assert json.loads(inst.run("config", "get"))["sched-py"]["queue-policy"] == "conservative"
    assert "config reload refused" in inst.dmesg()


def test_a_bad_config_fails_the_load_with_one_line(idle):
    inst = idle
    inst.run("module", "remove", "sched-py")
    try:
        write_conf(inst, "reserve-depth = true")
        inst.run("config", "reload")  # no scheduler to refuse it
        p = inst.try_run("module", "load", "sched-py")
        assert p.returncode != 0 and "sched-py" not in inst.modules()
        line = "sched-py: bad config: [sched-py] reserve-depth: expected a string or an integer, not a boolean"
        assert line in inst.dmesg()
        # an argument overrides the bad key? no: every key of the table is checked
        write_conf(inst, 'queue-policy = "hybrid"\nreserve-depth = 2')
        inst.run("config", "reload")
        inst.run("module", "load", "sched-py", "queue-policy=fcfs")
        o = options(inst)
        assert (o["queue-policy"], o["reserve-depth"]) == ("fcfs", 2)  # the argument wins, the rest is the file's
    finally:
        if "sched-py" not in inst.modules():
            write_conf(inst, 'queue-policy = "easy"')
            inst.run("config", "reload")
            inst.run("module", "load", "sched-py")
    inst.run("module", "reload", "sched-py")


def test_jobspec_default_duration_reaches_the_scheduler(idle):
    """flux-core 0.88 applies ``[policy.jobspec.defaults.system] duration`` at
    ingest (job-ingest's frobnicator), before ``sched.alloc``: the scheduler
    sees it in the jobspec, as sched-simple does."""
    inst = idle
    a = inst.submit("-N4", "--exclusive", runs(30), "true")  # no -t: the default minute
    inst.wait_event(a, "start")
    assert json.loads(inst.run("job", "info", a, "jobspec"))["attributes"]["system"]["duration"] == 60
    R = R_of(inst, a)["execution"]
    assert abs(R["expiration"] - R["starttime"] - 60) < 1
    b = inst.submit("-N4", "--exclusive", runs(0.1), "true")
    wait_until(lambda: estimate(inst, b), what="t_estimate")
    assert abs(estimate(inst, b) - (R["starttime"] + 60)) < 1


def test_the_named_flux_jobs_format(idle):
    inst = idle
    a, b = blocked_head(inst)
    env = f"XDG_CONFIG_DIRS={paths.xdg_dir()}"
    help_text = inst.run(f"{env} flux jobs --format=help")
    assert "sched-py" in help_text
    out = inst.run(f"{env} flux jobs --format=sched-py").splitlines()
    header, rows = out[0].split(), {line.split()[0]: line for line in out[1:]}
    assert header[:2] == ["JOBID", "NAME"] and "T_ESTIMATE" in header and header[-1] == "REASON"
    f58_b = inst.run("job", "id", "--to=f58", b).strip()
    assert "waiting for 4 nodes" in rows[f58_b] and "SCHED" in rows[f58_b]
