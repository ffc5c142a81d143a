"""Best-effort work lost to preemption, with and without notice and checkpoints.

The issue-25 mix: Batsim's seed-1 HPC workload (250 regular jobs, 128
nodes) plus a 2,000-job campaign of one-node jobs of 5 to 60 minutes
(uniform whole minutes, walltime 3600 s, ``preemptible-after: 0``), made by
``bench/make_campaign_workload.py --minutes 5-60 --walltime 3600`` (and
``--checkpoint`` for the runs where every campaign job checkpoints on its
notice).  Under fcfs, easy and conservative it replays:

* ``main``: the main this branch started from (``--base DIR``, a
  worktree of it; made only when given), with no option;
* ``default``: this code (``--code``, default this tree) with no option;
* ``prefer``: ``besteffort-fit=prefer``, the default before ``require``;
* ``fit``: ``besteffort-fit=require`` and no grace time;
* ``fit+grace``: ``fit`` with ``preempt-grace=60``, no job checkpointing;
* ``fit+ckpt``: ``fit+grace`` with every campaign job checkpointing on its notice;
* ``fewest+ckpt``: ``fit+ckpt`` with ``preempt-victims=fewest``;
* ``fit+grace+wait-ckpt``: ``fit+grace`` with ``preempt-wait=checkpoint``
  (a regular job waits only for victims that checkpoint: here, none);
* ``fit+ckpt+wait-ckpt``: ``fit+ckpt`` with ``preempt-wait=checkpoint``
  (every victim checkpoints: the same waits as ``fit+ckpt``);
* ``fit+ckpt+wait-none``: ``fit+ckpt`` with ``preempt-wait=none`` (no wait:
  a victim still in its first notice loses the work since its start);

and prints best-effort work completed, lost and recovered (node-hours),
lost / completed, preemptions, and how the regular jobs' start times compare
with a replay of the regular workload alone: how many differ (by more than
1e-6 s); the most one is late; how many started later than the reservation
they held when their start came (its planned start after the last pass
before it started: they waited for victims past it; a job that starts at
its first pass, or that easy did not reserve for, held none); and how many
of those that waited in the run alone (a planned start) are late.  Each
replay runs in a process of its own (``--one``), with the given code on its
``PYTHONPATH``.  Simulated time: the figures do not depend on the machine's load.

    python bench/bench_grace.py [--base DIR] [--code TREE]
        [--policies fcfs,easy,conservative] [--runs fit+grace,...] [-j 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGULAR = ROOT / "t" / "data" / "batsim" / "example_workload_hpc_seed1_jobs250.json.gz"

#: run name -> (code: "main" or "here", workload: "plain" or "checkpoint", extra replay flags)
FIT = ["--besteffort-fit", "require"]
GRACE = [*FIT, "--preempt-grace", "60"]
RUNS = {
    "main": ("main", "plain", []),
    "default": ("here", "plain", []),
    "prefer": ("here", "plain", ["--besteffort-fit", "prefer"]),
    "fit": ("here", "plain", FIT),
    "fit+grace": ("here", "plain", GRACE),
    "fit+ckpt": ("here", "checkpoint", GRACE),
    "fewest+ckpt": ("here", "checkpoint", [*GRACE, "--preempt-victims", "fewest"]),
    "fit+grace+wait-ckpt": ("here", "plain", [*GRACE, "--preempt-wait", "checkpoint"]),
    "fit+ckpt+wait-ckpt": ("here", "checkpoint", [*GRACE, "--preempt-wait", "checkpoint"]),
    "fit+ckpt+wait-none": ("here", "checkpoint", [*GRACE, "--preempt-wait", "none"]),
}


def make(out: Path, checkpoint: bool) -> None:
    cmd = [sys.executable, str(ROOT / "bench" / "make_campaign_workload.py"), str(REGULAR), str(out)]
    cmd += ["--minutes", "5-60", "--walltime", "3600"] + (["--checkpoint"] if checkpoint else [])
    subprocess.run(cmd, check=True)


def replay(pythonpath: Path, workload: Path, policy: str, flags: list[str], outdir: Path) -> tuple[dict, dict]:
    """The replay's summary and each job's (submit, start, reserved start held when its start came)."""
    # -S: no site, so no .pth of an editable install of this tree (whose
    # import hook would win over PYTHONPATH); the dependencies come from purelib.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), sysconfig.get_paths()["purelib"]])}
    # in a process of its own, with the reservations read after each pass (one())
    cmd = [sys.executable, "-S", str(Path(__file__).resolve()), "--one", str(workload), policy, str(outdir), "--"]
    subprocess.run([*cmd, *flags], env=env, check=True, cwd=outdir.parent)
    with open(outdir / "one.json") as f:
        data = json.load(f)
    return data["summary"], {k: tuple(v) for k, v in data["starts"].items()}


def one(workload: str, policy: str, outdir: str, flags: list[str]) -> None:
    """``--one``: replay ``workload`` in this process (this tree's code) and
    write ``outdir/one.json``: the summary, and each job's submit, start and
    the start its reservation had after the last pass before it started
    (None when it held none then: it started at its first pass, or easy
    reserved for another job)."""
    from fluxsched_py.engine.options import from_flags
    from fluxsched_py.engine.states import JobState
    from fluxsched_py.replay.cli import build_parser
    from fluxsched_py.replay.metrics import summarize
    from fluxsched_py.replay.platform import nodes_graph
    from fluxsched_py.replay.provenance import REPLAY_ENGINE_DEFAULTS
    from fluxsched_py.replay.sim import replay as run
    from fluxsched_py.replay.workload import load_workload

    args = build_parser().parse_args([workload, "--queue-policy", policy, *flags])
    options = from_flags(args, REPLAY_ENGINE_DEFAULTS, {"queue-policy": policy})
    w = load_workload(workload)
    prev: dict[int, float] = {}
    held: dict[int, float] = {}

    def check(engine) -> None:
        nonlocal prev
        cur = {s.jobid: s.start for s in engine.planner.reserved()}
        for jid, start in prev.items():
            if jid not in cur and (j := engine.job(jid)) is not None and j.state is not JobState.PENDING:
                held[jid] = start  # it left its reservation by starting (or waiting for victims)
        prev = cur

    result = run(w, nodes_graph(w.nb_res, 1), options, check=check)
    starts = {r.job.name: (r.job.submit, r.start, held.get(r.job.id)) for r in result.records}
    with open(Path(outdir) / "one.json", "w") as f:
        json.dump({"summary": summarize(result).as_dict(), "starts": starts}, f)


def compare(alone: dict, mixed: dict) -> tuple[int, float, int, int]:
    """(regular jobs whose start differs, the most one is late, planned starts
    that are late, jobs that started later than the reservation they held
    when their start came)."""
    differ, late, planned_late, past_reservation = 0, 0.0, 0, 0
    for jid, (submit, s0, _) in alone.items():
        s1, held = mixed[jid][1], mixed[jid][2]
        if s0 is None or s1 is None:
            differ += s0 != s1
            continue
        if abs(s1 - s0) > 1e-6:
            differ += 1
        late = max(late, s1 - s0)
        if s0 > submit + 1e-6 and s1 > s0 + 1e-6:
            planned_late += 1
        if held is not None and s1 > held + 1e-6:
            past_reservation += 1
    return differ, late, planned_late, past_reservation


def main() -> None:
    if sys.argv[1:2] == ["--one"]:  # a replay of this tree's code, in a process of its own (see replay())
        workload, policy, outdir, sep, *flags = sys.argv[2:]
        one(workload, policy, outdir, flags)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="a checkout of the main to compare with (the run 'main', else not made)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the code of the runs but main (default: this tree)")
    ap.add_argument("--policies", default="fcfs,easy,conservative")
    ap.add_argument("--runs", default="", help="the runs to make (default: all, 'main' only with --base)")
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    runs = [r for r in args.runs.split(",") if r] or [r for r in RUNS if r != "main" or args.base]
    if unknown := sorted(set(runs) - set(RUNS)):
        ap.error(f"--runs: no run named {', '.join(unknown)} (runs: {', '.join(RUNS)})")
    if "main" in runs and args.base is None:
        ap.error("--runs main needs --base (a checkout of the main to compare with)")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make(d / "plain.json", False)
        make(d / "checkpoint.json", True)
        jobs = []
        for pol in policies:
            jobs.append((pol, "alone", args.code, REGULAR, []))
            for name in runs:
                code, wl, flags = RUNS[name]
                jobs.append((pol, name, args.base if code == "main" else args.code, d / f"{wl}.json", flags))

        def run(job):
            pol, name, code, wl, flags = job
            (d / f"{pol}-{name}").mkdir()
            return (pol, name), replay(code, wl, pol, flags, d / f"{pol}-{name}")

        with ThreadPoolExecutor(args.j) as pool:
            results = dict(pool.map(run, jobs))
    print(
        "| policy | run | completed (node-h) | lost (node-h) | lost / completed | recovered (node-h) "
        "| preemptions | regular starts changed | most late (s) | later than their reservation "
        "| planned starts late |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pol in policies:
        alone = results[pol, "alone"][1]
        for name in runs:
            s, starts = results[pol, name]
            regular = {k: v for k, v in starts.items() if k in alone}
            differ, late, planned_late, past = compare(alone, regular)
            c, lost = s["besteffort_completed_nh"], s["besteffort_lost_nh"]
            rec = s.get("besteffort_recovered_nh", 0.0)
            print(
                f"| {pol} | {name} | {c:.1f} | {lost:.1f} | {lost / c:.3f} | {rec:.1f} | {s['preemptions']} "
                f"| {differ} | {late:.1f} | {past} | {planned_late} |"
            )


if __name__ == "__main__":
    main()
