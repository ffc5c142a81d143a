#!/usr/bin/env python3
"""Record real RFC 27 traffic between flux-core and sched-py into t/data/flux/.

Run by hand with flux-core on PATH (``python t/flux/record_traffic.py
[main] [down-up] [copies]``, all by default).  Each session starts ``flux start
--test-size=2``, replaces sched-simple with sched-py, traces every message of
the sched-py module (the ``module.trace`` RPC that ``flux module trace
--full`` uses) while a script drives flux-core through each RFC 27 exchange,
and writes one JSON-lines file per scenario.  Session ``main``:

    startup.jsonl       resource.acquire, sched-hello (no jobs), sched-ready
    alloc-free.jsonl    alloc -> KVS commit -> SUCCESS -> free
    feasibility.jsonl   feasibility.check, satisfiable and not
    deny.jsonl          alloc of an infeasible job -> DENY with a note
    cancel.jsonl        cancel of a pending job -> CANCEL
    urgency.jsonl       flux job urgency -> sched.prioritize
    expiration.jsonl    flux update ID duration= -> sched.expiration
    status.jsonl        sched.resource-status, sched-py.stats-get
    drain.jsonl         flux resource drain/undrain -> resource.acquire down/up
    housekeeping.jsonl  partial release: sched.free final=false then final=true
    reload.jsonl        module reload with running jobs and a housekeeping
                        straggler: sched-hello responses (one with "free")
                        and the KVS lookups of their R
    garbage.jsonl       malformed requests sent by hand

Session ``down-up`` (its own instance):

    down-up.jsonl       broker rank 1 stopped (SIGSTOP: torpid) ->
                        resource.acquire down=1; a 2-node job waits, a 1-node
                        job runs on rank 0; SIGCONT (lively) -> up=1 and the
                        2-node job runs; sched.resource-status while down and
                        after

Session ``copies`` (its own instance, ``duplicates=1``, mock execution):

    copies.jsonl        end-of-campaign copies: a regular job holds rank 0
                        while campaign c's best-effort jobs (one of 10 s,
                        two of 0.5 s) run on rank 1; once none is pending
                        and rank 0 is idle, the module asks for the long
                        job's jobspec and J (job-manager.getattr,
                        job-info.lookup) and submits its copy
                        (job-ingest.submit); the copy's sched.alloc; the
                        original ends first and the copy is cancelled
                        (job-manager.raise, type cancel)

Messages with no bearing on RFC 27 (log.append, module.status, ...) are
dropped (session ``copies`` keeps the three RPCs above too); payloads are
kept whole, but for J (the signed jobspec, which holds the environment).
See t/test_flux_replay_traffic.py and t/test_flux_copies.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "t" / "data" / "flux"
KEEP = (
    "sched.",
    "feasibility.",
    "job-manager.sched-",
    "job-manager.raise",
    "resource.acquire",
    "kvs.commit",
    "kvs.lookup",
    "sched-py.stats-get",
)

SCRIPT = r"""
set -x
T=$FLUX_TRACER
mark() { flux python -c 'import flux,sys; flux.Flux().rpc("sched-py.stats-get", {"marker": sys.argv[1]}).get()' $1; }
flux module remove sched-simple
flux python $T sched-py $WORK/trace1.jsonl & TR=$!
sleep 1
flux module load sched-py queue-policy=easy
sleep 1
mark alloc-free
flux run -n1 true
mark feasibility
flux python $WORK/feas.py $WORK/n1.json
flux submit -N3 true || true
mark deny
flux module reload -f job-ingest disable-validator
flux job submit $WORK/n3.json > $WORK/deny.id
flux job wait-event -t 10 $(cat $WORK/deny.id) clean
mark cancel
flux submit -N2 -n4 sleep 300 > $WORK/big.id
flux job wait-event -t 10 $(cat $WORK/big.id) alloc
J2=$(flux submit -n1 true)
sleep 0.3
flux cancel $J2
flux job wait-event -t 10 $J2 clean
mark urgency
J3=$(flux submit -n1 -t 60s true)
J4=$(flux submit -n2 -t 60s true)
sleep 0.3
flux job urgency $J4 31
sleep 0.3
mark expiration
flux update $(cat $WORK/big.id) duration=600
sleep 0.3
mark status
FLUX_RESOURCE_LIST_RPC=sched.resource-status flux resource list
flux module stats sched-py
mark drain
flux cancel $(cat $WORK/big.id)
flux job wait-event -t 10 $J3 clean
flux job wait-event -t 10 $J4 clean
flux resource drain 1 recording
sleep 0.3
flux resource undrain 1
sleep 0.3
mark housekeeping
flux config load <<EOT
[job-manager.housekeeping]
command = [ "$WORK/hk.sh" ]
release-after = "0"
EOT
flux run -N2 -n2 true
sleep 5
mark end
kill -9 $TR
wait $TR 2>/dev/null
# reload with running jobs and a housekeeping straggler
flux submit -N1 -n1 sleep 300 > $WORK/run.id
flux job wait-event -t 10 $(cat $WORK/run.id) start
flux run -N2 -n2 true
sleep 0.5
flux python $T sched-py $WORK/trace2.jsonl & TR=$!
sleep 1
flux module reload sched-py queue-policy=easy
flux resource list
sleep 3
mark end
kill -9 $TR
wait $TR 2>/dev/null
# garbage: requests no job-manager would send
flux python $T sched-py $WORK/trace3.jsonl & TR=$!
sleep 1
flux python $WORK/garbage.py
flux module stats sched-py | head -5
mark end
kill -9 $TR
wait $TR 2>/dev/null
flux cancel --all
"""

GARBAGE = r"""
import flux, flux.constants, json
h = flux.Flux()
def send(topic, payload):
    # no response expected (like the job-manager's sched.free / alloc of a bad job)
    h.rpc(topic, payload, flags=flux.constants.FLUX_RPC_NORESPONSE)
