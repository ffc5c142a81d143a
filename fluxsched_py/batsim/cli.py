"""``fluxsched-py batsim``: run the scheduler as Batsim's decision process.

This is the only module of the package that does I/O.  It owns the socket
(a ZeroMQ REP socket for the JSON protocols, a Unix stream socket for the
legacy text protocol), the receive timeout, the optional traffic recording
and the round-trip measurement; everything it receives goes through a
:class:`~fluxsched_py.batsim.driver.Driver`, which decides.

Exit status: 0 after SIMULATION_ENDS was answered; 1 when Batsim broke the
protocol, went silent for ``--timeout`` seconds, or disconnected, or an input
file (``--workload``, ``--platform``, ``--config``, ``--reservations``) is
bad, a reservation included that the platform Batsim sends cannot hold; 2 for bad command-line options
(an unwritable ``--record`` or ``--stats`` included, found before the run).
It never waits forever unless ``--timeout 0`` says so.  Every message is one
plain line on stderr, ``fluxsched-py batsim: LEVEL: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..cliutil import (
    ArgumentParser,
    AtomicOutput,
    CLIError,
    UsageError,
    boundary,
    bounded_int,
    bounded_seconds,
    error_line,
)
from ..cliutil import open_output as _open_output
from ..engine import EngineError, EngineOptions
from ..engine.config import ConfigError, SiteConfig, read_config
from ..engine.options import add_flags, from_flags
from ..engine.reservations import (
    Calendar,
    GroupResolver,
    ReservationError,
    on_clock,
    parse_spec,
    read_entries,
    read_groups,
)
from ..engine.runlimits import RunLimits
from ..errors import FluxschedError
from ..ids import user_id
from ..inputs import read_text
from ..limits import MAX_NODES, MAX_TIMEOUT
from .driver import Driver
from .errors import ProtocolError

__all__ = ["main", "build_parser", "driver_for", "make_driver", "BatsimIOError"]

log = logging.getLogger("fluxsched_py.batsim")

DEFAULT_SOCKETS = {"v4": "tcp://*:28000", "batprotocol": "tcp://*:28000", "legacy": "/tmp/bat_socket"}


PROG = "fluxsched-py batsim"
#: The engine options this driver sets unless told otherwise.
ENGINE_DEFAULTS = {"queue-policy": "easy"}


class BatsimIOError(FluxschedError):
    """The connection to Batsim failed: timeout, disconnect, truncated frame."""


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog=PROG,
        description="Run fluxsched-py as the decision process (scheduler) of a Batsim simulation. "
        "Start it first, then batsim; it exits 0 once Batsim ends the simulation, 1 on a protocol error, "
        "a timeout or a lost connection.",
    )
    ap.add_argument(
        "--protocol",
        choices=("v4", "batprotocol", "legacy"),
        default="v4",
        help="v4: Batsim 3/4 JSON over ZeroMQ (default); batprotocol: Batsim 5 EDC, JSON mode over ZeroMQ; "
        "legacy: the old text protocol over a Unix socket",
    )
    ap.add_argument(
        "--socket",
        metavar="ENDPOINT",
        help="ZeroMQ endpoint to bind (default tcp://*:28000), or for --protocol legacy the Unix socket path "
        "Batsim listens on (default /tmp/bat_socket)",
    )
    ap.add_argument(
        "--timeout",
        type=bounded_seconds(MAX_TIMEOUT),
        default=300.0,
        metavar="SECONDS",
        help=f"give up when Batsim sends nothing for this long (default 300, at most {MAX_TIMEOUT:g}; 0 waits forever)",
    )
    ap.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="FILE",
        help="legacy protocol: Batsim workload JSON giving each job's res and walltime (that protocol keeps "
        "them in Redis); batprotocol: where to read the profiles of the workload Batsim names with the same "
        "file name (by default the path Batsim gives); repeat for several workloads",
    )
    ap.add_argument(
        "--nodes",
        type=bounded_int(MAX_NODES),
        metavar="N",
        help="legacy protocol only: number of machines (default nb_res)",
    )
    ap.add_argument(
        "--platform",
        metavar="XML",
        help="the SimGrid platform Batsim runs: the machines (legacy protocol), and each host's power model "
        "(--power-cap; --power-save, v4 only: the switch times come from its pstates' speeds, which Batsim "
        "does not send)",
    )
    ap.add_argument(
        "--interval-separator",
        choices=("comma", "space"),
        default="comma",
        help="batprotocol only: how host_allocation separates intervals (comma at Batsim 3bb38700, space later)",
    )
    ap.add_argument(
        "--config",
        metavar="FILE",
        help="a Flux instance's TOML config, read as replay --config reads it: its run limits "
        "([sched-py.limits], [policy.scheduler.limits], [queues.NAME.policy.scheduler.limits]) and its "
        "[sched-py] engine options, under this command's flags; users are each Batsim job's user",
    )
    ap.add_argument(
        "--reservations",
        metavar="FILE",
        help="advance reservations (YAML or JSON list of {name, ranks|nodes, start, end|duration, "
        "users|groups, accounts, flags}, or {reservations: [...], groups: {NAME: [uid, ...]}}; times in seconds "
        "of the simulation's clock, or +FSD from its start), the replay's --reservations file; a job runs in one "
        "when its workload entry names it (its reservation field), its account is its bank field (the entry: "
        "JOB_SUBMITTED's job under v4, the --workload file's under legacy, extra_data or the workload file's "
        "under batprotocol): see "
        "docs/rfcs/reservations.md",
    )
    ap.add_argument(
        "--campaigns",
        action="store_true",
        help="a job's campaign field (and campaign-type) becomes attributes.user.campaign of its "
        "jobspec, for the campaign options (fair share, predictor, campaign-max-running); off by default "
        "(the engine then sees no campaign)",
    )
    ap.add_argument(
        "--job-metadata",
        action="store_true",
        help="v4: send SET_JOB_METADATA when a job's last reason_pending (for the jobs --annotate-depth "
        "annotates) or its number of preemptions changes, so Batsim's out_jobs.csv metadata column says "
        "preemptions=N;reason_pending=TEXT; off by default (each event costs Batsim simulated time)",
    )
    ap.add_argument(
        "--dynamic-jobs",
        action="store_true",
        help="v4, with batsim --enable-dynamic-jobs: register jobs with Batsim (REGISTER_PROFILE, "
        "REGISTER_JOB): a preempted checkpointing job (its workload entry says checkpoint: signal) "
        "again for its remaining work, and the end-of-campaign copies of --duplicates; off by default",
    )
    ap.add_argument("--record", metavar="FILE", help="write every message, both directions, as JSON lines")
    ap.add_argument("--stats", metavar="FILE", help="write round-trip times and counters as JSON at the end")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for every message)")
    ap.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    add_flags(ap, ENGINE_DEFAULTS)
    return ap


def make_driver(
    protocol: str,
    options: EngineOptions,
    workloads: list[str] | None = None,
    *,
    nodes: int | None = None,
    platform: str | None = None,
    interval_separator: str = ",",
    limits: RunLimits | None = None,
    reservations: list[dict] | None = None,
    groups: GroupResolver | None = None,
    campaigns: bool = False,
    metadata: bool = False,
    dynamic: bool = False,
) -> Driver:
    """The sans-I/O driver for ``protocol``: ``limits``, ``reservations``
    (with the ``groups`` their file names), ``campaigns`` and the power
    model of ``platform`` (for ``power-cap``) under each; ``metadata``,
    ``dynamic`` and the switches of ``power-save`` are the v4 driver's
    (:class:`~.v4driver.V4Driver`)."""
    power = None
    if platform:
        from .platform import PlatformError, batsim_power

        power = batsim_power(platform)
        if power is None and options.power_save != "off":
            raise PlatformError(f"{platform}: --power-save needs an energy platform (no wattage_per_state)")
        if power is None and options.power_cap is not None:
            raise PlatformError(f"{platform}: --power-cap needs an energy platform (no wattage_per_state)")
    if protocol == "v4":
        from .v4driver import V4Driver

        return V4Driver(
            options,
            power,
            limits=limits,
            reservations=reservations or (),
            groups=groups,
            campaigns=campaigns,
            metadata=metadata,
            dynamic=dynamic,
        )
    if protocol == "batprotocol":
        from .batprotocol import BatprotocolDriver

        return BatprotocolDriver(
            options,
            power,
            host_allocation_sep=interval_separator,
            workload_files=workloads or [],
            limits=limits,
            reservations=reservations or (),
            groups=groups,
            campaigns=campaigns,
        )
    if protocol == "legacy":
        from .driver import Host
        from .legacy import LegacyDriver, load_job_table

        hosts = None
        if platform:
            from .platform import batsim_hosts

            hosts = [Host(i, name, props, cores) for i, (name, cores, props) in enumerate(batsim_hosts(platform))]
        elif nodes:
            hosts = [Host(i, f"host{i}") for i in range(nodes)]
        return LegacyDriver(
            options,
            load_job_table(workloads or []),
            hosts,
            power,
            limits=limits,
            reservations=reservations or (),
            groups=groups,
            campaigns=campaigns,
        )
    raise ValueError(f"unknown protocol {protocol!r}")


class Recorder:
    """JSON lines: ``{"dir": "in"|"out", "data": text}``, or ``"hex"`` for binary frames."""

    def __init__(self, fp: AtomicOutput | None) -> None:
        self.fp = fp

    def __call__(self, direction: str, raw: bytes) -> None:
        if self.fp is None:
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        body = text[:-1] if text is not None and text.endswith("\0") else text
        if body is None or any(ord(c) < 32 and c not in "\t\n\r" for c in body):
            rec = {"dir": direction, "hex": raw.hex()}  # binary (the batprotocol init frame)
        else:
            rec = {"dir": direction, "data": text}
        self.fp.write(json.dumps(rec, separators=(",", ":")) + "\n")

    @staticmethod
    def load(path: str | Path) -> list[tuple[str, bytes]]:
        """Read a recording back (gzip'd when its name ends in ``.gz``): ``[(direction, raw bytes)]``."""
        import gzip

        path = Path(path)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            raw = bytes.fromhex(rec["hex"]) if "hex" in rec else rec["data"].encode("utf-8")
            out.append((rec["dir"], raw))
        return out


class RoundTrips:
    """Wall time from a message's arrival to its reply leaving: the driver's cost per decision."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)

    def summary(self) -> dict[str, float]:
        s = sorted(self.samples)
        if not s:
            return {"messages": 0}
        return {
            "messages": len(s),
            "median_ms": statistics.median(s) * 1e3,
            "p95_ms": s[min(len(s) - 1, int(0.95 * len(s)))] * 1e3,
            "max_ms": s[-1] * 1e3,
            "total_s": sum(s),
        }


def serve_zmq(
    driver: Driver,
    endpoint: str,
    timeout: float,
    record: Callable[[str, bytes], None],
    rtt: RoundTrips,
) -> None:
    """Answer Batsim on a REP socket until the driver is finished.

    A REP socket cannot tell that its peer is gone, so a socket monitor
    watches for the disconnect, and a receive deadline covers the rest.
    """
    try:
        import zmq
    except ImportError:
        raise BatsimIOError("pyzmq is not installed: pip install 'fluxsched-py[batsim]'") from None

    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 2000)
    try:
        sock.bind(endpoint)
    except zmq.ZMQError as exc:
        sock.close(0)
        ctx.term()
        raise BatsimIOError(f"cannot bind {endpoint}: {exc}") from None
    monitor = sock.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    log.info("listening on %s", endpoint)
    connected = False
    try:
        while not driver.finished:
            deadline = time.monotonic() + timeout if timeout > 0 else None
            raw = None
            while raw is None:
                wait_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
                ready = dict(poller.poll(wait_ms))
                if sock in ready:
                    raw = sock.recv()
                    if sock.getsockopt(zmq.RCVMORE):
                        raise BatsimIOError("multi-part ZeroMQ message: Batsim sends one frame per message")
                    break
                if monitor in ready:
                    from zmq.utils.monitor import recv_monitor_message

                    ev = recv_monitor_message(monitor)
                    if ev["event"] == zmq.EVENT_ACCEPTED:
                        connected = True
                        log.debug("Batsim connected")
                    elif ev["event"] == zmq.EVENT_DISCONNECTED and connected:
                        # A message may still be queued behind the disconnect.
                        if sock.poll(100, zmq.POLLIN):
                            continue
                        raise BatsimIOError("Batsim disconnected before the simulation ended (did it crash?)")
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    what = "first message" if not connected else "next message"
                    raise BatsimIOError(f"no {what} from Batsim within {timeout:g} s (is it running? see --timeout)")
            t0 = time.perf_counter()
            record("in", raw)
            reply = driver.handle(raw)
            if reply is None:
                reply = b""
            sock.send(reply)
            rtt.add(time.perf_counter() - t0)
            record("out", reply)
    finally:
        sock.disable_monitor()
        monitor.close(0)
        sock.close()
        ctx.term()


def _recv_exact(conn: socket.socket, n: int, what: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = conn.recv(n - len(buf))
        except TimeoutError:
            raise BatsimIOError(f"Batsim sent nothing for the timeout while a {what} was expected") from None
        if not chunk:
            if not buf and what == "length prefix":
                raise BatsimIOError("Batsim closed the connection before the simulation ended")
            raise BatsimIOError(f"truncated frame: connection closed after {len(buf)} of {n} bytes of the {what}")
        buf += chunk
    return bytes(buf)


def serve_unix(
    driver: Driver,
    path: str,
    timeout: float,
    record: Callable[[str, bytes], None],
    rtt: RoundTrips,
) -> None:
    """Legacy protocol: connect to Batsim's Unix socket, 32-bit native-endian length-prefixed frames."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout if timeout > 0 else None)
    start = time.monotonic()
    while True:
        try:
            conn.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            # Batsim creates the socket when it starts; wait for it like pybatsim does.
            if timeout > 0 and time.monotonic() - start > timeout:
                conn.close()
                raise BatsimIOError(f"cannot connect to Batsim at {path}: {exc}") from None
            time.sleep(0.05)
    log.info("connected to %s", path)
    try:
        while not driver.finished:
            (size,) = struct.unpack("=I", _recv_exact(conn, 4, "length prefix"))
            raw = _recv_exact(conn, size, "message")
            t0 = time.perf_counter()
            record("in", raw)
            reply = driver.handle(raw)
            if reply is not None:
                conn.sendall(struct.pack("=I", len(reply)) + reply)
            rtt.add(time.perf_counter() - t0)
            if reply is not None:
                record("out", reply)
    finally:
        conn.close()


class _OneLine(logging.Formatter):
    """``fluxsched-py batsim: LEVEL: message``, control characters escaped: one line per record."""

    def format(self, record: logging.LogRecord) -> str:
        return error_line(PROG, f"{record.levelname}: {record.getMessage()}")


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.ERROR if args.quiet else (logging.INFO if args.verbose == 0 else logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger("fluxsched_py")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    if args.verbose < 2:
        logging.getLogger("fluxsched_py.engine").setLevel(logging.WARNING)


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``fluxsched-py batsim``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    _setup_logging(args)
    setup = _setup(args)
    # Outputs are opened now, so a bad path fails before the simulation, not after it.
    # Each is renamed into place at the end (complete), or removed if the run is interrupted.
    with contextlib.ExitStack() as outputs:
        fp = outputs.enter_context(_open_output(args.record, "--record")) if args.record else None
        stats_fp = outputs.enter_context(_open_output(args.stats, "--stats")) if args.stats else None
        return _run(args, setup, fp, stats_fp)


def driver_for(argv: list[str]) -> Driver:
    """The driver ``fluxsched-py batsim ARGV`` would answer Batsim with (the
    recorded-traffic tests rebuild a run's driver from its command line);
    raises :class:`~fluxsched_py.cliutil.CLIError` as the command would report it."""
    args = build_parser().parse_args(argv)
    return _driver(args, _setup(args))


@dataclasses.dataclass(frozen=True, slots=True)
class _Setup:
    """What the command line and its input files say, checked before the socket is bound."""

    options: EngineOptions
    config: SiteConfig
    reservations: list[dict] | None
    groups: GroupResolver | None


def _setup(args: argparse.Namespace) -> _Setup:
    for flag, given in (
        ("--job-metadata", args.job_metadata),
        ("--dynamic-jobs", args.dynamic_jobs),
    ):
        if given and args.protocol != "v4":
            raise UsageError(f"{flag} is only for --protocol v4 so far")
    config = _config(args.config) if args.config else SiteConfig()
    try:
        options = from_flags(args, {**ENGINE_DEFAULTS, **config.options})
    except EngineError as exc:
        raise UsageError(str(exc)) from None
    if options.duplicates and not args.dynamic_jobs:
        raise UsageError(
            f"--duplicates {options.duplicates}: copies are registered with Batsim only with --dynamic-jobs "
            "(and batsim --enable-dynamic-jobs; docs/rfcs/batsim-v4.md)"
        )
    if args.nodes and args.protocol != "legacy":
        raise UsageError("--nodes is only for --protocol legacy (the JSON protocols carry the machines)")
    if options.power_save != "off" and not args.platform:
        raise UsageError(f"--power-save {options.power_save} needs --platform XML, the energy platform Batsim runs")
    if options.power_cap is not None and not args.platform:
        raise UsageError(f"--power-cap {options.power_cap:g} needs --platform XML, the energy platform Batsim runs")
    if options.power_save != "off" and args.protocol != "v4":
        raise UsageError(f"--power-save {options.power_save}: only --protocol v4 switches nodes so far")
    if args.workload and args.protocol == "v4":
        raise UsageError("--workload is only for --protocol legacy and batprotocol (v4 carries the jobs)")
    reservations, groups = _reservations(args.reservations) if args.reservations else (None, None)
    return _Setup(options, config, reservations, groups)


def _driver(args: argparse.Namespace, setup: _Setup) -> Driver:
    try:
        return make_driver(
            args.protocol,
            setup.options,
            args.workload,
            nodes=args.nodes,
            platform=args.platform,
            interval_separator="," if args.interval_separator == "comma" else " ",
            limits=setup.config.limits,
            reservations=setup.reservations,
            groups=setup.groups,
            campaigns=args.campaigns,
            metadata=args.job_metadata,
            dynamic=args.dynamic_jobs,
        )
    except (EngineError, ProtocolError, ValueError) as exc:
        raise CLIError(str(exc)) from None


def _config(path: str) -> SiteConfig:
    """``--config FILE``: the replay's reader (:func:`~fluxsched_py.engine.config.read_config`),
    users named in it given the uids Batsim jobs' user names get."""
    try:
        config = read_config(path, user_id)
    except ConfigError as exc:
        raise CLIError(f"--config {exc}") from None
    if config.ignored:
        log.info("--config %s: [sched-py] %s: the module's, not read here", path, ", ".join(config.ignored))
    return config


def _reservations(path: str) -> tuple[list[dict], GroupResolver]:
    """``--reservations FILE``: the replay's loader, entries and the file's
    ``groups`` table; every entry's fields are checked now
    (:func:`~fluxsched_py.engine.reservations.parse_spec`), its ranks against
    the platform when Batsim sends it.  A Batsim workload has no start date,
    so an ISO 8601 date is one error, as in the replay."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise CLIError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CLIError(f"{path}: not UTF-8 text: {exc.reason}") from None
    try:
        missing = "a Batsim workload has no start date (only an SWF header's UnixStartTime gives one)"
        entries = on_clock(read_entries(text, "reservations"), Calendar(None, missing=missing))
        groups = read_groups(text, "reservations")
        for i, entry in enumerate(entries):
            try:
                parse_spec(entry, 0.0, user_id, groups)
            except ReservationError as exc:
                raise ReservationError(f"reservations[{i}].{exc.field}", exc.reason) from None
    except ReservationError as exc:
        raise CLIError(f"{path}: {exc}") from None
    return [dict(e) for e in entries], groups


def _run(args: argparse.Namespace, setup: _Setup, fp: AtomicOutput | None, stats_fp: AtomicOutput | None) -> int:
    driver = _driver(args, setup)
    endpoint = args.socket or DEFAULT_SOCKETS[args.protocol]
    rtt = RoundTrips()
    record = Recorder(fp)
    if args.verbose >= 2:
        inner = record

        def record(direction: str, raw: bytes) -> None:  # type: ignore[misc]
            log.debug("%s %s", "<-" if direction == "in" else "->", raw[:2000])
            inner(direction, raw)

    status = 0
    try:
        if args.protocol == "legacy":
            serve_unix(driver, endpoint, args.timeout, record, rtt)
        else:
            serve_zmq(driver, endpoint, args.timeout, record, rtt)
    except ProtocolError as exc:
        log.error("protocol error: %s", exc)
        status = 1
    except ReservationError as exc:  # an entry the platform cannot hold (SIMULATION_BEGINS)
        log.error("%s: %s", args.reservations, exc)
        status = 1
    except BatsimIOError as exc:
        log.error("%s", exc)
        status = 1
    summary = rtt.summary()
    if summary["messages"]:
        log.info(
            "%d messages; driver round trip median %.3f ms, p95 %.3f ms, max %.3f ms",
            summary["messages"],
            summary["median_ms"],
            summary["p95_ms"],
            summary["max_ms"],
        )
    if stats_fp is not None:
        stats_fp.write(
            json.dumps(
                {
                    "status": status,
                    "round_trip": summary,
                    "round_trips_s": rtt.samples,
                    "jobs": driver.scheduler.stats,
                },
                indent=1,
            )
        )
    return status
