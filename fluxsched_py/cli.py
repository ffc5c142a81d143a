"""``fluxsched-py``: the command-line entry point.

Subcommands are thin: each parses its own options and calls into the
library.  Drivers whose dependencies are optional (Batsim needs pyzmq) are
imported only when their subcommand runs.  Every subcommand reports errors
through :mod:`fluxsched_py.cliutil`: one plain line on stderr, exit status 2
for a bad option, 1 for bad input.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from .cliutil import ArgumentParser, boundary, error_line, handle_signals, interrupted, quiet_stdout, report
from .inputs import read_bytes
from .jobspec import JobspecError, load_jobspec, parse_jobspec
from .limits import MAX_JOBSPEC_BYTES

__all__ = ["main", "usage", "validate_parser"]

#: ``validate``'s one line in ``--help`` (and in its man page); it is implemented here.
VALIDATE_HELP = "validate jobspecs (RFC 14 / RFC 25)"

#: Subcommands implemented by other modules as ``main(argv) -> int``.
DELEGATED = {
    "replay": ("fluxsched_py.replay.cli", "replay a workload trace through the scheduler (no Flux needed)"),
    "sweep": ("fluxsched_py.sweep.cli", "replay a grid of workloads x policies x options, in parallel or on Flux"),
    "report": ("fluxsched_py.report.cli", "draw the report page from jobs.csv files (the replay's or Batsim's)"),
    "match": ("fluxsched_py.matchcli.cli", "match jobspecs on a resource graph, speaking resource-query's commands"),
    "synthetic": ("fluxsched_py.replay.synthetic", "write a seeded synthetic workload (SWF or Batsim JSON)"),
    "batsim": ("fluxsched_py.batsim.cli", "run as a Batsim decision process"),
    "module-path": ("fluxsched_py.flux.paths", "print the folder to add to FLUX_MODULE_PATH_PREPEND"),
    "modprobe-path": ("fluxsched_py.flux.paths", "print the folder to add to FLUX_MODPROBE_PATH_APPEND"),
    "cmd-path": ("fluxsched_py.flux.paths", "print the folder to add to FLUX_EXEC_PATH_PREPEND (flux sched-py)"),
    "ctl": ("fluxsched_py.flux.ctl", "ask a running sched-py module (forecast, when, status): flux sched-py"),
    "xdg-path": ("fluxsched_py.flux.paths", "print the folder to add to XDG_CONFIG_DIRS (flux jobs --format=sched-py)"),
}


def bundled_jobspecs() -> list[Path]:
    """The example jobspecs shipped with the package."""
    return sorted((Path(__file__).parent / "jobspec" / "examples").glob("*.yaml"))


def validate_parser() -> ArgumentParser:
    """``validate``'s options: a function of its own, as every command's
    parser is, so that its man page is written from it."""
    parser = ArgumentParser(
        prog="fluxsched-py validate",
        description="Validate jobspecs (RFC 14 canonical, or RFC 25 V1 with --v1). "
        "With no FILE, validate the bundled examples.",
    )
    parser.add_argument("--v1", action="store_true", help="apply the stricter RFC 25 (jobspec V1) rules")
    parser.add_argument("files", nargs="*", metavar="FILE", help="jobspec files (YAML or JSON); '-' reads stdin")
    return parser


@boundary("fluxsched-py validate")
def validate(argv: Sequence[str]) -> int:
    """``fluxsched-py validate [--v1] FILE|- ...``: one line per input on stdout."""
    args = validate_parser().parse_args(argv)
    files = args.files or [str(p) for p in bundled_jobspecs()]
    failed = 0
    for name in files:
        try:
            if name == "-":
                try:
                    data = read_bytes("-", MAX_JOBSPEC_BYTES)
                except OSError as e:
                    raise JobspecError("/", f"cannot read stdin: {e.strerror}") from None
                parse_jobspec(data, v1=args.v1)
            else:
                load_jobspec(name, v1=args.v1)
        except JobspecError as e:
            failed += 1
            print(error_line(name, e))
        else:
            print(error_line(name, "ok"))
    return 1 if failed else 0


def usage() -> str:
    """``fluxsched-py --help``: the commands, each with its one line (also their man pages' NAME lines)."""
    lines = ["usage: fluxsched-py COMMAND [ARGS...]", "", "commands:"]
    lines.append(f"  {'validate':<14} {VALIDATE_HELP}")
    for name, (_, help_text) in DELEGATED.items():
        lines.append(f"  {name:<14} {help_text}")
    lines.append("")
    lines.append("Run 'fluxsched-py COMMAND --help' for a command's options.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command.  SIGTERM is handled like SIGINT (see :mod:`.cliutil`),
    and output into a closed pipe ends quietly with status 0, including what
    is still buffered when the command returns."""
    handle_signals()
    try:
        status = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        return 0
    except KeyboardInterrupt as e:  # before a command's own boundary took over
        line, status = interrupted(e)
        report("fluxsched-py", line)
    return status


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # a usage error: the usage goes to stderr
        print(usage(), file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from . import __version__

        print(f"fluxsched-py {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "validate":
        return validate(rest)
    if command not in DELEGATED:
        report("fluxsched-py", f"unknown command {command!r} (run 'fluxsched-py --help')")
        return 2
    return _delegate(command, rest)


def _delegate(command: str, rest: list[str]) -> int:
    @boundary(f"fluxsched-py {command}")
    def run() -> int:
        try:
            module = importlib.import_module(DELEGATED[command][0])
        except ModuleNotFoundError as e:
            report(f"fluxsched-py {command}", f"not available: {e}")
            return 1
        if command in ("module-path", "modprobe-path", "cmd-path", "xdg-path"):
            return module.main([command, *rest])
        return module.main(rest)

    return run()


if __name__ == "__main__":
    sys.exit(main())
