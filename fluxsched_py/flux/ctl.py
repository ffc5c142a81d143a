"""``flux sched-py`` (and ``fluxsched-py ctl --uri URI``): ask the loaded module.

The client side of :mod:`fluxsched_py.flux.control`: one RPC per command,
printed as a table (or as the response itself with ``--json``)::

    flux sched-py status
    flux sched-py forecast [--limit N]        # like squeue --start; its age on stderr
    flux submit --dry-run -N2 -t 10m app | flux sched-py when -
    flux sched-py reserve add NAME (--ranks IDSET | --nodes N [--requires C])
                              --start TIME (--end TIME | --duration FSD)
                              [--users U1,U2 | --groups G1,G2] [--accounts A1,A2]
                              [--flags MAINT,IGNORE_JOBS,FLEX]
    flux sched-py reserve list
    flux sched-py reserve update NAME (--end TIME | --duration FSD)
    flux sched-py reserve remove NAME

Flux finds the ``flux-sched-py`` console script (:func:`flux_main`) in
``FLUX_EXEC_PATH_PREPEND`` (``fluxsched-py cmd-path``); outside an
instance, ``fluxsched-py ctl --uri URI ...`` does the same, under
``flux python`` when this interpreter has no flux bindings.  Errors are one
line on stderr; the status is 1 (2 for a bad option).
"""

from __future__ import annotations

import json
import math
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cliutil import ArgumentParser, CLIError, boundary
from ..inputs import read_bytes
from ..limits import MAX_JOBSPEC_BYTES

__all__ = ["main", "flux_main", "build_parser", "fmt_time", "fmt_delay"]

#: Set in the environment of the ``flux python`` this command re-runs under.
_REEXEC = "FLUXSCHED_PY_CTL_REEXEC"
_ROOT = Path(__file__).resolve().parents[2]


