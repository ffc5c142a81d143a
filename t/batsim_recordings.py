"""What the tests of recorded Batsim traffic share.

Each folder under ``t/data/batsim/`` holds recordings made with
``fluxsched-py batsim --record`` against a real Batsim, and a
``MANIFEST.json`` saying where each comes from.  The tests read a recording
as ``[(Batsim's message, the reply)]`` and hold every protocol's run to the
same two checks: every job ran (or was rejected as the manifest says), and
every start time equals the offline replay's.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fluxsched_py.batsim.cli import Recorder
from fluxsched_py.engine import EngineOptions
from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph

BATSIM_DATA = Path(__file__).parent / "data" / "batsim"

Decision = tuple[float, str, str, "frozenset[int] | None"]


def manifest(folder: Path) -> dict:
    return json.loads((folder / "MANIFEST.json").read_text())


def recordings(folder: Path) -> tuple[list[dict], list[str]]:
    """A folder's recordings and their test ids (file names without ``.jsonl.gz``)."""
    recs = manifest(folder)["recordings"]
    return recs, [r["file"].removesuffix(".jsonl.gz") for r in recs]


@contextmanager
def batsim_side(endpoint: str) -> Iterator:
    """A ZeroMQ REQ socket connected to *endpoint*, as Batsim's side (10 s receive timeout)."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(0)
        ctx.term()


def message_pairs(path: Path) -> list[tuple[bytes, bytes]]:
    """``[(Batsim's message, the reply)]`` of one recording."""
    msgs = Recorder.load(path)
    assert [d for d, _ in msgs] == ["in", "out"] * (len(msgs) // 2), "a recording alternates in/out"
    return [(msgs[i][1], msgs[i + 1][1]) for i in range(0, len(msgs), 2)]


def plain_workloads(folder: Path, recordings: Iterable[dict], tmp: Path) -> dict[str, Path]:
    """Each recording's workload as a plain file under the base name Batsim gave it (gunzipped into *tmp*)."""
    out = {}
    for rec in recordings:
        src = folder / rec["workload"]
        if src.suffix == ".gz":
            dst = tmp / src.name.removesuffix(".gz")
            dst.write_bytes(gzip.decompress(src.read_bytes()))
        else:
            dst = src
        out[rec["file"]] = dst
    return out


def assert_every_job_ran(rec: dict, submitted: set, completed: set, decisions: list[Decision]) -> None:
    """Every submitted job was started and completed, or rejected as the manifest says."""
    started = {job for _, kind, job, _ in decisions if kind == "execute"}
    rejected = {job for _, kind, job, _ in decisions if kind == "reject"}
    assert len(submitted) == rec["jobs"]
    assert rejected == set(rec.get("rejected", [])) and not started & rejected
    assert started | rejected == submitted and completed == started


def assert_starts_equal_replay(
    rec: dict, workload: Path, decisions: list[Decision], job_number: Callable[[str], int]
) -> None:
    """The run's start times equal the offline replay's within 0.1 s (DESIGN.md, "Schedule quality")."""
    ref = replay(load_workload(workload), nodes_graph(rec["nodes"]), EngineOptions.parse(rec["options"]))
    expected = {r.job.id: r.start for r in ref.records if r.start is not None}
    started = {job_number(job): t for t, kind, job, _ in decisions if kind == "execute"}
    assert started.keys() == expected.keys()
    rejected = {job_number(job) for _, kind, job, _ in decisions if kind == "reject"}
    assert rejected == {r.job.id for r in ref.records if r.state == "REJECTED"}
    worst = max(abs(started[j] - expected[j]) for j in started)
    assert worst <= 0.1, f"a start time differs from the replay's by {worst:.6f} s"


def workload_job_number(job: str) -> int:
    """``w0!7`` -> 7: the workload's own job id."""
    return int(job.rsplit("!", 1)[1])


def driver_command(endpoint: str, *options: str) -> list[str]:
    """``fluxsched-py batsim`` on ``endpoint``, quiet, giving up after 10 s, with ``options``."""
    return [sys.executable, "-m", "fluxsched_py", "batsim", "--socket", endpoint, "--timeout", "10", "-q", *options]
