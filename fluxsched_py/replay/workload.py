"""Workload readers: SWF traces, Batsim workload JSON, YAML jobspec lists.

Every reader returns a :class:`Workload`: jobs with a submit time, a request
(the same :class:`~fluxsched_py.jobspec.Request` a Flux jobspec becomes), a
walltime and a run time.  The replay kills a job at its walltime, so a job
whose run time exceeds its walltime runs for exactly the walltime.

Batsim workload JSON (``docs/rfcs/batsim-workload.md``)
    ``{nb_res, jobs: [{id, subtime, walltime, res, profile}], profiles}``.
    A job becomes ``res`` nodes, exclusive; its run time is its profile's
    ``delay`` (``delay`` profiles only; other profile types need a platform
    model and are refused with a clear message).

Standard Workload Format (``docs/rfcs/swf.md``)
    18 whitespace-separated fields per line, ``;`` comments, read as a
    stream (gzip, bzip2 and xz files are decompressed on the fly); the
    header gives ``nb_res``: ``ceil(MaxProcs / procs_per_node)`` when
    ``procs_per_node`` is given, 1 included (or there is no ``MaxNodes``),
    else ``MaxNodes``.  A job becomes ``ceil(processors / procs_per_node)`` nodes,
    exclusive, where processors are the requested ones (field 8, else the
    allocated ones, field 5); walltime is the requested time (field 9, else
    the walltime model's choice); run time is field 4; user is field 12 and
    queue field 15.  Jobs with no run time or no processors are skipped (and
    counted).

Every number is checked as it is read: finite, not negative, integral where
it counts something, within :mod:`fluxsched_py.inputs`' limits; ids are
unique.  An SWF job with no requested time gets one from the *walltime model*
(:func:`parse_walltime_model`): ``runtime`` (its own run time, the default),
``default:SECONDS`` or ``none`` (unlimited).

YAML jobspec list
    ``nb_res`` (optional) and ``jobs``, a list of ``{id?, submit, runtime,
    jobspec}`` where ``jobspec`` is an RFC 14 jobspec (a mapping, or a path
    relative to the YAML file).  Walltime is the jobspec's duration.
"""

from __future__ import annotations

import dataclasses
import io
import json
import lzma
import math
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..batsim.entry import EntryError, read_entry
from ..errors import FluxschedError
from ..ids import user_id
from ..inputs import bounded_lines, open_stream
from ..jobspec.request import Request, node_request
from ..limits import (
    MAX_INPUT_BYTES,
    MAX_JOBS,
    MAX_LINE_CHARS,
    MAX_NODES,
    MAX_SECONDS,
    MAX_STREAM_JOBS,
    MAX_YAML_BYTES,
    QUIET_BYTES,
    QUIET_LINES,
    check_count,
    check_seconds,
)

__all__ = [
    "Workload",
    "WorkloadJob",
    "WorkloadError",
    "WALLTIME_MODELS",
    "load_workload",
    "mark_besteffort",
    "node_request",
    "parse_walltime_model",
    "user_id",
    "read_batsim",
    "read_swf",
    "read_jobspec_list",
]


class WorkloadError(FluxschedError, ValueError):
    """A workload file that cannot be replayed; the message says where and why."""


@dataclass(slots=True)
class WorkloadJob:
    """One job of a trace.  ``id`` orders ties; ``name`` is the trace's own id."""

    id: int
    #: The trace's own id when it is not ``str(id)`` (a Batsim job's, a
    #: copy's); "" for an archive trace's job, whose number is its id, so
    #: that hundreds of thousands of jobs keep no string each (:attr:`name`).
    label: str
    submit: float
    request: Request
    walltime: float  # math.inf when unlimited
    runtime: float
    nodes: int = 0
    profile: str = ""
    user: int = -1  # SWF field 12 (-1: unknown)
    queue: int = -1  # SWF field 15 (-1: unknown)
    #: CiGri campaign name and type (``test`` or ``default``), "" when none.
    campaign: str = ""
    campaign_type: str = ""
    #: It loads its nodes' processors (an archive trace's job); a Batsim
    #: ``delay`` profile only waits, and its nodes draw idle watts.
    computes: bool = True

    @property
    def name(self) -> str:
        return self.label or str(self.id)

    @property
    def preemptible_after(self) -> float | None:
        """Seconds after its start from which it may be preempted; None: regular."""
        return self.request.preemptible_after


