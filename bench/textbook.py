"""Textbook FCFS, EASY and conservative backfilling on a processor count: the oracle.

Written from the papers, with no code of the engine, so that the replay's
decisions and its cost can be held against the simplest program that makes
the same decisions:

- FCFS: jobs start in arrival order, the head as soon as it fits.
- EASY (Lifka 1995; Mu'alem and Feitelson 2001, section 2): the head of
  the queue gets a reservation at its *shadow time*, the earliest time
  enough processors are free if running jobs end at their requested times;
  the processors free then beyond what it needs are the *extra* ones.  A
  later job may start now when it fits now and either ends by the shadow
  time or needs no more than the extra processors.
- Conservative (Mu'alem and Feitelson 2001, section 2.2): every waiting
  job holds a reservation, the earliest start in a profile of free
  processors over time where it fits for its requested time.  When a job
  ends before its requested time, the reservations are *compressed*: in
  arrival order, each is taken out and placed again at its earliest start,
  which is never later than it was.

The machine is ``MaxProcs`` processors (the SWF header); a job needs its
requested processors (field 8; the allocated ones, field 5, when that is
missing), for its requested time (field 9), and runs for its run time
(field 4).  The trace is read with Gaussier et al.'s predictsim filter
(:func:`read_filtered`).  At each event time, ends come before arrivals,
then one scheduling decision is made.

    python bench/textbook.py TRACE.swf[.gz] --policy easy [--out starts.csv]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import math
import sys
from dataclasses import dataclass


@dataclass(slots=True, eq=False)
class TraceJob:
    id: int
    submit: float
    procs: int
    run: float
    wall: float
    start: float = math.nan


def _open(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def read_filtered(path: str) -> tuple[int, list[TraceJob], list[str]]:
    """(MaxProcs, the jobs kept in arrival order, the header lines) by predictsim's filter.

    A job is dropped when its processor count is missing or over
    ``MaxProcs``, or its run time or requested time is not positive; a run
    time longer than the requested time is cut to it.
    """
    maxprocs = 0
    jobs: list[TraceJob] = []
    header: list[str] = []
    with _open(path) as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith(";"):
                header.append(s)
                key, _, value = s[1:].partition(":")
                if key.strip().lower() == "maxprocs":
                    maxprocs = int(value.split()[0])
                continue
            v = s.split()
            run, alloc, req_procs, wall = float(v[3]), float(v[4]), float(v[7]), float(v[8])
            procs = int(req_procs if req_procs > 0 else alloc)
            if procs <= 0 or procs > maxprocs or run <= 0 or wall <= 0:
                continue
            jobs.append(TraceJob(int(v[0]), float(v[1]), procs, min(run, wall), wall))
    jobs.sort(key=lambda j: (j.submit, j.id))
    return maxprocs, jobs, header


def simulate(total: int, jobs: list[TraceJob], policy: str) -> None:
    """Set every job's ``start`` under ``policy`` (fcfs, easy or conservative)."""
    decide = {"fcfs": _Fcfs, "easy": _Easy, "conservative": _Conservative}[policy](total)
    ends: list[tuple[float, int, TraceJob]] = []
    i, n = 0, len(jobs)
    while i < n or ends:
        now = min(jobs[i].submit if i < n else math.inf, ends[0][0] if ends else math.inf)
        ended = []
        while ends and ends[0][0] <= now:
            ended.append(heapq.heappop(ends)[2])
        arrived = []
        while i < n and jobs[i].submit <= now:
            arrived.append(jobs[i])
            i += 1
        for job in decide(now, ended, arrived):
            job.start = now
            heapq.heappush(ends, (now + job.run, job.id, job))


class _Fcfs:
    def __init__(self, total: int) -> None:
        self.free = total
        self.queue: list[TraceJob] = []
        self.head = 0

    def __call__(self, now: float, ended: list[TraceJob], arrived: list[TraceJob]) -> list[TraceJob]:
        for job in ended:
            self.free += job.procs
        self.queue.extend(arrived)
        started = []
        q = self.queue
        while self.head < len(q) and q[self.head].procs <= self.free:
            job = q[self.head]
            self.head += 1
            self.free -= job.procs
            started.append(job)
        if self.head > 4096:
            del q[: self.head]
            self.head = 0
        return started


