"""``fluxsched-py sweep --flux`` inside ``flux start --test-size=2``.

Every run is a Flux job submitted through flux-python; its row comes back
through the job's output file.  The rows must be the ones a local run gives,
and a run that fails (a workload that does not parse) must be a row with its error while
the others complete.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from fluxsched_py.replay.synthetic import write_synthetic_swf
from fluxsched_py.sweep import RunSpec, run_one

from .instance import Instance, flux_exe, python_path_for_broker


@pytest.fixture(scope="module")
def inst():
    i = Instance(2)
    try:
        yield i
    finally:
        i.stop()


def test_sweep_flux_runs_every_cell_as_a_job(inst, tmp_path):
    swf = tmp_path / "w.swf"
    write_synthetic_swf(swf, 50, 8, seed=11)
    broken = tmp_path / "broken.swf"  # readable, so the sweep starts, but no SWF: its runs fail
    broken.write_text("1 0 -1 x y z\n")
    out = tmp_path / "out"
    env = dict(inst.env)
    # flux-core's own interpreter (it has flux-python and cffi), importing this checkout and our dependencies
    env["PYTHONPATH"] = python_path_for_broker()
    cmd = [flux_exe(), "python", "-m", "fluxsched_py", "sweep", "--flux", "--no-report"]
    cmd += [str(swf), str(broken), "--queue-policy", "fcfs,easy", "-o", str(out)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # the broken workload's runs failed
    rows = json.loads((out / "sweep.json").read_text())
    assert [(r["queue_policy"], r["status"]) for r in rows] == [
        ("fcfs", "ok"),
        ("easy", "ok"),
        ("fcfs", "failed"),
        ("easy", "failed"),
    ]
    assert all("broken.swf" in r["error"] for r in rows[2:])
    for r in rows[:2]:
        local = run_one(RunSpec(str(swf), r["queue_policy"], "first"), tmp_path / "local")
        for key in ("jobs", "started", "makespan", "mean_wait", "utilization"):
            assert r[key] == pytest.approx(local[key]), key
    # each run was a Flux job of this instance, and each one ended
    names = inst.run("jobs", "-a", "-no", "{name} {result}").split("\n")
    sweep_jobs = [line for line in names if line.startswith("sweep:")]
    assert len(sweep_jobs) == 4, names
    assert sorted(line.split()[-1] for line in sweep_jobs) == ["COMPLETED", "COMPLETED", "FAILED", "FAILED"]
