"""Where the shared conformance corpora are: the one place tests and benchmarks look it up.

``../shared`` next to the repository (``/work/shared`` beside ``/work/wt-NAME``
on the development machine), or the folder ``FLUXSCHED_SHARED`` names.  No
other path is tried: without it, the tests that need it skip and the
benchmarks say what they did not run.  Nothing here imports pytest, so the
scripts in ``bench/`` use it too.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO", "SHARED", "CONFORMANCE"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLUXSCHED_SHARED") or REPO.parent / "shared")
CONFORMANCE = SHARED / "conformance"
