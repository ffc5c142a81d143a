"""The Dockerfile and the CI workflow cannot run here (no Docker engine): lint them.

actionlint checks the workflow, hadolint the Dockerfile; each test skips with
one line when its linter is not on PATH.  The negative cases show the
linters do fail on a broken file.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
DOCKERFILE = REPO / "Dockerfile"


def _tool(name: str) -> str:
    exe = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{name} not installed")
    return exe


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_actionlint_passes_on_the_workflow():
    p = _run(_tool("actionlint"), "-no-color", str(WORKFLOW))
    assert p.returncode == 0, p.stdout + p.stderr


def test_actionlint_fails_on_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.no }}\n"
    )
    assert _run(_tool("actionlint"), "-no-color", str(bad)).returncode != 0


def test_hadolint_passes_on_the_dockerfile():
    p = _run(_tool("hadolint"), "--no-color", str(DOCKERFILE))
    assert p.returncode == 0, p.stdout + p.stderr


def test_hadolint_fails_on_a_broken_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN cd /tmp && apt-get install curl\n")
    assert _run(_tool("hadolint"), "--no-color", str(bad)).returncode != 0


def test_workflow_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    command = re.search(r"```sh\n(python3 -m venv .*pytest t)\n```", readme).group(1)
    assert command in WORKFLOW.read_text()


def test_image_config_makes_sched_py_the_scheduler():
    conf_dir = re.search(r"FLUX_CONF_DIR=/opt/fluxsched-py/src/(\S+)", DOCKERFILE.read_text()).group(1)
    tomls = list((REPO / conf_dir).glob("*.toml"))
    assert tomls
    merged: dict = {}
    for t in tomls:
        merged.update(tomllib.loads(t.read_text()))
    assert merged["modules"]["alternatives"]["sched"] == "sched-py"
    assert re.search(r"^ARG BASE=fluxrm/flux-core:bookworm$", DOCKERFILE.read_text(), re.M)
    assert re.search(r"^FROM \$\{BASE\}$", DOCKERFILE.read_text(), re.M)


def test_the_flux_job_runs_on_flux_core_alone_and_with_fluxion():
    text = WORKFLOW.read_text()
    assert '"fluxrm/flux-core:bookworm", "fluxrm/flux-sched:bookworm"' in text
    assert "BASE=${{ matrix.base }}" in text
