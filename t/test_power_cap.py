"""The power cap (issue 36, docs/rfcs/energy.md "The power cap").

The cap is checked from the replay's own power series (what the machine
drew at each instant, ``ReplayResult.power_series``), never from the
scheduler's view: the series never exceeds the cap, every job runs, and no
job starts later than its first ``t_estimate``.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxsched_py.engine import Engine, EngineError, EngineOptions
from fluxsched_py.power import PowerModel
from fluxsched_py.replay import replay
from fluxsched_py.replay.platform import load_platform, load_power, nodes_graph
from fluxsched_py.replay.workload import Workload, WorkloadJob, load_workload, node_request

from .shared import CONFORMANCE
from .test_policy_conservative import assert_no_start_after_first_estimate

PLATFORM = CONFORMANCE / "batsim" / "platforms" / "energy_platform_homogeneous_no_net_128.xml"
WORKLOADS = CONFORMANCE / "batsim" / "workloads"
needs_shared = pytest.mark.skipif(not PLATFORM.exists(), reason="needs ../shared/conformance (the Batsim platforms)")

#: The energy platform's hosts (rfcs/energy.md): 95 W idle, 190.738 W computing.
MODEL = PowerModel(95.0, 190.738, 9.75, 6.1, 101.0, 151.52, 125.17)


def max_watts(result, t0: float = -math.inf, t1: float = math.inf) -> float:
    """The most the replay's machine drew at any instant of [t0, t1), from its power series."""
    times, watts = result.power_series()
    top = -math.inf
    for k, t in enumerate(times):
        nxt = times[k + 1] if k + 1 < len(times) else math.inf
        if nxt > t0 and t < t1 and nxt > t:
            top = max(top, watts[k])
    return top


def _replay(nodes: int, jobs, options, computes=None, models=None):
    computes = computes or [True] * len(jobs)
    wl = []
    for (i, submit, res, wall, run), c in zip(jobs, computes, strict=True):
        job = WorkloadJob(i, str(i), submit, node_request(res, wall), wall, run, res)
        if not c:
            job.computes = False
            job.request = dataclasses.replace(job.request, computes=False)
        wl.append(job)
    power = models or [MODEL] * nodes
    return replay(Workload(wl, nodes), nodes_graph(nodes), options, power=power, check=Engine.check_invariants)


@st.composite
def capped_workloads(draw):
    nodes = draw(st.integers(2, 10))
    n = draw(st.integers(1, 20))
    # the cap leaves room for 1 to all nodes computing: every job fits under it alone
    room = draw(st.integers(1, nodes))
    biggest = draw(st.integers(1, room))
    jobs = []
    for i in range(n):
        submit = float(draw(st.integers(0, 60)))
        res = draw(st.integers(1, biggest))
        wall = float(draw(st.integers(1, 40)))
        run = float(draw(st.integers(1, int(wall))))
        jobs.append((i, submit, res, wall, run))
    computes = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    slack = draw(st.floats(0.0, 0.99))
    cap = nodes * MODEL.idle_watts + (room + slack) * (MODEL.computing_watts - MODEL.idle_watts)
    return nodes, jobs, computes, cap


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(capped_workloads(), st.sampled_from(["easy", "conservative", "fcfs", "hybrid"]), st.booleans())
def test_the_replay_never_draws_more_than_the_cap_every_job_runs_and_none_starts_after_its_first_estimate(
    wl, policy, windowed
):
    nodes, jobs, computes, cap = wl
    options = {"queue-policy": policy, "power-cap": str(cap)}
    window = (20.0, 90.0) if windowed else None
    if window:
        options["power-cap-window"] = "20-90"
    result = _replay(nodes, jobs, options, computes)
    assert_no_start_after_first_estimate(result.records)  # every job ran, none after its first t_estimate
    t0, t1 = window or (-math.inf, math.inf)
    assert max_watts(result, t0, t1) <= cap + 1e-6


