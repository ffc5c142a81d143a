"""End-of-campaign duplication: a campaign's makespan with and without copies.

    python bench/bench_duplicates.py [--seeds 1,2,...] [--jobs 200] [--nodes 64] [--write FILE]

One campaign of ``--jobs`` one-node best-effort jobs (``preemptible-after:
0``, campaign ``c``), all submitted at t=0 on an otherwise idle machine of
``--nodes`` nodes; run times log-normal with median 600 s and sigma 0.7
(the 5th to 95th percentile span 10x: 190 s to 1,900 s), seeded; walltime
24 h.  Each seed is replayed (simulated time: the figures do not depend on
machine load) without copies and with ``--duplicates 1`` and ``3``, under
the two copy run-time models of ``--duplicate-runtime``:

* ``same``: a copy runs its original's run time from a fresh start, so it
  never finishes first on an idle machine (it can only lose or tie);
* ``campaign``: a copy's run time is drawn (seeded by its id) from the run
  times of the campaign's jobs: the variation is of the run (a slow node,
  a loaded file server), not of the job.

It prints each seed's campaign makespan, then the medians and the ratio of
each median to the median without copies, and copies started / won / the
node-hours of runs no job kept (copies that lost, originals a copy completed).
``--write FILE`` writes the first seed's workload as a jobspec list
(``fluxsched-py replay FILE --nodes 64 --duplicates 1 --duplicate-runtime
campaign`` replays it).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.replay.metrics import summarize
from fluxsched_py.replay.platform import nodes_graph
from fluxsched_py.replay.sim import replay
from fluxsched_py.replay.workload import Workload, WorkloadJob

MEDIAN, SIGMA, WALLTIME = 600.0, 0.7, 86400.0


def jobspec() -> dict:
    core = {"type": "core", "count": 1}
    slot = {"type": "slot", "count": 1, "label": "task", "with": [core]}
    return {
        "version": 1,
        "resources": [{"type": "node", "count": 1, "exclusive": True, "with": [slot]}],
        "tasks": [{"command": ["job"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": WALLTIME, "preemptible-after": 0}, "user": {"campaign": "c"}},
    }


def runtimes(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [round(math.exp(rng.gauss(math.log(MEDIAN), SIGMA)), 1) for _ in range(n)]


def workload(seed: int, n: int, nodes: int) -> Workload:
    request = parse_jobspec(json.dumps(jobspec(), sort_keys=True))
    jobs = [
        WorkloadJob(i + 1, str(i + 1), 0.0, request, WALLTIME, rt, 1, campaign="c")
        for i, rt in enumerate(runtimes(seed, n))
    ]
    return Workload(jobs, nodes, f"campaign{n}_seed{seed}")


def makespan(seed: int, n: int, nodes: int, copies: int, model: str) -> tuple[float, int, int, float]:
    r = replay(workload(seed, n, nodes), nodes_graph(nodes), {"duplicates": str(copies)}, duplicate_runtime=model)
    s = summarize(r)
    (name, span), *_ = s.campaigns
    assert name == "c" and span is not None
    return span, s.duplicates, s.duplicates_won, s.duplicates_wasted_nh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--write", metavar="FILE")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.write:
        rts = runtimes(seeds[0], args.jobs)
        doc = {
            "nb_res": args.nodes,
            "jobs": [{"id": i + 1, "submit": 0, "runtime": rt, "jobspec": jobspec()} for i, rt in enumerate(rts)],
        }
        Path(args.write).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.write}", file=sys.stderr)
    cols = [(0, "same"), (1, "same"), (1, "campaign"), (3, "campaign")]
    names = ["no copies", "1 copy, same", "1 copy, campaign", "3 copies, campaign"]
    spans: dict[int, list[float]] = {c: [] for c in range(len(cols))}
    print(f"{args.jobs} one-node jobs on {args.nodes} idle nodes, log-normal run times (median {MEDIAN:g} s, "
          f"sigma {SIGMA}); campaign makespan in s (copies started / won / node-h of runs no job kept)")  # fmt: skip
    print("| seed | " + " | ".join(names) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for seed in seeds:
        row = []
        for c, (copies, model) in enumerate(cols):
            span, started, won, wasted = makespan(seed, args.jobs, args.nodes, copies, model)
            spans[c].append(span)
            row.append(f"{span:,.0f}" + (f" ({started} / {won} / {wasted:.1f})" if copies else ""))
        print(f"| {seed} | " + " | ".join(row) + " |")
    base = statistics.median(spans[0])
    meds = [statistics.median(spans[c]) for c in range(len(cols))]
    print("| median | " + " | ".join(f"{m:,.0f}" for m in meds) + " |")
    print("| ratio | " + " | ".join(f"{m / base:.3f}" for m in meds) + " |")


if __name__ == "__main__":
    main()
