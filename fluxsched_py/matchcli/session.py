"""resource-query's command language over the project's graph, matcher and planner.

A :class:`Session` owns a :class:`~fluxsched_py.resource.ResourceGraph`, a
:class:`~fluxsched_py.planner.Planner` over it, the job table and the job-id
counter, and executes one command line at a time (:meth:`Session.execute`).
Matching is :func:`fluxsched_py.match.match_result` — the project's one
matcher; this module only translates commands and prints results.

Output that resource-query writes to its ``-t`` test-output stream goes to
``out``; what it writes to the terminal (``info``, ``stat``) goes to ``term``;
errors go to ``err`` as one ``ERROR: ...`` line, never a traceback.

Time is resource-query's: it starts at 0 and never advances.  A job runs for
its jobspec's ``attributes.system.duration`` (rounded up); a duration of 0
means "the whole graph duration", which in resource-query is
``SYSTEM_MAX_DURATION`` = 3153600000 s (100 years).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from ..cliutil import plain_line
from ..errors import FluxschedError
from ..inputs import read_bytes
from ..jobspec import JobspecError, Request
from ..limits import MAX_JOBSPEC_BYTES
from ..match import MatchResult, match_result
from ..match.policy import Policy
from ..planner import Planner
from ..resource import ResourceError, ResourceGraph, ResourceSet
from .compat import read_jobspecs
from .writers import FORMATS, VertexIndex, render

__all__ = ["Session", "SYSTEM_MAX_DURATION", "MATCH_OPS", "FORMATS"]

SYSTEM_MAX_DURATION = 3153600000
MATCH_OPS = (
    "allocate",
    "allocate_with_satisfiability",
    "allocate_orelse_reserve",
    "satisfiability",
    "without_allocating",
    "without_allocating_future",
)
_SEP = "INFO: ============================="


@dataclass
class Job:
    jobid: int
    state: str  # ALLOCATED | RESERVED | CANCELED
    at: int
    jobspec: str
    resources: ResourceSet
    overhead: float = 0.0


class Session:
    """One resource-query session: graph + planner + jobs."""

    def __init__(
        self,
        graph: ResourceGraph,
        policy: Policy,
        *,
        match_format: str = "simple",
        out: TextIO | None = None,
        term: TextIO | None = None,
        err: TextIO | None = None,
        path_map: tuple[str, str] | None = None,
    ) -> None:
        if match_format not in FORMATS:
            raise ValueError(f"unknown match format '{match_format}'")
        self.g = graph
        self.policy = policy
        self.planner = Planner(graph, matcher=self._matcher)
        self.index = VertexIndex(graph.topo)
        self.fmt = match_format
        self.out = out or sys.stdout
        self.term = term or sys.stdout
        self.err = err or sys.stderr
        self.jobs: dict[int, Job] = {}
        self.counter = 1
        self.match_times: list[float] = []  # seconds per successful match, for `stat`
        self.now = 0
        self.path_map = path_map
        self._last: MatchResult | None = None
        #: rank-less items set down with ``set-status`` (ranks' state lives in the graph)
        self._down_items = ResourceSet(graph.topo)

    # --------------------------------------------------------------- driver
    def run(self, lines) -> int:
        """Execute commands until ``quit`` or end of input; returns 0."""
        for line in lines:
            if self.execute(line) < 0:
                break
        return 0

    def error(self, msg: str) -> None:
        """One ``ERROR:`` line; control characters from the input (an escape
        sequence, a newline) are shown escaped, never sent to the terminal."""
        print(f"ERROR: {plain_line(msg)}", file=self.err)

    def execute(self, line: str) -> int:
        """Run one command line; -1 means quit."""
        line = line.strip()
        if not line or line.startswith("#"):
            return 0
        if self.path_map:
            line = line.replace(*self.path_map)
        if "\0" in line:
            self.error("malformed command: NUL byte")
            return 0
        try:
            args = shlex.split(line)
        except ValueError as e:
            self.error(f"malformed command: {e}")
            return 0
        cmd = args[0]
        if cmd in ("quit", "q"):
            return -1
        handler = {
            "match": self.cmd_match,
            "m": self.cmd_match,
            "multi-match": self.cmd_multi,
            "M": self.cmd_multi,
            "cancel": self.cmd_cancel,
            "c": self.cmd_cancel,
            "partial-cancel": self.cmd_partial_cancel,
            "pc": self.cmd_partial_cancel,
            "info": self.cmd_info,
            "i": self.cmd_info,
            "stat": self.cmd_stat,
            "s": self.cmd_stat,
            "list": self.cmd_list,
            "l": self.cmd_list,
            "set-status": self.cmd_set_status,
            "t": self.cmd_set_status,
            "get-status": self.cmd_get_status,
            "e": self.cmd_get_status,
            "set-property": self.cmd_set_property,
            "p": self.cmd_set_property,
            "get-property": self.cmd_get_property,
            "g": self.cmd_get_property,
            "find": self.cmd_find,
            "f": self.cmd_find,
            "help": self.cmd_help,
            "h": self.cmd_help,
        }.get(cmd)
        if handler is None:
            self.error(f"unknown command: {cmd}")
            return 0
        try:
            handler(args)
        except FluxschedError as e:  # bad input a handler did not word itself
            self.error(f"{cmd}: {e}")
        except RecursionError:
            self.error(f"{cmd}: input nested too deeply")
        except BrokenPipeError:  # the output's reader is gone: the command's boundary ends quietly
            raise
        except Exception as e:  # the session's last resort: a bug, one line, and the session goes on
            self.error(f"{cmd}: internal error: {type(e).__name__}: {e} (please report it)")
        return 0

    # -------------------------------------------------------------- matching
    def _matcher(
        self, g: ResourceGraph, request: Request, *, policy: Policy, available: ResourceSet | None = None
    ) -> ResourceSet | None:
        """The planner's matcher: the project's, remembering the last result for printing."""
        if available is None:
            available = g.free()
        available = self._usable(available)
        res = match_result(g, request, policy=policy, available=available)
        if res is None:
            return None
        self._last = res
        return res.resources

    def _usable(self, rs: ResourceSet) -> ResourceSet:
        return rs - self._down_items if self._down_items else rs

    def _match_at(self, request: Request, t0: int, dur: int) -> tuple[ResourceSet, MatchResult] | None:
        avail = self.planner.available(t0, t0 + dur)
        rs = self._matcher(self.g, request, policy=self.policy, available=avail)
        if rs is None or self._last is None:
            return None
        return rs, self._last

    def _satisfiable(self, request: Request) -> bool:
        """Could ``request`` match if every resource that is up were free?  (resource-query's check)."""
        if self._nnodes(request) > self._nodes_up():
            return False
        return match_result(self.g, request, policy=self.policy, available=self._usable(self.g.all())) is not None

    def _nnodes(self, request: Request) -> int:
        """Nodes the request needs at least (with ``-T flexible``, slot alternatives count their least)."""
        if not self.policy.flexible:
            return request.nnodes

        def count(reqs) -> int:
            if len(reqs) > 1 and all(r.type == "slot" for r in reqs):
                return min(count((r,)) for r in reqs)
            return sum(r.count.min * (1 if r.type == "node" else count(r.with_)) for r in reqs)

        return count(request.resources)

    def _nodes_up(self) -> int:
        topo = self.g.topo
        down = self.g.down_ranks()
        gone = self._down_items.containers
        n = 0
        for v in range(topo.n):
            if topo.type[v] == "node":
                r = topo.rank[v]
                n += r not in down if r >= 0 else v not in gone
        return n

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

    def run_match(self, op: str, fn: str) -> int:
        """resource-query's run_match(): returns 0 on a match, -1 otherwise."""
        jobid = self.counter
        try:
            variants = read_jobspecs(fn, flexible=self.policy.flexible)
        except OSError as e:
            self.error(f"can't open {fn}: {e.strerror}")
            return 0
        except JobspecError as e:
            self.error(f"match_allocate: Jobspec error for {jobid}: {e}")
            self._print_schedule(jobid, False, True, 0)
            return -1
        except ValueError as e:  # a path the OS cannot take (a NUL byte in it)
            self.error(f"can't open {fn!r}: {e}")
            return 0
        request = variants[0]
        started = time.perf_counter()
        dur = SYSTEM_MAX_DURATION if not request.duration else int(math.ceil(request.duration))
        matched, sat, at, found = False, False, 0, None
        for i, variant in enumerate(variants):  # -T flexible xor_slot alternatives, in order
            m, s, t, f = self._schedule(op, variant, dur)
            sat = sat or s
            if m and (not matched or t < at):
                matched, at, found = True, t, f
                if t == self.now:
                    break
            elif i == 0 and not matched:
                found = f
        if matched:
            self.match_times.append(time.perf_counter() - started)
        if found is not None:
            self.out.write(render(self.fmt, self.g, self.index, self.policy, found[1], at, dur))
        if op == "satisfiability":
            self.out.write(f"{_SEP}\nINFO: {'Satisfiable' if sat else 'Unsatisfiable'} request\n{_SEP}\n")
            return 0 if sat else -1
        self._print_schedule(jobid, matched, sat, at)
        if op.startswith("without_allocating"):
            return 0 if matched else -1
        if matched and found is not None:
            rs = found[0]
            if at == self.now:
                self.g.allocate(jobid, rs)
                self.planner.add_running(jobid, rs, at, at + dur)
            else:
                self.planner.reserve(jobid, rs, at, at + dur)
            self.jobs[jobid] = Job(jobid, "ALLOCATED" if at == self.now else "RESERVED", at, fn, rs)
        self.counter += 1
        return 0 if matched else -1

    def _schedule(self, op: str, request: Request, dur: int):
        """Returns (matched, satisfiable, at, (resources, match result) or None)."""
        sat_ops = ("allocate_with_satisfiability", "satisfiability")
        if self._nnodes(request) > self._nodes_up():
            # resource-query's request_feasible(): more nodes than are up
            return False, op not in sat_ops, 0, None
        if op == "satisfiability":
            return False, self._satisfiable(request), 0, None
        found = self._match_at(request, self.now, dur)
        if found is not None:
            return True, True, self.now, found
        if op == "allocate_with_satisfiability":
            return False, self._satisfiable(request), 0, None
        if op in ("allocate_orelse_reserve", "without_allocating_future"):
            self._last = None
            hit = self.planner.earliest(request, self.now, dur, self.policy)
            if hit is not None:
                t, rs = hit
                res = self._last if self._last is not None and self._last.resources == rs else None
                if res is None:  # the planner's cache answered: match again for the printout
                    found = self._match_at(request, int(t), dur)
                    if found is None:  # pragma: no cover - the planner found it
                        return False, True, 0, None
                    rs, res = found
                return True, True, int(t), (rs, res)
            return False, self._satisfiable(request), 0, None
        return False, True, 0, None

    def _print_schedule(self, jobid: int, matched: bool, sat: bool, at: int) -> None:
        w = self.out.write
        if matched:
            mode = "ALLOCATED" if at == 0 else "RESERVED"
            w(
                f"{_SEP}\nINFO: JOBID={jobid}\nINFO: RESOURCES={mode}\n"
                f"INFO: SCHEDULED AT={'Now' if at == 0 else at}\n{_SEP}\n"
            )
        else:
            w(f"{_SEP}\nINFO: No matching resources found\n")
            if not sat:
                w("INFO: Unsatisfiable request\n")
            w(f"INFO: JOBID={jobid}\n{_SEP}\n")

    # ---------------------------------------------------------- job table
    def _jobid(self, args: list[str]) -> int | None:
        try:
            return int(args[1])
        except ValueError:
            self.error(f"invalid jobid '{args[1]}'")
            return None

    def _live_job(self, args: list[str], command: str) -> Job | None:
        """The job named by ``args[1]`` if it exists and is not cancelled; else report and None."""
        jobid = self._jobid(args)
        if jobid is None:
            return None
        job = self.jobs.get(jobid)
        if job is None or job.state == "CANCELED":
            self.error(f"{command}: nonexistent job {jobid}")
            return None
        return job

    def cmd_cancel(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            self.error("malformed command")
            return
        job = self._live_job(args, "cancel")
        if job is None:
            return
        self._drop(job)
        if len(args) == 3 and args[2] == "stats":
            # traversal visit counts are Fluxion internals; we report 0
            self.out.write(f'{_SEP}\nINFO: CANCEL PREORDER COUNT="0"\nINFO: CANCEL POSTORDER COUNT="0"\n{_SEP}\n')

    def _drop(self, job: Job) -> None:
        if job.jobid in self.g.jobs:
            self.g.release(job.jobid)
        self.planner.remove(job.jobid)
        job.state = "CANCELED"

    def cmd_partial_cancel(self, args: list[str]) -> None:
        """``partial-cancel ID rv1exec|jgf FILE [stats]``: release part of a job's resources."""
        if len(args) not in (4, 5) or args[2] not in ("rv1exec", "jgf"):
            self.error("malformed command")
            return
        job = self._live_job(args, "partial-cancel")
        if job is None:
            return
        jobid = job.jobid
        try:
            data = json.loads(read_bytes(args[3], MAX_JOBSPEC_BYTES))
        except OSError as e:
            self.error(f"can't open {args[3]}: {e.strerror}")
            return
        except json.JSONDecodeError as e:
            self.error(f"partial-cancel: {args[3]}: invalid JSON: {e.msg}")
            return
        except (ValueError, RecursionError) as e:  # not UTF-8, a NUL in the path, nested too deep
            self.error(f"partial-cancel: {args[3]!r}: cannot read: {type(e).__name__}")
            return
        if not isinstance(data, dict):
            self.error(f"partial-cancel: {args[3]}: expected a JSON object ({args[2]}), got {type(data).__name__}")
            return
        try:
            part = self._release_set(job, data, args[2], args[3])
        except ResourceError as e:
            self.error(f"partial-cancel: {e}")
            return
        if len(args) == 5 and args[4] == "stats":
            self.out.write(
                f'{_SEP}\nINFO: PARTIAL CANCEL PREORDER COUNT="0"\nINFO: PARTIAL CANCEL POSTORDER COUNT="0"\n{_SEP}\n'
            )
        if not part:
            return
        if job.state == "ALLOCATED":
            freed = self.g.release(jobid, part)
        else:
            freed = part
        left = job.resources - freed
        span = self.planner.remove(jobid)
        if not left:
            job.state = "CANCELED"
            return
        job.resources = left
        if span is not None:
            if span.running:
                self.planner.add_running(jobid, left, span.start, span.end)
            else:
                self.planner.reserve(jobid, left, span.start, span.end)

    def _release_set(self, job: Job, data: dict, fmt: str, source: str) -> ResourceSet:
        """The part of ``job`` named by R or JGF: everything it holds on the ranks named."""
        from ..ids import IdSet

        def member(obj: Any, key: str, kind: type, where: str) -> Any:
            if not isinstance(obj, dict):
                raise ResourceError(f"{where} must be an object", source=source)
            value = obj.get(key)
            if value is None:
                return kind()
            if not isinstance(value, kind):
                what = {dict: "an object", list: "an array", str: "a string"}[kind]
                raise ResourceError(f"{where}.{key} must be {what}", source=source)
            return value

        ranks: set[int] = set()
        if fmt == "rv1exec":
            execution = member(data, "execution", dict, "R")
            for i, ent in enumerate(member(execution, "R_lite", list, "execution")):
                try:
                    ranks.update(IdSet.parse(str(member(ent, "rank", str, f"R_lite[{i}]"))))
                except ValueError as e:
                    raise ResourceError(f"execution.R_lite[{i}]: {e}", source=source) from None
        else:
            for n in member(member(data, "graph", dict, "JGF"), "nodes", list, "graph"):
                md = member(n, "metadata", dict, "node")
                if md.get("type") == "node" and isinstance(md.get("rank"), int):
                    ranks.add(md["rank"])
        return job.resources.restrict(IdSet(ranks))

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
        times = self.match_times
        print(f"INFO: Num. of Jobs Matched: {len(times)}", file=self.term)
        if times:
            for what, value in (("Min.", min(times)), ("Max.", max(times)), ("Avg.", sum(times) / len(times))):
                print(f"INFO: {what} Match Time: {value:.6f}", file=self.term)

    def cmd_list(self, args: list[str]) -> None:
        for job in self.jobs.values():
            print(f"INFO: {job.jobid}, {job.state}, {job.at}, {job.jobspec}, {job.overhead}", file=self.term)

    # ------------------------------------------------------------ status
    def _status_items(self, args: list[str], nargs: int) -> Any:
        """The items a ``set-status``/``get-status`` path names, or None (the error already printed)."""
        if len(args) != nargs:
            self.error("malformed command")
            return None
        items = self.index.lookup(args[1])
        if items is None:
            self.out.write(f"Could not find path {args[1]} in resource graph.\n")
        return items

    def cmd_set_status(self, args: list[str]) -> None:
        items = self._status_items(args, 3)
        if items is None:
            return
        if args[2] not in ("up", "down"):
            self.error("unrecognized status")
            return
        up = args[2] == "up"
        ranks = items.ranks
        if ranks:
            (self.g.set_up if up else self.g.set_down)(ranks)
        else:
            self._down_items = self._down_items - items if up else self._down_items | items

    def cmd_get_status(self, args: list[str]) -> None:
        items = self._status_items(args, 2)
        if items is None:
            return
        ranks = items.ranks
        if ranks:
            down = ranks.issubset(self.g.down_ranks())
        else:
            down = items.issubset(self._down_items)
        print(f"INFO: vertex {args[1]} status: {'down' if down else 'up'}", file=self.term)

    def cmd_set_property(self, args: list[str]) -> None:
        if len(args) != 3 or "=" not in args[2]:
            self.error("malformed command")
            return
        if self.index.lookup(args[1]) is None:
            self.out.write(f"Couldn't find {args[1]} in resource graph.\n")
            return
        k, val = args[2].split("=", 1)
        self.index.props.setdefault(args[1], {})[k] = val

    def cmd_get_property(self, args: list[str]) -> None:
        if len(args) != 2:
            self.error("malformed command")
            return
        if self.index.lookup(args[1]) is None:
            self.out.write(f"Couldn't find {args[1]} in resource graph.\n")
            return
        v = self.index.vertex(args[1])
        props = self.index.properties(args[1], v)
        if not props:
            self.out.write(f"No properties were found for {args[1]}.\n")
        for k, val in props.items():
            self.out.write(f"{k}={val}\n")

    def cmd_find(self, args: list[str]) -> None:
        """``find EXPR``: print the resources an expression selects, then the expression.

        Supported terms (joined by ``and``): ``sched-now=allocated|free``,
        ``sched-future=reserved``, ``status=up|down``, ``jobid-alloc=N``,
        ``jobid-span=N``, ``jobid-tag=N``; ``agfilter=...`` is accepted and
        selects nothing more.
        """
        if len(args) < 2:
            self.error("malformed command")
            return
        expr = " ".join(args[1:])
        rs: ResourceSet | None = None
        for term in args[1:]:
            if term in ("and", "or"):
                continue
            key, _, val = term.partition("=")
            sel = self._find_term(key, val)
            if sel is None:
                continue
            rs = sel if rs is None else rs & sel
        if rs:
            from .writers import render_set

            self.out.write(render_set(self.fmt, self.g, self.index, rs))
        self.out.write(f'{_SEP}\nINFO: EXPRESSION="{expr}"\n{_SEP}\n')

    def _find_term(self, key: str, val: str) -> ResourceSet | None:
        g = self.g
        if key == "sched-now":
            return g.allocated() if val == "allocated" else g.free() if val == "free" else None
        if key == "sched-future" and val == "reserved":
            out = g.all() - g.all()
            for s in self.planner.reserved():
                out = out | s.resources
            return out
        if key == "status":
            return g.all() - g.down() if val == "up" else g.down() if val == "down" else None
        if key in ("jobid-alloc", "jobid-span", "jobid-tag"):
            try:
                job = self.jobs.get(int(val))
            except ValueError:
                return None
            if job is None or job.state == "CANCELED":
                return g.all() - g.all()
            return job.resources
        return None

    def cmd_help(self, args: list[str]) -> None:
        print(
            "INFO: commands: match {" + "|".join(MATCH_OPS) + "} JOBSPEC, multi-match OP JOBSPEC..., "
            "cancel ID, partial-cancel ID rv1exec|jgf FILE, info ID, stat, list, set-status PATH up|down, "
            "get-status PATH, set-property VERTEX K=V, get-property VERTEX, find EXPR, quit",
            file=self.term,
        )
