"""``fluxsched-py replay``: evaluate queue policies on a workload trace, no Flux needed.

Which policies run is one rule: ``--compare P1,P2`` runs those,
``--queue-policy P`` runs that one, then the ``queue-policy`` of the
``--config`` file, and with none of them the replay compares fcfs, easy and
conservative, whatever the other options.  The file's other ``[sched-py]``
options stand where no flag is given, as under ``fluxsched-py batsim``.  With no workload it
replays the bundled synthetic example.

Errors are one plain line on stderr (:mod:`fluxsched_py.cliutil`): exit
status 2 for a bad option value, 1 for a bad input file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..cliutil import ArgumentParser, CLIError, UsageError, boundary, bounded_int, check_output_dir
from ..engine import Engine, EngineError
from ..engine.config import ConfigError, SiteConfig, read_config
from ..engine.options import OPTIONS, add_flags, from_flags
from ..engine.reservations import (
    Calendar,
    GroupResolver,
    ReservationError,
    declare_entries,
    on_clock,
    read_entries,
    read_groups,
)
from ..inputs import read_text
from ..limits import MAX_JOBS, MAX_NODES, MAX_PER_NODE
from ..policy import POLICIES
from ..resource import ResourceError
from .events import EventsError, ExternalEvent, ReservationsEvent, load_events
from .metrics import summarize
from .platform import PlatformError, load_platform, load_power, nodes_graph
from .provenance import REPLAY_ENGINE_DEFAULTS, describe, file_sha256
from .report import never_started_line, print_summary, rejected_line, stdout_console, write_energy_files, write_jobs_csv
from .sim import DUPLICATE_RUNTIMES, replay
from .synthetic import EXAMPLE_NAME, example_path, generate
from .window import parse_load_factor, scale_load, take_window
from .workload import (
    Workload,
    WorkloadError,
    load_workload,
    mark_besteffort,
    mark_checkpointing,
    parse_walltime_model,
    read_batsim,
    user_id,
)

__all__ = ["main", "build_parser", "DEFAULT_POLICIES"]

PROG = "fluxsched-py replay"
#: The policies compared when neither --queue-policy nor --compare is given.
DEFAULT_POLICIES = ("fcfs", "easy", "conservative")
#: Seconds between plain progress lines when stderr is not a terminal.
PROGRESS_EVERY = 5.0


def _walltime_model(text: str) -> tuple[str, float | None]:
    try:
        return parse_walltime_model(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _load_factor(text: str) -> float:
    try:
        return parse_load_factor(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _skip(text: str) -> int:
    if text.strip() == "0":
        return 0
    try:
        return bounded_int(MAX_JOBS)(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(str(e).replace("at least 1", "at least 0")) from None


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog=PROG,
        description="Replay a workload (SWF, plain or .gz/.bz2/.xz; Batsim workload JSON; or a YAML list of "
        "jobspecs) through the scheduler in simulated time and print schedule metrics.  Policies: --compare "
        f"runs the listed ones, --queue-policy one; with neither, {', '.join(DEFAULT_POLICIES)} are compared.  "
        "With no workload, replay the bundled example.",
    )
    ap.add_argument("workload", nargs="?", help="workload file (.swf[.gz|.bz2|.xz], .json, .yaml); '-' reads stdin")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--platform", metavar="FILE", help="YAML recipe, R (JSON), GRUG (.graphml) or Batsim XML")
    where.add_argument(
        "--nodes",
        type=bounded_int(MAX_NODES),
        metavar="N",
        help=f"N identical nodes, 1..{MAX_NODES} (default: the workload's nb_res)",
    )
    ap.add_argument(
        "--cores-per-node",
        type=bounded_int(MAX_PER_NODE),
        default=1,
        metavar="C",
        help="cores per node with --nodes (default 1)",
    )
    ap.add_argument(
        "--walltime",
        type=_walltime_model,
        default=("runtime", None),
        metavar="MODEL",
        help="SWF jobs with no requested time get: runtime (their run time, the default), default:SECONDS, or "
        "none (unlimited); the table's title names the model when it was used",
    )
    ap.add_argument(
        "--procs-per-node",
        type=bounded_int(MAX_PER_NODE),
        default=None,
        metavar="P",
        help="SWF: processors per node: a job of N processors is ceil(N/P) nodes and the machine ceil(MaxProcs/P) "
        "nodes (default: a node per processor, on MaxNodes nodes)",
    )
    ap.add_argument(
        "--load-factor",
        type=_load_factor,
        default=1.0,
        metavar="F",
        help="divide every inter-arrival time by F (0 < F <= 1000; the first submit time stays; sizes and run "
        "times kept): F=2 is twice the arrival rate",
    )
    ap.add_argument(
        "--skip",
        type=_skip,
        default=0,
        metavar="N",
        help="leave out the first N jobs (in submit order, after jobs with no run time or no processors)",
    )
    ap.add_argument(
        "--jobs",
        type=bounded_int(MAX_JOBS),
        default=None,
        metavar="N",
        help="replay N jobs (after --skip), then stop submitting",
    )
    ap.add_argument(
        "--besteffort-queue",
        type=int,
        metavar="N",
        help="SWF: jobs of queue N (field 15) are best-effort (preemptible-after 0)",
    )
    ap.add_argument(
        "--checkpoint-queue",
        type=int,
        metavar="N",
        help="SWF: jobs of queue N (field 15) checkpoint on their preemption notice (--preempt-grace) and "
        "are requeued with their remaining work when preempted",
    )
    ap.add_argument(
        "--resubmit-preempted",
        action="store_true",
        help="submit a preempted best-effort job again at once, as CiGri does",
    )
    ap.add_argument(
        "--duplicate-runtime",
        choices=DUPLICATE_RUNTIMES,
        default="same",
        help="with --duplicates N: an end-of-campaign copy runs its original's run time (same), or one drawn "
        "from its campaign's jobs' run times, seeded by the copy's id (campaign: run times vary run to run)",
    )
    ap.add_argument(
        "--reservations",
        metavar="FILE",
        help="advance reservations (YAML or JSON list of {name, ranks|nodes, start, end|duration, users|groups, "
        "accounts, flags}, or {reservations: [...], groups: {NAME: [uid, ...]}}; "
        "times in seconds of the replay's clock, +FSD from its start, or ISO 8601 dates placed by the SWF "
        "header's UnixStartTime, in its TimeZoneString or UTC): see docs/rfcs/reservations.md",
    )
    ap.add_argument(
        "--events",
        metavar="FILE",
        help="Batsim external events (JSON lines: machine_unavailable, machine_available, with resources and "
        "timestamp): a machine unavailable takes no new job, and a job running there runs on; a reservations "
        "event (with a list of --reservations entries) declares them from its timestamp on; "
        "see docs/rfcs/batsim-events.md",
    )
    ap.add_argument("--output-dir", metavar="DIR", help="write DIR/jobs.csv (DIR/POLICY/jobs.csv with several)")
    ap.add_argument(
        "--job-metadata",
        action="store_true",
        help="with --output-dir: a metadata column in jobs.csv, as the Batsim driver's --job-metadata makes "
        "Batsim write it (preemptions=N;reason_pending=TEXT, the last reason given); annotate-depth is then "
        "the engine's default (64) unless given",
    )
    ap.add_argument("--compare", metavar="P1,P2,...", help="replay under these queue policies, side by side")
    ap.add_argument(
        "--report",
        metavar="DIR",
        help="write figures (PNG and SVG) and DIR/index.html; needs the plot extra (matplotlib)",
    )
    ap.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    ap.add_argument(
        "--config",
        metavar="FILE",
        help="a Flux instance's TOML config: its [sched-py] engine options stand where no flag is given, and "
        "its run limits ([sched-py.limits], [policy.scheduler.limits], [queues.NAME.policy.scheduler.limits]) "
        "hold jobs as the module does; users are SWF field 12 or a Batsim job's user",
    )
    ap.add_argument(
        "--forecast",
        action="store_true",
        help="measure the forecast (flux sched-py forecast): each job's start as forecast at the first pass "
        "after its submission, against its real start (at most 1000 jobs planned per pass)",
    )
    add_flags(ap, REPLAY_ENGINE_DEFAULTS, {"queue-policy": f"compare {', '.join(DEFAULT_POLICIES)}; see --compare"})
    return ap


def _config(path: str) -> SiteConfig:
    """``--config FILE``: its ``[sched-py]`` engine options and its run limits,
    as the Batsim driver reads them (CLIError names the file and the key).
    Its ``[[sched-py.reservation]]`` and ``[sched-py.power]`` tables are the
    module's (the replay has ``--reservations`` and ``--platform``): noted, left."""
    try:
        conf = read_config(path, user_id)
    except ConfigError as exc:
        raise CLIError(f"--config {exc}") from None
    if conf.ignored:
        print(
            f"{PROG}: note: --config {path}: [sched-py] {', '.join(conf.ignored)}: the module's, not read here",
            file=sys.stderr,
        )
    return conf