#: Quick switches, so that nodes sleep and wake within the short runs drawn here.
QUICK = PowerModel(95.0, 190.738, 9.75, 2.0, 101.0, 5.0, 125.17)
#: energy_platform_homogeneous_no_net.xml's hosts: a boot (425 W) draws more than a job (100 W).
HUNGRY = PowerModel(30.0, 100.0, 9.75, 2.0, 200.996721311, 20.0, 425.1743849)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capped_workloads(),
    st.sampled_from(["easy", "conservative", "fcfs"]),
    st.sampled_from(["idle", "planned"]),
    st.sampled_from([QUICK, HUNGRY]),
)
def test_with_power_saving_the_replay_never_draws_more_than_the_cap_and_every_job_runs(wl, policy, mode, model):
    nodes, jobs, computes, _ = wl
    # the same room for jobs, in this model's watts
    room = (wl[3] - nodes * MODEL.idle_watts) / (MODEL.computing_watts - MODEL.idle_watts)
    cap = nodes * model.idle_watts + room * (model.computing_watts - model.idle_watts)
    options = {"queue-policy": policy, "power-cap": str(cap), "power-save": mode, "power-idle-time": "3"}
    result = _replay(nodes, jobs, options, computes, models=[model] * nodes)
    assert len(result.records) == len(jobs) and all(rec.start is not None for rec in result.records)
    assert max_watts(result) <= cap + 1e-6


def test_switching_idle_nodes_off_frees_watts_for_a_job():
    """Four nodes, a cap with room for one node computing beside three idle
    ones: a two-node job cannot run while every node is on.  Under
    ``power-save=planned`` the two nodes nobody needs sleep, and their idle
    watts are the job's: it runs once they are off, where without power
    saving it never could."""
    cap = 4 * QUICK.idle_watts + 1.5 * (QUICK.computing_watts - QUICK.idle_watts)
    jobs = [(0, 0.0, 1, 10.0, 10.0), (1, 20.0, 2, 10.0, 10.0)]
    options = {"power-cap": str(cap), "power-save": "planned", "power-idle-time": "3"}
    result = _replay(4, jobs, options, models=[QUICK] * 4)
    starts = {rec.job.id: rec.start for rec in result.records}
    assert starts[0] == 0.0 and starts[1] is not None
    assert max_watts(result) <= cap + 1e-6
    without = _replay(4, jobs, {"power-cap": str(cap)}, models=[QUICK] * 4)
    assert {rec.job.id: rec.start for rec in without.records}[1] is None  # without power saving it never runs


def test_no_more_nodes_sleep_than_could_boot_at_once_beside_the_others_idle():
    """A boot here draws 425 W, more than a job: under a cap of four nodes
    computing (400 W), one node booting beside three idle ones (515 W)
    would cross it.  So no node is switched off, and the job that needs all
    four still runs; a cap with room for that boot lets nodes sleep."""
    jobs = [(0, 0.0, 1, 10.0, 10.0), (1, 60.0, 4, 10.0, 10.0)]
    tight = 4 * HUNGRY.computing_watts
    options = {"power-save": "planned", "power-idle-time": "3"}
    result = _replay(4, jobs, {**options, "power-cap": str(tight)}, models=[HUNGRY] * 4)
    assert all(rec.start is not None for rec in result.records)
    assert result.energy.sleeping == 0.0
    roomy = 3 * HUNGRY.idle_watts + HUNGRY.on_watts
    result = _replay(4, jobs, {**options, "power-cap": str(roomy)}, models=[HUNGRY] * 4)
    assert all(rec.start is not None for rec in result.records)
    assert result.energy.sleeping > 0.0 and max_watts(result) <= roomy + 1e-6


