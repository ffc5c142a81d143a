"""``jobs.csv`` is Batsim's out_jobs.csv: evalys, Batsim's analysis library, reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluxsched_py.replay import load_workload, replay
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.report import write_jobs_csv

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_seed42_64nodes.json"


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_evalys_loads_jobs_csv(tmp_path):
    jobset_mod = pytest.importorskip("evalys.jobset", reason="evalys not installed (pip install evalys)")
    result = replay(load_workload(EXAMPLE), nodes_graph(64), {"queue-policy": "easy"})
    path = write_jobs_csv(result, tmp_path / "jobs.csv")
    js = jobset_mod.JobSet.from_csv(str(path))
    df = js.df
    assert len(df) == len(result.records)
    by_id = {str(r.job.name): r for r in result.records}
    for row in df.itertuples():
        rec = by_id[str(row.jobID)]
        assert row.starting_time == pytest.approx(rec.start)
        assert row.finish_time == pytest.approx(rec.finish)
        assert row.waiting_time == pytest.approx(rec.start - rec.job.submit)
    # evalys parses allocated_resources into interval sets: the same nodes the replay used
    first = result.records[0]
    alloc = df.loc[df.jobID.astype(str) == first.job.name, "allocated_resources"].iloc[0]
    assert sorted(int(x) for x in alloc) == sorted(first.ranks)
    # evalys infers the machine from the highest resource used
    assert js.MaxProcs == max(max(r.ranks) for r in result.records) + 1
