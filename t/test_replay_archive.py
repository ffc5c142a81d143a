"""A real Parallel Workloads Archive trace, read as the archive ships it.

``../shared/conformance/swf/NASA-iPSC-1993-3.1-cln.swf.gz``: 18,239 jobs on
the 128-node iPSC/860, gzipped, with no requested times (field 9 is -1).  The
reader streams it (no unpacking), takes ``MaxNodes`` from the header, users
from field 12, and gives every job a walltime from the walltime model.  The
whole trace is replayed under every queue policy (marked ``slow``: about
5 s of CPU per policy; ``-m "not slow"`` leaves it out), and the fcfs and
easy start times are checked job for job against the textbook schedulers of
``t/test_policy_textbook.py``.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
from collections import Counter

import pytest

from fluxsched_py.policy import POLICIES
from fluxsched_py.replay import load_workload, replay, summarize
from fluxsched_py.replay.platform import nodes_graph

from .conftest import shared_path
from .test_policy_textbook import textbook

NAME = "NASA-iPSC-1993-3.1-cln.swf.gz"


def _trace():
    return shared_path("conformance", "swf", NAME)


def _swf_lines(path) -> list[list[str]]:
    """An independent reading of the data lines: gzip + split, nothing else."""
    with gzip.open(path, "rt") as f:
        return [line.split() for line in f if line.strip() and not line.lstrip().startswith(";")]


def test_gzipped_trace_is_read_streaming_with_header_users_and_walltime_model():
    path = _trace()
    w = load_workload(path)
    fields = _swf_lines(path)
    assert w.name == "NASA-iPSC-1993-3.1-cln" and w.nb_res == 128  # "; MaxNodes: 128"
    assert len(w.jobs) + w.skipped == len(fields) == 18239
    by_id = {int(f[0]): f for f in fields}
    for j in w.jobs:
        f = by_id[j.id]
        assert (j.submit, j.runtime, j.nodes) == (float(f[1]), float(f[3]), int(f[4]))
        assert j.user == int(f[11]) and j.queue == int(f[14])
        # no requested time: the default model, runtime (a 0 s job has no limit: Flux's duration 0)
        assert j.walltime == (j.runtime if j.runtime > 0 else math.inf)
    assert w.walltime_filled == len(w.jobs) and w.walltime_model == "runtime"
    assert len(Counter(j.user for j in w.jobs)) > 10


def test_walltime_models_and_procs_per_node():
    path = _trace()
    w = load_workload(path, walltime="default:3600", procs_per_node=4)
    assert w.nb_res == 32 and all(j.walltime == 3600.0 for j in w.jobs)
    procs = {int(f[0]): int(f[4]) for f in _swf_lines(path)}
    assert all(j.nodes == math.ceil(procs[j.id] / 4) for j in w.jobs)
    w = load_workload(path, walltime="none")
    assert all(j.walltime == math.inf and j.request.duration == 0.0 for j in w.jobs)


@pytest.mark.parametrize("opener,suffix", [(bz2.open, ".bz2"), (lzma.open, ".xz"), (open, "")])
def test_bz2_xz_and_plain_give_the_same_jobs(tmp_path, opener, suffix):
    path = _trace()
    with gzip.open(path, "rb") as f:
        data = f.read()
    other = tmp_path / f"nasa.swf{suffix}"
    with opener(other, "wb") as f:
        f.write(data)
    a, b = load_workload(path), load_workload(other)
    assert [(j.id, j.submit, j.nodes, j.runtime, j.user) for j in a.jobs] == [
        (j.id, j.submit, j.nodes, j.runtime, j.user) for j in b.jobs
    ]
    assert a.nb_res == b.nb_res


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_whole_trace_replays_under_every_queue_policy(policy):
    w = load_workload(_trace())
    result = replay(w, nodes_graph(128), {"queue-policy": policy, "annotate-depth": 0})
    s = summarize(result)
    assert s.started == len(w.jobs) and s.rejected == 0 and s.killed == 0
    assert 0 < s.utilization <= 1 and math.isfinite(s.makespan)
    if policy in ("fcfs", "easy"):
        ref = textbook([(j.id, j.submit, j.nodes, j.walltime, j.runtime) for j in w.jobs], 128, easy=policy == "easy")
        got = result.starts()
        diffs = [(jid, ref[jid], got[jid]) for jid in ref if got[jid] != ref[jid]]
        assert not diffs, f"{len(diffs)} start times differ from textbook {policy}, first: {diffs[:5]}"