def fmt_time(t: float | None) -> str:
    """An epoch time as ``squeue --start`` shows it (local time), ``N/A`` for none."""
    return "N/A" if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def fmt_delay(dt: float) -> str:
    """``dt`` seconds as ``now``, ``45s``, ``3m05s``, ``2h03m`` or ``4d02h``."""
    s = int(round(max(0.0, dt)))
    if s == 0:
        return "now"
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def build_parser(prog: str = "flux sched-py", with_uri: bool = False) -> ArgumentParser:
    """The options of ``flux sched-py`` (and, with ``--uri``, of ``fluxsched-py ctl``)."""
    p = ArgumentParser(prog=prog, description="Ask the sched-py module of a Flux instance.")
    if with_uri:
        p.add_argument("--uri", help="the instance's FLUX_URI (default: $FLUX_URI)")
    p.add_argument("--module", default="sched-py", help="the module's name (default: sched-py)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    s = sub.add_parser("status", help="the policy and how many jobs are pending, running, reserved")
    s.add_argument("--json", action="store_true", help="print the response as JSON")
    f = sub.add_parser("forecast", help="every pending job's estimated start, in start order")
    f.add_argument("--limit", type=int, help="jobs planned at most (default: the module's cap)")
    f.add_argument("--json", action="store_true", help="print the response as JSON")
    w = sub.add_parser("when", help="when a jobspec would start if submitted now, and where")
    w.add_argument("jobspec", metavar="FILE", help="a jobspec (JSON or YAML; '-' reads stdin)")
    w.add_argument("--priority", type=int, help="its priority (default: 16, flux-core's default urgency)")
    w.add_argument("--json", action="store_true", help="print the response as JSON")
    r = sub.add_parser("reserve", help="advance reservations: add, list, update, remove")
    rsub = r.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = rsub.add_parser("add", help="reserve ranks over a window of time (instance owner only)")
    a.add_argument("name", metavar="NAME")
    which = a.add_mutually_exclusive_group(required=True)
    which.add_argument("--ranks", metavar="IDSET", help="these ranks")
    which.add_argument("--nodes", type=int, metavar="N", help="N nodes, picked now (those free over the window first)")
    a.add_argument("--requires", metavar="CONSTRAINT", help="with --nodes: as flux submit --requires (or RFC 31 JSON)")
    a.add_argument("--start", required=True, metavar="TIME", help="an ISO 8601 date, or +FSD from now")
    _end_options(a, required=True)
    who = a.add_mutually_exclusive_group()
    who.add_argument(
        "--users", metavar="U1,U2", help="who may run jobs in it (default, with no --groups or --accounts: the owner)"
    )
    who.add_argument(
        "--groups", metavar="G1,G2", help="unix groups (names or gids) whose members may run jobs in it, as now"
    )
    a.add_argument(
        "--accounts",
        metavar="A1,A2",
        help="banks (attributes.system.bank, flux-accounting's) whose jobs may run in it; "
        "with --users or --groups, a job needs both",
    )
    a.add_argument(
        "--flags",
        metavar="F1,F2",
        help="Slurm's reservation flags: MAINT (may overlap other reservations), "
        "IGNORE_JOBS (may take nodes of running jobs), FLEX (its jobs may run before, after and outside it)",
    )
    a.add_argument("--json", action="store_true", help="print the response as JSON")
    li = rsub.add_parser("list", help="the reservations")
    li.add_argument("--json", action="store_true", help="print the response as JSON")
    u = rsub.add_parser("update", help="move a reservation's end (instance owner only)")
    u.add_argument("name", metavar="NAME")
    _end_options(u, required=True)
    u.add_argument("--json", action="store_true", help="print the response as JSON")
    rm = rsub.add_parser("remove", help="remove a reservation (instance owner only)")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument("--json", action="store_true", help="print the response as JSON")
    return p


def _end_options(p: Any, required: bool) -> None:
    end = p.add_mutually_exclusive_group(required=required)
    end.add_argument("--end", metavar="TIME", help="an ISO 8601 date, or +FSD from now")
    end.add_argument("--duration", metavar="FSD", help="from its start (e.g. 4h)")


def _time_arg(option: str, text: str) -> Any:
    """``+FSD`` as it is (the module adds it to its clock), a date as epoch seconds."""
    if text.startswith("+"):
        return text
    from ..engine.reservations import ReservationError, parse_time

    try:
        return parse_time(text, 0.0, option)
    except ReservationError as exc:
        raise CLIError(f"--{exc}") from None


def _constraint(text: str) -> Any:
    """``--requires``: RFC 31 JSON, or flux submit's constraint syntax (flux's own parser)."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise CLIError(f"--requires: not JSON: {exc}") from None
    try:
        from flux.job._utils import MiniConstraintParser  # what flux submit --requires uses
    except ImportError:  # pragma: no cover - older flux
        from flux.constraint.parser import ConstraintParser as MiniConstraintParser
    try:
        return MiniConstraintParser().parse(text)
    except Exception as exc:
        raise CLIError(f"--requires: {exc}") from None


def _reserve_payload(args: Any) -> dict[str, Any]:
    if args.action == "list":
        return {}
    payload: dict[str, Any] = {"name": args.name}
    if args.action == "add":
        if args.ranks is not None:
            payload["ranks"] = args.ranks
        else:
            payload["nodes"] = args.nodes
            if args.requires:
                payload["requires"] = _constraint(args.requires)
        if args.requires and args.ranks is not None:
            raise CLIError("--requires: only with --nodes")
        payload["start"] = _time_arg("start", args.start)
        for key in ("users", "groups", "accounts"):
            if getattr(args, key):
                payload[key] = [u for u in getattr(args, key).split(",") if u]
        if args.flags:
            from ..engine.reservations import ReservationError, parse_flags

            try:
                payload["flags"] = list(parse_flags(args.flags))
            except ReservationError as exc:
                raise CLIError(f"--{exc}") from None
    if args.action in ("add", "update"):
        if args.end is not None:
            payload["end"] = _time_arg("end", args.end)
        else:
            payload["duration"] = args.duration
    return payload


def _print_reservations(resp: dict[str, Any]) -> None:
    rows = [("NAME", "STATE", "START", "END", "NNODES", "NODELIST", "RANKS", "FLAGS", "USERS")]
    for r in resp["reservations"]:
        who = [_user(u) for u in r["users"]] + [f"group:{g}" for g in r.get("groups", ())]
        who += [f"bank:{a}" for a in r.get("accounts", ())]
        users = ",".join(who) or "(owner)"
        state = "active" if r["active"] else "future"
        n = str(_count(r["ranks"]))
        flags = ",".join(r.get("flags", ())) or "-"
        start, end = fmt_time(r["start"]), fmt_time(r["end"])
        rows.append((r["name"], state, start, end, n, r["nodelist"], r["ranks"], flags, users))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1])


def _count(ranks: str) -> int:
    from ..ids import IdSet

    return len(IdSet.parse(ranks))


def _rpc(h: Any, topic: str, payload: Any) -> Any:
    try:
        return h.rpc(topic, payload).get()
    except OSError as exc:
        text = exc.strerror or str(exc)
        raise CLIError(text if text.startswith(f"{topic}: ") else f"{topic}: {text}") from None


def _print_forecast(resp: dict[str, Any], job_name: Any) -> None:
    rows = [("JOBID", "USER", "QUEUE", "START_TIME", "IN", "KIND", "NODELIST", "REASON")]
    now = resp["now"]
    for j in resp["jobs"]:
        t = j["t_estimate"]
        rows.append(
            (
                job_name(j["id"]),
                _user(j["userid"]),
                j["queue"] or "-",
                fmt_time(t),
                "-" if t is None else fmt_delay(t - now),
                j["kind"],
                j["nodelist"] or "-",
                j["reason"] or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    if "as_of" in resp:  # how old the plan is, on stderr: stdout stays one line per job
        age = "planned now" if resp["source"] == "on demand" else f"{fmt_delay(resp['age'])} old"
        age = age.replace("now old", "up to date")
        print(f"forecast of {fmt_time(resp['as_of'])} ({age}, {resp['source']})", file=sys.stderr)


def _print_when(resp: dict[str, Any]) -> None:
    t = resp["t_estimate"]
    if t is None:
        why = f" ({resp['reason']})" if resp.get("reason") else ""  # held: the run limit
        print(f"would not start: {resp['kind']}{why}")
        return
    d = resp["duration"]
    run = "unlimited" if d is None else fmt_delay(d)
    note = " (only the first jobs ahead were planned)" if resp["kind"] == "partial forecast" else ""
    print(f"start:     {fmt_time(t)} (in {fmt_delay(t - resp['now'])}){note}")
    print(f"nodelist:  {resp['nodelist']}")
    print(f"ranks:     {resp['ranks']}")
    print(f"walltime:  {run}")
    if resp["kind"] == "held":  # it starts once enough of its user's or queue's jobs end
        print(f"held now:  {resp['reason']}")


def _run(args: Any, uri: str | None) -> int:
    import flux
    from flux.job import JobID

    try:
        h = flux.Flux(uri) if uri else flux.Flux()
    except OSError as exc:
        where = uri or os.environ.get("FLUX_URI") or "the enclosing instance"
        raise CLIError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    topic = f"{args.module}.{args.command}"
    if args.command == "reserve":
        topic = f"{args.module}.reserve-{args.action}"
    payload: dict[str, Any] = _reserve_payload(args) if args.command == "reserve" else {}
    if args.command == "forecast" and args.limit is not None:
        payload["limit"] = args.limit
    if args.command == "when":
        try:
            data = read_bytes(args.jobspec, MAX_JOBSPEC_BYTES)
        except OSError as exc:
            raise CLIError(f"{args.jobspec}: cannot read: {exc.strerror or exc}") from None
        try:
            import yaml

            jobspec = yaml.safe_load(data)
        except Exception as exc:
            raise CLIError(f"{args.jobspec}: not JSON or YAML: {str(exc).splitlines()[0]}") from None
        payload["jobspec"] = jobspec
        if args.priority is not None:
            payload["priority"] = args.priority
    resp = _rpc(h, topic, payload)
    if args.json:
        print(json.dumps(resp, indent=2, sort_keys=True))
    elif args.command == "forecast":
        _print_forecast(resp, lambda i: JobID(i).f58)
    elif args.command == "when":
        _print_when(resp)
    elif args.command == "reserve":
        if args.action == "list":
            _print_reservations(resp)
        else:
            verb = {"add": "added", "update": "updated", "remove": "removed"}[args.action]
            print(
                f"{verb} reservation {resp['name']}: {resp['nodelist']} (ranks {resp['ranks']}) from "
                f"{fmt_time(resp['start'])} to {fmt_time(resp['end'])}"
            )
    else:
        width = max((len(k) for k in resp), default=0) + 2
        for k, v in resp.items():
            none = "none yet" if k == "forecast_age" else "unlimited"  # no background forecast completed
            print(f"{k + ':':<{width}}{none if v is None or v == math.inf else v}")
    return 0


def _reexec(prog: str, argv: Sequence[str]) -> int:
    """This command again under ``flux python``, which has the bindings."""
    exe = shutil.which("flux")
    if exe is None or os.environ.get(_REEXEC):
        raise CLIError("cannot import flux's Python bindings, and no 'flux python' on PATH to run under")
    env = dict(os.environ)
    env[_REEXEC] = "1"
    # this package, and the dependencies next to it (this interpreter's site-packages)
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), *site, env.get("PYTHONPATH", "")) if p)
    cmd = [exe, "python", "-m", "fluxsched_py.flux.ctl", "--prog", prog, *argv]
    return subprocess.run(cmd, env=env).returncode


def main(argv: Sequence[str] | None = None, prog: str = "fluxsched-py ctl") -> int:
    """``fluxsched-py ctl [--uri URI] COMMAND ...``, or ``flux sched-py COMMAND ...``
    (``prog="flux sched-py"``: no ``--uri``, the instance is the enclosing one)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--prog"] and len(argv) > 1:
        prog, argv = argv[1], argv[2:]

    @boundary(prog)
    def run() -> int:
        args = build_parser(prog, with_uri=prog != "flux sched-py").parse_args(argv)
        try:
            import flux  # noqa: F401
        except ImportError:
            return _reexec(prog, argv)
        return _run(args, getattr(args, "uri", None))

    return run()


def flux_main() -> int:
    """The ``flux-sched-py`` console script, which flux runs as ``flux sched-py``.

    A console script rather than a ``flux-sched-py.py`` file in the package:
    flux runs a ``flux-NAME.py`` only when it is executable, and ``pip
    install`` does not keep the mode of package files."""
    return main(sys.argv[1:], prog="flux sched-py")


if __name__ == "__main__":  # pragma: no cover - run by _reexec
    sys.exit(main())
