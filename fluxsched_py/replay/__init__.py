"""Offline replay of workload traces through the scheduling engine.

The replay is the project's main job: evaluate a queue policy on a trace in
seconds, with no Flux.  It reads a workload (:mod:`.workload`), builds a
resource graph (:mod:`.platform`), runs the engine in simulated time
(:mod:`.sim`), and reports (:mod:`.metrics`, :mod:`.report`).  The command
line is :func:`fluxsched_py.replay.cli.main`.
"""

from .metrics import Summary, summarize
from .sim import JobRecord, ReplayResult, replay
from .workload import Workload, WorkloadError, WorkloadJob, load_workload, node_request

__all__ = [
    "JobRecord",
    "ReplayResult",
    "Summary",
    "Workload",
    "WorkloadError",
    "WorkloadJob",
    "load_workload",
    "node_request",
    "replay",
    "summarize",
]
