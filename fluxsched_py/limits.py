"""The one table of input limits every reader, command and driver checks.

Each limit is a module constant, documented once here and in
``docs/rfcs/limits.md``; readers check them as they read (a count before what it
counts is built, a size before the bytes are held), so a hostile input is
refused early and cheaply.  The helpers below give every reader the same
rule for the same kind of number; they raise :class:`ValueError` with the
reason, which each reader turns into its own error naming the file, job or
option.
"""

from __future__ import annotations

import math

__all__ = [
    "MAX_NODES",
    "MAX_PER_NODE",
    "MAX_ID",
    "MAX_HOSTS",
    "MAX_LEAF_BITS",
    "MAX_VERTICES",
    "MAX_COUNT",
    "MAX_REQUEST_VALUES",
    "MAX_JOBS",
    "MAX_SECONDS",
    "MAX_TIMEOUT",
    "MAX_INPUT_BYTES",
    "MAX_GRAPH_BYTES",
    "MAX_JOBSPEC_BYTES",
    "MAX_YAML_BYTES",
    "MAX_EXPANDED_NODES",
    "MAX_DEPTH",
    "MAX_STREAM_BYTES",
    "MAX_LINE_CHARS",
    "MAX_COMMAND_CHARS",
    "QUIET_LINES",
    "QUIET_BYTES",
    "MAX_STREAM_JOBS",
    "check_seconds",
    "check_count",
]

# -- machines -------------------------------------------------------------------

#: Largest machine (2**18 nodes; Fugaku has 158,976): the graph and the engine's
#: planner cost about 5.6 KB per node, so 262,144 nodes peak near 1.5 GB.
MAX_NODES = 262_144
#: Largest count of one leaf type (cores, GPUs, memory units) on one node.
MAX_PER_NODE = 65_536
#: Largest id an idset may hold (ranks, core ids): a bitmask this wide is 8 MiB.
MAX_ID = (1 << 26) - 1
#: Most hosts one hostlist string may expand to.
MAX_HOSTS = 1 << 20
#: Most bits all the leaf pools of one graph may span together (sparse huge ids).
MAX_LEAF_BITS = 1 << 28
#: Most vertices a graph recipe (GRUG) may expand to, pooled leaves counted.
MAX_VERTICES = 50_000_000

# -- jobs -------------------------------------------------------------------------

#: Largest count in a jobspec (RFC 14: a 32-bit signed integer).
MAX_COUNT = (1 << 31) - 1
#: Most values in a jobspec's ``resources`` and ``tasks`` together.
MAX_REQUEST_VALUES = 4096
#: Most jobs one workload may hold.
MAX_JOBS = 1_000_000
#: Largest time or duration, in seconds (about 31,700 years): beyond it a float no
#: longer resolves milliseconds, and sums of times could overflow to inf.
MAX_SECONDS = 1e12
#: Longest timeout of a wait on a socket, in seconds: ZeroMQ takes milliseconds
#: as a C int (2**31 - 1 ms, about 24.8 days).
MAX_TIMEOUT = (2**31 - 1) / 1000

# -- sizes ------------------------------------------------------------------------

#: Largest JSON or XML file read whole (workloads, platforms, R), after decompression.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Largest JGF, GRUG or hwloc file: building costs about 0.3 s per MB of JGF.
MAX_GRAPH_BYTES = 16 * 1024 * 1024
#: Largest jobspec given as JSON.
MAX_JOBSPEC_BYTES = 16 * 1024 * 1024
#: Largest YAML document (jobspec, recipe, YAML workload) that is not JSON:
#: PyYAML, even with libyaml, reads about 1 MB/s (70 times slower than JSON),
#: and a YAML workload validates each of its jobspecs (about 1 ms each).  So a
#: YAML workload holds at most about 4,000 inline jobspecs; larger ones are
#: Batsim JSON or SWF.
MAX_YAML_BYTES = 1024 * 1024
#: Most nodes (scalars, lists, mappings) a YAML document may expand to once its
#: aliases are expanded: defeats alias bombs ("billion laughs").
MAX_EXPANDED_NODES = 1_000_000
#: Deepest nesting of a JSON or YAML document, and of RFC 31 constraints.
MAX_DEPTH = 64

# -- streams ------------------------------------------------------------------------

#: Largest stream read line by line (SWF traces, after decompression).
MAX_STREAM_BYTES = 1024 * 1024 * 1024
#: Longest line of an SWF trace (18 numbers).
MAX_LINE_CHARS = 4096
#: Longest command line of a ``match`` session.
MAX_COMMAND_CHARS = 1 << 16
#: A stream that yields no job in its first QUIET_LINES lines or QUIET_BYTES
#: bytes is refused: a trace's header is a few hundred lines, and an endless
#: comment or a decompression bomb of newlines would otherwise run for minutes.
QUIET_LINES = 100_000
QUIET_BYTES = 16 * 1024 * 1024
#: Most job lines a stream may hold, kept or skipped (no run time, no processors).
MAX_STREAM_JOBS = 2 * MAX_JOBS


def check_seconds(value: float, what: str) -> float:
    """``value`` when it is a time or duration in 0..MAX_SECONDS, else ValueError."""
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value:g}")
    if value > MAX_SECONDS:
        raise ValueError(f"{what} {value:g} is beyond the limit of {MAX_SECONDS:g} s")
    return value


def check_count(value: int, what: str, limit: int) -> int:
    """``value`` when it is a count in 1..limit, else ValueError naming the limit."""
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    if value > limit:
        raise ValueError(f"{what} {value} is more than the limit of {limit}")
    return value
