"""ruff lint and format are part of the test suite."""

from __future__ import annotations

import shutil
import subprocess
import sys

from .conftest import REPO


def ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff")
    cmd = [exe] if exe else [sys.executable, "-m", "ruff"]
    return subprocess.run([*cmd, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_check_is_clean():
    proc = ruff("check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean():
    proc = ruff("format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
