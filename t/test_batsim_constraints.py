"""A Batsim platform's host properties in the replay: node constraints (RFC 31)
in a workload, and affinity.

``t/data/batsim/features/cluster_gpu32.xml`` has 24 CPU hosts (``cpu10`` to
``cpu33``) and 8 GPU hosts (``gpu10`` to ``gpu17``, ``<prop id="gpu"
value="a100"/>``); ``seed1_first30_constraints.json`` is the seed-1 first 30
jobs with ``"constraints"`` on ten of them: seven ask for ``gpu=a100`` (job
27 wants 16 nodes of the 8 and cannot run), three for ``^gpu=a100``.
"""

from __future__ import annotations

import subprocess
import sys

from fluxsched_py.engine import EngineOptions
from fluxsched_py.ids import user_id
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import load_platform
from t.batsim_recordings import BATSIM_DATA

DATA = BATSIM_DATA / "features"
PLATFORM = DATA / "cluster_gpu32.xml"
WORKLOAD = DATA / "seed1_first30_constraints.json"
GPU_RANKS = set(range(24, 32))
GPU_JOBS = {2, 8, 12, 13, 21, 28}
CPU_ONLY_JOBS = {11, 18, 23}


def replayed(policy: str = "easy"):
    return replay(load_workload(WORKLOAD), load_platform(PLATFORM), EngineOptions.parse({"queue-policy": policy}))


def test_the_platforms_props_are_the_nodes_properties():
    graph = load_platform(PLATFORM)
    assert [graph.hostname(r) for r in (0, 23, 24, 31)] == ["cpu10", "cpu33", "gpu10", "gpu17"]
    assert {r for r in range(32) if "gpu=a100" in graph.properties(r)} == GPU_RANKS


def test_the_replay_puts_each_constrained_job_on_the_nodes_it_asks_for():
    for policy in ("fcfs", "easy", "conservative"):
        result = replayed(policy)
        ranks = {r.job.id: set(r.ranks) for r in result.records if r.started}
        assert GPU_JOBS <= ranks.keys() and CPU_ONLY_JOBS <= ranks.keys()
        assert all(ranks[j] <= GPU_RANKS for j in GPU_JOBS), policy
        assert all(not ranks[j] & GPU_RANKS for j in CPU_ONLY_JOBS), policy
        assert 27 not in ranks
        # Unconstrained jobs still use the GPU nodes.
        assert any(ranks[j] & GPU_RANKS for j in ranks.keys() - GPU_JOBS - CPU_ONLY_JOBS)


def test_affinity_by_user_name_places_the_users_jobs_on_the_nodes_with_the_property():
    """``seed1_first30_campaign.json``'s 20 best-effort jobs are carol's: with
    ``affinity=carol:gpu=a100`` the first 8 take the GPU hosts, as they would
    with her uid, and no regular job's start moves."""
    workload = load_workload(DATA / "seed1_first30_campaign.json")

    def starts(affinity):
        opts = EngineOptions.parse({"queue-policy": "easy", "affinity": affinity})
        result = replay(workload, load_platform(PLATFORM), opts)
        return {r.job.id: (r.start, frozenset(r.ranks)) for r in result.records if r.started}

    by_name, by_uid, without = starts("carol:gpu=a100"), starts(f"{user_id('carol')}:gpu=a100"), starts("")
    assert by_name == by_uid != without
    carols = [j for j in by_name if j >= 100]
    assert {r for j in carols if by_name[j][0] == 0 for r in by_name[j][1]} >= GPU_RANKS
    assert not {r for j in carols if without[j][0] == 0 for r in without[j][1]} & GPU_RANKS
    assert {j: s for j, (s, _) in by_name.items() if j < 100} == {j: s for j, (s, _) in without.items() if j < 100}


def test_a_malformed_constraint_is_one_line_naming_the_file_and_job(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text(
        '{"nb_res": 4, "profiles": {"p": {"type": "delay", "delay": 1}}, "jobs": [{"id": 7, "subtime": 0,'
        ' "walltime": 5, "res": 1, "profile": "p", "constraints": {"properties": ["gpu|x"]}}]}'
    )
    out = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "replay", str(bad)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 1
    reason = "constraints/properties/0: invalid character '|' in property 'gpu|x'"
    assert out.stderr == f"fluxsched-py replay: {bad}: jobs[0]: job 7: {reason}\n"
