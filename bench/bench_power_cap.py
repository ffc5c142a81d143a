"""The power cap on Batsim's seed workloads: max power against the cap, energy, mean wait.

For each of ``example_workload_hpc_seed{1,2,3}_jobs250.json`` on
``energy_platform_homogeneous_no_net_128.xml``, replays the workload with
no cap and with ``--power-cap`` at ``--share`` of the machine's peak (every
node computing), and reads the most the machine drew at any instant from
the replay's power series.  Two variants:

* ``as-is``: the workload as Batsim runs it.  Its jobs are ``delay``
  profiles, which SimGrid draws at idle watts, so the cap never binds;
* ``computing`` (``--computing``): every job planned and drawn at computing
  watts, the jobs too big ever to fit under the cap left out (a job of N
  nodes adds N x (computing - idle) watts), so the cap binds.

With ``--power-save idle|planned``, both runs switch idle nodes off too:
a sleeping node draws less than an idle one, and the cap leaves what it
saves to jobs.

Checks what docs/rfcs/energy.md states: never over the cap, every job
runs, none after its first ``t_estimate`` (with power saving off: a boot
the cap has no room for yet may move a start past it).

    python bench/bench_power_cap.py [--seeds 1,2,3] [--share 0.6] [--policy easy] [--computing]
        [--power-save off|idle|planned]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fluxsched_py.replay import replay  # noqa: E402
from fluxsched_py.replay.platform import load_platform, load_power  # noqa: E402
from fluxsched_py.replay.workload import Workload, load_workload  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "conformance" / "batsim"
PLATFORM = SHARED / "platforms" / "energy_platform_homogeneous_no_net_128.xml"


def max_watts(result) -> float:
    times, watts = result.power_series()
    return max(w for k, w in enumerate(watts) if k + 1 == len(times) or times[k + 1] > times[k])


def computing(workload: Workload, room: float, extra: float) -> Workload:
    """``workload`` with every job computing, less those over ``room`` watts."""
    jobs = []
    for j in workload.jobs:
        if j.nodes * extra > room:
            continue
        j = dataclasses.replace(j, request=dataclasses.replace(j.request, computes=True))
        j.computes = True
        jobs.append(j)
    return Workload(jobs, workload.nb_res, workload.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--share", type=float, default=0.6)
    ap.add_argument("--policy", default="easy")
    ap.add_argument("--computing", action="store_true")
    ap.add_argument("--power-save", default="off", choices=["off", "idle", "planned"])
    args = ap.parse_args(argv)
    models = load_power(PLATFORM)
    peak = sum(m.computing_watts for m in models)
    idle = sum(m.idle_watts for m in models)
    cap = args.share * peak
    extra = models[0].computing_watts - models[0].idle_watts
    saving = {"power-save": args.power_save}
    print(
        f"power-save={args.power_save}; cap {cap:.1f} W "
        f"({args.share:.0%} of {peak:.1f} W peak; idle machine {idle:.1f} W)"
    )
    print("seed  cap   jobs  energy (MJ)  mean wait (s)  max power (W)  all ran  none after first t_estimate")
    ok = True
    for seed in args.seeds.split(","):
        workload = load_workload(SHARED / "workloads" / f"example_workload_hpc_seed{seed}_jobs250.json")
        if args.computing:
            workload = computing(workload, cap - idle, extra)
        for label, options in (("none", {}), ("cap", {"power-cap": str(cap)})):
            result = replay(
                workload, load_platform(PLATFORM), {"queue-policy": args.policy, **saving, **options}, power=models
            )
            recs = result.records
            ran = all(r.start is not None for r in recs)
            kept = all(r.first_estimate is None or r.start <= r.first_estimate + 1e-9 for r in recs if r.start)
            waits = [r.start - r.job.submit for r in recs if r.start is not None]
            top = max_watts(result)
            if label == "cap":
                ok = ok and ran and (kept or args.power_save != "off") and top <= cap + 1e-6
            print(
                f"{seed:>4}  {label:<4} {len(recs):>5}  {result.energy.total / 1e6:11.3f}  "
                f"{sum(waits) / len(waits):13.1f}  {top:13.1f}  {'yes' if ran else 'NO':>7}  "
                f"{'yes' if kept else 'NO'}"
            )
    return 0 if ok and math.isfinite(cap) else 1


if __name__ == "__main__":
    sys.exit(main())
