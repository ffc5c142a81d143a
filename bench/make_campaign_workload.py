"""Write a Batsim workload: a regular workload plus a best-effort campaign.

    python bench/make_campaign_workload.py REGULAR.json[.gz] OUT.json [--jobs 2000] [--seed 1]
        [--minutes 1-20] [--walltime 1800] [--checkpoint]

The campaign is ``--jobs`` one-node jobs, all submitted at t=0 with
``preemptible-after: 0``, in campaign ``cigri-1`` (type ``default``); their
run times are drawn (seeded, uniform) from whole minutes in ``--minutes``
(default 1 to 20: 60, 120, ..., 1200 s), one ``delay`` profile each,
walltime ``--walltime`` seconds (default 1800).  ``--checkpoint`` makes
every campaign job checkpoint on its preemption notice (``"checkpoint":
"signal"``).  The regular jobs are copied unchanged.
``t/data/batsim/seed1_campaign2000.json.gz`` is this script's output on
Batsim's ``example_workload_hpc_seed1_jobs250.json`` with the defaults.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("regular")
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", default="1-20", help="run times: whole minutes LO-HI, uniform")
    ap.add_argument("--walltime", type=float, default=1800.0)
    ap.add_argument("--checkpoint", action="store_true", help="campaign jobs checkpoint on their notice")
    args = ap.parse_args()
    lo, _, hi = args.minutes.partition("-")
    lo_m, hi_m = int(lo), int(hi or lo)
    raw = Path(args.regular).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    rng = random.Random(args.seed)
    first = max(int(j["id"]) for j in data["jobs"]) + 1
    for m in range(lo_m, hi_m + 1):
        data["profiles"][f"be_{60 * m}"] = {"type": "delay", "delay": 60.0 * m}
    for k in range(args.jobs):
        job = {
            "id": first + k,
            "subtime": 0,
            "walltime": int(args.walltime) if args.walltime.is_integer() else args.walltime,
            "res": 1,
            "profile": f"be_{60 * rng.randint(lo_m, hi_m)}",
            "preemptible-after": 0,
            "campaign": "cigri-1",
            "campaign-type": "default",
            "user": "cigri",
        }
        if args.checkpoint:
            job["checkpoint"] = "signal"
        data["jobs"].append(job)
    data["description"] = f"{data.get('description', '')} + a best-effort campaign of {args.jobs} one-node jobs"
    text = json.dumps(data, indent=None, separators=(",", ":")).encode()
    out = Path(args.out)
    out.write_bytes(gzip.compress(text, mtime=0) if out.suffix == ".gz" else text)


if __name__ == "__main__":
    main()
