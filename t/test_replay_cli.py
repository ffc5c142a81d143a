"""The replay and synthetic command lines: the policy rule, stdin, progress lines, the generator."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from fluxsched_py.replay import cli as replay_cli
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import load_platform, nodes_graph
from fluxsched_py.replay.synthetic import EXAMPLE_NAME
from fluxsched_py.replay.synthetic import main as synthetic_main

from .conftest import REPO

EXAMPLE = REPO / "examples" / EXAMPLE_NAME


def _policies(capsys, argv):
    assert replay_cli.main(argv) == 0
    return [d["policy"] for d in json.loads(capsys.readouterr().out)]


def test_one_policy_rule_whatever_the_other_options(capsys):
    three = ["fcfs", "easy", "conservative"]
    assert _policies(capsys, ["--json"]) == three
    assert _policies(capsys, [str(EXAMPLE), "--json", "--nodes", "64"]) == three
    assert _policies(capsys, ["--json", "--queue-policy", "hybrid"]) == ["hybrid"]
    assert _policies(capsys, ["--json", "--compare", "easy,fcfs"]) == ["easy", "fcfs"]
    assert "fcfs, easy, conservative are compared" in replay_cli.build_parser().format_help().replace("\n", " ")


def test_replay_dash_reads_stdin_in_any_format(tmp_path, capsys, monkeypatch):
    for flag in ("--swf", "--json"):
        assert synthetic_main(["--jobs", "40", "--nodes", "16", flag, str(tmp_path / "w")]) == 0
        data = (tmp_path / "w").read_bytes()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        got = _policies(capsys, ["-", "--json", "--queue-policy", "easy"])
        assert got == ["easy"]


def test_plain_progress_lines_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(replay_cli, "PROGRESS_EVERY", 0.0)
    assert replay_cli.main(["--queue-policy", "fcfs"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("fluxsched-py replay: fcfs: ") for line in lines)
    assert lines[-1].startswith("fluxsched-py replay: fcfs: 300/300 jobs done")
    assert replay_cli.main(["--queue-policy", "fcfs", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_synthetic_defaults_rewrite_the_bundled_example_byte_for_byte(tmp_path):
    out = tmp_path / "example.json"
    assert synthetic_main(["--json", str(out)]) == 0
    assert out.read_bytes() == EXAMPLE.read_bytes()


def test_synthetic_swf_and_json_replay_to_the_same_schedule(tmp_path):
    args = ["--jobs", "200", "--nodes", "32", "--seed", "3", "--load", "0.9"]
    assert synthetic_main([*args, "--swf", str(tmp_path / "w.swf")]) == 0
    assert synthetic_main([*args, "--json", str(tmp_path / "w.json")]) == 0
    a, b = load_workload(tmp_path / "w.swf"), load_workload(tmp_path / "w.json")
    assert a.nb_res == b.nb_res == 32 and len(a.jobs) == len(b.jobs) == 200
    for policy in ("fcfs", "easy"):
        ra = replay(a, nodes_graph(32), {"queue-policy": policy})
        rb = replay(b, nodes_graph(32), {"queue-policy": policy})
        starts_a = [(r.start, r.finish, r.state) for r in ra.records]
        starts_b = [(r.start, r.finish, r.state) for r in rb.records]
        assert starts_a == starts_b
        assert any(s == "COMPLETED_WALLTIME_REACHED" for _, _, s in starts_a)


def test_synthetic_to_stdout_and_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "synthetic", "--jobs", "5", "--swf", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    lines = [x for x in proc.stdout.splitlines() if not x.startswith(";")]
    assert len(lines) == 5 and all(len(x.split()) == 18 for x in lines)


def test_json_rows_say_how_they_were_made(capsys, tmp_path):
    """Two runs that differ only by --predict-runtimes are told apart by their rows."""
    import hashlib

    from fluxsched_py import __version__

    swf = tmp_path / "w.swf"
    assert synthetic_main(["--jobs", "40", "--nodes", "16", "--swf", str(swf)]) == 0
    rows = []
    for extra in ([], ["--predict-runtimes"]):
        argv = [str(swf), "--queue-policy", "easy", "--nodes", "16", "--cores-per-node", "2", "--json", *extra]
        assert replay_cli.main([*argv, "--procs-per-node", "1", "--policy", "high", "--walltime", "none"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        rows.append(row)
    plain, predicted = rows
    assert plain["workload"] == str(swf) and plain["workload_sha256"] == hashlib.sha256(swf.read_bytes()).hexdigest()
    assert (plain["nodes"], plain["cores"], plain["queue_policy"], plain["placement_policy"]) == (
        16,
        32,
        "easy",
        "high",
    )
    assert plain["walltime_model"] == "none" and plain["version"] == __version__
    # --procs-per-node has no default (a node per processor): given, it is recorded
    assert plain["options"] == {"procs-per-node": 1}
    assert predicted["options"] == {"procs-per-node": 1, "predict-runtimes": True}


def test_a_replay_that_rejects_jobs_says_so_in_one_line():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fluxsched_py",
            "replay",
            str(EXAMPLE),
            "--platform",
            str(REPO / "examples" / "small.graphml"),
        ]
        + ["--queue-policy", "easy", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    result = replay(
        load_workload(EXAMPLE), load_platform(REPO / "examples" / "small.graphml"), {"queue-policy": "easy"}
    )
    rejected = [r.job.name for r in result.records if r.state == "REJECTED"]
    assert row["rejected"] == len(rejected) == 99
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    ids = ", ".join(str(i) for i in rejected[:5])
    assert lines[0].startswith(f"fluxsched-py replay: easy: 99 of 300 jobs rejected (ids {ids}, ...): ")
