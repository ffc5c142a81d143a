"""Fuzz targets and mutation strategies, shared by t/test_fuzz.py (a short,
deterministic run in the suite) and bench/fuzz.py (the long run).

Every target takes one input (bytes, or a decoded document for the readers
that also take one) and feeds it to a public entry point.  The rule they
all check: any input yields a result or the project's own error type
(:class:`fluxsched_py.errors.FluxschedError`), never another exception,
and within a time bound.  The Flux driver's handlers never raise at all.

Inputs are the real files of ``../shared/conformance/`` and the project's
recorded traffic (``t/data/``), mutated: byte flips and inserts,
truncation, splicing two seeds, and, after decoding JSON or YAML, type
swaps, huge numbers, NaN and infinities, deep nesting and long strings put
in place of a random node.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import signal
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from fluxsched_py.errors import FluxschedError

from .shared import CONFORMANCE, REPO  # ../shared, or the folder FLUXSCHED_SHARED names

DATA = REPO / "t" / "data"

#: CPU seconds one input may take (CPU, not wall: the machine may be shared);
#: a wall-clock alarm at HANG_LIMIT stops an input that never returns
TIME_LIMIT = 5.0
HANG_LIMIT = 30.0

# -- seeds -------------------------------------------------------------------------


def _read(p: Path, limit: int = 1 << 20) -> bytes | None:
    try:
        data = p.read_bytes()
    except OSError:
        return None
    if p.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    return data[:limit]


def files(*globs: str, base: Path = CONFORMANCE, limit: int = 1 << 20, max_files: int = 400) -> list[bytes]:
    """Contents of the files matching ``globs`` under ``base`` (sorted, capped)."""
    out: list[bytes] = []
    for g in globs:
        for p in sorted(base.glob(g))[:max_files]:
            if p.is_file():
                data = _read(p, limit)
                if data:
                    out.append(data)
    return out


def jsonl_payloads(path: Path, key: str = "payload") -> Iterator[Any]:
    data = _read(path, 1 << 26)
    for line in (data or b"").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        yield rec


# -- mutations ---------------------------------------------------------------------

INTERESTING_TOKENS = [
    b"NaN",
    b"-Infinity",
    b"1e308",
    b"-1",
    b"0",
    b"18446744073709551616",
    b"99999999999999999999",
    b"4294967295",
    b"0-4294967295",
    b"[" * 300,
    b"{" * 300,
    b'"',
    b"\x00",
    b"\xff\xfe",
    b"&a [*a, *a, *a]",
    b"null",
    b"true",
    b"[0-99999999999]",
    b"!!python/object:os.system",
]

INTERESTING_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1 << 64,
    10**20,
    1e308,
    -1e308,
    math.nan,
    math.inf,
    -math.inf,
    0.5,
    "",
    "x" * 10_000,
    "0-4294967295",
    "node[0-99999999]",
    "NaN",
    "\x00",
    [],
    {},
    [[[[[[[[[[]]]]]]]]]],
    {"a": {"b": {"c": {}}}},
    ["x"] * 1000,
]


def _deep(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


@st.composite
def mutate_bytes(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A seed with a few byte-level mutations."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "splice", "token", "dup"]))
        n = len(data)
        i = draw(st.integers(0, max(n - 1, 0)))
        if op == "flip" and n:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and n:
            del data[i : i + draw(st.integers(1, 64))]
        elif op == "truncate":
            del data[i:]
        elif op == "splice":
            other = draw(st.sampled_from(seeds))
            j = draw(st.integers(0, max(len(other) - 1, 0)))
            data[i:] = other[j:]
        elif op == "token":
            data[i:i] = draw(st.sampled_from(INTERESTING_TOKENS))
        elif op == "dup" and n:
            data[i:i] = data[i : i + draw(st.integers(1, 256))]
    return bytes(data)


def _paths(doc: Any, path: tuple = (), out: list | None = None, limit: int = 2000) -> list[tuple]:
    """Paths to the nodes of a JSON-like document (the first ``limit``, at most 40 deep)."""
    if out is None:
        out = []
    if len(out) >= limit or len(path) > 40:
        return out
    out.append(path)
    if isinstance(doc, dict):
        for k, v in doc.items():
            _paths(v, (*path, k), out, limit)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:50]):
            _paths(v, (*path, i), out, limit)
    return out


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, value)}
    out = list(doc)
    out[head] = _replace(doc[head], rest, value)
    return out


def _swap(value: Any) -> list[Any]:
    """Values of another type carrying the same content."""
    out: list[Any] = []
    if isinstance(value, bool):
        out += [int(value), str(value).lower()]
    elif isinstance(value, int | float):
        out += [str(value), float(value), [value], -value, value * 10**12, {"value": value}]
    elif isinstance(value, str):
        out += [[value], {value: value}, len(value), value * 1000, value + "\x00"]
    elif isinstance(value, list):
        out += [{str(i): v for i, v in enumerate(value)}, value * 100, value[:1], value[::-1]]
    elif isinstance(value, dict):
        out += [list(value.values()), list(value), {**value, "": None}]
    return out or [None]


@st.composite
def mutate_doc(draw: st.DrawFn, docs: list[Any]) -> Any:
    """A decoded seed document with a few nodes replaced."""
    doc = draw(st.sampled_from(docs))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        node = doc
        for k in path:
            node = node[k]
        kind = draw(st.sampled_from(["value", "swap", "deep", "delete", "copy"]))
        if kind == "value":
            new = draw(st.sampled_from(INTERESTING_VALUES))
        elif kind == "swap":
            new = draw(st.sampled_from(_swap(node)))
        elif kind == "deep":
            new = _deep(draw(st.sampled_from([10, 100, 500])))
        elif kind == "copy":
            other = draw(st.sampled_from(paths))
            new = doc
            for k in other:
                new = new[k]
        else:
            if not path:
                continue
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if isinstance(parent, dict):
                parent = {k: v for k, v in parent.items() if k != path[-1]}
            else:
                parent = [v for i, v in enumerate(parent) if i != path[-1]]
            doc = _replace(doc, path[:-1], parent)
            continue
        doc = _replace(doc, path, new)
    return doc


def decode_all(seeds: list[bytes], yaml_ok: bool = False) -> list[Any]:
    out = []
    for s in seeds:
        s = s.rstrip(b"\0")
        try:
            out.append(json.loads(s))
            continue
        except ValueError:
            pass
        if yaml_ok:
            try:
                doc = yaml.safe_load(s)
            except yaml.YAMLError:
                continue
            try:
                json.dumps(doc)
            except (TypeError, ValueError):
                continue
            out.append(doc)
    return out


def to_text(doc: Any) -> bytes:
    """JSON text of a mutated document (NaN/Infinity as Python writes them);
    a document too deep to write comes out as its repr."""
    try:
        return json.dumps(doc).encode()
    except (RecursionError, ValueError, TypeError):
        return repr(doc).encode()


# -- running one input -------------------------------------------------------------


class Hang(Exception):
    """An input ran past the alarm (raised by the SIGALRM handler)."""


@contextmanager
def bounded(seconds: float = HANG_LIMIT) -> Iterator[None]:
    """Raise :class:`Hang` if the block runs longer than ``seconds`` (main thread only)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"input still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Target:
    """One fuzz target: ``run(input)`` must return or raise FluxschedError."""

    name: str
    run: Callable[[Any], Any]
    inputs: Callable[[], st.SearchStrategy[Any]]
    #: exceptions besides FluxschedError that the entry point documents
    allowed: tuple[type[BaseException], ...] = ()
    #: the seeds, and a 1 MB input when repeating the seeds does not make a fair one
    seeds: list[bytes] = field(default_factory=list)
    big: Callable[[], Any] | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"inputs": 0, "ok": 0, "errors": 0})


