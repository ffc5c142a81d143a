"""Run limits under a real flux-core: RFC 33 ``policy.scheduler`` tables.

A 4-node instance (4 cores each, mock execution) started with ``flux start
-c DIR``; ``DIR/sched.toml`` holds the limits, read when sched-py loads and
again at each ``flux config reload``.  A second user is simulated as
flux-core's own tests do (t2264-job-manager-private, t0005-exec-jobid): its
jobspec is wrapped with sign-type ``none`` for its uid (flux-core's
``sign_none_wrap``) and submitted with ``--flags=signed`` over the owner's
connection with ``FLUX_HANDLE_USERID=UID``.  Without flux-security, job-ingest
takes sign-type ``none`` only from the owner role, so the role stays the
owner's (``FLUX_HANDLE_ROLEMASK=0x1``, as in t0005); the job's user is UID.
Its job may fail at exec: what is checked is that the scheduler allocated it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from .instance import Instance
from .test_flux_module import fields, runs, wait_until

GUEST_UID = 4242
AS_GUEST = f"FLUX_HANDLE_ROLEMASK=0x1 FLUX_HANDLE_USERID={GUEST_UID}"
DEFAULTS = '[policy.jobspec.defaults.system]\nduration = "1m"\n'
TWO_NODES = "[policy.scheduler.limits]\nuser = { nodes = 2 }\n"


def sign_none(jobspec: str, uid: int) -> str:
    """flux-core's ``sign_none_wrap``: ``base64(header).base64(payload).none``."""
    header = f"version\0i1\0userid\0i{uid}\0mechanism\0snone\0".encode()
    return f"{base64.b64encode(header).decode()}.{base64.b64encode(jobspec.encode()).decode()}.none"


def submit_as_other_user(inst: Instance, *args: str) -> str:
    path = inst.dir / "signed.J"
    path.write_text(sign_none(inst.run("run", "--dry-run", *args), GUEST_UID))
    return inst.run(f"{AS_GUEST} flux job submit --flags=signed {path}").strip()


def write_conf(inst: Instance, text: str) -> None:
    (inst.confdir / "sched.toml").write_text(f'[sched-py]\nqueue-policy = "easy"\n{text}{DEFAULTS}')


def reason(inst: Instance, jobid: str) -> str:
    return inst.run("jobs", "-no", "{annotations.sched.reason_pending}", jobid).strip()


def allocated(inst: Instance, jobid: str) -> bool:
    return any(e["name"] == "alloc" for e in inst.eventlog(jobid))


@pytest.fixture(scope="module")
def inst():
    confdir = Path(tempfile.mkdtemp(prefix="fluxsched-limits-"))
    (confdir / "sched.toml").write_text(f'[sched-py]\nqueue-policy = "easy"\n{TWO_NODES}{DEFAULTS}')
    i = Instance(4, broker_opts=["-c", str(confdir)])
    i.confdir = confdir
    try:
        i.use_scheduler(None)
        i.set_resources(4, 4)
        i.use_scheduler("sched-py")  # the limits come from the file at load
        yield i
    finally:
        i.stop()
        shutil.rmtree(confdir, ignore_errors=True)


@pytest.fixture
def idle(inst):
    yield inst
    inst.run("cancel", "--all", "--user=all", check=False)
    inst.run("queue", "drain", "--timeout=30")
    write_conf(inst, TWO_NODES)
    inst.run("config", "reload")


def test_a_users_third_node_waits_named_by_the_limit_while_another_users_job_starts(idle):
    inst = idle
    mine = [inst.submit("-N1", "-t", "100s", runs(100), "true") for _ in range(3)]
    for j in mine[:2]:
        inst.wait_event(j, "alloc")
    wait_until(lambda: reason(inst, mine[2]) == "user limit: 2 of 2 nodes in use", what="the limit as the reason")
    assert fields(inst, mine[2], "{status}") == ["SCHED"] and not allocated(inst, mine[2])
    theirs = submit_as_other_user(inst, "-N1", "-t", "100s", runs(100), "true")
    wait_until(lambda: allocated(inst, theirs), what="the other user's alloc")
    assert fields(inst, theirs, "{userid}") == [str(GUEST_UID)]
    assert fields(inst, mine[2], "{status}") == ["SCHED"]  # one node is still free: the limit holds it
    st = inst.json("module", "stats", "sched-py")["limits"]
    assert st["set"] == ["every queue: user nodes=2"]
    assert st["users"][str(os.getuid())] == {"jobs": 2, "nodes": 2, "cores": 8, "gpus": 0}  # the other may be over
    inst.run("cancel", mine[0])
    inst.wait_event(mine[2], "alloc")  # its user's usage dropped: it starts at the next pass


def test_config_reload_raises_and_lowers_the_limit_and_running_jobs_stay(idle):
    inst = idle
    mine = [inst.submit("-N1", "-t", "100s", runs(100), "true") for _ in range(3)]
    wait_until(lambda: reason(inst, mine[2]).startswith("user limit"), what="the held job")
    write_conf(inst, "[policy.scheduler.limits]\nuser = { nodes = 3 }\n")
    inst.run("config", "reload")
    inst.wait_event(mine[2], "alloc")
    write_conf(inst, "[policy.scheduler.limits]\nuser = { jobs = 1 }\n")
    inst.run("config", "reload")
    fourth = inst.submit("-N1", "-t", "100s", runs(100), "true")
    wait_until(lambda: reason(inst, fourth) == "user limit: 3 of 1 running job in use", what="the lowered limit")
    for j in mine:
        assert fields(inst, j, "{status}") == ["RUN"], j


def test_a_bad_limit_at_reload_is_refused_and_the_old_limits_kept(idle):
    inst = idle
    write_conf(inst, "[policy.scheduler.limits]\nuser = { nodes = -5 }\n")
    p = inst.try_run("config", "reload")
    assert p.returncode != 0
    assert "bad config: policy.scheduler.limits.user.nodes: expected an integer from 0" in p.stderr
    assert "config reload refused" in inst.dmesg()
    assert json.loads(inst.run("config", "get"))["policy"]["scheduler"]["limits"]["user"]["nodes"] == 2
    assert inst.json("module", "stats", "sched-py")["limits"]["set"] == ["every queue: user nodes=2"]


def test_a_bad_limit_fails_the_load_with_one_line(idle):
    inst = idle
    inst.run("module", "remove", "sched-py")
    try:
        write_conf(inst, "[queues.batch.policy.scheduler.limits]\ntotal = { cpus = 4 }\n")
        inst.run("config", "reload")  # no scheduler to refuse it; flux-core leaves policy.scheduler to us
        p = inst.try_run("module", "load", "sched-py")
        assert p.returncode != 0 and "sched-py" not in inst.modules()
        line = (
            "sched-py: bad config: queues.batch.policy.scheduler.limits.total.cpus: unknown key "
            "(expected one of jobs, nodes, cores, gpus)"
        )
        assert line in inst.dmesg()
    finally:
        write_conf(inst, TWO_NODES)
        inst.run("config", "reload")
        if "sched-py" not in inst.modules():
            inst.run("module", "load", "sched-py")
