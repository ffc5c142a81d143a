"""What happened to each job of a replay: one column per field, a view per job.

A replay of an archive trace keeps an outcome for each of its hundreds of
thousands of jobs until the end (the summary, ``jobs.csv``, the report).
An object per job, with a float object for each time and a dict entry to
find it, costs more than the trace itself; so :class:`Records` keeps the
outcomes as columns of C numbers (times, state codes, rank runs packed in
one 64-bit word), and :class:`JobRecord` is a view of one row, made when a
job is looked up and dropped after.  The fields most jobs leave at their
defaults (preemptions, notes, copies, checkpoints) are kept per row only
once set.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from ..ids import IdSet
from .workload import WorkloadJob

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "KILLED",
    "NOT_STARTED",
    "PREEMPTED",
    "REJECTED",
    "JobRecord",
    "RecordList",
    "Records",
]

COMPLETED = "COMPLETED_SUCCESSFULLY"
KILLED = "COMPLETED_WALLTIME_REACHED"
PREEMPTED = "COMPLETED_KILLED"  # Batsim's state for a job it was told to kill
REJECTED = "REJECTED"
NOT_STARTED = "NOT_STARTED"
CANCELLED = "CANCELLED"  # an end-of-campaign copy that lost (or its original, which then completes by its copy)

_STATES = (NOT_STARTED, COMPLETED, KILLED, PREEMPTED, REJECTED, CANCELLED)
_CODE = {s: i for i, s in enumerate(_STATES)}
_NONE = math.nan  # a time not set: no replay time is NaN
_WORD = (1 << 64) - 1
_SEVERAL = -1  # in ``Records.runs``: the job ran on several runs of ranks, packed in ``Records.several``

#: The fields kept per row only once set, with their defaults.
RARE = {
    #: The start the forecast (:mod:`fluxsched_py.engine.forecast`) gave the
    #: job at the first pass after its submission (``replay(forecast=True)``).
    "first_forecast": None,
    "note": None,
    #: When the engine denied the job (state ``REJECTED``): its submit time, or a later pass's.
    "rejected_at": None,
    #: Best-effort jobs: times preempted, and node-seconds of work lost to it.
    "preemptions": 0,
    "lost": 0.0,
    #: A job a copy of it completed (end-of-campaign duplication): that copy's id.
    "won_by": None,
    #: Node-seconds of its runs cancelled because another copy finished first.
    "wasted": 0.0,
    #: Notices (``preempt-grace``) it got, and node-seconds of its work kept
    #: by checkpoints and not run again (a requeued checkpointing job).
    "notices": 0,
    "recovered": 0.0,
    #: Each preempted run: (start, end, nodes), for the busy time of the machine.
    "preempted_runs": None,
    #: The last ``reason_pending`` the engine gave it (``replay(reasons=True)``: ``--job-metadata``).
    "reason": None,
}


def _pack(ranks: IdSet) -> int:
    """Runs of ranks in one int: 64 bits a run, its first rank and one past
    its last in 32 bits each (so no run packs as 0)."""
    packed, shift = 0, 0
    for lo, hi in ranks.runs():
        packed |= (lo | (hi + 1) << 32) << shift
        shift += 64
    return packed


def _unpack(packed: int) -> list[tuple[int, int]]:
    out = []
    while packed:
        run = packed & _WORD
        out.append((run & 0xFFFFFFFF, (run >> 32) - 1))
        packed >>= 64
    return out


class _Rows:
    """Job id -> row.  A trace numbers its jobs from 0 or 1 with few gaps, so
    a column of rows indexed by id takes a fraction of a dict's memory;
    ids spread wider (or negative) are kept in a dict."""

    def __init__(self, ids: Sequence[int]) -> None:
        self._dict: dict[int, int] | None = None
        self._column = array("q")
        if ids and (min(ids) < 0 or max(ids) >= 4 * len(ids) + 1024):
            self._dict = {}
        elif ids:
            self._column = array("q", [-1]) * (max(ids) + 1)
        for i, jobid in enumerate(ids):
            if self.get(jobid) is not None:
                raise ValueError(f"workload job ids must be unique: {jobid} twice")
            self.add(jobid, i)

    def get(self, jobid: int) -> int | None:
        if self._dict is not None:
            return self._dict.get(jobid)
        column = self._column
        row = column[jobid] if 0 <= jobid < len(column) else -1
        return None if row < 0 else row

    def add(self, jobid: int, row: int) -> None:
        if self._dict is not None:
            self._dict[jobid] = row
            return
        column = self._column
        if jobid < 0 or jobid >= 4 * len(column) + 1024:
            self._dict = {j: r for j, r in enumerate(column) if r >= 0}
            self._column = array("q")
            self._dict[jobid] = row
            return
        if jobid >= len(column):
            column.extend(array("q", [-1]) * (jobid + 1 - len(column)))
        column[jobid] = row


class Records:
    """Every job's outcome, by job id (see the module docstring)."""

    def __init__(self, jobs: Iterable[WorkloadJob]) -> None:
        self.jobs: list[WorkloadJob] = list(jobs)  # its own: copies are appended
        self.rows = _Rows([j.id for j in jobs])
        n = len(self.jobs)
        self.start = array("d", [_NONE]) * n
        self.finish = array("d", [_NONE]) * n
        self.first_estimate = array("d", [_NONE]) * n
        self.state = bytearray(n)  # codes in _STATES: 0 is NOT_STARTED
        #: One run of ranks packed in a word (0: never started; _SEVERAL: in :attr:`several`).
        self.runs = array("q", bytes(8 * n))
        self.several: dict[int, int] = {}
        self.extra: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, jobid: int) -> JobRecord:
        row = self.rows.get(jobid)
        if row is None:
            raise KeyError(jobid)
        return JobRecord(self, row)

    def __contains__(self, jobid: object) -> bool:
        return isinstance(jobid, int) and self.rows.get(jobid) is not None

    def values(self) -> Iterator[JobRecord]:
        return (JobRecord(self, i) for i in range(len(self.jobs)))

    def add(self, job: WorkloadJob) -> JobRecord:
        """A row for a job not in the workload (an end-of-campaign copy)."""
        if job.id in self:
            raise ValueError(f"job {job.id}: already recorded")
        i = len(self.jobs)
        self.rows.add(job.id, i)
        self.jobs.append(job)
        for column in (self.start, self.finish, self.first_estimate):
            column.append(_NONE)
        self.state.append(0)
        self.runs.append(0)
        return JobRecord(self, i)

    def of(self, jobids: Iterable[int]) -> RecordList:
        get = self.rows.get
        return RecordList(self, array("q", (get(j) for j in jobids)))


