"""Power saving against Batsim: energy, slowdown and agreement, seed by seed.

For each of Batsim's ``example_workload_hpc_seed{1,2,3}_jobs250.json`` on
``energy_platform_homogeneous_no_net_128.xml`` and each ``--power-save``
mode, run the replay and, with ``--batsim BIN`` (a Batsim 4.2 binary), the
same scheduler under that Batsim in energy mode (``-E``).  Prints each run's
energy (Batsim's ``consumed_joules`` and the replay's), its saving against
``off``, the mean bounded slowdown (tau = 10 s) and its ratio to ``off``'s,
the mean wait, and the largest difference between a job's start in the
replay and under Batsim.  docs/rfcs/energy.md quotes its output.

    python bench/bench_energy.py [--batsim /opt/batsim/bin/batsim] [--seeds 1,2,3]
        [--modes off,idle,planned] [--policy easy] [-- extra replay/batsim flags]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from t.shared import CONFORMANCE  # noqa: E402

PLATFORM = CONFORMANCE / "batsim" / "platforms" / "energy_platform_homogeneous_no_net_128.xml"
WORKLOADS = CONFORMANCE / "batsim" / "workloads"
TAU = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "fluxsched_py.cli", *args]


def replay(workload: Path, mode: str, policy: str, extra: list[str], out: Path) -> tuple[float, dict[str, float]]:
    """The replay's energy (J) and each job's start."""
    cmd = _cli("replay", str(workload), "--platform", str(PLATFORM), "--queue-policy", policy,
               "--power-save", mode, "--no-progress", "--json", "--output-dir", str(out), *extra)  # fmt: skip
    row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)[0]
    with (out / "jobs.csv").open() as f:
        starts = {r["job_id"]: float(r["starting_time"]) for r in csv.DictReader(f)}
    return row["energy_joules"], starts


def batsim(binary: str, workload: Path, mode: str, policy: str, extra: list[str], out: Path) -> dict:
    """One run of the scheduler under Batsim: its out_schedule.csv row and out_jobs.csv rows."""
    port = _free_port()
    sched = subprocess.Popen(
        _cli(
            "batsim",
            "--socket",
            f"tcp://*:{port}",
            "--queue-policy",
            policy,
            "--power-save",
            mode,
            "--platform",
            str(PLATFORM),
            *extra,
        ),  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        prefix = out / "out"
        subprocess.run(
            [
                binary,
                "-p",
                str(PLATFORM),
                "-w",
                str(workload),
                "-E",
                "-e",
                str(prefix),
                "-s",
                f"tcp://localhost:{port}",
                "-q",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=600,
        )
        sched.wait(timeout=60)
    finally:
        if sched.poll() is None:
            sched.kill()
    with (out / "out_schedule.csv").open() as f:
        schedule = next(csv.DictReader(f))
    with (out / "out_jobs.csv").open() as f:
        jobs = list(csv.DictReader(f))
    return {"schedule": schedule, "jobs": jobs}


def bsld(rows: list[tuple[float, float]]) -> float:
    return sum(max(1.0, (w + r) / max(TAU, r)) for w, r in rows) / len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batsim", help="a Batsim 4.2 binary: run each case under it too")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--modes", default="off,idle,planned")
    ap.add_argument("--policy", default="easy")
    ap.add_argument("extra", nargs="*", help="more flags for both (after --)")
    a = ap.parse_args(argv)
    if not PLATFORM.exists():
        print(f"no {PLATFORM}: nothing to run (the shared conformance corpora are missing)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-energy-"))
    head = ("seed", "mode", "batsim MJ", "replay MJ", "saved", "bsld", "x off", "wait s", "max dstart")
    print("{:>4} {:8} {:>10} {:>10} {:>7} {:>6} {:>6} {:>7} {:>10}".format(*head))
    for seed in a.seeds.split(","):
        workload = WORKLOADS / f"example_workload_hpc_seed{seed}_jobs250.json"
        base = None
        for mode in a.modes.split(","):
            out = work / f"s{seed}-{mode}"
            out.mkdir()
            joules, starts = replay(workload, mode, a.policy, a.extra, out / "replay")
            if a.batsim:
                b = batsim(a.batsim, workload, mode, a.policy, a.extra, out)
                energy = float(b["schedule"]["consumed_joules"])
                waits = [(float(j["waiting_time"]), float(j["execution_time"])) for j in b["jobs"]]
                theirs = {j["job_id"]: float(j["starting_time"]) for j in b["jobs"]}
                dstart = f"{max(abs(theirs[k] - starts[k]) for k in theirs):10.4f}"
                shown = f"{energy / 1e6:10.3f}"
            else:
                energy = joules
                with (out / "replay" / "jobs.csv").open() as f:
                    waits = [(float(r["waiting_time"]), float(r["execution_time"])) for r in csv.DictReader(f)]
                dstart, shown = f"{'-':>10}", f"{'-':>10}"
            slow = bsld(waits)
            wait = sum(w for w, _ in waits) / len(waits)
            if base is None:
                base = (energy, slow)
            saved = 100 * (base[0] - energy) / base[0]
            ratio = slow / base[1]
            line = f"{seed:>4} {mode:8} {shown} {joules / 1e6:10.3f} {saved:6.1f}% {slow:6.3f} {ratio:6.3f} {wait:7.1f}"
            print(line, dstart)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
