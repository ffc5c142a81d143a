#!/usr/bin/env python3
"""Replay Fluxion's resource-query corpus through ``fluxsched-py match``.

Reads ``MANIFEST.tsv`` of ``../shared/conformance/fluxion-resource`` (or
``--corpus DIR``), runs every case in-process (a pool of workers), and compares
the ``-t`` output with the expected file:

* **outcome-identical**: the same sequence of JOBIDs with the same
  ALLOCATED / RESERVED / failed (and satisfiable / unsatisfiable) outcome and
  the same SCHEDULED AT values;
* **byte-identical**: the whole output is the same.

Manifest rows of t3033/t3037 carry shell variables; they stand for the first
call of their ``run_tests_with_policy`` (``hinodex`` / its long spelling,
prefix ``00``) and their command file ``cmdsNNN`` is ``commands/nodex/cmdsNN.in``.

Usage: ``python bench/conformance_fluxion.py [--tsv out.tsv] [-j N] [-v]``
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from t.shared import CONFORMANCE  # noqa: E402 - the one place that finds ../shared

DEFAULT_CORPUS = CONFORMANCE / "fluxion-resource"
PREFIX = "@TEST_SRCDIR@/data/resource/"
SHELL_VARS = {
    "t3033-resource-nodex.t": {"pol": "hinodex", "prefix": "00"},
    "t3037-resource-custom-policy.t": {"pol": "policy=high node_centric=true node_exclusive=true", "prefix": "00"},
}


@dataclass
class Case:
    index: int
    origin: str
    commands: str
    options: str
    expected: str


@dataclass
class Result:
    case: Case
    outcome: bool
    byte: bool
    reason: str
    seconds: float


def read_manifest(corpus: Path) -> list[Case]:
    cases = []
    lines = (corpus / "MANIFEST.tsv").read_text().splitlines()
    for i, line in enumerate(lines[1:], 1):
        origin, cmds, opts, exp = line.split("\t")
        var = SHELL_VARS.get(origin)
        if var:
            opts = opts.replace('"${pol}"', shlex.quote(var["pol"])).replace("$pol", shlex.quote(var["pol"]))
            opts = opts.replace("${prefix}", var["prefix"])
            exp = exp.replace("${prefix}", var["prefix"])
            m = re.fullmatch(r"cmds0*(\d+)", cmds)
            if m:
                cmds = f"commands/nodex/cmds{int(m.group(1)):02d}.in"
        cases.append(Case(i, origin, cmds, opts, exp))
    return cases


_JOB = re.compile(r"INFO: JOBID=(\d+)")


def outcomes(text: str) -> list[tuple]:
    """The outcome skeleton of a simple/pretty_simple output: one tuple per result block."""
    res: list[tuple] = []
    block: list[str] = []
    for line in text.splitlines():
        if not line.startswith("INFO:"):
            continue
        if line == "INFO: =============================":
            if block:
                res.append(_summarize(block))
                block = []
            continue
        block.append(line)
    if block:
        res.append(_summarize(block))
    # (partial-)cancel statistics blocks carry traversal counts, not outcomes
    return [r for r in res if r[0] != "stats"]


def _summarize(block: list[str]) -> tuple:
    d: dict[str, str] = {}
    for line in block:
        body = line[len("INFO: ") :]
        if "=" in body:
            k, v = body.split("=", 1)
            d[k] = v
        else:
            d[body] = ""
    if any(k.startswith(("CANCEL ", "PARTIAL CANCEL ")) for k in d):
        return ("stats",)
    if "Satisfiable request" in d:
        return ("sat", True)
    if "Unsatisfiable request" in d and "JOBID" not in d:
        return ("sat", False)
    if "No matching resources found" in d:
        return ("job", d.get("JOBID"), "FAILED", "Unsatisfiable request" in d)
    return ("job", d.get("JOBID"), d.get("RESOURCES"), d.get("SCHEDULED AT"))


def run_case(args: tuple[Case, str]) -> Result:
    case, corpus = args
    from fluxsched_py.matchcli.cli import build_parser, load_graph
    from fluxsched_py.matchcli.compat import parse_policy
    from fluxsched_py.matchcli.session import Session

    t0 = time.perf_counter()
    cdir = Path(corpus)
    expected_path = cdir / case.expected
    cmd_path = cdir / case.commands
    if not expected_path.exists() or not cmd_path.exists():
        return Result(case, False, False, "missing corpus file", 0.0)
    expected = expected_path.read_text()
    argv = shlex.split(case.options)
    ns = build_parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    try:
        graph = load_graph(str(cdir / ns.load_file), ns.load_format, ns.match_subsystems)
        session = Session(
            graph,
            parse_policy(ns.match_policy, flexible=ns.traverser_policy == "flexible"),
            match_format=ns.match_format,
            out=out,
            term=io.StringIO(),
            err=err,
            path_map=(PREFIX, str(cdir) + "/"),
        )
        session.run(cmd_path.read_text().splitlines())
    except Exception as e:  # report, don't crash the whole run
        return Result(case, False, False, f"crash: {type(e).__name__}: {e}", time.perf_counter() - t0)
    got = out.getvalue()
    byte = got == expected
    oc_got, oc_exp = outcomes(got), outcomes(expected)
    outcome = oc_got == oc_exp
    reason = ""
    if not outcome:
        reason = _first_diff(oc_got, oc_exp)
    elif not byte:
        reason = "resources differ"
    return Result(case, outcome, byte, reason, time.perf_counter() - t0)


def _first_diff(got: list[tuple], exp: list[tuple]) -> str:
    for i, (a, b) in enumerate(zip(got, exp, strict=False)):
        if a != b:
            return f"block {i + 1}: got {a} expected {b}"
    return f"{len(got)} result blocks, expected {len(exp)}"


def run_all(corpus: Path, jobs: int | None = None, select: str | None = None) -> list[Result]:
    cases = read_manifest(corpus)
    if select:
        cases = [c for c in cases if re.search(select, f"{c.origin} {c.commands} {c.expected}")]
    work = [(c, str(corpus)) for c in cases]
    # slow cases first so the pool finishes evenly
    work.sort(key=lambda w: "disaggr" not in w[0].options)
    if jobs == 1:
        results = [run_case(w) for w in work]
    else:
        with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as ex:
            results = list(ex.map(run_case, work, chunksize=1))
    results.sort(key=lambda r: r.case.index)
    return results


def summary(results: list[Result]) -> str:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(r.case.origin, []).append(r)
    lines = [f"{'test group':<34} {'cases':>5} {'outcome':>8} {'byte':>5}"]
    for g, rs in groups.items():
        lines.append(f"{g:<34} {len(rs):>5} {sum(r.outcome for r in rs):>8} {sum(r.byte for r in rs):>5}")
    n = len(results)
    o = sum(r.outcome for r in results)
    b = sum(r.byte for r in results)
    lines.append(f"{'TOTAL':<34} {n:>5} {o:>8} {b:>5}")
    lines.append(
        f"outcome-identical {o}/{n} ({100 * o / max(n, 1):.1f}%), byte-identical {b}/{n} ({100 * b / max(n, 1):.1f}%)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--tsv", type=Path, help="write per-case results here")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    ap.add_argument("-k", "--select", help="only cases whose origin/commands/expected match this regex")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every mismatching case")
    a = ap.parse_args(argv)
    if not (a.corpus / "MANIFEST.tsv").exists():
        print(f"ERROR: no MANIFEST.tsv in {a.corpus}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE.parent))
    t0 = time.perf_counter()
    results = run_all(a.corpus, a.jobs, a.select)
    print(summary(results))
    print(f"({time.perf_counter() - t0:.1f} s)")
    if a.verbose:
        for r in results:
            if not r.outcome:
                print(f"MISMATCH {r.case.index:3d} {r.case.origin} {r.case.commands} {r.case.expected}: {r.reason}")
        reasons = Counter(r.reason.split(":")[0] for r in results if not r.outcome)
        print(reasons)
    if a.tsv:
        with open(a.tsv, "w") as f:
            f.write("index\torigin\tcommands\toptions\texpected\toutcome_identical\tbyte_identical\treason\tseconds\n")
            for r in results:
                c = r.case
                f.write(
                    f"{c.index}\t{c.origin}\t{c.commands}\t{c.options}\t{c.expected}\t{int(r.outcome)}\t"
                    f"{int(r.byte)}\t{r.reason}\t{r.seconds:.3f}\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
