"""``--dynamic-jobs`` (issue 37) on traffic from a real Batsim 4.2.1 run with
``--enable-dynamic-jobs --acknowledge-dynamic-jobs``.

The recordings are in ``t/data/batsim/features/`` with Batsim's own
``out_jobs.csv`` of each run (``MANIFEST.json``, features
``dynamic-checkpoint`` and ``dynamic-duplicates``); that every reply is
rebuilt from the command line is
``test_batsim_features_recorded.py::test_the_driver_built_from_the_command_line_sends_the_recorded_replies``.
Here: what the registrations were, what Batsim did with them (its
``out_jobs.csv``), and that it is what the offline replay does on the same
inputs.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import math
import subprocess
from collections import Counter

import pytest

from fluxsched_py.batsim.cli import driver_for
from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from t.batsim_recordings import BATSIM_DATA, batsim_side, driver_command, manifest, message_pairs, plain_workloads

DATA = BATSIM_DATA / "features"
RECORDINGS = {r["feature"]: r for r in manifest(DATA)["recordings"]}
CHECKPOINT, DUPLICATES = RECORDINGS["dynamic-checkpoint"], RECORDINGS["dynamic-duplicates"]


def pairs(rec: dict) -> list[tuple[bytes, bytes]]:
    return message_pairs(DATA / rec["file"])


def events(rec: dict, direction: str):
    """``(message now, event)`` of every event Batsim sent (``in``) or the driver sent (``out``)."""
    for msg, reply in pairs(rec):
        m = json.loads(msg if direction == "in" else reply)
        for e in m["events"]:
            yield m["now"], e


def out_jobs(rec: dict) -> dict[str, dict]:
    """Batsim's out_jobs.csv of the run, by Batsim job id."""
    text = gzip.decompress((DATA / rec["out_jobs"]).read_bytes()).decode()
    return {f"{r['workload_name']}!{r['job_id']}": r for r in csv.DictReader(io.StringIO(text))}


