"""resource-query's command language over one resource graph.

A :class:`Session` owns the graph, the job table and the job-id counter, and
executes one command line at a time (:meth:`Session.execute`).  Output that
resource-query writes to its ``-t`` test-output stream goes to ``out``; what
it writes to the terminal (``info``, ``stat``) goes to ``term``; errors go to
``err`` as one ``ERROR: ...`` line, never a traceback.

Time starts at 0.  A job runs for its jobspec's ``attributes.system.duration``
(rounded up); a duration of 0 means "the whole graph duration", which in
resource-query is ``SYSTEM_MAX_DURATION`` = 3153600000 s (100 years).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from dataclasses import dataclass
from typing import TextIO

from .dfu import MatchError, Meta, Traverser
from .graph import RGraph, Vertex
from .jobspec import JobspecError, RSpec, read_rjob

__all__ = ["Session", "SYSTEM_MAX_DURATION", "MATCH_OPS", "FORMATS"]

SYSTEM_MAX_DURATION = 3153600000
MATCH_OPS = ("allocate", "allocate_with_satisfiability", "allocate_orelse_reserve", "satisfiability",
             "without_allocating", "without_allocating_future")
FORMATS = ("simple", "pretty_simple", "jgf", "rlite", "rv1", "rv1_nosched")
_SEP = "INFO: ============================="


@dataclass
class Job:
    jobid: int
    state: str  # ALLOCATED | RESERVED | CANCELED
    at: int
    jobspec: str
    overhead: float = 0.0


class Session:
    """One resource-query session: graph + traverser + jobs."""

    def __init__(self, graph: RGraph, traverser: Traverser, *, match_format: str = "simple",
                 out: TextIO | None = None, term: TextIO | None = None, err: TextIO | None = None,
                 path_map: tuple[str, str] | None = None) -> None:
        if match_format not in FORMATS:
            raise ValueError(f"unknown match format '{match_format}'")
        self.g = graph
        self.t = traverser
        self.fmt = match_format
        self.out = out or sys.stdout
        self.term = term or sys.stdout
        self.err = err or sys.stderr
        self.jobs: dict[int, Job] = {}
        self.counter = 1
        self.now = 0
        self.path_map = path_map

    # --------------------------------------------------------------- driver
    def run(self, lines) -> int:
        """Execute commands until ``quit`` or end of input; returns 0."""
        for line in lines:
            if self.execute(line) < 0:
                break
        return 0

    def error(self, msg: str) -> None:
        print(f"ERROR: {msg}", file=self.err)

    def execute(self, line: str) -> int:
        """Run one command line; -1 means quit."""
        line = line.strip()
        if not line or line.startswith("#"):
            return 0
        if self.path_map:
            line = line.replace(*self.path_map)
        try:
            args = shlex.split(line)
        except ValueError as e:
            self.error(f"malformed command: {e}")
            return 0
        cmd = args[0]
        handler = {
            "match": self.cmd_match, "m": self.cmd_match,
            "multi-match": self.cmd_multi, "M": self.cmd_multi,
            "cancel": self.cmd_cancel, "c": self.cmd_cancel,
            "info": self.cmd_info, "i": self.cmd_info,
            "stat": self.cmd_stat, "s": self.cmd_stat,
            "list": self.cmd_list, "l": self.cmd_list,
            "set-status": self.cmd_set_status, "t": self.cmd_set_status,
            "get-status": self.cmd_get_status, "e": self.cmd_get_status,
            "set-property": self.cmd_set_property, "p": self.cmd_set_property,
            "get-property": self.cmd_get_property, "g": self.cmd_get_property,
            "find": self.cmd_find, "f": self.cmd_find,
            "help": self.cmd_help, "h": self.cmd_help,
        }.get(cmd)
        if cmd in ("quit", "q"):
            return -1
        if handler is None:
            self.error(f"unknown command: {cmd}")
            return 0
        handler(args)
        return 0

    # -------------------------------------------------------------- match
    def cmd_match(self, args: list[str]) -> None:
        if len(args) != 3:
            self.error("malformed command")
            return
        if args[1] not in MATCH_OPS:
            self.error(f"unknown subcmd {args[1]}")
            return
        self.run_match(args[1], args[2])

    def cmd_multi(self, args: list[str]) -> None:
        if len(args) <= 3:
            self.error("malformed command")
            return
        if args[1] not in MATCH_OPS:
            self.error(f"unknown subcmd {args[1]}")
            return
        for fn in args[2:]:
            if self.run_match(args[1], fn) != 0:
                break

    def _target_nodes(self, resources: list[RSpec], mult: int = 1) -> int:
        n = 0
        for r in resources:
            if r.type == "node":
                n += mult * r.min
            n += self._target_nodes(r.with_, mult * r.min)
        return n

    def run_match(self, op: str, fn: str) -> int:
        """Fluxion's run_match(): returns 0 on a match, -1 otherwise."""
        jobid = self.counter
        try:
            job = read_rjob(fn)
        except JobspecError as e:
            if str(e).startswith("can't open"):
                self.error(str(e))
                return 0
            self.error(f"match_allocate: Jobspec error for {jobid}: {e}")
            self._print_schedule(jobid, False, True, 0)
            return -1
        dur = SYSTEM_MAX_DURATION if job.duration == 0 else int(math.ceil(job.duration))
        try:
            matched, sat, at, emitted = self._schedule(op, job.resources, jobid, dur)
        except MatchError as e:
            self.error(f"match_allocate: {e}")
            self._print_schedule(jobid, False, True, 0)
            return -1
        if emitted:
            self.out.write(self._format(emitted, jobid, at, dur))
        if op == "satisfiability":
            self.out.write(f"{_SEP}\nINFO: {'Satisfiable' if sat else 'Unsatisfiable'} request\n{_SEP}\n")
            return 0 if sat else -1
        self._print_schedule(jobid, matched, sat, at)
        if op.startswith("without_allocating"):
            return 0 if matched else -1
        if matched:
            self.jobs[jobid] = Job(jobid, "ALLOCATED" if at == self.now else "RESERVED", at, fn)
        self.counter += 1
        return 0 if matched else -1

    def _schedule(self, op: str, resources: list[RSpec], jobid: int, dur: int):
        """Returns (matched, satisfiable, at, emitted vertices)."""
        t = self.t
        nodes_up = sum(1 for v in self.g.vertices if v.type == "node" and v.up)
        target = self._target_nodes(resources)
        sat_ops = ("allocate_with_satisfiability", "satisfiability")
        if target > nodes_up:
            if op in sat_ops:  # Fluxion's request_feasible(): ENODEV against nodes *up*
                return False, False, 0, []
            if op not in sat_ops:
                return False, True, 0, []

        def sat_probe() -> bool:
            return t.select(resources, Meta(jobid, self.now, dur, self.now, alloc=False, sat=True))

        if op == "satisfiability":
            return False, sat_probe(), 0, []
        meta = Meta(jobid, self.now, dur, self.now, alloc=True)
        book = not op.startswith("without_allocating")
        if t.select(resources, meta):
            return True, True, self.now, t.update(meta, reserved=False, book=book)
        if op == "allocate_with_satisfiability":
            return False, sat_probe(), 0, []
        if op in ("allocate_orelse_reserve", "without_allocating_future"):
            for at in t.span_ends(self.now):
                meta = Meta(jobid, at, dur, self.now, alloc=False)
                if t.select(resources, meta):
                    return True, True, at, t.update(meta, reserved=True, book=book)
            return False, sat_probe(), 0, []
        return False, True, 0, []

    def _print_schedule(self, jobid: int, matched: bool, sat: bool, at: int) -> None:
        w = self.out.write
        if matched:
            mode = "ALLOCATED" if at == 0 else "RESERVED"
            w(f"{_SEP}\nINFO: JOBID={jobid}\nINFO: RESOURCES={mode}\n"
              f"INFO: SCHEDULED AT={'Now' if at == 0 else at}\n{_SEP}\n")
        else:
            w(f"{_SEP}\nINFO: No matching resources found\n")
            if not sat:
                w("INFO: Unsatisfiable request\n")
            w(f"INFO: JOBID={jobid}\n{_SEP}\n")

    # ------------------------------------------------------------- writers
    def _format(self, emitted: list[tuple[int, Vertex, int, bool]], jobid: int, at: int, dur: int) -> str:
        if self.fmt == "simple":
            return "".join(f"      {'---' * lvl}{v.name}[{n}:{'x' if x else 's'}]\n" for lvl, v, n, x in emitted)
        if self.fmt == "pretty_simple":
            return "".join(f"      {'---' * lvl}{v.name}[{n}:{'exclusive' if x else 'shared'}]\n"
                           for lvl, v, n, x in reversed(emitted))
        if self.fmt == "jgf":
            nodes = [{"id": str(v.uniq_id), "metadata": {
                "type": v.type, "basename": v.basename, "name": v.name, "id": v.id, "uniq_id": v.uniq_id,
                "rank": v.rank, "exclusive": x, "unit": v.unit, "size": n,
                "paths": {"containment": v.path}}} for _, v, n, x in emitted]
            ids = {v.uniq_id for _, v, _, _ in emitted}
            edges = [{"source": str(v.parent.uniq_id), "target": str(v.uniq_id),
                      "metadata": {"name": {"containment": "contains"}}}
                     for _, v, _, _ in emitted if v.parent is not None and v.parent.uniq_id in ids]
            return json.dumps({"graph": {"nodes": nodes, "edges": edges}}) + "\n"
        return json.dumps(self._rv1(emitted, at, dur)) + "\n"

    def _rv1(self, emitted, at: int, dur: int) -> dict:
        from ..ids import Hostlist, IdSet

        by_rank: dict[int, dict[str, set[int]]] = {}
        hosts: dict[int, str] = {}
        for _, v, _, _ in emitted:
            node = v
            while node is not None and node.type != "node":
                node = node.parent
            if node is None:
                continue
            hosts[node.rank] = node.name
            if v.type in ("core", "gpu"):
                by_rank.setdefault(node.rank, {}).setdefault(v.type, set()).add(v.id)
        rlite = []
        for r in sorted(by_rank):
            rlite.append({"rank": str(r), "children": {k: IdSet(s).encode() for k, s in sorted(by_rank[r].items())}})
        return {"version": 1, "execution": {
            "R_lite": rlite, "nodelist": [str(Hostlist([hosts[r] for r in sorted(hosts)]))],
            "starttime": at, "expiration": at + dur}}

    # ---------------------------------------------------------- job table
    def _jobid(self, args: list[str]) -> int | None:
        try:
            return int(args[1])
        except ValueError:
            self.error(f"invalid jobid '{args[1]}'")
            return None

    def cmd_cancel(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            self.error("malformed command")
            return
        jobid = self._jobid(args)
        if jobid is None:
            return
        job = self.jobs.get(jobid)
        if job is None or job.state == "CANCELED":
            self.error(f"cancel: nonexistent job {jobid}")
            return
        self.t.cancel(jobid)
        job.state = "CANCELED"
        if len(args) == 3 and args[2] == "stats":
            # traversal visit counts are Fluxion internals; we report 0
            self.out.write(f'{_SEP}\nINFO: CANCEL PREORDER COUNT="0"\nINFO: CANCEL POSTORDER COUNT="0"\n{_SEP}\n')

    def cmd_info(self, args: list[str]) -> None:
        if len(args) != 2:
            self.error("malformed command")
            return
        jobid = self._jobid(args)
        if jobid is None:
            return
        job = self.jobs.get(jobid)
        if job is None:
            self.error(f"info: nonexistent job {jobid}")
            return
        print(f"INFO: {job.jobid}, {job.state}, {job.at}, {job.jobspec}, {job.overhead}", file=self.term)

    def cmd_stat(self, args: list[str]) -> None:
        if len(args) != 1:
            self.error("malformed command")
            return
        n = len(self.jobs)
        print(f"INFO: Num. of Jobs Matched: {n}", file=self.term)
        for what in ("Min.", "Max.", "Avg."):
            print(f"INFO: {what} Match Time: 0", file=self.term)

    def cmd_list(self, args: list[str]) -> None:
        for job in self.jobs.values():
            print(f"INFO: {job.jobid}, {job.state}, {job.at}, {job.jobspec}, {job.overhead}", file=self.term)

    # ------------------------------------------------------------ status
    def cmd_set_status(self, args: list[str]) -> None:
        if len(args) != 3:
            self.error("malformed command")
            return
        v = self.g.by_path.get(args[1])
        if v is None:
            self.out.write(f"Could not find path {args[1]} in resource graph.\n")
            return
        if args[2] not in ("up", "down"):
            self.error("unrecognized status")
            return
        for u in v.walk():
            u.up = args[2] == "up"

    def cmd_get_status(self, args: list[str]) -> None:
        if len(args) != 2:
            self.error("malformed command")
            return
        v = self.g.by_path.get(args[1])
        if v is None:
            self.out.write(f"Could not find path {args[1]} in resource graph.\n")
            return
        print(f"INFO: vertex {args[1]} status: {'up' if v.up else 'down'}", file=self.term)

    def _vertex(self, name: str) -> Vertex | None:
        v = self.g.by_path.get(name)
        if v is None:
            v = next((u for u in self.g.vertices if u.name == name), None)
        return v

    def cmd_set_property(self, args: list[str]) -> None:
        if len(args) != 3 or "=" not in args[2]:
            self.error("malformed command")
            return
        v = self._vertex(args[1])
        if v is None:
            self.out.write(f"Couldn't find {args[1]} in resource graph.\n")
            return
        k, val = args[2].split("=", 1)
        v.properties[k] = val

    def cmd_get_property(self, args: list[str]) -> None:
        if len(args) != 2:
            self.error("malformed command")
            return
        v = self._vertex(args[1])
        if v is None:
            self.out.write(f"Couldn't find {args[1]} in resource graph.\n")
            return
        for k, val in v.properties.items():
            self.out.write(f"{args[1]}'s property: {k}={val}\n")

    def cmd_find(self, args: list[str]) -> None:
        self.error("find is not supported")

    def cmd_help(self, args: list[str]) -> None:
        print("INFO: commands: match {" + "|".join(MATCH_OPS) + "} JOBSPEC, multi-match OP JOBSPEC..., "
              "cancel ID, info ID, stat, list, set-status PATH up|down, get-status PATH, "
              "set-property VERTEX K=V, get-property VERTEX, quit", file=self.term)