@dataclass(slots=True)
class Workload:
    jobs: list[WorkloadJob]
    nb_res: int | None = None
    name: str = "workload"
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    #: how many jobs had no requested time, and the walltime model that gave them one
    walltime_filled: int = 0
    walltime_model: str = "runtime"
    #: The epoch seconds of the trace's time 0 (an SWF header's
    #: ``UnixStartTime``), None when the format has no calendar: what an
    #: absolute date in ``--reservations FILE`` is placed by.
    start_time: float | None = None
    #: The zone the trace was recorded in (the SWF header's ``TimeZoneString``), None when not given.
    timezone: str | None = None


# -- numbers, checked as read ---------------------------------------------------

#: The walltime models (``--walltime``), for jobs that request no time.
WALLTIME_MODELS = ("runtime", "default:SECONDS", "none")


def parse_walltime_model(text: str) -> tuple[str, float | None]:
    """``runtime`` | ``default:SECONDS`` | ``none`` as ``(kind, seconds)``; :class:`ValueError` otherwise."""
    if text in ("runtime", "none"):
        return text, None
    kind, _, value = text.partition(":")
    if kind == "default":
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS:
            return kind, seconds
        raise ValueError(f"default:SECONDS needs a positive number of seconds, got {value!r}")
    raise ValueError(f"unknown walltime model {text!r} (choose runtime, default:SECONDS or none)")


def _fill_walltime(model: tuple[str, float | None], runtime: float) -> float:
    kind, seconds = model
    if kind == "runtime":
        return runtime if runtime > 0 else math.inf
    if kind == "default":
        return float(seconds)  # type: ignore[arg-type]
    return math.inf