class _Easy:
    def __init__(self, total: int) -> None:
        self.free = total
        self.queue: list[TraceJob] = []
        self.running: set[TraceJob] = set()

    def __call__(self, now: float, ended: list[TraceJob], arrived: list[TraceJob]) -> list[TraceJob]:
        for job in ended:
            self.free += job.procs
            self.running.discard(job)
        self.queue.extend(arrived)
        q = self.queue
        started = []
        k = 0
        while k < len(q) and q[k].procs <= self.free:  # the head, as long as it fits
            started.append(q[k])
            self.free -= q[k].procs
            k += 1
        if k < len(q):
            head = q[k]
            # shadow time: running jobs end at their requested times, soonest
            # first; the extra processors are those free at that time
            avail = self.free
            shadow = math.inf
            ends = [(r.start + r.wall, r.procs) for r in self.running] + [(now + r.wall, r.procs) for r in started]
            for end, procs in sorted(ends):
                if end > shadow:
                    break
                avail += procs
                if avail >= head.procs:
                    shadow = end
            extra = avail - head.procs
            waiting = [head]
            for job in q[k + 1 :]:
                if job.procs <= self.free and (now + job.wall <= shadow or job.procs <= extra):
                    started.append(job)
                    self.free -= job.procs
                    if now + job.wall > shadow:
                        extra -= job.procs
                else:
                    waiting.append(job)
            self.queue = waiting
        else:
            self.queue = []
        self.running.update(started)
        return started


class _Profile:
    """Free processors over time: breakpoints ``times`` with the count from each to the next."""

    def __init__(self, total: int) -> None:
        self.times = [0.0]
        self.free = [total]

    def _split(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] != t:
            self.times.insert(i + 1, t)
            self.free.insert(i + 1, self.free[i])
            i += 1
        return i

    def add(self, start: float, end: float, procs: int) -> None:
        """Take ``procs`` over [start, end) (give them back with a negative count)."""
        i, j = self._split(start), self._split(end)
        for k in range(i, j):
            self.free[k] -= procs

    def earliest(self, now: float, procs: int, length: float) -> float:
        times, free = self.times, self.free
        j = bisect.bisect_right(times, now) - 1
        start = now
        while True:
            k = j
            while k < len(times) and times[k] < start + length:
                if free[k] < procs:
                    break
                k += 1
            else:
                return start
            j = k + 1
            start = times[j]

    def drop_before(self, now: float) -> None:
        i = bisect.bisect_right(self.times, now) - 1
        if i > 0:
            del self.times[:i], self.free[:i]


class _Conservative:
    def __init__(self, total: int) -> None:
        self.profile = _Profile(total)
        self.queue: list[TraceJob] = []  # arrival order
        self.reserved: dict[int, float] = {}

    def _reserve(self, now: float, job: TraceJob) -> None:
        t = self.profile.earliest(now, job.procs, job.wall)
        self.reserved[job.id] = t
        self.profile.add(t, t + job.wall, job.procs)

    def __call__(self, now: float, ended: list[TraceJob], arrived: list[TraceJob]) -> list[TraceJob]:
        p = self.profile
        early = False
        for job in ended:
            planned_end = job.start + job.wall
            if now < planned_end:
                p.add(now, planned_end, -job.procs)
                early = True
        p.drop_before(now)
        if early:  # compression, in arrival order
            for job in self.queue:
                t = self.reserved[job.id]
                p.add(t, t + job.wall, -job.procs)
                self._reserve(now, job)
        for job in arrived:
            self._reserve(now, job)
        self.queue.extend(arrived)
        started = [job for job in self.queue if self.reserved[job.id] == now]
        if started:
            self.queue = [job for job in self.queue if self.reserved[job.id] != now]
            for job in started:
                del self.reserved[job.id]
        return started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--policy", choices=("fcfs", "easy", "conservative"), default="easy")
    ap.add_argument("--out", help="write job_id,starting_time to this CSV")
    a = ap.parse_args(argv)
    total, jobs, _ = read_filtered(a.trace)
    simulate(total, jobs, a.policy)
    if a.out:
        with open(a.out, "w") as f:
            f.write("job_id,starting_time\n")
            f.writelines(f"{j.id},{j.start!r}\n" for j in jobs)
    tau = 10.0
    bsld = sum(max(1.0, (j.start - j.submit + j.run) / max(j.run, tau)) for j in jobs) / len(jobs)
    print(f"{a.policy}: {len(jobs)} jobs on {total} processors, mean bounded slowdown {bsld:.6f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