def test_a_job_too_big_ever_to_run_under_the_cap_is_denied_at_once():
    """Four nodes under a 600 W cap: three computing beside one idle node
    draw 667.2 W, so a three-node job could never run, and is denied at
    alloc and by feasibility with the watts named; a two-node one (571.5 W)
    is queued.  Under power saving the fourth node could sleep (9.75 W:
    582 W in all), so a three-node job may run, and only four nodes
    (763 W) are too many."""
    cap = 600.0
    e = Engine(nodes_graph(4), [f"power-cap={cap}"], power=[MODEL] * 4)
    spec = {"version": 1, "resources": [{"type": "node", "count": 3, "exclusive": True,
            "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
            "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 60}}}  # fmt: skip
    (deny,) = e.alloc(1, 0, 0, 0.0, spec)
    want = "power cap: on 3 nodes it draws at least 667 W with every other node idle, over the 600 W cap"
    assert deny.note == want and e.feasibility(spec) == want
    spec2 = json.loads(json.dumps(spec))
    spec2["resources"][0]["count"] = 2
    assert e.alloc(2, 0, 0, 0.0, spec2) == [] and e.feasibility(spec2) is None
    saving = Engine(nodes_graph(4), [f"power-cap={cap}", "power-save=planned"], power=[MODEL] * 4)
    assert saving.feasibility(spec) is None
    spec4 = json.loads(json.dumps(spec))
    spec4["resources"][0]["count"] = 4
    assert saving.feasibility(spec4).startswith("power cap: on 4 nodes it draws at least 763 W")
    windowed = Engine(nodes_graph(4), [f"power-cap={cap}", "power-cap-window=0-100"], power=[MODEL] * 4)
    assert windowed.feasibility(spec) is None  # it may run after the window


def test_a_job_over_the_cap_waits_with_the_cap_as_its_reason_and_its_estimate_where_the_watts_are():
    # 4 nodes; the cap leaves room for 2 computing nodes: a 2-node job runs 0-100,
    # a 2-node job (on the 2 free nodes) must wait until it ends
    cap = 4 * 95.0 + 2 * (190.738 - 95.0) + 1.0
    engine = Engine(nodes_graph(4), {"queue-policy": "easy", "power-cap": str(cap)}, power=[MODEL] * 4)
    engine.alloc(1, 0, 0, 0.0, node_request(2, 100.0))
    engine.alloc(2, 0, 0, 0.0, node_request(2, 50.0))
    responses = engine.schedule(0.0).responses
    started = [r.id for r in responses if r.type.name == "SUCCESS"]
    assert started == [1]
    (ann,) = [r.annotations["sched"] for r in responses if r.id == 2 and r.type.name == "ANNOTATE"]
    assert ann["reason_pending"].startswith("power cap: needs 191 W more over its run, 1 W left under the")
    assert ann["t_estimate"] == 100.0
    # a job that computes nothing adds no watts: it backfills on the free nodes at once
    engine.alloc(3, 0, 0, 1.0, dataclasses.replace(node_request(1, 10.0), computes=False))
    engine.alloc(4, 0, 0, 1.0, node_request(1, 10.0))  # one that computes would cross the cap
    assert [r.id for r in engine.schedule(1.0).responses if r.type.name == "SUCCESS"] == [3]
    # unset, the same jobs start together
    plain = Engine(nodes_graph(4), {"queue-policy": "easy"}, power=[MODEL] * 4)
    plain.alloc(1, 0, 0, 0.0, node_request(2, 100.0))
    plain.alloc(2, 0, 0, 0.0, node_request(2, 50.0))
    assert [r.id for r in plain.schedule(0.0).responses if r.type.name == "SUCCESS"] == [1, 2]


@pytest.mark.parametrize(
    "args, words",
    [
        (["power-cap=-5"], "power-cap='-5': expected a positive number of watts, or 'none'"),
        (["power-cap=lots"], "power-cap='lots': expected a positive number of watts, or 'none'"),
        (["power-cap=0"], "power-cap='0': expected a positive number of watts, or 'none'"),
        (["power-cap-window=90-20"], "power-cap-window='90-20': expected START-END"),
    ],
)
def test_a_bad_cap_is_one_clear_error(args, words):
    with pytest.raises(EngineError) as e:
        EngineOptions.parse(args)
    assert str(e.value).startswith(words)


def test_a_cap_that_cannot_be_held_is_refused_at_once():
    with pytest.raises(EngineError, match=r"power-cap=300: below the 380 W the machine draws with every node idle"):
        Engine(nodes_graph(4), ["power-cap=300"], power=[MODEL] * 4)
    with pytest.raises(EngineError, match=r"power-cap=1000: no power model for rank 0"):
        Engine(nodes_graph(4), ["power-cap=1000"])


def test_unset_the_cap_changes_nothing():
    jobs = [(i, float(3 * i), 1 + i % 4, 30.0 + i % 7, 20.0 + i % 5) for i in range(40)]
    for policy in ("easy", "conservative", "fcfs"):
        plain = _replay(6, jobs, {"queue-policy": policy})
        none = _replay(6, jobs, {"queue-policy": policy, "power-cap": "none"})
        loose = _replay(6, jobs, {"queue-policy": policy, "power-cap": str(6 * MODEL.computing_watts)})
        want = [(r.start, r.ranks, r.first_estimate) for r in plain.records]
        assert [(r.start, r.ranks, r.first_estimate) for r in none.records] == want
        assert [(r.start, r.ranks) for r in loose.records] == [(s, rk) for s, rk, _ in want]


def seed_figures(seed: int, policy: str = "easy") -> dict[str, float]:
    """The 60 %-of-peak must-hold on a seed workload: the figures the note gives."""
    models = load_power(PLATFORM)
    cap = 0.6 * sum(m.computing_watts for m in models)
    workload = load_workload(WORKLOADS / f"example_workload_hpc_seed{seed}_jobs250.json")
    result = replay(workload, load_platform(PLATFORM), {"queue-policy": policy, "power-cap": str(cap)}, power=models)
    assert_no_start_after_first_estimate(result.records)
    waits = [r.start - r.job.submit for r in result.records]
    return {
        "cap": cap,
        "max_watts": max_watts(result),
        "energy": result.energy.total,
        "mean_wait": sum(waits) / len(waits),
    }


@needs_shared
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cap_of_60_percent_of_peak_holds_on_the_seed_workloads(seed):
    f = seed_figures(seed)
    assert f["max_watts"] <= f["cap"] + 1e-6


@needs_shared
def test_the_v4_driver_takes_the_cap_and_plans_batsims_delay_jobs_at_idle_watts():
    # the s1-off recording from a real Batsim 4.2.1 -E: its jobs are delay profiles,
    # which draw idle watts, so a 60 % cap leaves every decision as Batsim saw it
    from fluxsched_py.batsim.platform import batsim_power
    from fluxsched_py.batsim.v4driver import V4Driver
    from t.batsim_recordings import BATSIM_DATA, message_pairs

    models = batsim_power(PLATFORM)
    cap = 0.6 * sum(m.computing_watts for m in models)
    driver = V4Driver({"queue-policy": "easy", "power-cap": str(cap)}, models)
    pairs = message_pairs(BATSIM_DATA / "energy" / "s1-off.jsonl.gz")
    sent = [json.loads(reply)["events"] for _, reply in pairs]
    assert [json.loads(driver.handle(msg))["events"] for msg, _ in pairs] == sent
    assert driver.scheduler.engine.cap is not None


@needs_shared
@pytest.mark.parametrize("protocol", ["batprotocol", "legacy"])
def test_the_other_batsim_drivers_take_the_cap_from_the_platform_and_decide_as_v4(protocol):
    # the same real run's events in the other protocol's words: built from a
    # command line with --power-cap and --platform, the driver's engine holds
    # the platform's models under the cap and starts every job as v4 did
    from fluxsched_py.batsim.batprotocol import BatprotocolDriver
    from fluxsched_py.batsim.cli import driver_for
    from fluxsched_py.batsim.legacy import LegacyDriver
    from fluxsched_py.batsim.platform import batsim_power
    from t.batsim_recordings import (
        BATSIM_DATA,
        decisions_bp,
        decisions_legacy,
        message_pairs,
        to_batprotocol,
        to_legacy,
        v4_decisions,
    )

    cap = 0.6 * sum(m.computing_watts for m in batsim_power(PLATFORM))
    workload = CONFORMANCE / "batsim" / "workloads" / "example_workload_hpc_seed1_jobs250.json"
    args = ["--queue-policy", "easy", "--power-cap", str(cap), "--platform", str(PLATFORM), "--protocol", protocol]
    driver = driver_for([*args, "--workload", str(workload)])
    pairs = message_pairs(BATSIM_DATA / "energy" / "s1-off.jsonl.gz")
    if protocol == "batprotocol":
        assert isinstance(driver, BatprotocolDriver)
        got = decisions_bp([driver.handle(m) for m in to_batprotocol(pairs)])
        want = v4_decisions(pairs)
    else:
        assert isinstance(driver, LegacyDriver)
        got = decisions_legacy([driver.handle(m) for m in to_legacy(pairs)])
        want = [(round(t, 6), k, j, a) for t, k, j, a in v4_decisions(pairs)]
    assert driver.finished
    assert got == want and len(got) == 250
    engine = driver.scheduler.engine
    assert engine.cap is not None and engine.cap.models == batsim_power(PLATFORM)


# -- with power saving, against a real Batsim ---------------------------------------------

CAPPED = json.loads((Path(__file__).parent / "data" / "batsim" / "energy" / "MANIFEST.json").read_text())["capped"]


def computing_workload(out: Path) -> Path:
    """Batsim's seed-1 workload as jobs that compute: each delay profile a
    ``parallel_homogeneous`` one of as many flops per host as its delay
    takes at pstate 0 (100 Mf, no communication: as long, drawn at
    computing watts), its jobs of more than 25 nodes left out (they could
    never run under a 60 % cap).  The recordings' MANIFEST says so."""
    src = json.loads((WORKLOADS / "example_workload_hpc_seed1_jobs250.json").read_text())
    profiles = {
        name: {"type": "parallel_homogeneous", "cpu": p["delay"] * 1e8, "com": 0.0, "runtime": p["delay"]}
        for name, p in src["profiles"].items()
    }
    jobs = [j for j in src["jobs"] if j["res"] <= 25]
    out.write_text(json.dumps({"nb_res": src["nb_res"], "jobs": jobs, "profiles": profiles}))
    return out


def batsim_max_power(path: Path) -> float:
    """The most a Batsim run drew over any stretch between two of its
    events, from its own ``out_consumed_energy.csv``: ``epower`` is the
    mean power since the row before, and the power changes only at rows,
    so over a stretch of positive length it is what the machine drew."""
    with gzip.open(path, "rt") as f:
        rows = list(csv.DictReader(f))
    top, last = -math.inf, None
    for r in rows:
        t = float(r["time"])
        if last is not None and t > last and r["epower"] != "NA":
            top = max(top, float(r["epower"]))
        last = t
    return top


def _recorded_starts_and_waits(pairs) -> tuple[dict[str, float], float]:
    submitted, starts = {}, {}
    for msg, reply in pairs:
        for ev in json.loads(msg)["events"]:
            if ev["type"] == "JOB_SUBMITTED":
                submitted[ev["data"]["job_id"]] = ev["timestamp"]
        for ev in json.loads(reply)["events"]:
            if ev["type"] == "EXECUTE_JOB":
                starts[ev["data"]["job_id"]] = ev["timestamp"]
    waits = [starts[j] - t for j, t in submitted.items()]
    return {j.split("!", 1)[1]: t for j, t in starts.items()}, sum(waits) / len(waits)


@needs_shared
@pytest.mark.parametrize("rec", CAPPED, ids=[r["file"].removesuffix(".jsonl.gz") for r in CAPPED])
def test_under_a_real_batsim_the_cap_holds_with_power_saving_and_the_v4_driver_decides_as_it_did(rec):
    from fluxsched_py.batsim.platform import batsim_power
    from fluxsched_py.batsim.v4driver import V4Driver
    from t.batsim_recordings import BATSIM_DATA, message_pairs

    folder = BATSIM_DATA / "energy"
    pairs = message_pairs(folder / rec["file"])
    driver = V4Driver(dict(rec["options"]), batsim_power(PLATFORM))
    assert [json.loads(driver.handle(m))["events"] for m, _ in pairs] == [json.loads(r)["events"] for _, r in pairs]
    cap = float(rec["options"]["power-cap"])
    assert batsim_max_power(folder / rec["consumed_energy"]) <= cap + 1e-6  # Batsim's own figures
    switches = sum(1 for _, r in pairs for ev in json.loads(r)["events"] if ev["type"] == "SET_RESOURCE_STATE")
    assert (switches > 0) == (rec["options"]["power-save"] != "off")


@needs_shared
def test_the_replay_gives_batsims_starts_and_energy_under_the_cap_with_power_saving(tmp_path):
    """The replay of the same workload under the same options starts every
    job when Batsim did (within 0.1 s) and counts Batsim's energy (within
    1 %); switching idle nodes off leaves the jobs the watts that idle
    nodes would draw, so they wait far less than under the cap alone."""
    from t.batsim_recordings import BATSIM_DATA, message_pairs

    workload = load_workload(computing_workload(tmp_path / "seed1_computing.json"))
    waits = {}
    for rec in CAPPED:
        starts, waits[rec["options"]["power-save"]] = _recorded_starts_and_waits(
            message_pairs(BATSIM_DATA / "energy" / rec["file"])
        )
        result = replay(workload, load_platform(PLATFORM), dict(rec["options"]), power=load_power(PLATFORM))
        got = {r.job.label: r.start for r in result.records}
        assert got.keys() == starts.keys()
        assert max(abs(got[j] - starts[j]) for j in starts) <= 0.1
        assert result.energy.total == pytest.approx(rec["batsim_consumed_joules"], rel=0.01)
        assert waits[rec["options"]["power-save"]] == pytest.approx(rec["batsim_mean_waiting_time"], abs=1e-3)
    assert waits["planned"] < waits["off"] / 10