def registrations(rec: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """The jobs the driver registered, by id, and the profiles it registered, by name."""
    jobs, profiles = {}, {}
    for _, e in events(rec, "out"):
        if e["type"] == "REGISTER_PROFILE":
            assert e["data"]["workload_name"] == "dyn" and e["data"]["profile_name"] not in profiles
            profiles[e["data"]["profile_name"]] = e["data"]["profile"]
        elif e["type"] == "REGISTER_JOB":
            job = e["data"]["job"]
            assert job["profile"] in profiles, "a job's profile is registered before it"
            jobs[e["data"]["job_id"]] = job
    return jobs, profiles


def workload_profiles(rec: dict) -> dict[str, dict]:
    (begins,) = [e for _, e in events(rec, "in") if e["type"] == "SIMULATION_BEGINS"]
    return begins["data"]["profiles"]["w0"]


def test_batsim_acknowledged_every_registered_job_once_and_ended_after_registration_finished():
    for rec in (CHECKPOINT, DUPLICATES):
        jobs, _ = registrations(rec)
        acks = Counter(e["data"]["job_id"] for _, e in events(rec, "in") if e["type"] == "JOB_SUBMITTED")
        assert jobs and all(acks[j] == 1 for j in jobs)
        finished = [i for i, (_, reply) in enumerate(pairs(rec)) if b"registration_finished" in reply]
        ends = [i for i, (msg, _) in enumerate(pairs(rec)) if b"JOB_COMPLETED" in msg or b"JOB_KILLED" in msg]
        assert finished == [ends[-1]]  # once, in the reply to the last job's end
        assert b"SIMULATION_ENDS" in pairs(rec)[-1][0]
        assert set(out_jobs(rec)) >= set(jobs)  # Batsim ran them all (it ends only then)


def test_every_preempted_checkpointing_job_is_registered_again_for_its_remaining_work_and_completes():
    """Issue 37, must-hold 2: each preempted job's chain of runs ends in a
    completed run, and its work (what each killed run kept, plus the last
    run) is its original run time within 1 s, in Batsim's own figures."""
    jobs, profiles = registrations(CHECKPOINT)
    rows = out_jobs(CHECKPOINT)
    wl = workload_profiles(CHECKPOINT)
    chains: dict[str, list[str]] = {}
    for jid, job in jobs.items():
        chains.setdefault(job["requeued-from"], []).append(jid)
    killed = [j for j, r in rows.items() if j.startswith("w0!") and r["final_state"] == "COMPLETED_KILLED"]
    assert sorted(chains) == sorted(killed) and len(killed) == CHECKPOINT["batsim_out_jobs"]["w0 COMPLETED_KILLED"]
    for root, chain in chains.items():
        chain.sort(key=lambda j: int(j.rsplit(".r", 1)[1]))
        runs = [root, *chain]
        delay = [float(wl[rows[root]["profile"]]["delay"])] + [
            float(profiles[jobs[j]["profile"]]["delay"]) for j in chain
        ]
        states = [rows[j]["final_state"] for j in runs]
        assert states == ["COMPLETED_KILLED"] * len(chain) + ["COMPLETED_SUCCESSFULLY"], root
        for k, j in enumerate(chain):
            kept = delay[k] - delay[k + 1]
            assert kept >= 0 and kept <= float(rows[runs[k]]["execution_time"]) + 0.01  # kept only work done
            assert jobs[j]["res"] == 1 and jobs[j]["walltime"] == 1800  # the original's, as the replay requeues
        work = sum(delay[k] - delay[k + 1] for k in range(len(chain))) + float(rows[runs[-1]]["execution_time"])
        assert math.isclose(work, delay[0], abs_tol=1.0), root
        assert float(rows[runs[-1]]["execution_time"]) == pytest.approx(delay[-1], abs=1e-3)


def test_with_dynamic_jobs_batsims_schedule_equals_the_replays(tmp_path):
    rec = CHECKPOINT
    workload = plain_workloads(DATA, [rec], tmp_path)[rec["file"]]
    ref = replay(load_workload(workload), nodes_graph(rec["nodes"]), rec["options"])
    rows = out_jobs(rec)
    regular = [r for r in ref.records if r.job.request.preemptible_after is None]
    worst = max(abs(float(rows[f"w0!{r.job.id}"]["starting_time"]) - r.start) for r in regular)
    assert len(regular) == 250 and worst <= 0.1, worst
    kills = sum(1 for r in rows.values() if r["final_state"] == "COMPLETED_KILLED")
    out = rec["batsim_out_jobs"]
    assert kills == ref.stats["preemptions"] == out["w0 COMPLETED_KILLED"] + out["dyn COMPLETED_KILLED"]
    assert {r.state for r in ref.records} == {"COMPLETED_SUCCESSFULLY"}
    # every workload job's last run ends where the replay's does (lag aside)
    last = {}
    for jid, r in rows.items():
        root = jid if jid.startswith("w0!") else "w0!" + jid.split(".")[1]
        last[root] = max(last.get(root, 0.0), float(r["finish_time"]))
    assert max(abs(last[f"w0!{r.job.id}"] - r.finish) for r in ref.records) <= 0.5


def test_a_copy_is_registered_with_its_originals_profile_and_the_loser_is_killed():
    rec = DUPLICATES
    jobs, profiles = registrations(rec)
    wl = workload_profiles(rec)
    rows = out_jobs(rec)
    assert len(jobs) == 14
    for job in jobs.values():
        orig = job["copy-of"]
        assert profiles[job["profile"]] == wl[rows[orig]["profile"]]  # the original's profile, under a name of its own
        assert job["res"] == int(rows[orig]["requested_number_of_resources"]) and job["walltime"] == 600
    kills = {j: now for now, e in events(rec, "out") if e["type"] == "KILL_JOB" for j in e["data"]["job_ids"]}
    # the copies of 101 and 102 lost: killed when their original completed, in the same reply
    for orig in ("w0!101", "w0!102"):
        (loser,) = [j for j, job in jobs.items() if job["copy-of"] == orig and float(rows[j]["starting_time"]) > 100]
        assert rows[orig]["final_state"] == "COMPLETED_SUCCESSFULLY"
        assert kills[loser] == pytest.approx(float(rows[orig]["finish_time"]), abs=0.01)
        assert rows[loser]["final_state"] == "COMPLETED_KILLED"


def test_copies_are_the_replays(tmp_path):
    rec = DUPLICATES
    w = load_workload(DATA / rec["workload"])
    for j in w.jobs:  # what --campaigns does (the replay's Batsim reader keeps the campaign for its metrics)
        if j.campaign:
            j.request = dataclasses.replace(j.request, attributes={"user": {"campaign": j.campaign}})
    ref = replay(w, nodes_graph(rec["nodes"]), rec["options"])
    rows = out_jobs(rec)
    jobs, _ = registrations(rec)
    got = sorted((jobs[j]["copy-of"], round(float(rows[j]["starting_time"]))) for j in jobs)
    want = sorted((f"w0!{c.job.name.removesuffix('+copy')}", round(c.start)) for c in ref.copies)
    assert got == want
    assert ref.stats["duplicates_cancelled"] == 2
    assert max(abs(float(rows[f"w0!{r.job.id}"]["starting_time"]) - r.start) for r in ref.records) <= 0.1


def test_without_dynamic_jobs_the_driver_says_registration_finished_at_once():
    """Batsim with --enable-dynamic-jobs waits for registration_finished to end:
    a driver that registers nothing says so in its first reply."""
    first = pairs(DUPLICATES)[0][0]
    reply = json.loads(driver_for(["--queue-policy", "easy"]).handle(first))
    assert [e["data"] for e in reply["events"]] == [{"type": "registration_finished"}]
    assert json.loads(driver_for(["--dynamic-jobs"]).handle(first))["events"] == []


def _run_until_first_ack(rec: dict, tamper):
    """The recorded run fed to a driver up to the first acknowledgement, which ``tamper`` changes."""
    driver = driver_for(rec["args"])
    for msg, _ in pairs(rec):
        m = json.loads(msg)
        acks = [e for e in m["events"] if e["type"] == "JOB_SUBMITTED" and e["data"]["job_id"].startswith("dyn!")]
        if acks:
            tamper(acks[0]["data"], m)
            return driver, json.dumps(m).encode()
        driver.handle(msg)
    raise AssertionError("no acknowledgement recorded")


@pytest.mark.parametrize(
    "tamper,words",
    [
        (
            lambda d, m: d["job"].update(res=2),
            "JOB_SUBMITTED for registered job dyn!w0.100.c1: res 2, registered with 1",
        ),
        (lambda d, m: d.pop("job"), "JOB_SUBMITTED dyn!w0.100.c1 has no 'job' object"),
        (lambda d, m: d["job"].update(res="1"), "job dyn!w0.100.c1: 'res' must be a positive integer"),
        (lambda d, m: m["events"].append(json.loads(json.dumps(m["events"][-1]))), "came twice"),
    ],
)
def test_a_malformed_acknowledgement_is_a_protocol_error(tamper, words):
    driver, msg = _run_until_first_ack(DUPLICATES, tamper)
    with pytest.raises(ProtocolError) as err:
        driver.handle(msg)
    assert words in str(err.value)


def test_dynamic_jobs_against_a_batsim_without_them_ends_with_one_line(tmp_path):
    pytest.importorskip("zmq")
    first = json.loads(pairs(DUPLICATES)[0][0])
    first["events"][0]["data"]["config"]["dynamic-jobs-enabled"] = False
    endpoint = f"ipc://{tmp_path}/batsim.sock"
    cmd = driver_command(endpoint, "--dynamic-jobs")
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    with batsim_side(endpoint) as sock:
        sock.send(json.dumps(first).encode())
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.splitlines() == [
        "fluxsched-py batsim: ERROR: protocol error: --dynamic-jobs: Batsim runs without dynamic job registration "
        "(run batsim with --enable-dynamic-jobs)"
    ]
