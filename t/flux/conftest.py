"""t/flux: tests that run sched-py under a real ``flux start``.

When ``flux`` is not on PATH (or its Python is not this interpreter's
version, so the broker could not import our dependencies), every test here is
skipped with one reason, and the run prints that reason once at the end.
"""

from __future__ import annotations

import sys

import pytest

from .instance import broker_python_version, flux_exe

_HERE = __file__.rsplit("/", 1)[0]
_skip_reason: list[str] = []


def _why_not() -> str | None:
    if flux_exe() is None:
        return "flux not on PATH"
    want = "{}.{}".format(*sys.version_info[:2])
    have = broker_python_version()
    if have != want:
        return f"flux-core's Python is {have}, these tests run under {want}"
    return None


def pytest_collection_modifyitems(config, items):
    mine = [it for it in items if str(it.fspath).startswith(_HERE)]
    if not mine:
        return
    why = _why_not()
    if why is None:
        return
    reason = f"{why}: skipping {len(mine)} Flux tests"
    _skip_reason.append(reason)
    for it in mine:
        it.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _skip_reason:
        terminalreporter.write_line(_skip_reason[0])
