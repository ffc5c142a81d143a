"""Replay inputs and outputs: SWF, Batsim workload JSON, YAML jobspec lists,
platforms (Batsim XML, R, node counts), jobs.csv, the summary and the CLI."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

from fluxsched_py.replay import load_workload, replay, summarize
from fluxsched_py.replay.cli import main
from fluxsched_py.replay.platform import PlatformError, batsim_hosts, load_platform, nodes_graph
from fluxsched_py.replay.report import JOBS_COLUMNS, batsim_intervals, write_jobs_csv
from fluxsched_py.replay.synthetic import EXAMPLE_NAME, example_path, generate
from fluxsched_py.replay.workload import WorkloadError, read_batsim, read_swf

from .conftest import REPO, shared_path

SWF = """; Version: 2.2
; MaxNodes: 8
; MaxProcs: 8
1 0 -1 50 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 500 4 -1 -1 -1 300 -1 1 1 1 -1 1 -1 -1 -1
3 20 -1 -1 4 -1 -1 4 300 -1 0 1 1 -1 1 -1 -1 -1
4 30 -1 20 0 -1 -1 -1 60 -1 1 1 1 -1 1 -1 -1 -1
5 40 -1 30 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1
"""


def test_swf_fields_header_and_skipped_jobs():
    w = read_swf(SWF, name="t")
    assert w.nb_res == 8 and w.skipped == 2
    j1, j2, j5 = w.jobs
    assert (j1.id, j1.submit, j1.nodes, j1.walltime, j1.runtime) == (1, 0.0, 2, 100.0, 50.0)
    assert j2.nodes == 4  # requested processors missing: allocated processors
    assert j5.walltime == 30.0  # requested time missing: the run time
    assert j1.request.nnodes == 2 and j1.request.exclusive and j1.request.duration == 100.0


def test_swf_bad_line_names_the_line():
    with pytest.raises(WorkloadError, match=r"t\.swf:2"):
        read_swf("; x\n1 2 three\n", name="t")


def test_batsim_workload_delay_profiles_and_string_ids():
    w = read_batsim(
        {
            "nb_res": 4,
            "jobs": [
                {"id": "w0!7", "subtime": 1, "walltime": 10, "res": 2, "profile": "p"},
                {"id": 3, "subtime": 0, "res": 1, "profile": "p"},
            ],
            "profiles": {"p": {"type": "delay", "delay": 20}},
        }
    )
    a, b = w.jobs
    assert (a.id, a.name, a.walltime, a.runtime) == (7, "w0!7", 10.0, 20.0)
    assert b.walltime == math.inf and b.request.duration == 0.0


def test_batsim_queue_and_bank_fields_reach_the_request_and_a_bad_one_names_the_entry():
    def one(**fields):
        job = {"id": 1, "subtime": 0, "res": 1, "profile": "p", **fields}
        return read_batsim({"jobs": [job], "profiles": {"p": {"type": "delay", "delay": 5}}})

    (job,) = one(queue="debug", bank="physics").jobs
    assert job.request.queue == "debug" and job.request.attributes == {"system": {"bank": "physics"}}
    for field in ("queue", "bank"):
        # the Batsim drivers' words (fluxsched_py/batsim/entry.py), after where the entry is
        with pytest.raises(WorkloadError, match=rf"^<batsim>: jobs\[0\]: job 1: '{field}' must be a name, got \"\"$"):
            one(**{field: ""})


def test_a_batsim_job_is_read_by_the_batsim_drivers_reader_unknown_users_included():
    """The replay reads a Batsim entry's fields with the drivers' reader
    (fluxsched_py/batsim/entry.py): a name is the same uid, and no user or
    SWF's -1 is the unknown user, -1 in the replay and uid 0 under Batsim."""
    from fluxsched_py.batsim.entry import read_entry
    from fluxsched_py.ids import user_id

    entries = [{"user": "alice"}, {"user": 7}, {"user": -1}, {}]
    doc = {
        "jobs": [{"id": i, "subtime": 0, "res": 1, "profile": "p", **e} for i, e in enumerate(entries)],
        "profiles": {"p": {"type": "delay", "delay": 5}},
    }
    assert [j.user for j in read_batsim(doc).jobs] == [user_id("alice"), 7, -1, -1]
    submitted = [read_entry(f"w0!{i}", e).submission(campaigns=False, checkpoints=False) for i, e in enumerate(entries)]
    assert [s["user"] for s in submitted] == [user_id("alice"), 7, 0, 0]
    with pytest.raises(WorkloadError, match=r"^<batsim>: jobs\[0\]: job 0: 'user' must be a uid"):
        read_batsim({**doc, "jobs": [{**doc["jobs"][0], "user": 3.5}]})