def _policies(args: argparse.Namespace, config: SiteConfig) -> list[str]:
    if args.compare is not None:
        policies = [p.strip() for p in args.compare.split(",") if p.strip()]
        if not policies:
            raise UsageError("--compare: name at least one queue policy")
        for pol in policies:
            if pol not in POLICIES:
                raise UsageError(f"--compare: unknown queue policy {pol!r} (choose from {', '.join(POLICIES)})")
        if len(set(policies)) != len(policies):
            raise UsageError(f"--compare: a queue policy is named twice in {args.compare!r}")
        if args.queue_policy is not None:
            raise UsageError("--compare and --queue-policy: give one or the other")
        return policies
    if args.queue_policy is not None:
        return [args.queue_policy]
    if "queue-policy" in config.options:  # the file's policy, as the module would run it
        return [str(config.options["queue-policy"])]
    return list(DEFAULT_POLICIES)


def _graph_factory(args: argparse.Namespace, workload: Workload) -> Callable[[], Any]:
    if args.platform:
        return lambda: load_platform(args.platform)
    n = args.nodes or workload.nb_res
    if not n:
        raise UsageError(
            f"{args.workload or workload.name}: the workload does not say how many nodes it needs (nb_res): "
            "give --nodes N or --platform FILE"
        )
    return lambda: nodes_graph(n, args.cores_per_node)