def _number(value: Any, where: str, what: str) -> float:
    """A finite number, given as a JSON/YAML number (or a numeric string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise WorkloadError(f"{where}: {what} must be a number, got {type(value).__name__}")
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise WorkloadError(f"{where}: {what} must be a number, got {str(value)[:40]!r}") from None
    if not math.isfinite(x):
        raise WorkloadError(f"{where}: {what} must be finite, got {value}")
    return x


def _time(value: Any, where: str, what: str) -> float:
    """A time in seconds: finite, 0 <= t <= MAX_SECONDS."""
    x = _number(value, where, what)  # its WorkloadError names the place already
    try:
        return check_seconds(x, what)
    except ValueError as e:
        raise WorkloadError(f"{where}: {e}") from None


def _count(value: Any, where: str, what: str, limit: int = MAX_NODES) -> int:
    """A count: an integer, 1 <= n <= limit (checked before anything is built from it)."""
    x = _number(value, where, what)
    if x != int(x):
        raise WorkloadError(f"{where}: {what} must be an integer, got {value}")
    try:
        return check_count(int(x), what, limit)
    except ValueError as e:
        raise WorkloadError(f"{where}: {e}") from None


def _optional_nb_res(value: Any, source: str) -> int | None:
    if value is None or value == 0:
        return None
    return _count(value, source, "nb_res")


# -- files ---------------------------------------------------------------------

_COMPRESSED = (".gz", ".bz2", ".xz")


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def load_workload(
    path: str | os.PathLike[str],
    *,
    walltime: str | tuple[str, float | None] = "runtime",
    procs_per_node: int | None = None,
) -> Workload:
    """Read a workload, choosing the reader from the file's name, else its first bytes.

    ``path`` may be ``-`` (stdin) and may be gzip, bzip2 or xz compressed.
    ``walltime`` is the model for SWF jobs with no requested time;
    ``procs_per_node`` maps SWF processors to nodes (None: one each, and
    the machine is ``MaxNodes``; see :func:`read_swf`).
    """
    model = parse_walltime_model(walltime) if isinstance(walltime, str) else walltime
    source = os.fspath(path)
    p = Path(source)
    base = p.name
    for ext in _COMPRESSED:
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    stem, _, suffix = base.rpartition(".")
    name, suffix = (stem, "." + suffix.lower()) if stem else (base, "")
    if source == "-":
        name = "stdin"
    try:
        stream = open_stream(source)
    except OSError as exc:
        raise WorkloadError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        with stream:
            if suffix not in (".swf", ".json", ".yaml", ".yml"):
                head = stream.peek(256)[:256].lstrip()
                suffix = ".json" if head[:1] == b"{" else ".swf" if head[:1] == b";" or head[:1].isdigit() else ".yaml"
            if suffix == ".swf":
                if source != "-":
                    _refuse_too_many_lines(source)
                lines = io.TextIOWrapper(stream, encoding="utf-8", newline=None)
                return read_swf(lines, name=name, source=source, walltime=model, procs_per_node=procs_per_node)
            # YAML costs about 30 times JSON to read: its cap is smaller.
            limit = MAX_INPUT_BYTES if suffix == ".json" else MAX_YAML_BYTES
            data = stream.read(limit + 1)
            if len(data) > limit:
                raise WorkloadError(f"{source}: larger than {limit} bytes (the limit for this format)")
            text = _decode(data, source)
    except OSError as exc:
        raise WorkloadError(f"{source}: cannot read: {exc.strerror or exc}") from None
    except (EOFError, lzma.LZMAError, zlib.error) as exc:
        raise WorkloadError(f"{source}: cannot read: corrupt compressed data ({exc})") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start} of a block)") from None
    if suffix == ".json":
        return read_batsim(text, name=name, source=source)
    return read_jobspec_list(text, name=name, base=p.parent, source=source)


#: A job line of an SWF trace starts with its job number (after blanks).
_SWF_JOB_LINE = re.compile(rb"^[ \t]*[0-9]", re.M)


def _refuse_too_many_lines(source: str) -> None:
    """Count an SWF file's job lines before it is parsed (a C-speed pass over
    its bytes, decompressed, 1 MiB at a time), and refuse it at once when it
    has more than :data:`MAX_STREAM_JOBS`: parsing the million jobs the limit
    allows before finding out takes seconds (10 million lines: 20 s)."""
    jobs = quiet = 0  # job lines, and bytes since the last chunk that had one
    with open_stream(source) as stream:
        while chunk := stream.read(1 << 20):
            found = len(_SWF_JOB_LINE.findall(chunk))
            jobs += found
            if jobs > MAX_STREAM_JOBS:
                raise WorkloadError(f"{source}: more than {MAX_STREAM_JOBS} job lines (the limit of an SWF trace)")
            quiet = 0 if found else quiet + len(chunk)
            if quiet > QUIET_BYTES:
                return  # no job for too long: the parser says so, at the line where it sees it


# -- Batsim ------------------------------------------------------------------


def _job_number(raw: Any, index: int) -> int:
    """Batsim ids are ints or ``"workload!N"`` strings; keep N when it is a number."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    s = str(raw).rsplit("!", 1)[-1]
    return int(s) if s.isdigit() and len(s) < 19 else index


