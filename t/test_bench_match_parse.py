"""bench/bench_match.py reads Fluxion's match times from resource-query's own output.

resource-query (``-e``) prints, per match, ``INFO: ELAPSE=`` followed by
``std::to_string(seconds)`` (print_schedule_info in Fluxion's
resource/utilities/command.cpp); the benchmark used to look for
``Elapsed=`` and showed "?".  The sample below is that format, written out
by hand from the source, around a ``-F simple`` match.
"""

from __future__ import annotations

import importlib.util
import sys

from .shared import REPO

SAMPLE = """\
      ---------------core0[1:x]
      ------------socket0[1:s]
      ---------node0[1:s]
      ---tiny0[1:s]
INFO: =============================
INFO: JOBID=1
INFO: RESOURCES=ALLOCATED
INFO: SCHEDULED AT=Now
INFO: ELAPSE=0.007012
INFO: PREORDER VISIT COUNT=123
INFO: POSTORDER VISIT COUNT=45
INFO: =============================
INFO: =============================
INFO: No matching resources found
INFO: JOBID=2
INFO: ELAPSE=12.500000
INFO: PREORDER VISIT COUNT=1
INFO: POSTORDER VISIT COUNT=1
INFO: =============================
INFO: Elapsed=9.9
"""


def _bench():
    spec = importlib.util.spec_from_file_location("bench_match", REPO / "bench" / "bench_match.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_elapse_lines_are_parsed_and_nothing_else():
    assert _bench().parse_elapse(SAMPLE) == [0.007012, 12.5]