def call(topic, payload):
    try:
        print(topic, h.rpc(topic, payload).get())
    except OSError as e:
        print(topic, "error", e)
send("sched.free", {"id": 123456789, "R": {"version": 1, "execution": {"R_lite": []}}, "final": True})
send("sched.cancel", {"id": 123456789})
send("sched.prioritize", {"jobs": [[123456789, 5], "junk"]})
send("sched.alloc", {"jobspec": {}})
send("sched.alloc", "not an object")
call("sched.expiration", {"id": 123456789, "expiration": 1.0})
call("sched.expiration", {"nope": 1})
call("feasibility.check", {"jobspec": {"version": 1}})
call("feasibility.check", {})
# a malformed alloc with an id: denied, the response comes back to us
f = h.rpc("sched.alloc", {"id": 424242, "priority": "high", "jobspec": 7})
print("alloc", f.get())
f = h.rpc("sched.alloc", {"id": 434343, "priority": 16, "userid": 0, "t_submit": 1.0,
                          "jobspec": {"version": 1, "resources": [{"type": "slot"}]}})
print("alloc", f.get())
"""

DOWN_UP = r"""
set -x
T=$FLUX_TRACER
mark() { flux python -c 'import flux,sys; flux.Flux().rpc("sched-py.stats-get", {"marker": sys.argv[1]}).get()' $1; }
down() { flux resource list -s down -no {nnodes}; }
mock="--setattr=system.exec.test.run_duration=0.1s"
# torpid after 6 s without a word from a broker (flux-core's t3308 uses 2 s,
# which flaps on a loaded machine); keepalives every second
flux module reload heartbeat period=0.5s
flux config get | flux python $WORK/tbon.py | flux config load
flux module remove sched-simple
flux python $T sched-py $WORK/trace4.jsonl & TR=$!
sleep 1
flux module load sched-py queue-policy=easy
sleep 1
for i in $(seq 100); do test "$(down)" = 0 && break; sleep 0.2; done
mark down-up
PID=$(flux exec -r 1 flux getattr broker.pid)
kill -STOP $PID
for i in $(seq 150); do test "$(down)" = 1 && break; sleep 0.2; done
FLUX_RESOURCE_LIST_RPC=sched.resource-status flux resource list
J1=$(flux submit -N2 -n2 $mock true)
J2=$(flux submit -N1 -n1 $mock true)
flux job wait-event -t 10 $J2 clean
kill -CONT $PID
for i in $(seq 100); do test "$(down)" = 0 && break; sleep 0.2; done
flux job wait-event -t 20 $J1 clean
FLUX_RESOURCE_LIST_RPC=sched.resource-status flux resource list
flux jobs -a -o "{id} {status} {annotations.sched.resource_summary}"
mark end
kill -9 $TR
wait $TR 2>/dev/null
"""

COPIES = r"""
set -x
T=$FLUX_TRACER
mark() { flux python -c 'import flux,sys; flux.Flux().rpc("sched-py.stats-get", {"marker": sys.argv[1]}).get()' $1; }
mock() { echo "--setattr=system.exec.test.run_duration=$1s"; }
BE="-N1 --exclusive -S preemptible-after=0 -t 1m --setattr=user.campaign=c"
# whichever scheduler the instance loaded (sched-simple, or Fluxion's modules), as t/flux/instance.py does
flux modprobe remove sched feasibility
for m in $(flux module list | awk '$1 ~ /^sched-/ {print $1}'); do flux modprobe remove $m; done
flux python $T sched-py $WORK/trace5.jsonl & TR=$!
sleep 1
flux module load sched-py queue-policy=easy duplicates=1
sleep 1
mark copies
R=$(flux submit -N1 --exclusive -t 1m $(mock 3) true)
flux job wait-event -t 10 $R start
L=$(flux submit $BE $(mock 10) true)
flux job wait-event -t 10 $L start
S1=$(flux submit $BE $(mock 0.5) true)
S2=$(flux submit $BE $(mock 0.5) true)
flux job wait-event -t 20 $L clean
sleep 2
flux jobs -a -o "{id} {result} {t_submit} {ranks}"
flux module stats sched-py
mark end
kill -9 $TR
wait $TR 2>/dev/null
"""

TBON = """
import json, sys
c = json.load(sys.stdin)
c["tbon"] = dict(c.get("tbon", {}), torpid_min="1s", torpid_max="6s")
print(json.dumps(c))
"""

FEAS = """
import flux, json, sys
print(flux.Flux().rpc("feasibility.check", {"jobspec": json.load(open(sys.argv[1]))}).get())
"""

HK = """#!/bin/sh
test "$(flux getattr rank)" = 1 && sleep 4
exit 0
"""


def _split(trace: Path, keep: tuple[str, ...] = KEEP) -> dict[str, list[dict]]:
    """Split a trace into scenarios at the marker stats-get requests."""
    out: dict[str, list[dict]] = {"startup": []}
    name = "startup"
    skip_answer = False
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        topic = rec["topic"]
        if topic == "sched-py.stats-get" and isinstance(rec.get("payload"), dict) and "marker" in rec["payload"]:
            name = rec["payload"]["marker"]
            out.setdefault(name, [])
            skip_answer = True
            continue
        if skip_answer and topic == "sched-py.stats-get" and rec["type"] == "response":
            skip_answer = False
            continue
        if topic.endswith(".disconnect") or not topic.startswith(keep):
            continue
        out[name].append(rec)
    return out


def _start(work: Path, script: str, env: dict[str, str]) -> None:
    (work / "run.sh").write_text(script)
    proc = subprocess.run(
        ["flux", "start", "--test-size=2", "sh", str(work / "run.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    (work / "run.log").write_text(proc.stdout + proc.stderr)
    print(f"flux start exited {proc.returncode}; log in {work / 'run.log'}")


def scrub(obj):
    """Drop what a recording must not carry: the recording user's environment and working folder.

    Every jobspec's ``attributes.system.environment`` becomes ``{}`` and its
    ``cwd`` ``/tmp``, and every J (a signed jobspec) ``"scrubbed"``; nothing
    the scheduler reads changes.
    """
    if isinstance(obj, dict):
        if isinstance(obj.get("J"), str):
            obj["J"] = "scrubbed"
        system = obj.get("attributes", {}).get("system") if isinstance(obj.get("attributes"), dict) else None
        if isinstance(system, dict):
            if "environment" in system:
                system["environment"] = {}
            if "cwd" in system:
                system["cwd"] = "/tmp"
        for v in obj.values():
            scrub(v)
    elif isinstance(obj, list):
        for v in obj:
            scrub(v)
    return obj


def _write(scenarios: dict[str, list[dict]]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, recs in scenarios.items():
        path = OUT / f"{name}.jsonl"
        path.write_text("".join(json.dumps(scrub(r), sort_keys=True) + "\n" for r in recs))
        print(f"{path.relative_to(REPO)}: {len(recs)} messages")


def record_main(work: Path, env: dict[str, str]) -> None:
    (work / "hk.sh").write_text(HK)
    (work / "hk.sh").chmod(0o755)
    (work / "garbage.py").write_text(GARBAGE)
    (work / "feas.py").write_text(FEAS)
    for n, f in (("n1", ["-n1"]), ("n3", ["-N3"])):
        js = subprocess.run(["flux", "run", "--dry-run", *f, "true"], capture_output=True, text=True, check=True)
        (work / f"{n}.json").write_text(js.stdout)
    _start(work, SCRIPT, env)
    scenarios = _split(work / "trace1.jsonl")
    reload = _split(work / "trace2.jsonl")
    garbage = _split(work / "trace3.jsonl")
    scenarios["reload"] = reload.get("startup", [])
    scenarios["garbage"] = garbage.get("startup", [])
    scenarios.pop("end", None)
    _write(scenarios)


def record_down_up(work: Path, env: dict[str, str]) -> None:
    (work / "tbon.py").write_text(TBON)
    _start(work, DOWN_UP, env)
    scenarios = _split(work / "trace4.jsonl")
    # the startup of this session is the same exchange as startup.jsonl: kept in front
    _write({"down-up": scenarios["startup"] + scenarios["down-up"]})


def record_copies(work: Path, env: dict[str, str]) -> None:
    _start(work, COPIES, env)
    scenarios = _split(work / "trace5.jsonl", (*KEEP, "job-manager.getattr", "job-info.lookup", "job-ingest.submit"))
    _write({"copies": scenarios["startup"] + scenarios["copies"]})


SESSIONS = {"main": record_main, "down-up": record_down_up, "copies": record_copies}


def main(argv: list[str]) -> int:
    if not shutil.which("flux"):
        print("flux not on PATH", file=sys.stderr)
        return 1
    names = argv or list(SESSIONS)
    unknown = [n for n in names if n not in SESSIONS]
    if unknown:
        print(f"unknown session {unknown[0]!r} (choose from {', '.join(SESSIONS)})", file=sys.stderr)
        return 2
    env = dict(os.environ)
    site = [str(REPO)] + [p for p in sys.path if p.endswith("site-packages")]
    env["FLUX_PYTHONPATH_PREPEND"] = ":".join(site)
    env["FLUX_MODULE_PATH_PREPEND"] = str(REPO / "fluxsched_py" / "flux" / "modules")
    env["FLUX_TRACER"] = str(Path(__file__).with_name("tracer.py"))
    for name in names:
        work = Path(tempfile.mkdtemp(prefix=f"fluxsched-rec-{name}-"))
        env["WORK"] = str(work)
        SESSIONS[name](work, env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