MEGABYTE = 1 << 20


def one_megabyte(target: Target) -> Any:
    """A 1 MB input for ``target``: its own, or its seeds repeated and cut at 1 MB."""
    if target.big is not None:
        return target.big()
    data = b"\n".join(target.seeds) or b"0"
    return (data * (MEGABYTE // len(data) + 1))[:MEGABYTE]


class Bug(AssertionError):
    """The target broke the rule (another exception, or too slow)."""


def check(target: Target, value: Any, time_limit: float = TIME_LIMIT) -> None:
    """Run one input; raise :class:`Bug` if it breaks the rule."""
    target.stats["inputs"] += 1
    t0 = time.process_time()
    try:
        with bounded(max(HANG_LIMIT, time_limit * 2)):
            target.run(value)
        target.stats["ok"] += 1
    except (FluxschedError, *target.allowed):
        target.stats["errors"] += 1
    except Hang as exc:
        raise Bug(f"{target.name}: hang: {exc}; input {_show(value)}") from None
    except RecursionError as exc:
        raise Bug(f"{target.name}: RecursionError on input {_show(value)}") from exc
    except Exception as exc:
        raise Bug(f"{target.name}: {type(exc).__name__}: {exc} on input {_show(value)}") from exc
    dt = time.process_time() - t0
    if dt > time_limit:
        raise Bug(f"{target.name}: {dt:.1f} s of CPU on input {_show(value)}")


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = "<deep>"
    return text[:300] + ("..." if len(text) > 300 else "")


# -- targets -------------------------------------------------------------------------


def _as_text(value: bytes | Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def jobspec_target() -> Target:
    from fluxsched_py.jobspec import parse_jobspec

    seeds = files("jobspec/**/*.yaml", "jobspec/**/*.json", "fluxion-resource/jobspecs/**/*.yaml", max_files=300)

    def run(value: Any) -> Any:
        return parse_jobspec(value, v1=False)

    def inputs() -> st.SearchStrategy[Any]:
        docs = [d for d in decode_all(seeds, yaml_ok=True) if isinstance(d, dict)]
        return st.one_of(mutate_bytes(seeds), mutate_doc(docs))

    return Target("jobspec", run, inputs, seeds=seeds, big=lambda: _big_jobspec())


@contextmanager
def _tmpfile(data: bytes, suffix: str) -> Iterator[str]:
    fd, name = tempfile.mkstemp(suffix=suffix, prefix="fuzz-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield name
    finally:
        os.unlink(name)


RECIPES = [
    b"cluster:\n  nodes: 4\n  sockets: 2\n  cores_per_socket: 4\n",
    b"cluster:\n  racks: 2\n  nodes_per_rack: 3\n  sockets: 1\n  cores_per_socket: 2\n  gpus_per_socket: 1\n"
    b"  memory_gb: 16\n  hostname: rack[0-5]\n  properties: {batch: '0-3', debug: '4-5'}\n",
]


def graph_target(fmt: str) -> Target:
    """The resource readers, through :func:`fluxsched_py.resource.load.load_graph`."""
    from fluxsched_py.resource.load import load_graph

    globs = {
        "rv1": (["R/*", "fluxion-resource/rv1exec/**/*.json"], ".json"),
        "jgf": (["fluxion-resource/jgfs/**/*.json"], ".json"),
        "grug": (["fluxion-resource/grugs/**/*.graphml"], ".graphml"),
        "hwloc": (["hwloc/*.xml"], ".xml"),
        "recipe": (["fluxion-resource/grugs/**/*.graphml"], ".yaml"),  # recipes: from the project's own
    }
    pats, suffix = globs[fmt]
    seeds = files(*pats, limit=1 << 19)
    if fmt == "recipe":
        seeds = files("examples/**/*.yaml", base=REPO) + RECIPES

    def run(value: bytes) -> Any:
        with _tmpfile(value, suffix) as path, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # networkx on GraphML keys it does not know
            return load_graph(path, None if fmt in ("hwloc", "grug") else fmt)

    def inputs() -> st.SearchStrategy[Any]:
        strategies = [mutate_bytes(seeds)]
        docs = decode_all(seeds, yaml_ok=fmt == "recipe")
        if docs:
            strategies.append(mutate_doc(docs).map(to_text if fmt != "recipe" else _yaml_text))
        return st.one_of(*strategies)

    return Target(f"graph-{fmt}", run, inputs, seeds=seeds[:1])


def _yaml_text(doc: Any) -> bytes:
    try:
        return yaml.safe_dump(doc).encode()
    except (RecursionError, yaml.YAMLError, ValueError):
        return to_text(doc)


def idset_target() -> Target:
    from fluxsched_py.ids import IdSet

    seeds = [b"0-3", b"0,2,5-7", b"[0-1023]", b"1-2,4-8,10", b"", b"0", b"0-3,3-5"]

    def run(value: bytes) -> Any:
        return IdSet.parse(value.decode("utf-8", "replace"))

    big = lambda: ",".join(str(2 * i) for i in range(150_000)).encode()[:MEGABYTE]  # noqa: E731
    return Target("idset", run, lambda: st.one_of(mutate_bytes(seeds), st.binary(max_size=40)), seeds=seeds, big=big)


def hostlist_target() -> Target:
    from fluxsched_py.ids import Hostlist

    seeds = [b"node[0-3]", b"fluke[1-4,6],foo", b"n[001-100]", b"a,b,c", b"x[0-1]y[2-3]", b"host", b"sierra[1-2]"]

    def run(value: bytes) -> Any:
        hl = Hostlist.parse(value.decode("utf-8", "replace"))
        return hl.encode()

    big = lambda: ",".join(f"n{i}x{i}" for i in range(100_000)).encode()[:MEGABYTE]  # noqa: E731
    return Target("hostlist", run, lambda: st.one_of(mutate_bytes(seeds), st.binary(max_size=40)), seeds=seeds, big=big)


def swf_target() -> Target:
    from fluxsched_py.replay.workload import read_swf

    seeds = [s[:20000] for s in files("swf/*.swf.gz")]
    seeds = seeds or [b"; MaxNodes: 4\n1 0 0 10 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n"]

    def run(value: bytes) -> Any:
        return read_swf(value.decode("utf-8", "replace"))

    return Target("swf", run, lambda: mutate_bytes(seeds), seeds=seeds)


_SWF = (
    b"; MaxNodes: 4\n; MaxProcs: 4\n"
    b"1 0 0 10 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n"
    b"2 5 0 -1 1 -1 -1 1 100 -1 1 2 1 -1 2 -1 -1 -1\n\n;\n"
    b"3 9 1 20 4 -1 -1 4 -1 -1 1 3 1 -1 1 -1 -1 -1\n"
)


def swf_stream_target() -> Target:
    """SWF read as a stream (``load_workload`` on a file), plain or compressed:
    the time bound on lines with no job, the job-line bound, corrupt archives."""
    import bz2
    import lzma

    from fluxsched_py.replay.workload import load_workload

    seeds = [s[:20000] for s in files("swf/*.swf.gz")] + [_SWF, b";\n" * 5000 + _SWF, b"\n" * 5000]
    packers = {"plain": lambda b: b, "gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}

    def run(value: tuple[bytes, str]) -> Any:
        data, kind = value
        with _tmpfile(data if kind == "raw" else packers[kind](data), ".swf") as name:
            return load_workload(name)

    def inputs() -> st.SearchStrategy[Any]:
        packed = st.tuples(mutate_bytes(seeds), st.sampled_from(sorted(packers)))
        raw = st.tuples(mutate_bytes([gzip.compress(s) for s in seeds]), st.just("raw"))  # corrupt archives
        return st.one_of(packed, raw)

    def big() -> tuple[bytes, str]:
        """1 MB of gzip members expanding to about 1 GB of newlines: refused after QUIET_LINES lines."""
        member = gzip.compress(b"\n" * (64 << 20), 9)
        return member * (MEGABYTE // len(member)), "raw"

    return Target("swf-stream", run, inputs, seeds=seeds, big=big)


def yaml_workload_target() -> Target:
    """The YAML workload reader (a list of inline jobspecs), text or decoded."""
    from fluxsched_py.replay.workload import read_jobspec_list

    specs = [yaml.safe_load(p.read_bytes()) for p in sorted((REPO / "fluxsched_py/jobspec/examples").glob("*.yaml"))]
    docs = [{"nb_res": 4, "jobs": [{"submit": i, "runtime": 10, "jobspec": j} for i, j in enumerate(specs)]}]
    docs.append({"jobs": [{"id": 7, "submit": 0.5, "runtime": 1, "jobspec": specs[0]}]})
    seeds = [_yaml_text(d) for d in docs]

    def run(value: Any) -> Any:
        return read_jobspec_list(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)

    def inputs() -> st.SearchStrategy[Any]:
        return st.one_of(mutate_bytes(seeds), mutate_doc(docs).map(_yaml_text).map(bytes.decode))

    def big() -> bytes:
        job = _yaml_text({"jobs": [{"submit": 0, "runtime": 10, "jobspec": specs[0]}]}).split(b"\n", 1)[1]
        return b"jobs:\n" + job * (MEGABYTE // len(job) - 1)

    return Target("yaml-workload", run, inputs, seeds=seeds, big=big)


def batsim_workload_target() -> Target:
    from fluxsched_py.replay.workload import read_batsim

    seeds = files("batsim/workloads/*.json", limit=1 << 18)
    seeds += files("batsim/seed1_first30.json", base=DATA)

    def run(value: Any) -> Any:
        return read_batsim(_as_text(value))

    def inputs() -> st.SearchStrategy[Any]:
        docs = decode_all(seeds)
        return st.one_of(mutate_bytes(seeds), mutate_doc(docs), mutate_doc(docs).map(to_text))

    return Target("batsim-workload", run, inputs, seeds=seeds, big=lambda: _big_workload(seeds))


def _recorded(pattern: str, direction: str = "in") -> list[bytes]:
    out: list[bytes] = []
    for p in sorted(DATA.glob(pattern)):
        for rec in jsonl_payloads(p):
            if isinstance(rec, dict) and rec.get("dir") == direction and isinstance(rec.get("data"), str):
                out.append(rec["data"].encode())
            if len(out) > 300:
                return out
    return out


def batsim_v4_target() -> Target:
    from fluxsched_py.batsim import v4

    seeds = _recorded("batsim/v4-*.jsonl") or [b'{"now": 0, "events": []}']

    def run(value: bytes) -> Any:
        now, events = v4.MessageDecoder().decode(value)
        for ev in events:
            if ev.type == "JOB_SUBMITTED":
                v4.parse_job(ev)
            elif ev.type == "SIMULATION_BEGINS":
                v4.parse_hosts(ev)
        return events

    def inputs() -> st.SearchStrategy[Any]:
        docs = decode_all(seeds)
        return st.one_of(mutate_bytes(seeds), mutate_doc(docs).map(to_text))

    return Target("batsim-v4", run, inputs, seeds=seeds, big=lambda: _big_envelope(seeds, "type", "data"))


def batprotocol_target() -> Target:
    from fluxsched_py.batsim import batprotocol

    seeds = _recorded("batsim/batprotocol/*.jsonl.gz") or [b'{"now": 0, "events": []}']

    def run(value: bytes) -> Any:
        if value[:1] == b"I":  # the binary init frame
            return batprotocol.decode_init(value[1:])
        return batprotocol.decode_message(value)

    def inputs() -> st.SearchStrategy[Any]:
        docs = decode_all(seeds)
        return st.one_of(mutate_bytes(seeds), mutate_doc(docs).map(to_text), st.binary(max_size=32).map(b"I".__add__))

    return Target("batprotocol", run, inputs, seeds=seeds, big=lambda: _big_envelope(seeds, "event_type", "event"))


def legacy_target() -> Target:
    from fluxsched_py.batsim import legacy

    seeds = _recorded("batsim/legacy/*.jsonl.gz") or [b"2:0.000000|0.000000:A"]

    def run(value: bytes) -> Any:
        return legacy.parse_message(value.decode("utf-8", "replace"))

    return Target("batsim-legacy", run, lambda: mutate_bytes(seeds), seeds=seeds, big=_big_legacy)


def match_target() -> Target:
    """resource-query's command language (``fluxsched-py match``), on a small graph."""
    from fluxsched_py.matchcli.compat import parse_policy
    from fluxsched_py.matchcli.session import Session
    from fluxsched_py.resource import ResourceGraph

    base = CONFORMANCE / "fluxion-resource"
    seeds = files("commands/**/cmds*", base=base, max_files=200)
    grug = base / "grugs" / "tiny.graphml"
    jobspec_dir = str(base) + "/"

    def run(value: bytes) -> Any:
        g = ResourceGraph.from_grug(grug) if grug.exists() else ResourceGraph.from_recipe(RECIPES[0].decode())
        out = io.StringIO()
        path_map = ("@TEST_SRCDIR@/data/resource/", jobspec_dir)
        s = Session(g, parse_policy("first"), out=out, term=out, err=out, path_map=path_map)
        for line in value.decode("utf-8", "replace").splitlines()[:50]:
            if s.execute(line) < 0:
                break
        return out.getvalue()

    return Target("match", run, lambda: mutate_bytes(seeds), seeds=seeds)


SLOT4 = {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 4}]}


def driver_target() -> Target:
    """The Flux driver's handlers: recorded requests with mutated payloads,
    for every topic.  ``handle`` must never raise, and every request that
    expects an answer gets one."""
    from fluxsched_py.flux.driver import Driver, bad_payload

    from .recording_transport import RecordingTransport
    from .test_flux_driver import R2 as R

    probe = Driver(RecordingTransport(), [])
    topics = probe.topics()  # the topics the module registers, config-reload included
    probe.close()
    answered = {
        "sched.expiration",
        "sched.resource-status",
        "feasibility.check",
        "sched-py.stats-get",
        "sched-py.config-reload",
    }
    # The startup responses the driver handles too: resource.acquire updates
    # (after the first) and a sched-hello response with the job's R.
    startup = ["resource.acquire", "job-manager.sched-hello"]
    recorded: dict[str, list[Any]] = {t: [] for t in topics + startup}
    for p in sorted(DATA.glob("flux/*.jsonl")):
        for rec in jsonl_payloads(p):
            if isinstance(rec, dict) and rec.get("dir") == "rx" and rec.get("topic") in recorded:
                if len(recorded[rec["topic"]]) < 40:
                    recorded[rec["topic"]].append(rec.get("payload"))
    docs = [{"topic": t, "payload": p} for t, ps in recorded.items() for p in ps]
    docs += [{"topic": t, "payload": {"id": 1}} for t in topics]
    docs += [{"topic": "resource.acquire", "payload": {"up": "1", "down": "0", "expiration": 2000.0}}]
    hello = {"id": 7, "priority": 16, "userid": 0, "t_submit": 1.0, "free": "1", "R": R}
    docs += [{"topic": "job-manager.sched-hello", "payload": hello}]

    def run(value: Any) -> Any:
        topic, payload = value
        t = RecordingTransport()
        d = Driver(t, [], clock=lambda: 1000.0, budget=None)
        t.driver = d
        try:
            d.acquire({"resources": R, "up": "0-1"})
            d.hello_done()
            d.ready({"count": 0})
            # a running job and a pending one, for free/cancel/expiration to find
            spec = {
                "version": 1,
                "resources": [{"type": "node", "count": 1, "with": [SLOT4]}],
                "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
                "attributes": {"system": {"duration": 10}},
            }
            for jobid in (1, 2, 3):
                p = {"id": jobid, "priority": 16, "userid": 0, "t_submit": 1.0, "jobspec": spec}
                d.handle("sched.alloc", f"alloc-{jobid}", p)
            t.run_passes()
            before = len(t.sent)
            try:
                if topic == "resource.acquire":
                    d.acquire(payload)
                elif topic == "job-manager.sched-hello":
                    job_R = payload.get("R") if isinstance(payload, dict) else payload
                    d.hello(payload, job_R)
                    d.hello_done()
                else:
                    d.handle(topic, "msg", payload)
                t.run_passes()
            except Exception as exc:
                raise Bug(f"driver: {topic} raised {type(exc).__name__}: {exc}") from exc
            if topic in answered:
                mine = [k for k, m, _ in t.sent[before:] if m == "msg"]
                if len(mine) != 1:
                    raise Bug(f"driver: {topic} answered {len(mine)} times: {t.sent[before:]}")
            if topic == "sched.alloc":
                mine = [p for _, m, p in t.sent[before:] if m == "msg"]
                finals = [p for p in mine if isinstance(p, dict) and p.get("type") in (0, 2, 3)]
                if len(finals) > 1:
                    raise Bug(f"driver: alloc answered {len(finals)} times")
                jobid = payload.get("id") if isinstance(payload, dict) else None
                new = isinstance(jobid, int) and not isinstance(jobid, bool) and 3 < jobid < 1 << 63
                if new and not finals and d.engine.job(jobid) is None:
                    raise Bug(f"driver: alloc of job {jobid} neither answered nor queued")
            d.engine.check_invariants()
        finally:
            d.close()

    def inputs() -> st.SearchStrategy[Any]:
        def split(doc: Any) -> tuple[str, Any]:
            return doc["topic"], doc.get("payload")

        def known(d: Any) -> bool:
            return isinstance(d, dict) and isinstance(d.get("topic"), str) and d["topic"] in recorded

        mutated = mutate_doc(docs).filter(known).map(split)
        garbage = st.tuples(
            st.sampled_from(topics + startup), st.sampled_from(INTERESTING_VALUES + [bad_payload("not JSON")])
        )
        return st.one_of(mutated, garbage)

    return Target("flux-driver", run, inputs, big=_big_alloc)


# -- 1 MB inputs -------------------------------------------------------------------


def _big_jobspec() -> bytes:
    """A valid jobspec of 1 MB, most of it its environment (as ``flux run`` sends it)."""
    env = {f"VAR_{i}": "x" * 90 for i in range(MEGABYTE // 100)}
    doc = {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 10, "environment": env}},
    }
    return json.dumps(doc).encode()


def _big_workload(seeds: list[bytes]) -> bytes:
    job = {"id": 0, "subtime": 0, "walltime": 10, "res": 1, "profile": "p"}
    n = MEGABYTE // len(json.dumps(job))
    jobs = [{**job, "id": i, "subtime": i} for i in range(n)]
    return json.dumps({"nb_res": 4, "profiles": {"p": {"type": "delay", "delay": 1}}, "jobs": jobs}).encode()


def _big_envelope(seeds: list[bytes], type_key: str, payload_key: str) -> bytes:
    ev = {"timestamp": 0.0, type_key: "REQUESTED_CALL" if type_key == "type" else "RequestedCallEvent", payload_key: {}}
    n = MEGABYTE // len(json.dumps(ev))
    return json.dumps({"now": 1.0, "events": [ev] * n}).encode()


def _big_legacy() -> bytes:
    n = MEGABYTE // 12
    return ("2:1.000000" + "|0.000000:N" * n).encode()[:MEGABYTE]


def _big_alloc() -> tuple[str, Any]:
    spec = json.loads(_big_jobspec())
    return "sched.alloc", {"id": 9, "priority": 16, "userid": 0, "t_submit": 1.0, "jobspec": spec}


TARGETS: dict[str, Callable[[], Target]] = {
    "jobspec": jobspec_target,
    "graph-rv1": lambda: graph_target("rv1"),
    "graph-jgf": lambda: graph_target("jgf"),
    "graph-grug": lambda: graph_target("grug"),
    "graph-hwloc": lambda: graph_target("hwloc"),
    "graph-recipe": lambda: graph_target("recipe"),
    "idset": idset_target,
    "hostlist": hostlist_target,
    "swf": swf_target,
    "swf-stream": swf_stream_target,
    "yaml-workload": yaml_workload_target,
    "batsim-workload": batsim_workload_target,
    "batsim-v4": batsim_v4_target,
    "batprotocol": batprotocol_target,
    "batsim-legacy": legacy_target,
    "match": match_target,
    "flux-driver": driver_target,
}
