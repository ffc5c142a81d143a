"""The replay's job outcomes in columns (fluxsched_py/replay/records.py):
every field reads back what was written, whatever the ids and the ranks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import node_request
from fluxsched_py.replay.records import COMPLETED, NOT_STARTED, PREEMPTED, RARE, Records
from fluxsched_py.replay.workload import WorkloadJob


def _job(jobid: int) -> WorkloadJob:
    return WorkloadJob(jobid, "", 0.0, node_request(1, 10.0), 10.0, 5.0, 1)


ids = st.lists(st.integers(-5, 10**7), min_size=1, max_size=40, unique=True)
rank_sets = st.frozensets(st.integers(0, 200_000), max_size=60)


@given(ids, st.data())
def test_each_field_reads_back_what_was_written(jobids, data):
    records = Records([_job(i) for i in jobids])
    written = {}
    for jobid in jobids:
        rec = records[jobid]
        assert rec.job.id == jobid and rec.state == NOT_STARTED and rec.start is None and rec.ranks is None
        ranks = data.draw(rank_sets)
        start = data.draw(st.one_of(st.none(), st.floats(0, 1e9)))
        rec.start, rec.finish, rec.state = start, math.inf, PREEMPTED
        rec.ranks = IdSet(ranks)
        rec.preemptions += 1
        written[jobid] = (start, ranks)
    for jobid, (start, ranks) in written.items():
        rec = records[jobid]
        assert rec.start == start and rec.finish == math.inf and rec.state == PREEMPTED
        assert rec.preemptions == 1 and rec.lost == RARE["lost"]
        assert rec.nranks == len(ranks)
        assert (rec.ranks is None) == (not ranks) and set(rec.ranks or ()) == set(ranks)
    assert [r.job.id for r in records.of(reversed(jobids))] == list(reversed(jobids))


def test_a_copy_gets_a_row_after_the_workload_and_ids_stay_unique():
    records = Records([_job(1), _job(2)])
    copy = records.add(_job(10**9))  # far beyond the workload's ids: the rows move to a dict
    copy.state = COMPLETED
    assert records[10**9].state == COMPLETED and records[2].state == NOT_STARTED
    assert 10**9 in records and 3 not in records
    with pytest.raises(ValueError, match="already recorded"):
        records.add(_job(2))
    with pytest.raises(ValueError, match="unique"):
        Records([_job(4), _job(4)])
    with pytest.raises(KeyError):
        records[3]


def test_fields_left_at_their_defaults_take_no_room():
    records = Records([_job(i) for i in range(100)])
    for rec in records.values():
        rec.start, rec.finish, rec.state = 0.0, 5.0, COMPLETED
        rec.ranks = IdSet([rec.job.id])
    assert records.extra == {} and records.several == {}
    records[7].ranks = IdSet([1, 3])  # two runs: beyond one word
    records[7].note = "x"
    assert set(records.several) == {7} and set(records.extra) == {7}
    assert records[7].rank_runs() == [(1, 1), (3, 3)]