class RecordList(Sequence["JobRecord"]):
    """Some rows of :class:`Records`, in order; a view made per item."""

    def __init__(self, records: Records, rows: array) -> None:
        self._records = records
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, k: int) -> JobRecord: ...
    @overload
    def __getitem__(self, k: slice) -> list[JobRecord]: ...
    def __getitem__(self, k: int | slice) -> JobRecord | list[JobRecord]:
        if isinstance(k, slice):
            return [JobRecord(self._records, i) for i in self._rows[k]]
        return JobRecord(self._records, self._rows[k])

    def __iter__(self) -> Iterator[JobRecord]:
        records = self._records
        return (JobRecord(records, i) for i in self._rows)


def _time(column: str) -> property:
    def get(rec: JobRecord) -> float | None:
        t = getattr(rec._t, column)[rec._i]
        return None if t != t else t

    def put(rec: JobRecord, value: float | None) -> None:
        getattr(rec._t, column)[rec._i] = _NONE if value is None else value

    return property(get, put)


def _rare(name: str) -> property:
    default = RARE[name]

    def get(rec: JobRecord) -> Any:
        extra = rec._t.extra.get(rec._i)
        return default if extra is None else extra.get(name, default)

    def put(rec: JobRecord, value: Any) -> None:
        rows = rec._t.extra
        extra = rows.get(rec._i)
        if extra is None:
            if value is default or (value == default and type(value) is type(default)):
                return  # a row that sets nothing keeps no dict
            extra = rows[rec._i] = {}
        extra[name] = value

    return property(get, put)


class JobRecord:
    """What happened to one job: a view of its row of :class:`Records`."""

    __slots__ = ("_i", "_t")

    def __init__(self, records: Records, row: int) -> None:
        self._t = records
        self._i = row

    @property
    def job(self) -> WorkloadJob:
        return self._t.jobs[self._i]

    start = _time("start")
    finish = _time("finish")
    first_estimate = _time("first_estimate")
    first_forecast = _rare("first_forecast")
    note = _rare("note")
    rejected_at = _rare("rejected_at")
    preemptions = _rare("preemptions")
    lost = _rare("lost")
    won_by = _rare("won_by")
    wasted = _rare("wasted")
    notices = _rare("notices")
    recovered = _rare("recovered")
    preempted_runs = _rare("preempted_runs")
    reason = _rare("reason")

    @property
    def state(self) -> str:
        return _STATES[self._t.state[self._i]]

    @state.setter
    def state(self, value: str) -> None:
        self._t.state[self._i] = _CODE[value]

    @property
    def started(self) -> bool:
        """It ran on some ranks (its last run's are :attr:`ranks`)."""
        return self._t.runs[self._i] != 0

    @property
    def ranks(self) -> IdSet | None:
        """The ranks it ran on (None: it never started)."""
        if not self.started:
            return None
        mask = 0
        for lo, hi in self.rank_runs():
            mask |= ((1 << (hi - lo + 1)) - 1) << lo
        return IdSet.from_mask(mask)

    @ranks.setter
    def ranks(self, value: IdSet | None) -> None:
        t, i = self._t, self._i
        t.several.pop(i, None)
        packed = 0 if value is None else _pack(value)
        if packed > _WORD >> 1:  # beyond one signed word: several runs
            t.several[i] = packed
            packed = _SEVERAL
        t.runs[i] = packed

    @property
    def nranks(self) -> int:
        """How many ranks it ran on (0: it never started), with no IdSet built."""
        return sum(hi - lo + 1 for lo, hi in self.rank_runs())

    def rank_runs(self) -> list[tuple[int, int]]:
        """The ranks it ran on as ``(first, last)`` runs, in order."""
        t, i = self._t, self._i
        packed = t.runs[i]
        return _unpack(t.several[i] if packed == _SEVERAL else packed)

    def __repr__(self) -> str:
        return f"JobRecord(job {self.job.name}: {self.state}, start={self.start}, finish={self.finish})"
