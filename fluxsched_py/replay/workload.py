"""Workload readers: SWF traces, Batsim workload JSON, YAML jobspec lists.

Every reader returns a :class:`Workload`: jobs with a submit time, a request
(the same :class:`~fluxsched_py.jobspec.Request` a Flux jobspec becomes), a
walltime and a run time.  The replay kills a job at its walltime, so a job
whose run time exceeds its walltime runs for exactly the walltime.

Batsim workload JSON (``rfcs/batsim-workload.md``)
    ``{nb_res, jobs: [{id, subtime, walltime, res, profile}], profiles}``.
    A job becomes ``res`` nodes, exclusive; its run time is its profile's
    ``delay`` (``delay`` profiles only; other profile types need a platform
    model and are refused with a clear message).

Standard Workload Format (``rfcs/swf.md``)
    18 whitespace-separated fields per line, ``;`` comments; the header's
    ``MaxNodes``/``MaxProcs`` give ``nb_res``.  A job becomes ``requested
    processors`` (field 8, else allocated processors, field 5) nodes,
    exclusive; walltime is the requested time (field 9, else the run time);
    run time is field 4.  Jobs with no run time or no processors are skipped
    (and counted).

YAML jobspec list
    ``nb_res`` (optional) and ``jobs``, a list of ``{id?, submit, runtime,
    jobspec}`` where ``jobspec`` is an RFC 14 jobspec (a mapping, or a path
    relative to the YAML file).  Walltime is the jobspec's duration.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..jobspec.request import Request, node_request

__all__ = ["Workload", "WorkloadJob", "WorkloadError", "load_workload", "node_request"]


class WorkloadError(ValueError):
    """A workload file that cannot be replayed; the message says where and why."""


@dataclass(slots=True)
class WorkloadJob:
    """One job of a trace.  ``id`` orders ties; ``name`` is the trace's own id."""

    id: int
    name: str
    submit: float
    request: Request
    walltime: float  # math.inf when unlimited
    runtime: float
    nodes: int = 0
    profile: str = ""


@dataclass(slots=True)
class Workload:
    jobs: list[WorkloadJob]
    nb_res: int | None = None
    name: str = "workload"
    skipped: int = 0
    notes: list[str] = field(default_factory=list)


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """Read a workload, choosing the reader from the file's extension/content."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise WorkloadError(f"{p}: cannot read: {exc.strerror or exc}") from None
    suffix = p.suffix.lower()
    if suffix == ".swf":
        return read_swf(text, name=p.stem)
    if suffix == ".json":
        return read_batsim(text, name=p.stem, source=str(p))
    if suffix in (".yaml", ".yml"):
        return read_jobspec_list(text, name=p.stem, base=p.parent, source=str(p))
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return read_batsim(text, name=p.stem, source=str(p))
    if stripped.startswith(";") or (stripped[:1].isdigit()):
        return read_swf(text, name=p.stem)
    return read_jobspec_list(text, name=p.stem, base=p.parent, source=str(p))


# -- Batsim ------------------------------------------------------------------


def _job_number(raw: Any, index: int) -> int:
    """Batsim ids are ints or ``"workload!N"`` strings; keep N when it is a number."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    s = str(raw).rsplit("!", 1)[-1]
    return int(s) if s.isdigit() else index