def read_batsim(text: str | dict, name: str = "workload", source: str = "<batsim>") -> Workload:
    """A Batsim workload (JSON text or the parsed object).

    A job with no walltime (absent or -1) has none, as in Batsim: it is never
    killed and the scheduler plans it as unlimited.
    """
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{source}: not JSON: {exc}") from None
    except RecursionError:
        raise WorkloadError(f"{source}: not a Batsim workload: JSON nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{source}: a Batsim workload needs a 'jobs' list")
    if len(data["jobs"]) > MAX_JOBS:
        raise WorkloadError(f"{source}: {len(data['jobs'])} jobs is more than the limit of {MAX_JOBS}")
    nb_res = _optional_nb_res(data.get("nb_res"), f"{source}: nb_res")
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise WorkloadError(f"{source}: profiles must be an object, got {type(profiles).__name__}")
    jobs: list[WorkloadJob] = []
    seen: set[int] = set()
    top = -1  # the largest job number so far
    names: set[str] = set()
    for i, j in enumerate(data["jobs"]):
        where = f"{source}: jobs[{i}]"
        if not isinstance(j, dict):
            raise WorkloadError(f"{where}: a job must be an object, got {type(j).__name__}")
        missing = [k for k in ("id", "subtime", "res") if k not in j]
        if missing:
            raise WorkloadError(f"{where}: needs id, subtime and res (missing {', '.join(missing)})")
        raw_id = j["id"]
        if not isinstance(raw_id, (int, str)) or isinstance(raw_id, bool):
            raise WorkloadError(f"{where}: id must be a string or an integer, got {type(raw_id).__name__}")
        if str(raw_id) in names:
            raise WorkloadError(f"{where}: duplicate job id {raw_id!r}")
        names.add(str(raw_id))
        subtime = _time(j["subtime"], where, "subtime")
        res = _count(j["res"], where, "res")
        prof_name = j.get("profile")
        if not isinstance(prof_name, str):
            raise WorkloadError(f"{where}: profile must be a name, got {type(prof_name).__name__}")
        prof = profiles.get(prof_name)
        if not isinstance(prof, dict):
            raise WorkloadError(f"{where}: profile {prof_name!r} is not defined")
        if prof.get("type") == "delay" and "delay" in prof:
            runtime = _time(prof["delay"], f"{source}: profiles[{prof_name!r}]", "delay")
        elif "runtime" in prof:
            runtime = _time(prof["runtime"], f"{source}: profiles[{prof_name!r}]", "runtime")
        else:
            raise WorkloadError(
                f"{where}: profile {prof_name!r} has type {str(prof.get('type'))[:40]!r}; the replay needs 'delay' "
                "profiles (other types need Batsim's platform model)"
            )
        wall = j.get("walltime")
        wall_s = None if wall is None else _number(wall, where, "walltime")
        if wall_s is None or wall_s <= 0:  # Batsim writes -1 for "no walltime"
            walltime_s = math.inf
        else:
            walltime_s = _time(wall_s, where, "walltime")
        request = node_request(res, walltime_s)
        try:
            fields = read_entry(str(raw_id), j)
        except EntryError as exc:
            raise WorkloadError(f"{where}: {exc}") from None
        # What the Batsim drivers submit for it (the campaign is kept for the metrics only).
        sub = fields.submission(campaigns=False, checkpoints=True)
        named = ("preemptible_after", "reservation", "queue", "constraints", "attributes")
        given = {k: sub[k] for k in named if sub[k] is not None}
        if given:  # else the interned request, shared by every job of its shape
            request = dataclasses.replace(request, **given)
        number = _job_number(raw_id, i)
        if number in seen:
            number = top + 1  # max(seen) here made many colliding ids quadratic
        seen.add(number)
        top = max(top, number)
        user = -1 if fields.user is None else fields.user
        job = WorkloadJob(
            number,
            str(raw_id),
            subtime,
            request,
            walltime_s,
            runtime,
            res,
            prof_name,
            user,
            -1,
            fields.campaign,
            fields.campaign_type,
        )
        if prof.get("type") == "delay":
            job.computes = False
            job.request = dataclasses.replace(job.request, computes=False)  # the power cap plans it so
        jobs.append(job)
    return Workload(jobs, nb_res, name)


def mark_besteffort(workload: Workload, queue: int, preemptible_after: float = 0.0) -> int:
    """Make the jobs of SWF queue ``queue`` (field 15) best-effort; returns how many."""
    n = 0
    for j in workload.jobs:
        if j.queue == queue:
            j.request = dataclasses.replace(j.request, preemptible_after=preemptible_after)
            n += 1
    return n


