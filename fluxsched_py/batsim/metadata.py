"""The text of a job's ``metadata`` column in Batsim's ``out_jobs.csv``.

The v4 driver sends it with ``SET_JOB_METADATA`` (``--job-metadata``), and
Batsim writes the last one a job got; the replay's ``jobs.csv`` writes the
same text in the same column (``replay --job-metadata``), so the two files
can be compared row for row.
"""

from __future__ import annotations

__all__ = ["job_metadata"]


def job_metadata(preemptions: int, reason: str | None) -> str:
    """``preemptions=N;reason_pending=TEXT``: the times the job was preempted
    and the last ``reason_pending`` the engine gave it (empty if none); the
    reason last, so that it may hold any character but the double quote,
    which Batsim refuses (it writes the text between double quotes) and
    becomes a single one, and control characters, which become spaces."""
    text = "".join(" " if ord(c) < 32 else c for c in (reason or "")).replace('"', "'")
    return f"preemptions={preemptions};reason_pending={text}"
