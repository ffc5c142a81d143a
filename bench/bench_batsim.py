#!/usr/bin/env python3
"""fluxsched-py as Batsim's decision process, against a real Batsim and the offline replay.

Two tables:

1. **Round trip from recorded traffic** (always runs).  The committed real
   Batsim recordings in ``t/data/batsim/`` (4.2.1, and under ``batprotocol/``
   and ``legacy/`` Batsim 5 and 2.0) are played into their driver
   in-process; per message it reports the median/p95 wall time of the whole
   reply (engine pass included) and of the driver alone (decoding, encoding
   and bookkeeping: the total minus the time spent inside ``Engine`` calls).
2. **Real Batsim** (runs when ``batsim`` is on PATH, or for each ``--batsim
   PATH``; prints a clear line and skips otherwise).  For fcfs and easy, on
   ``cluster512.xml`` with all 512 hosts and with ``--mmax 128`` (the
   workload's own ``nb_res``, where jobs wait and the policies differ), it
   runs ``batsim`` against ``fluxsched-py batsim`` on the seed-1 workload
   (250 jobs), reads Batsim's own jobs CSV, and compares every job's start
   time with the offline replay of the same workload on the same number of
   nodes.  It also reports the socket round-trip median (message received to
   reply sent) measured by ``fluxsched-py batsim --stats``, and the mean per
   message of the time Batsim itself says it waited for the scheduler
   (``scheduling_time`` in its schedule CSV, ZeroMQ transport included).
   A Batsim of the batprotocol era (its ``--help`` has ``--edc-socket-str``,
   e.g. commit 3bb38700) is run with ``--protocol batprotocol`` and
   ``--edc-socket-str tcp://localhost:PORT 1 INIT``; Batsim 3/4 with the v4
   protocol.

    python bench/bench_batsim.py                 # both tables
    python bench/bench_batsim.py --keep DIR      # keep Batsim outputs and recordings in DIR
    python bench/bench_batsim.py --batsim /opt/batsim/bin/batsim --batsim /opt/batsim5/bin/batsim

This is a benchmark, not a test: it prints, and exits non-zero only when a
simulation fails or a start time is more than 0.1 s off the replay.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fluxsched_py.batsim.cli import Recorder, make_driver  # noqa: E402
from fluxsched_py.engine import Engine, EngineOptions  # noqa: E402
from fluxsched_py.replay import load_workload, replay  # noqa: E402
from fluxsched_py.replay.platform import nodes_graph  # noqa: E402

DATA = ROOT / "t" / "data" / "batsim"
from t.shared import SHARED  # noqa: E402 - the one place that finds ../shared

PLATFORM = SHARED / "conformance" / "batsim" / "platforms" / "cluster512.xml"
WORKLOAD = SHARED / "conformance" / "batsim" / "workloads" / "example_workload_hpc_seed1_jobs250.json"
TOLERANCE = 0.1


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def _ms(xs: list[float], q: float) -> str:
    s = sorted(xs)
    return f"{s[min(len(s) - 1, int(q * len(s)))] * 1e3:.3f}" if q != 0.5 else f"{statistics.median(s) * 1e3:.3f}"


def recorded_round_trips() -> None:
    import gzip

    manifest = json.loads((DATA / "MANIFEST.json").read_text())
    wl_dir = Path(tempfile.mkdtemp(prefix="bench_batsim_wl_"))
    recordings = [(DATA, rec, []) for rec in manifest["recordings"]]
    for sub in ("batprotocol", "legacy"):
        for rec in json.loads((DATA / sub / "MANIFEST.json").read_text())["recordings"]:
            src = DATA / sub / rec["workload"]
            if src.suffix == ".gz":
                dst = wl_dir / src.name.removesuffix(".gz")
                if not dst.exists():
                    dst.write_bytes(gzip.decompress(src.read_bytes()))
                src = dst
            recordings.append((DATA / sub, rec, [str(src)]))
    engine_time = [0.0]
    originals = {name: getattr(Engine, name) for name in ("alloc", "free", "schedule")}

    def timed(f):
        def wrapper(self, *a, **k):
            t0 = time.perf_counter()
            try:
                return f(self, *a, **k)
            finally:
                engine_time[0] += time.perf_counter() - t0

        return wrapper

    rows = []
    try:
        for name, f in originals.items():
            setattr(Engine, name, timed(f))
        for where, rec, workloads in recordings:
            msgs = [raw for d, raw in Recorder.load(where / rec["file"]) if d == "in"]
            total, own = [], []
            for _ in range(3):  # a few repetitions for stable medians
                nodes = rec["nodes"] if rec["protocol"] == "legacy" else None  # that protocol does not say
                driver = make_driver(rec["protocol"], EngineOptions.parse(rec["options"]), workloads, nodes=nodes)
                for raw in msgs:
                    engine_time[0] = 0.0
                    t0 = time.perf_counter()
                    driver.handle(raw)
                    dt = time.perf_counter() - t0
                    total.append(dt)
                    own.append(dt - engine_time[0])
            rows.append(
                [
                    rec["file"],
                    str(len(msgs)),
                    _ms(total, 0.5),
                    _ms(total, 0.95),
                    _ms(own, 0.5),
                    _ms(own, 0.95),
                ]
            )
    finally:
        for name, f in originals.items():
            setattr(Engine, name, f)
    print("Driver round trip per Batsim message, from recorded real traffic (ms)")
    print(
        table(
            ["recording", "messages", "total median", "total p95", "driver-only median", "driver-only p95"],
            rows,
        )
    )
    print()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_jobs_csv(path: Path) -> dict[int | str, dict[str, str]]:
    out: dict[int | str, dict[str, str]] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            jid = str(row["job_id"]).rsplit("!", 1)[-1]
            out[int(jid) if jid.isdigit() else jid] = row
    return out


def batsim_protocol(batsim: str) -> str:
    """``batprotocol`` for a Batsim of the batprotocol era (Batsim 5), else ``v4``."""
    help_text = subprocess.run([batsim, "--help"], capture_output=True, text=True).stdout
    return "batprotocol" if "--edc-socket-str" in help_text else "v4"


def run_batsim(batsim: str, policy: str, mmax: int, outdir: Path, timeout: float = 600.0, protocol: str = "v4") -> dict:
    port = free_port()
    outdir.mkdir(parents=True, exist_ok=True)
    stats = outdir / "stats.json"
    sched = subprocess.Popen(
        [sys.executable, "-m", "fluxsched_py", "batsim", "--protocol", protocol, "--socket", f"tcp://*:{port}"]
        + ["--queue-policy", policy]
        + ["--stats", str(stats), "--record", str(outdir / "traffic.jsonl"), "-q", "--timeout", "120"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    if protocol == "batprotocol":
        # Batsim 5: JSON mode (1) and an init string; outputs go to the directory out/.
        cmd = [batsim, "-p", str(PLATFORM), "-w", str(WORKLOAD), "--edc-socket-str", f"tcp://localhost:{port}"]
        cmd += ["1", "INIT", "-e", f"{outdir / 'out'}/", "-q"]
        csv_prefix = f"{outdir / 'out'}/"
    else:
        cmd = [batsim, "-p", str(PLATFORM), "-w", str(WORKLOAD), "-s", f"tcp://localhost:{port}"]
        cmd += ["-e", str(outdir / "out"), "-q"]
        csv_prefix = f"{outdir / 'out_'}"
    if mmax:
        cmd += ["--mmax", str(mmax)]
    t0 = time.monotonic()
    bat = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    try:
        _, sched_err = sched.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        sched.kill()
        _, sched_err = sched.communicate()
    wall = time.monotonic() - t0
    result = {"batsim_status": bat.returncode, "sched_status": sched.returncode, "wall": wall}
    if bat.returncode != 0:
        result["error"] = (bat.stderr or bat.stdout)[-2000:]
    if sched.returncode != 0:
        result["error"] = result.get("error", "") + sched_err[-2000:]
    if stats.exists():
        result["stats"] = json.loads(stats.read_text())
    sched_csv = Path(f"{csv_prefix}schedule.csv")
    if sched_csv.exists():
        with open(sched_csv) as f:
            row = next(csv.DictReader(f), {})
        if row.get("scheduling_time"):
            result["batsim_scheduling_time"] = float(row["scheduling_time"])
    jobs_csv = Path(f"{csv_prefix}jobs.csv")
    if jobs_csv.exists():
        result["jobs"] = read_jobs_csv(jobs_csv)
    return result


def real_batsim(keep: Path | None, batsim: str | None = None) -> int:
    batsim = batsim or shutil.which("batsim")
    if batsim is None:
        print("Real Batsim: skipped — `batsim` is not on PATH (build Batsim 4.2 and add it to PATH to run this part).")
        return 0
    if not PLATFORM.exists() or not WORKLOAD.exists():
        print(f"Real Batsim: skipped — conformance files not found under {SHARED}.")
        return 0
    version = subprocess.run([batsim, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    protocol = batsim_protocol(batsim)
    workload = load_workload(WORKLOAD)
    base = keep or Path(tempfile.mkdtemp(prefix="bench_batsim_"))
    base = base / protocol if keep else base
    rows = []
    failed = 0
    for mmax, nodes in ((0, 512), (128, 128)):
        for policy in ("fcfs", "easy"):
            res = run_batsim(batsim, policy, mmax, base / f"{policy}-{nodes}", protocol=protocol)
            ref = replay(workload, nodes_graph(nodes), EngineOptions.parse({"queue-policy": policy}))
            ref_start = {r.job.id: r.start for r in ref.records}
            jobs = res.get("jobs", {})
            done = sum(1 for j in jobs.values() if j.get("final_state", "").startswith("COMPLETED"))
            deltas = [
                abs(float(j["starting_time"]) - ref_start[jid])
                for jid, j in jobs.items()
                if ref_start.get(jid) is not None and j.get("starting_time") not in (None, "", "-1")
            ]
            worst = max(deltas) if deltas else float("nan")
            ok = (
                res["batsim_status"] == 0
                and res["sched_status"] == 0
                and done == len(workload.jobs)
                and len(deltas) == len(workload.jobs)
                and worst <= TOLERANCE
            )
            failed += not ok
            rt = res.get("stats", {}).get("round_trip", {})
            seen_by_batsim = res.get("batsim_scheduling_time")
            batsim_mean = seen_by_batsim / rt["messages"] * 1e3 if seen_by_batsim and rt.get("messages") else None
            makespan = max((float(j["finish_time"]) for j in jobs.values()), default=float("nan"))
            ref_makespan = max(r.finish for r in ref.records if r.finish is not None)
            rows.append(
                [
                    policy,
                    f"{nodes}" + (" (--mmax)" if mmax else ""),
                    f"{done}/{len(workload.jobs)}",
                    f"{worst:.6f}",
                    f"{statistics.mean(deltas):.6f}" if deltas else "nan",
                    f"{makespan:.2f}",
                    f"{ref_makespan:.2f}",
                    f"{rt.get('median_ms', float('nan')):.3f}",
                    f"{batsim_mean:.3f}" if batsim_mean is not None else "—",
                    f"{rt.get('messages', 0)}",
                    "ok" if ok else "FAIL",
                ]
            )
            if not ok and "error" in res:
                print(f"{policy}/{nodes}: {res['error']}", file=sys.stderr)
    print(
        f"Real Batsim ({version[0] if version else batsim}, --protocol {protocol}) vs offline replay, "
        f"{WORKLOAD.name} on {PLATFORM.name}"
    )
    print(
        table(
            [
                "policy",
                "hosts",
                "jobs done",
                "max |Δstart| s",
                "mean |Δstart| s",
                "makespan",
                "replay makespan",
                "round trip median ms",
                "Batsim-side mean ms*",
                "messages",
                "",
            ],
            rows,
        )
    )
    print(f"(tolerance {TOLERANCE} s; outputs in {base})")
    print("* Batsim's scheduling_time / messages: ZeroMQ transport included, and the one-off graph build at")
    print("  SIMULATION_BEGINS, so it is a mean, not a median.")
    return 1 if failed else 0


def main() -> int:
    logging.getLogger("fluxsched_py").setLevel(logging.ERROR)  # the recordings include rejections
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", type=Path, help="keep Batsim outputs and recordings here")
    ap.add_argument(
        "--batsim",
        action="append",
        metavar="PATH",
        help="a Batsim binary to run (repeat for several; default: batsim on PATH); "
        "Batsim 5 (batprotocol) is told apart by its --help",
    )
    args = ap.parse_args()
    recorded_round_trips()
    status = 0
    for batsim in args.batsim or [None]:
        status |= real_batsim(args.keep, batsim)
    return status


if __name__ == "__main__":
    sys.exit(main())