def mark_checkpointing(workload: Workload, queue: int) -> int:
    """Make the jobs of SWF queue ``queue`` checkpoint on their preemption
    notice (``attributes.user.checkpoint = "signal"``); returns how many."""
    n = 0
    for j in workload.jobs:
        if j.queue == queue:
            attrs = dict(j.request.attributes or {})
            attrs["user"] = {**(attrs.get("user") or {}), "checkpoint": "signal"}
            j.request = dataclasses.replace(j.request, attributes=attrs)
            n += 1
    return n


def _model_name(model: tuple[str, float | None]) -> str:
    kind, seconds = model
    return f"default:{seconds:g}" if kind == "default" else kind


# -- SWF -----------------------------------------------------------------------


def _lines(stream: Iterable[str], source: str) -> Iterable[tuple[int, str]]:
    if not hasattr(stream, "readline"):
        yield from enumerate(stream, 1)
        return
    try:
        yield from bounded_lines(stream, MAX_LINE_CHARS)  # type: ignore[arg-type]
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{source}: not UTF-8 text ({exc.reason}): not SWF") from None
    except ValueError as exc:
        raise WorkloadError(f"{source}: {exc}: not SWF") from None


class _Floats(dict):
    """``float(text)``, remembered: most fields of a trace's lines are a few
    values (``-1``, counts, requested times), and a lookup costs less than
    parsing (issue 15: a third of the time reading a 100,000-job trace)."""

    KEEP = 65536  # entries before the memo starts afresh (unique times fill it)

    def __missing__(self, text: str) -> float:
        x = self[text] = float(text)
        return x