def test_batsim_non_delay_profile_is_refused_clearly():
    with pytest.raises(WorkloadError, match="needs 'delay' profiles"):
        read_batsim(
            {
                "jobs": [{"id": 1, "subtime": 0, "res": 1, "profile": "p"}],
                "profiles": {"p": {"type": "parallel_homogeneous", "cpu": 1e9, "com": 0}},
            }
        )


def test_yaml_jobspec_list(tmp_path):
    (tmp_path / "w.yaml").write_text(
        """
nb_res: 2
jobs:
  - submit: 0
    runtime: 5
    jobspec:
      version: 1
      resources:
        - type: node
          count: 2
          with:
            - type: slot
              count: 1
              label: task
              with: [{type: core, count: 1}]
      tasks: [{command: ["true"], slot: task, count: {per_slot: 1}}]
      attributes: {system: {duration: 10}}
"""
    )
    w = load_workload(tmp_path / "w.yaml")
    assert w.nb_res == 2 and w.jobs[0].walltime == 10.0 and w.jobs[0].request.nnodes == 2
    r = replay(w, nodes_graph(2), {"queue-policy": "fcfs"})
    assert r.records[0].start == 0.0 and r.records[0].finish == 5.0


def test_job_over_its_walltime_is_killed_at_walltime_and_too_big_jobs_rejected():
    w = read_swf(SWF, name="t")
    r = replay(w, nodes_graph(3), {"queue-policy": "easy"})
    by_id = {rec.job.id: rec for rec in r.records}
    assert by_id[2].state == "REJECTED"  # 4 nodes on a 3-node machine
    w = read_swf(SWF, name="t")
    r = replay(w, nodes_graph(8), {"queue-policy": "easy"})
    by_id = {rec.job.id: rec for rec in r.records}
    assert by_id[2].state == "COMPLETED_WALLTIME_REACHED" and by_id[2].finish - by_id[2].start == 300.0
    s = summarize(r)
    assert s.killed == 1 and s.started == 3


def test_batsim_platform_xml_hosts_clusters_and_master_skipped():
    # The file declares Jupiter, Fafard, Ginette, Bourassa; Batsim 4.2.1 numbers
    # them by name (its SIMULATION_BEGINS: 0 Bourassa, 1 Fafard, 2 Ginette, 3 Jupiter).
    hosts = batsim_hosts(shared_path("conformance", "batsim", "platforms", "small_platform.xml"))
    assert [h for h, _, _ in hosts] == ["Bourassa", "Fafard", "Ginette", "Jupiter"]
    hosts = batsim_hosts(shared_path("conformance", "batsim", "platforms", "cluster512.xml"))
    assert len(hosts) == 512 and hosts[0][0] == "a0"
    g = load_platform(shared_path("conformance", "batsim", "platforms", "energy_platform_homogeneous_no_net_128.xml"))
    assert len(g.ranks) == 128


def test_a_platforms_hosts_get_the_ids_a_real_batsim_gave_them():
    """A real Batsim 4.2.1 run on cluster512.xml (``--mmax 32``: its first 32
    machines): host id i is the replay's rank i, ``a10`` third."""
    recording = REPO / "t" / "data" / "batsim" / "v4-easy-seed1-first30-mmax32.jsonl"
    first = json.loads(recording.read_text().split("\n")[0])
    begins = json.loads(first["data"])["events"][0]["data"]["compute_resources"]
    g = load_platform(shared_path("conformance", "batsim", "platforms", "cluster512.xml"))
    assert [(h["id"], h["name"]) for h in begins] == [(r, g.hostname(r)) for r in range(32)]
    assert begins[2]["name"] == "a10"


