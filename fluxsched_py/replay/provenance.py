"""What a result row says about how it was made: every ``replay --json`` row and ``sweep.csv`` row.

``workload`` (the path as given) and ``workload_sha256`` (of the file's
bytes, as stored: a ``.swf.gz`` is hashed compressed; None for stdin),
``nodes`` and ``cores``, ``queue_policy``, ``placement_policy``,
``walltime_model`` and ``walltime_filled`` (what SWF jobs without a
requested time are given, and how many jobs were), ``options`` (every option that differs from its default, derived
from the engine's :data:`~fluxsched_py.engine.options.OPTIONS` table and,
for ``replay``, from its command line's own table) and ``version``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from .. import __version__
from ..engine import EngineOptions
from .workload import Workload

__all__ = ["file_sha256", "describe", "engine_option_changes", "REPLAY_ENGINE_DEFAULTS"]

#: The engine options a replay sets unless told otherwise (it needs t_estimate, never
#: reason_pending texts); a row lists an option only when it differs from these.
REPLAY_ENGINE_DEFAULTS: Mapping[str, str] = {"annotate-depth": "0"}
#: Recorded in their own columns, not among ``options``.
_OWN_COLUMNS = ("queue-policy", "policy")


def file_sha256(path: str | os.PathLike[str] | None) -> str | None:
    """The sha256 of a file's bytes, or None for stdin (``-``) or no file."""
    if path is None or str(path) == "-":
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def engine_option_changes(options: EngineOptions) -> dict[str, Any]:
    """The engine options that differ from a replay's defaults, by name (queue and placement
    policies left out: they have their own columns)."""
    base = EngineOptions.parse({**REPLAY_ENGINE_DEFAULTS, "queue-policy": options.queue_policy}).as_dict()
    mine = options.as_dict()
    return {k: v for k, v in mine.items() if k not in _OWN_COLUMNS and v != base[k]}


def describe(
    workload_path: str | None,
    workload: Workload,
    options: EngineOptions,
    nodes: int,
    cores: int,
    extra: Mapping[str, Any] | None = None,
    sha256: str | None = None,
) -> dict[str, Any]:
    """The provenance columns of one run; ``extra`` adds non-engine options (e.g. the command
    line's), ``sha256`` saves hashing a file already hashed."""
    return {
        "workload": workload_path if workload_path is not None else workload.name,
        "workload_sha256": sha256 if sha256 is not None else file_sha256(workload_path),
        "nodes": nodes,
        "cores": cores,
        "queue_policy": options.queue_policy,
        "placement_policy": options.placement,
        "walltime_model": workload.walltime_model,
        "walltime_filled": workload.walltime_filled,
        "options": {**engine_option_changes(options), **dict(extra or {})},
        "version": __version__,
    }