def _swf_fields(values: list[float], procs_per_node: int) -> tuple[float, float, int, float] | None:
    """(submit, run time, nodes, requested time) of a well-formed SWF job
    line's numbers, checked in a few comparisons; None when anything is off
    (then :func:`_swf_fields_checked` says what, or skips the job)."""
    submit, runtime, alloc, req_procs, req_time = values[0], values[2], values[3], values[6], values[7]
    # a sum of floats is finite only when each of them is (inf and NaN carry)
    if not (math.isfinite(submit + runtime + alloc + req_procs + req_time) and 0 <= submit <= MAX_SECONDS):
        return None
    procs = req_procs if req_procs > 0 else alloc
    if not 0 <= runtime <= MAX_SECONDS or req_time > MAX_SECONDS or not 1 <= procs <= MAX_NODES * procs_per_node:
        return None
    procs_i = int(procs)
    if procs_i != procs:
        return None
    return submit, runtime, -(-procs_i // procs_per_node), req_time


def _swf_fields_checked(values: list[float], procs_per_node: int, where: str) -> tuple[float, float, int, float] | None:
    """What :func:`_swf_fields` returns, one check at a time: raises
    WorkloadError naming the first bad field, None for a job to skip."""
    submit = _time(values[0], where, "submit time (field 2)")
    runtime = _number(values[2], where, "run time (field 4)")
    alloc = _number(values[3], where, "allocated processors (field 5)")
    req_procs = _number(values[6], where, "requested processors (field 8)")
    req_time = _number(values[7], where, "requested time (field 9)")
    procs = req_procs if req_procs > 0 else alloc
    if runtime < 0 or not procs > 0:  # -1: unknown; NaN fails the test too
        return None
    runtime = _time(runtime, where, "run time (field 4)")
    procs_i = _count(procs, where, "processors (field 8 or 5)", MAX_NODES * procs_per_node)
    if req_time > 0:
        req_time = _time(req_time, where, "requested time (field 9)")
    return submit, runtime, -(-procs_i // procs_per_node), req_time


def _quiet(source: str, lineno: int, lines: int, nbytes: int, last_job: int) -> None:
    """Refuse a stream that yields no job for too long: a bomb of newlines or endless comments."""
    where = "the first" if last_job == 0 else f"the {lines} lines after line {last_job}, over"
    what = f"{QUIET_LINES} lines" if lines > QUIET_LINES else f"{QUIET_BYTES >> 20} MiB"
    raise WorkloadError(f"{source}:{lineno}: no job in {where} {what}: not an SWF trace")


def read_swf(
    text: str | Iterable[str],
    name: str = "workload",
    source: str | None = None,
    *,
    walltime: tuple[str, float | None] = ("runtime", None),
    procs_per_node: int | None = None,
) -> Workload:
    """A Standard Workload Format trace (Feitelson's Parallel Workloads Archive), text or lines.

    A job of P processors is ``ceil(P / procs_per_node)`` nodes (P nodes
    when ``procs_per_node`` is None).  The machine is ``ceil(MaxProcs /
    procs_per_node)`` nodes when ``procs_per_node`` is given, 1 included;
    when it is None, ``MaxNodes`` (``MaxProcs`` if the header has no
    ``MaxNodes``), with a note when ``MaxProcs`` is larger.
    """
    given = procs_per_node
    procs_per_node = procs_per_node or 1
    source = source or f"{name}.swf"
    lines: Iterable[tuple[int, str]]
    lines = enumerate(text.splitlines(), 1) if isinstance(text, str) else _lines(text, source)
    jobs: list[WorkloadJob] = []
    seen: set[int] = set()
    header: dict[str, int] = {}
    zone: str | None = None
    skipped = filled = 0
    memo = _Floats()
    number_of = memo.__getitem__
    #: One int object per distinct user and node count, shared by their
    #: jobs (an int above 256 is a new object each time it is made).
    ints: dict[int, int] = {}
    shared = ints.setdefault
    quiet = quiet_bytes = 0  # lines and bytes since the last job line
    for lineno, line in lines:
        s = line.strip()
        if not s or s.startswith(";"):
            quiet += 1
            quiet_bytes += len(line)
            if quiet > QUIET_LINES or quiet_bytes > QUIET_BYTES:
                _quiet(source, lineno, quiet, quiet_bytes, lineno - quiet)
        if not s:
            continue
        if s.startswith(";"):
            key, _, value = s[1:].partition(":")
            key = key.strip().lower()
            if key in ("maxnodes", "maxprocs", "unixstarttime"):
                try:
                    header[key] = int(value.split()[0])
                except (ValueError, IndexError):
                    raise WorkloadError(
                        f"{source}:{lineno}: {key} must be an integer: {value.strip()[:40]!r}"
                    ) from None
            elif key == "timezonestring" and value.strip():
                zone = value.strip()
            continue
        if "\0" in s:
            raise WorkloadError(f"{source}:{lineno}: NUL byte: not an SWF text file")
        f = s.split()
        if len(f) < 9:
            raise WorkloadError(f"{source}:{lineno}: expected 18 fields, got {len(f)}")
        try:
            number = int(f[0])
            values = list(map(number_of, f[1:]))
        except ValueError:
            raise WorkloadError(f"{source}:{lineno}: fields must be numbers: {s[:60]!r}") from None
        if number in seen:
            raise WorkloadError(f"{source}:{lineno}: duplicate job number {number}")
        seen.add(number)
        quiet = quiet_bytes = 0
        if len(seen) > MAX_STREAM_JOBS:
            raise WorkloadError(f"{source}:{lineno}: more than {MAX_STREAM_JOBS} job lines (the limit of a stream)")
        fields = _swf_fields(values, procs_per_node)
        if fields is None:  # something is off: the checks again, one by one, to say what
            fields = _swf_fields_checked(values, procs_per_node, f"{source}:{lineno}")
        if fields is None:
            skipped += 1
            continue
        submit, runtime, nodes, req_time = fields
        if req_time > 0:
            wall = req_time
        else:
            wall = _fill_walltime(walltime, runtime)
            filled += 1
        user = int(values[10]) if len(values) > 10 and math.isfinite(values[10]) else -1
        queue = int(values[13]) if len(values) > 13 and math.isfinite(values[13]) else -1
        user, nodes = shared(user, user), shared(nodes, nodes)
        jobs.append(WorkloadJob(number, "", submit, node_request(nodes, wall), wall, runtime, nodes, "", user, queue))
        if len(memo) > _Floats.KEEP:
            memo.clear()
        if len(jobs) > MAX_JOBS:
            raise WorkloadError(f"{source}:{lineno}: more than {MAX_JOBS} jobs (the limit)")
    jobs.sort(key=lambda j: (j.submit, j.id))
    # Jobs count processors: with procs_per_node (1 too), the machine is MaxProcs / procs_per_node nodes.
    nb_res = None
    maxnodes, maxprocs = header.get("maxnodes", 0), header.get("maxprocs", 0)
    if maxprocs > 0 and (given is not None or maxnodes <= 0):
        nb_res = -(-_count(maxprocs, source, "MaxProcs", MAX_NODES * procs_per_node) // procs_per_node)
    elif maxnodes > 0:
        nb_res = _count(maxnodes, source, "MaxNodes")
    w = Workload(jobs, nb_res, name, skipped, walltime_filled=filled, walltime_model=_model_name(walltime))
    if "unixstarttime" in header:
        w.start_time, w.timezone = float(header["unixstarttime"]), zone
    if given is None and maxnodes > 0 and maxprocs > maxnodes:
        w.notes.append(
            f"MaxProcs is {maxprocs / maxnodes:g} x MaxNodes: jobs count processors; "
            f"--procs-per-node {maxprocs // maxnodes} would map them to nodes"
        )
    if skipped:
        w.notes.append(f"skipped {skipped} jobs with no run time or no processors")
    return w


# -- YAML jobspec list ----------------------------------------------------------


def read_jobspec_list(text: str, name: str = "workload", base: Path | None = None, source: str = "<yaml>") -> Workload:
    """``{nb_res?, jobs: [{id?, submit, runtime, jobspec}]}`` (or just the list).

    The YAML is read with the jobspec loader's defences (size, nesting, alias
    expansion); walltime is each jobspec's duration (0: unlimited, as under Flux).
    """
    from ..jobspec import JobspecError, load_jobspec, parse_jobspec
    from ..jobspec.loader import load_document

    try:
        data = load_document(text)
    except JobspecError as exc:
        raise WorkloadError(f"{source}: not a YAML workload: {exc}") from None
    if isinstance(data, list):
        data = {"jobs": data}
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{source}: expected a 'jobs' list of {{submit, runtime, jobspec}}")
    if len(data["jobs"]) > MAX_JOBS:
        raise WorkloadError(f"{source}: {len(data['jobs'])} jobs is more than the limit of {MAX_JOBS}")
    nb_res = _optional_nb_res(data.get("nb_res"), f"{source}: nb_res")
    jobs = []
    seen: set[int] = set()
    for i, entry in enumerate(data["jobs"]):
        where = f"{source}: jobs[{i}]"
        if not isinstance(entry, dict) or "jobspec" not in entry:
            raise WorkloadError(f"{where}: needs 'jobspec', 'submit' and 'runtime'")
        spec = entry["jobspec"]
        try:
            if isinstance(spec, str):
                request = load_jobspec((base or Path(".")) / spec)
            else:  # as canonical text: parse_jobspec validates each distinct text once
                request = parse_jobspec(json.dumps(spec, sort_keys=True))
        except (JobspecError, ValueError, TypeError) as exc:
            raise WorkloadError(f"{where}: invalid jobspec: {exc}") from None
        if "runtime" not in entry:
            raise WorkloadError(f"{where}: needs 'runtime'")
        submit = _time(entry.get("submit", 0.0), where, "submit")
        runtime = _time(entry["runtime"], where, "runtime")
        walltime = float(request.duration) if request.duration and request.duration > 0 else math.inf
        raw = entry.get("id", i)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise WorkloadError(f"{where}: id must be an integer, got {str(raw)[:40]!r}")
        if raw in seen:
            raise WorkloadError(f"{where}: duplicate job id {raw}")
        seen.add(raw)
        user = (request.attributes or {}).get("user") or {}
        job = WorkloadJob(raw, str(raw), submit, request, walltime, runtime, request.nnodes, "")
        job.campaign, job.campaign_type = str(user.get("campaign", "")), str(user.get("campaign-type", ""))
        jobs.append(job)
    jobs.sort(key=lambda j: (j.submit, j.id))
    return Workload(jobs, nb_res, name)