def test_platform_errors_are_clear(tmp_path):
    with pytest.raises(PlatformError, match="no such file"):
        load_platform(tmp_path / "nope.xml")
    (tmp_path / "bad.xml").write_text("<platform>")
    with pytest.raises(PlatformError, match="not a readable platform XML"):
        load_platform(tmp_path / "bad.xml")


def test_R_platform(tmp_path):
    from fluxsched_py.resource.rv1 import hosts_rv1

    (tmp_path / "R.json").write_text(json.dumps(hosts_rv1(["a", "b", "c"], 2)))
    g = load_platform(tmp_path / "R.json")
    assert len(g.ranks) == 3 and g.all().count("core") == 6


def test_jobs_csv_has_batsim_columns(tmp_path):
    w = read_swf(SWF, name="t")
    r = replay(w, nodes_graph(8), {"queue-policy": "fcfs"})
    path = write_jobs_csv(r, tmp_path / "out" / "jobs.csv")
    rows = list(csv.DictReader(path.open()))
    assert tuple(rows[0]) == JOBS_COLUMNS
    first = rows[0]
    assert first["job_id"] == "1" and first["final_state"] == "COMPLETED_SUCCESSFULLY"
    assert float(first["turnaround_time"]) == float(first["finish_time"]) - float(first["submission_time"])
    assert batsim_intervals(r.records[0].ranks) == first["allocated_resources"]


def test_batsim_intervals_text():
    from fluxsched_py.ids import IdSet

    assert batsim_intervals(IdSet.parse("0-3,7")) == "0-3 7"


def test_bundled_example_is_the_seeded_generator_output():
    p = example_path()
    assert p is not None and p.name == EXAMPLE_NAME
    assert json.loads(p.read_text()) == json.loads(json.dumps(generate()))


def test_cli_with_no_arguments_replays_the_bundled_example(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "synthetic_seed42_64nodes" in out and "fcfs" in out and "conservative" in out and "makespan" in out


def test_cli_compare_json_and_output_dir(tmp_path, capsys):
    wl = shared_path("conformance", "batsim", "workloads", "example_workload_hpc_seed1_jobs250.json")
    rc = main([str(wl), "--compare", "fcfs,easy", "--json", "--output-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["policy"] for d in data] == ["fcfs", "easy"]
    assert round(data[0]["makespan"], 2) == 11304.24 and round(data[1]["makespan"], 2) == 11187.14
    assert (tmp_path / "fcfs" / "jobs.csv").exists() and (tmp_path / "easy" / "jobs.csv").exists()


def test_cli_platform_xml_and_nodes(capsys):
    wl = shared_path("conformance", "batsim", "workloads", "example_workload_hpc_seed1_jobs250.json")
    xml = shared_path("conformance", "batsim", "platforms", "energy_platform_homogeneous_no_net_128.xml")
    assert main([str(wl), "--platform", str(xml), "--queue-policy", "fcfs", "--json"]) == 0
    assert round(json.loads(capsys.readouterr().out)[0]["makespan"], 2) == 11304.24


def test_cli_bad_input_exits_1_bad_option_2_with_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "missing.swf")]) == 1
    err = capsys.readouterr().err
    assert err == f"fluxsched-py replay: {tmp_path / 'missing.swf'}: cannot read: No such file or directory\n"
    assert main(["--compare", "fcfs,sjf"]) == 2
    err = capsys.readouterr().err
    assert "unknown queue policy 'sjf'" in err and err.count("\n") == 1


def test_python_dash_m_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py.replay", "--json", "--queue-policy", "easy"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["policy"] == "easy"


def test_a_bad_swf_time_names_its_place_once():
    with pytest.raises(WorkloadError) as err:
        read_swf("1 nan -1 10 1 -1 -1 1 100 -1 1 1 1 1 1 -1 -1 -1\n", source="bad.swf")
    assert str(err.value) == "bad.swf:1: submit time (field 2) must be finite, got nan"