#: Arguments a row does not list among its options: outputs, and those with their own columns.
_NOT_OPTIONS = frozenset(
    ("workload", "nodes", "cores_per_node", "compare", "walltime")
    + ("json", "report", "output_dir", "no_progress", "forecast")
)


def _cli_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The command-line options that differ from their defaults and are not engine options
    (those are listed from the engine's table), by flag name."""
    engine = {o.dest for o in OPTIONS}
    out: dict[str, Any] = {}
    for dest, value in sorted(vars(args).items()):
        if dest in _NOT_OPTIONS or dest in engine:
            continue
        name = dest.replace("_", "-")
        if value != parser.get_default(dest):
            out[name] = value
    return out


def _finite(obj: Any) -> Any:
    """JSON has no Infinity or NaN: such values become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _load(args: argparse.Namespace) -> Workload:
    if args.workload:
        w = load_workload(args.workload, walltime=args.walltime, procs_per_node=args.procs_per_node)
        if args.besteffort_queue is not None:
            n = mark_besteffort(w, args.besteffort_queue)
            w.notes.append(f"{n} jobs of queue {args.besteffort_queue} are best-effort")
        if args.checkpoint_queue is not None:
            n = mark_checkpointing(w, args.checkpoint_queue)
            w.notes.append(f"{n} jobs of queue {args.checkpoint_queue} checkpoint on their preemption notice")
    else:
        p = example_path()
        w = load_workload(p) if p else read_batsim(generate(), name=EXAMPLE_NAME.removesuffix(".json"))
    if args.skip or args.jobs is not None:
        take_window(w, args.skip, args.jobs)
        if not w.jobs:
            raise UsageError(f"--skip {args.skip}: the workload has no job after the first {args.skip}")
    return scale_load(w, args.load_factor)


def _calendar(workload: Workload, source: str | None) -> Calendar:
    """How a date in the reservations file lands on the replay's clock: the
    trace's time 0 is the SWF header's ``UnixStartTime``; the other formats
    have no date to place one by."""
    if workload.start_time is not None:
        return Calendar(workload.start_time, workload.timezone)
    what = f"the workload {source}" if source else "the built-in example workload"
    swf = source is not None and ".swf" in source.lower()
    has = "no UnixStartTime header" if swf else "no start date (only an SWF header's UnixStartTime gives one)"
    return Calendar(None, missing=f"{what} has {has}")


def _reservations(
    path: str, make_graph: Callable[[], Any], calendar: Calendar
) -> tuple[list[Any], GroupResolver | None]:
    """The entries of ``--reservations FILE``, their dates on the replay's
    clock, each checked by adding it to an engine on the machine, and the
    file's groups."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise CLIError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        entries = on_clock(read_entries(text, "reservations"), calendar)
        groups = read_groups(text, "reservations")
        declare_entries(Engine(make_graph()).reservations, entries, 0.0, group=groups)
    except ReservationError as exc:
        raise CLIError(f"{path}: {exc}") from None
    except (PlatformError, ResourceError) as exc:
        raise CLIError(str(exc)) from None
    return entries, groups


def _reservation_events(
    events: tuple[ExternalEvent, ...],
    first: Sequence[Any],
    groups: GroupResolver | None,
    make_graph: Callable[[], Any],
    calendar: Calendar,
) -> tuple[ExternalEvent, ...]:
    """``events`` with each reservations event's dates on the replay's
    clock, each declared in turn on an engine on the machine after the
    ``--reservations`` file's ``first``, so that a bad entry stops the
    replay before it starts, with its line."""
    if not any(isinstance(ev, ReservationsEvent) for ev in events):
        return events
    check = Engine(_make(make_graph)).reservations
    out: list[ExternalEvent] = []
    try:
        declare_entries(check, first, 0.0, group=groups)
        for ev in events:
            if isinstance(ev, ReservationsEvent):
                ev = ReservationsEvent(ev.time, tuple(on_clock(ev.entries, calendar)), ev.where)
                declare_entries(check, ev.entries, ev.time, where=f"{ev.where}: reservations", group=groups)
            out.append(ev)
    except ReservationError as exc:
        raise CLIError(str(exc)) from None  # its place names the file and the line
    return tuple(out)


def _make(make_graph: Callable[[], Any]) -> Any:
    """A new graph for one replay (CLIError for a bad platform)."""
    try:
        return make_graph()
    except (PlatformError, ResourceError) as exc:
        raise CLIError(str(exc)) from None


def _plain_progress(policy: str, err: Any) -> Callable[[int, int], None]:
    """A progress line every PROGRESS_EVERY seconds (for logs: stderr is not a terminal)."""
    t0 = time.monotonic()
    last = [t0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            print(f"{PROG}: {policy}: {done}/{total} jobs done ({now - t0:.0f} s)", file=err, flush=True)

    return progress


@boundary(PROG)
def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 bad input, 2 bad option)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    # Piped output: a fixed, wide enough table instead of rich's 80 columns.
    out: Any = None
    if not args.json:  # rich only for the table and the bar (start-up time, issue 15)
        out = stdout_console() if sys.stdout.isatty() else stdout_console(width=120)
    config = _config(args.config) if args.config else SiteConfig()
    limits = config.limits
    policies = _policies(args, config)
    try:
        defaults = {**REPLAY_ENGINE_DEFAULTS, **config.options}
        if args.job_metadata and "annotate-depth" not in config.options:
            del defaults["annotate-depth"]  # reasons are given to the jobs annotated, as under Batsim
        opts = [from_flags(args, defaults, {"queue-policy": pol}) for pol in policies]
    except EngineError as exc:
        raise UsageError(str(exc)) from None
    outdir = check_output_dir(args.output_dir, "--output-dir") if args.output_dir else None
    if args.job_metadata and outdir is None:
        raise UsageError("--job-metadata writes a column of jobs.csv: give --output-dir")
    try:
        workload = _load(args)
        make_graph = _graph_factory(args, workload)
    except WorkloadError as exc:
        raise CLIError(str(exc)) from None
    for note in workload.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    reservations: list[Any] = []
    groups = None
    if args.reservations:
        reservations, groups = _reservations(args.reservations, make_graph, _calendar(workload, args.workload))
    events: tuple[ExternalEvent, ...] = ()
    first = None  # the first replay's graph, when it was made early to check the events file against
    if args.events:
        first = _make(make_graph)
        try:
            read = load_events(args.events, len(first.ranks))
        except EventsError as exc:
            raise CLIError(str(exc)) from None
        events = _reservation_events(read.events, reservations, groups, make_graph, _calendar(workload, args.workload))
        if read.generic:
            print(
                f"{PROG}: note: {args.events}: {read.generic} generic events left "
                "(the replay acts on machine events only)",
                file=sys.stderr,
            )
    saving = next((o.power_save for o in opts if o.power_save != "off"), None)
    if saving and not args.platform:
        raise UsageError(f"--power-save {saving} needs a power model per node: give --platform with an energy platform")
    try:
        power = load_power(args.platform, f"--power-save {saving}" if saving else None) if args.platform else None
    except PlatformError as exc:
        raise CLIError(str(exc)) from None

    if args.report:
        from ..report import ReportError, require_matplotlib

        try:
            require_matplotlib()
        except ReportError as exc:
            raise CLIError(str(exc)) from None
        check_output_dir(args.report, "--report")

    bar = sys.stderr.isatty() and not args.no_progress and not args.json
    plain = not sys.stderr.isatty() and not args.no_progress
    summaries, results, cores = [], [], []
    for o in opts:
        graph, first = (_make(make_graph) if first is None else first), None
        cores.append(graph.all().count("core"))
        if bar:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(
                TextColumn(f"{o.queue_policy:>12}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            ) as progress_bar:
                task = progress_bar.add_task("replay", total=len(workload.jobs))
                result = replay(
                    workload,
                    graph,
                    o,
                    progress=lambda done, total, task=task: progress_bar.update(task, completed=done),
                    resubmit_preempted=args.resubmit_preempted,
                    limits=limits,
                    forecast=args.forecast,
                    duplicate_runtime=args.duplicate_runtime,
                    reservations=reservations,
                    groups=groups,
                    power=power,
                    events=events,
                    reasons=args.job_metadata,
                )
        else:
            result = replay(
                workload,
                graph,
                o,
                progress=_plain_progress(o.queue_policy, sys.stderr) if plain else None,
                resubmit_preempted=args.resubmit_preempted,
                limits=limits,
                forecast=args.forecast,
                duplicate_runtime=args.duplicate_runtime,
                reservations=reservations,
                groups=groups,
                power=power,
                events=events,
                reasons=args.job_metadata,
            )
        results.append(result)
        summaries.append(summarize(result))
        for line in (rejected_line(result), never_started_line(result)):
            if line:
                print(f"{PROG}: {o.queue_policy}: {line}", file=sys.stderr)
        for t, ranks, reason in result.drains:
            print(f"{PROG}: {o.queue_policy}: t={t:.0f}s: drained rank {ranks}: {reason}", file=sys.stderr)
        if outdir is not None:
            path = write_jobs_csv(
                result, outdir / o.queue_policy / "jobs.csv" if len(opts) > 1 else outdir / "jobs.csv"
            )
            print(f"wrote {path}", file=sys.stderr)
            if result.energy is not None:
                for written in write_energy_files(result, path.parent):
                    print(f"wrote {written}", file=sys.stderr)
    nodes = results[0].nb_nodes if results else 0
    title = f"{workload.name}: {len(workload.jobs)} jobs on {nodes} nodes"
    if workload.walltime_filled:
        title += f", walltime={workload.walltime_model} ({workload.walltime_filled} jobs)"
    if args.json:
        extra = _cli_options(parser, args)
        if limits is not None:
            extra["limits"] = limits.describe()
        source = args.workload or (str(example_path()) if example_path() else None)
        digest = file_sha256(source) if source and source != "-" else None
        rows = []
        for s, r, c in zip(summaries, results, cores, strict=True):
            rows.append({**describe(source, workload, r.options, r.nb_nodes, c, extra, digest), **s.as_dict()})
        print(json.dumps(_finite(rows), indent=1, allow_nan=False))
    else:
        print_summary(summaries, title, out)
    if args.report:
        from ..report.replay import report_replay

        page = report_replay(
            results, summaries, args.report, title, progress=not args.no_progress, jobs=os.cpu_count() or 1
        )
        print(f"wrote {page}", file=sys.stderr)
    return 0