def read_batsim(text: str | dict, name: str = "workload", source: str = "<batsim>") -> Workload:
    """A Batsim workload (JSON text or the parsed object)."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{source}: a Batsim workload needs a 'jobs' list")
    profiles = data.get("profiles") or {}
    jobs: list[WorkloadJob] = []
    seen: set[int] = set()
    for i, j in enumerate(data["jobs"]):
        where = f"{source}: jobs[{i}]"
        try:
            raw_id, subtime, res = j["id"], float(j["subtime"]), int(j["res"])
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkloadError(f"{where}: needs id, subtime and res ({exc})") from None
        wall = j.get("walltime")
        walltime = float(wall) if wall is not None and float(wall) > 0 else math.inf
        prof_name = j.get("profile")
        prof = profiles.get(prof_name)
        if prof is None:
            raise WorkloadError(f"{where}: profile {prof_name!r} is not defined")
        if prof.get("type") == "delay" and "delay" in prof:
            runtime = float(prof["delay"])
        elif "runtime" in prof:
            runtime = float(prof["runtime"])
        else:
            raise WorkloadError(
                f"{where}: profile {prof_name!r} has type {prof.get('type')!r}; the replay needs 'delay' "
                "profiles (other types need Batsim's platform model)"
            )
        if res <= 0:
            raise WorkloadError(f"{where}: res must be positive, got {res}")
        number = _job_number(raw_id, i)
        if number in seen:
            number = max(seen) + 1
        seen.add(number)
        jobs.append(
            WorkloadJob(number, str(raw_id), subtime, node_request(res, walltime), walltime, runtime, res, prof_name)
        )
    nb = data.get("nb_res")
    return Workload(jobs, int(nb) if nb else None, name)


# -- SWF -----------------------------------------------------------------------


def read_swf(text: str, name: str = "workload") -> Workload:
    """A Standard Workload Format trace (Feitelson's Parallel Workloads Archive)."""
    jobs: list[WorkloadJob] = []
    nb_res: int | None = None
    max_procs: int | None = None
    skipped = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            key, _, value = s[1:].partition(":")
            key = key.strip().lower()
            try:
                if key == "maxnodes":
                    nb_res = int(value.split()[0])
                elif key == "maxprocs":
                    max_procs = int(value.split()[0])
            except (ValueError, IndexError):
                pass
            continue
        f = s.split()
        if len(f) < 9:
            raise WorkloadError(f"{name}.swf:{lineno}: expected 18 fields, got {len(f)}")
        try:
            number = int(f[0])
            submit = float(f[1])
            runtime = float(f[3])
            alloc = int(float(f[4]))
            req_procs = int(float(f[7]))
            req_time = float(f[8])
        except ValueError:
            raise WorkloadError(f"{name}.swf:{lineno}: fields must be numbers: {s[:60]!r}") from None
        procs = req_procs if req_procs > 0 else alloc
        if runtime < 0 or procs <= 0:
            skipped += 1
            continue
        walltime = req_time if req_time > 0 else (runtime if runtime > 0 else math.inf)
        jobs.append(
            WorkloadJob(number, str(number), submit, node_request(procs, walltime), walltime, runtime, procs, "")
        )
    jobs.sort(key=lambda j: (j.submit, j.id))
    w = Workload(jobs, nb_res or max_procs, name, skipped)
    if skipped:
        w.notes.append(f"skipped {skipped} jobs with no run time or no processors")
    return w


# -- YAML jobspec list ----------------------------------------------------------


def read_jobspec_list(text: str, name: str = "workload", base: Path | None = None, source: str = "<yaml>") -> Workload:
    """``{nb_res?, jobs: [{id?, submit, runtime, jobspec}]}`` (or just the list)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{source}: not YAML: {exc}") from None
    if isinstance(data, list):
        data = {"jobs": data}
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{source}: expected a 'jobs' list of {{submit, runtime, jobspec}}")
    from .. import jobspec as js

    parse = getattr(js, "parse_jobspec", None)
    load = getattr(js, "load_jobspec", None)
    if parse is None:
        raise WorkloadError(f"{source}: this build has no jobspec parser (fluxsched_py.jobspec.parse_jobspec)")
    jobs = []
    for i, entry in enumerate(data["jobs"]):
        where = f"{source}: jobs[{i}]"
        if not isinstance(entry, dict) or "jobspec" not in entry:
            raise WorkloadError(f"{where}: needs 'jobspec', 'submit' and 'runtime'")
        spec = entry["jobspec"]
        try:
            if isinstance(spec, str) and load is not None:
                request = load((base or Path(".")) / spec)
            else:
                request = parse(spec)
        except Exception as exc:
            raise WorkloadError(f"{where}: invalid jobspec: {exc}") from None
        try:
            submit = float(entry.get("submit", 0.0))
            runtime = float(entry["runtime"])
        except (KeyError, TypeError, ValueError):
            raise WorkloadError(f"{where}: 'submit' and 'runtime' must be numbers") from None
        walltime = float(request.duration) if request.duration and request.duration > 0 else math.inf
        number = int(entry.get("id", i))
        jobs.append(WorkloadJob(number, str(number), submit, request, walltime, runtime, request.nnodes, ""))
    jobs.sort(key=lambda j: (j.submit, j.id))
    nb = data.get("nb_res")
    return Workload(jobs, int(nb) if nb else None, name)
