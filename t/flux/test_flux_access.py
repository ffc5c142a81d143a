"""Access under a real flux-core: only the instance owner reaches sched-py.

A guest is simulated as flux-core's own tests do (t0017-security,
t0005-exec-jobid): ``FLUX_HANDLE_ROLEMASK=0x2 FLUX_HANDLE_USERID=UID`` on a
connection of the instance owner.  Every request sched-py serves is tried as
the guest and must be refused with EPERM and leave the scheduler untouched.
The oracle for what flux-core itself opens to guests is flux-core's own
scheduler: the same probes against sched-simple in the same instance give
the same answers.
"""

from __future__ import annotations

import errno
import json

import pytest

from .instance import Instance

GUEST = "FLUX_HANDLE_ROLEMASK=0x2 FLUX_HANDLE_USERID=4242"

JOBSPEC = {
    "version": 1,
    "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
    "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
    "attributes": {"system": {"duration": 0}},
}
R = {"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "starttime": 0, "expiration": 0}}
JOBID = 1 << 40  # no such job

REQUESTS = {
    "sched.alloc": {"id": JOBID, "priority": 16, "userid": 4242, "t_submit": 0.0, "jobspec": JOBSPEC},
    "sched.free": {"id": JOBID, "R": R, "final": True},
    "sched.cancel": {"id": JOBID},
    "sched.prioritize": {"jobs": [[JOBID, 31]]},
    "sched.expiration": {"id": JOBID, "expiration": 1e9},
    "sched.resource-status": None,
    "feasibility.check": {"jobspec": JOBSPEC},
    "MODULE.stats-get": None,
    "MODULE.config-reload": {},
}

PROBE = """
import errno, json, sys
import flux
h = flux.Flux()
out = {}
for topic, payload in json.loads(sys.argv[1]).items():
    f = h.rpc(topic, payload)
    try:
        f.wait_for(5.0)
        f.get()
        out[topic] = "ok"
    except OSError as exc:
        out[topic] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(out))
"""


def probe(inst: Instance, module: str, guest: bool, topics=None) -> dict[str, str]:
    reqs = {t.replace("MODULE", module): p for t, p in REQUESTS.items() if topics is None or t in topics}
    script = inst.dir / "probe.py"
    script.write_text(PROBE)
    prefix = f"{GUEST} " if guest else ""
    out = inst.run(f"{prefix}flux python {script} '{json.dumps(reqs)}'")
    return {t.replace(module, "MODULE"): v for t, v in json.loads(out).items()}


@pytest.fixture(scope="module")
def inst():
    i = Instance(1)
    try:
        i.use_scheduler("sched-py")
        yield i
    finally:
        i.stop()


def test_a_guest_reaches_no_service_of_sched_py(inst):
    before = inst.json("module", "stats", "sched-py")
    got = probe(inst, "sched-py", guest=True)
    assert got == {t: errno.errorcode[errno.EPERM] for t in REQUESTS}
    after = inst.json("module", "stats", "sched-py")
    for key in ("allocs", "frees", "bad_requests", "config_reloads", "pending_jobs", "running_jobs"):
        assert after[key] == before[key], key
    # the owner does reach it (the probe is not refused for another reason)
    topics = ["sched.resource-status", "feasibility.check", "MODULE.stats-get"]
    owner = probe(inst, "sched-py", guest=False, topics=topics)
    assert set(owner.values()) == {"ok"}


def test_guests_get_what_flux_cores_own_scheduler_gives_them(inst):
    ours = probe(inst, "sched-py", guest=True)
    inst.use_scheduler("sched-simple")
    try:
        theirs = probe(inst, "sched-simple", guest=True)
    finally:
        inst.use_scheduler("sched-py")
    assert ours == theirs
    # and flux-core's built-in module methods stay open to guests as flux-core made them
    assert inst.try_run("ping", "--count=1", "sched-py").returncode == 0
    p = inst.run(f"{GUEST} flux ping --count=1 sched-py")
    assert "sched-py.ping" in p
