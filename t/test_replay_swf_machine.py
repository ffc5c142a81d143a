"""The machine an SWF header makes (``docs/rfcs/swf.md``), on the SDSC Blue
Horizon trace (``../shared/conformance/swf/``): 144 nodes of 8 processors,
``MaxNodes: 144``, ``MaxProcs: 1152``.  The header and job lines are read
here with gzip and split, independently of the replay's reader."""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.replay import load_workload

from .conftest import shared_path

NAME = "SDSC-BLUE-2000-4.1-cln.swf.gz"
CLI = str(Path(sys.executable).with_name("fluxsched-py"))


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int], list[list[str]]]:
    """The header and the first 300 job lines, in a file of their own."""
    src = shared_path("conformance", "swf", NAME)
    header: dict[str, int] = {}
    lines: list[str] = []
    jobs: list[list[str]] = []
    with gzip.open(src, "rt") as f:
        for line in f:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if key.strip() in ("MaxNodes", "MaxProcs"):
                    header[key.strip()] = int(value)
            elif line.strip():
                jobs.append(line.split())
            lines.append(line)
            if len(jobs) == 300:
                break
    path = tmp_path_factory.mktemp("sdsc") / "sdsc-head.swf"
    path.write_text("".join(lines))
    return path, header, jobs


def test_the_header_says_144_nodes_of_8_processors(head) -> None:
    _, header, _ = head
    assert header == {"MaxNodes": 144, "MaxProcs": 1152}


def test_procs_per_node_1_makes_maxprocs_nodes(head) -> None:
    path, header, jobs = head
    w = load_workload(path, procs_per_node=1)
    assert w.nb_res == header["MaxProcs"] == 1152
    assert not any("procs-per-node" in n for n in w.notes)
    procs = {int(f[0]): int(f[7]) if int(f[7]) > 0 else int(f[4]) for f in jobs}
    assert w.jobs and all(j.nodes == procs[j.id] for j in w.jobs)


def test_procs_per_node_8_makes_maxnodes_nodes(head) -> None:
    path, header, jobs = head
    w = load_workload(path, procs_per_node=8)
    assert w.nb_res == math.ceil(header["MaxProcs"] / 8) == header["MaxNodes"]
    procs = {int(f[0]): int(f[7]) if int(f[7]) > 0 else int(f[4]) for f in jobs}
    assert all(j.nodes == math.ceil(procs[j.id] / 8) for j in w.jobs)


def test_no_procs_per_node_is_maxnodes_with_a_note(head) -> None:
    path, header, _ = head
    w = load_workload(path)
    assert w.nb_res == header["MaxNodes"]
    assert any("--procs-per-node 8 would map them to nodes" in n for n in w.notes)


@pytest.mark.parametrize(
    ("args", "nodes"), [(["--procs-per-node", "1"], 1152), ([], 144), (["--procs-per-node", "8"], 144)]
)
def test_the_replay_runs_on_that_machine(head, args: list[str], nodes: int) -> None:
    path, _, _ = head
    p = subprocess.run(
        [CLI, "replay", str(path), "--queue-policy", "fcfs", "--jobs", "20", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"20 jobs on {nodes} nodes" in p.stdout
