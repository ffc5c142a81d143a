"""``fluxsched-py sweep``: the grid of workloads x queue policies x placement policies x options.

:mod:`.grid` expands the grid into run specs, :mod:`.worker` runs one spec
(in a process pool, :mod:`.local`, or as a Flux job, :mod:`.fluxrun`),
:mod:`.output` writes ``sweep.csv``, ``sweep.json``, the comparison table
and the report, and :mod:`.cli` is the command line.
"""

from .grid import RunSpec, expand
from .worker import run_one

__all__ = ["RunSpec", "expand", "run_one"]
