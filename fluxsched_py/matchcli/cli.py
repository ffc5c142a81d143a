"""``fluxsched-py match``: a resource-query compatible command line.

Options follow Fluxion's resource-query; commands are read from stdin, one
per line (see :mod:`fluxsched_py.matchcli.session`).  Example::

    fluxsched-py match -L examples/tiny.graphml -P high -t out.txt < cmds.in

A bad option or graph ends the command with one plain line on stderr
(``fluxsched-py match: FILE: reason``; status 2 for options, 1 for the graph);
a bad command inside the session prints resource-query's ``ERROR: ...`` line
and the session goes on, as resource-query's does.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Iterator
from typing import Any

from ..cliutil import ArgumentParser, CLIError, UsageError, boundary, open_output
from ..inputs import read_bytes
from ..limits import MAX_COMMAND_CHARS, MAX_GRAPH_BYTES
from ..resource import ResourceError, ResourceGraph
from .compat import parse_policy
from .session import FORMATS, Session

__all__ = ["main", "build_parser", "load_graph"]

SUBSYSTEMS = (
    "CA",
    "IBA",
    "IBBA",
    "PFS1BA",
    "PA",
    "C+IBA",
    "C+IBBA",
    "C+PFS1BA",
    "C+PA",
    "IB+IBBA",
    "C+P+IBA",
    "VA",
    "V+PFS1BA",
    "ALL",
)


#: resource-query's subsystem letters (``-S``; the first one is the tree a match walks)
SUBSYSTEM_NAMES = {
    "C": "containment",
    "P": "power",
    "IB": "ibnet",
    "IBB": "ibnetbw",
    "PFS1B": "pfs1bw",
    "V": "virtual1",
}


def dominant_subsystem(spec: str) -> str:
    """The subsystem a match walks for ``-S spec``: ``CA`` -> containment, ``PA`` / ``P+...`` -> power."""
    first = spec.upper().split("+")[0]
    if first == "ALL":
        return "containment"
    return SUBSYSTEM_NAMES.get(first[:-1] if first.endswith("A") else first, "containment")


PROG = "fluxsched-py match"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog=PROG, description="resource-query compatible matcher")
    p.add_argument("-L", "--load-file", required=True, help="resource graph file")
    p.add_argument("-f", "--load-format", default="grug", choices=("grug", "jgf", "rv1exec", "rv1exec_force", "hwloc"))
    p.add_argument("-W", "--load-allowlist", default=None, help="accepted, ignored")
    p.add_argument("-S", "--match-subsystems", default="CA")
    p.add_argument("-P", "--match-policy", default="first")
    p.add_argument("-F", "--match-format", default="simple", choices=FORMATS)
    p.add_argument("-T", "--traverser-policy", default="simple", choices=("simple", "flexible"))
    p.add_argument("-p", "--prune-filters", default="ALL:core", help="accepted; pruning does not change results")
    p.add_argument("-g", "--graph-format", default="dot", help="accepted, ignored")
    p.add_argument("-o", "--graph-output", default=None, help="accepted, ignored")
    p.add_argument("-t", "--test-output", default=None, help="write match output to this file")
    p.add_argument("-r", "--reserve-vtx-vec", type=int, default=0, help="accepted, ignored")
    p.add_argument("-e", "--elapse-time", action="store_true", help="accepted, ignored")
    p.add_argument("-d", "--disable-prompt", action="store_true", help="accepted (there is no prompt)")
    p.add_argument(
        "--path-map",
        nargs=2,
        metavar=("FROM", "TO"),
        default=None,
        help="rewrite FROM to TO in every command line (e.g. @TEST_SRCDIR@/data/resource/ DIR/)",
    )
    return p


def load_graph(path: str, fmt: str = "grug", subsystems: str = "CA") -> ResourceGraph:
    """Load ``path`` in resource-query's ``-f`` format, matched on the dominant subsystem of ``-S subsystems``.

    Raises :class:`ResourceError` if it cannot be loaded or has no tree of that subsystem.
    """
    graph = _load(path, fmt)
    sub = dominant_subsystem(subsystems)
    if sub != graph.topo.subsystem:
        graph = ResourceGraph(graph.nx, subsystem=sub)
    return graph


def _load(path: str, fmt: str) -> ResourceGraph:
    if fmt == "hwloc":
        return ResourceGraph.from_hwloc(path)
    if fmt in ("rv1exec", "rv1exec_force"):
        return ResourceGraph.load(path, "rv1")
    if fmt == "jgf":
        try:
            data = json.loads(read_bytes(path, MAX_GRAPH_BYTES))
        except OSError as e:
            raise ResourceError(f"cannot read: {e.strerror}", source=path) from None
        except json.JSONDecodeError as e:
            raise ResourceError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", source=path) from None
        except (UnicodeDecodeError, RecursionError) as e:
            raise ResourceError(f"invalid JSON: {type(e).__name__}", source=path) from None
        if isinstance(data, dict) and "graph" not in data and isinstance(data.get("scheduling"), dict):
            data = data["scheduling"]
        return ResourceGraph.from_jgf(data, source=path)
    return ResourceGraph.load(path, fmt)


def command_lines(stream: Any, session: Session) -> Iterator[str]:
    """The stream's lines; a line longer than MAX_COMMAND_CHARS is skipped with an error (never held whole)."""
    while True:
        line = stream.readline(MAX_COMMAND_CHARS)
        if not line:
            return
        if len(line) == MAX_COMMAND_CHARS and not line.endswith("\n"):
            while line and not line.endswith("\n"):
                line = stream.readline(MAX_COMMAND_CHARS)
            session.error(f"malformed command: line longer than {MAX_COMMAND_CHARS} characters")
            continue
        yield line


@boundary(PROG)
def main(argv: list[str]) -> int:
    """Run a resource-query session; commands come from stdin. Returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.match_subsystems not in SUBSYSTEMS and args.match_subsystems.upper() not in SUBSYSTEMS:
        raise UsageError(f"-S: unknown match subsystems '{args.match_subsystems}'")
    try:
        policy = parse_policy(args.match_policy, flexible=args.traverser_policy == "flexible")
    except ValueError as e:
        raise UsageError(f"-P: {e}") from None
    with contextlib.ExitStack() as outputs:
        out = outputs.enter_context(open_output(args.test_output, "-t")) if args.test_output else None
        try:
            graph = load_graph(args.load_file, args.load_format, args.match_subsystems)
        except ResourceError as e:
            raise CLIError(str(e)) from None
        session = Session(
            graph,
            policy,
            match_format=args.match_format,
            out=out.file if out is not None else sys.stdout,
            path_map=tuple(args.path_map) if args.path_map else None,
        )
        # Bytes that are not UTF-8 reach the session as U+FFFD and fail as unknown commands.
        buffer = getattr(sys.stdin, "buffer", None)
        stdin = io.TextIOWrapper(buffer, encoding="utf-8", errors="replace") if buffer else sys.stdin
        return session.run(command_lines(stdin, session))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
