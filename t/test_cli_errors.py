"""Every CLI error is one plain line, with the same exit statuses everywhere, on hostile input too.

Each case runs the installed console script in a subprocess, as a user
would: stderr is a pipe, ``COLUMNS=20``, the address space is capped at
1 GiB and the run at 60 s (a hang, not a time limit: times are
measured by ``bench/bench_hostile.py``).  A case passes when the exit status is the one
the rule gives (2: bad option value, 1: bad input), stderr is exactly one
line starting with ``fluxsched-py SUBCOMMAND: `` and naming the file, and
no traceback is printed.  The inputs are the ones issue 14 lists (NaN and
huge times, huge counts, devices, binary garbage, deep nesting, duplicate
ids, unwritable outputs), plus brackets and long paths that a console
library would take for markup or wrap.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = Path(sys.executable).with_name("fluxsched-py")
GIB = 1 << 30
EXAMPLE = REPO / "examples" / "synthetic_seed42_64nodes.json"
SMALL_GRAPH = REPO / "examples" / "small.graphml"
SWF_LINE = "1 {submit} -1 {run} {procs} -1 -1 {procs} 100 -1 1 1 1 -1 1 -1 -1 -1\n"


def _limit_memory(limit: int = GIB) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run(
    args: list[str], stdin: bytes = b"", cwd: Path | None = None, timeout: float = 60, memory: int = GIB
) -> subprocess.CompletedProcess:
    if not SCRIPT.exists():
        pytest.skip(f"the console script is not installed next to {sys.executable}")
    env = {**os.environ, "COLUMNS": "20"}
    env.pop("FLUXSCHED_PY_TRACEBACK", None)
    return subprocess.run(
        [str(SCRIPT), *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        preexec_fn=lambda: _limit_memory(memory),
    )


def one_line(proc: subprocess.CompletedProcess, prog: str) -> str:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"fluxsched-py {prog}: "), err
    return err


def batsim_workload(**job) -> str:
    j = {"id": 1, "subtime": 0, "res": 1, "profile": "p", **job}
    return json.dumps({"nb_res": 4, "jobs": [j], "profiles": {"p": {"type": "delay", "delay": 10}}})


# name -> (file name, content, expected status, text the error line must hold)
REPLAY_FILES = {
    "nan-submit-swf": ("w.swf", SWF_LINE.format(submit="nan", run=10, procs=1), 1, "must be finite"),
    "inf-run-swf": ("w.swf", SWF_LINE.format(submit=0, run="inf", procs=1), 1, "must be finite"),
    "negative-submit-swf": ("w.swf", SWF_LINE.format(submit=-5, run=10, procs=1), 1, "must not be negative"),
    "1e308-submit-swf": ("w.swf", SWF_LINE.format(submit="1e308", run=10, procs=1), 1, "beyond the limit"),
    "huge-procs-swf": ("w.swf", SWF_LINE.format(submit=0, run=10, procs=10**15), 1, "more than the limit"),
    "huge-maxnodes-swf": (
        "w.swf",
        "; MaxNodes: 1000000000000\n" + SWF_LINE.format(submit=0, run=1, procs=1),
        1,
        "MaxNodes",
    ),
    "duplicate-swf": ("w.swf", SWF_LINE.format(submit=0, run=1, procs=1) * 2, 1, "duplicate job number 1"),
    "words-swf": ("w.swf", "1 2 three four five six seven eight nine\n", 1, "fields must be numbers"),
    "no-newline-swf": ("w.swf", "1" * 100_000, 1, "longer than"),
    "nan-submit-json": ("w.json", batsim_workload(subtime=float("nan")), 1, "must be finite"),
    "1e308-submit-json": ("w.json", batsim_workload(subtime=1e308), 1, "beyond the limit"),
    "negative-submit-json": ("w.json", batsim_workload(subtime=-1), 1, "must not be negative"),
    "string-res-json": ("w.json", batsim_workload(res="abc"), 1, "res must be a number"),
    "list-subtime-json": ("w.json", batsim_workload(subtime=[1]), 1, "subtime must be a number, got list"),
    "fractional-res-json": ("w.json", batsim_workload(res=1.5), 1, "must be an integer"),
    "huge-res-json": ("w.json", batsim_workload(res=10**12), 1, "more than the limit"),
    "huge-nb-res-json": ("w.json", batsim_workload().replace('"nb_res": 4', '"nb_res": 1e15'), 1, "nb_res"),
    "duplicate-json": (
        "w.json",
        json.dumps(
            {
                "jobs": [{"id": 1, "subtime": 0, "res": 1, "profile": "p"}] * 2,
                "profiles": {"p": {"type": "delay", "delay": 1}},
            }
        ),
        1,
        "duplicate job id",
    ),
    "job-not-object-json": ("w.json", '{"jobs": [3]}', 1, "a job must be an object"),
    "profiles-list-json": ("w.json", '{"jobs": [], "profiles": []}', 1, "profiles must be an object"),
    "deep-json": ("w.json", "[" * 200_000, 1, "nested too deeply"),
    "binary-json": ("w.json", b"\xff\xfe\x00garbage" * 100, 1, "not UTF-8"),
    "binary-swf": ("w.swf", b"\xff\xfe\x00garbage" * 100, 1, "UTF-8"),
    "nul-swf": ("w.swf", "1 0 -1 1\x00 1 -1 -1 1 1\n", 1, "w.swf"),
    "deep-yaml": ("w.yaml", "[" * 200_000, 1, "nested deeper"),
    "binary-yaml": ("w.yaml", bytes(range(256)) * 10, 1, "w.yaml"),
    "device-jobspec-yaml": ("w.yaml", "jobs:\n  - {jobspec: /dev/zero, submit: 0, runtime: 1}\n", 1, "larger than"),
    "wrong-types-yaml": ("w.yaml", "jobs:\n  - {jobspec: 3, submit: x, runtime: 1}\n", 1, "invalid jobspec"),
    "alias-bomb-yaml": (
        "w.yaml",
        'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "jobs: []\n",
        1,
        "alias",
    ),
    "self-alias-yaml": ("w.yaml", "jobs: &j\n  - *j\n", 1, "refers to a node that contains it"),
    "corrupt-gzip-swf": (
        "w.swf.gz",
        gzip.compress(b"1 0 -1 5 1 -1 -1 1 10\n" * 99)[:10] + b"garbage" * 9,
        1,
        "corrupt",
    ),
    "truncated-gzip-swf": ("w.swf.gz", gzip.compress(b"; x\n" * 10_000)[:40], 1, "corrupt"),
    "bzip2-bomb-swf": ("w.swf.bz2", bz2.compress(b"\0" * (64 << 20)), 1, "longer than"),
    "brackets-in-name": ("we[/x]ird [bold]x[/bold]].swf", SWF_LINE.format(submit="nan", run=1, procs=1), 1, "finite"),
    "long-path": ("d" * 200 + ".swf", SWF_LINE.format(submit="nan", run=1, procs=1), 1, "finite"),
}


@pytest.mark.parametrize("case", sorted(REPLAY_FILES))
def test_replay_bad_workload_is_one_line_naming_the_file(tmp_path, case):
    name, content, status, text = REPLAY_FILES[case]
    path = tmp_path / "sub dir[x]" / name  # a name may hold "[/x]": folders "…[" and "x]…"
    path.parent.mkdir(parents=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    proc = run(["replay", str(path), "--nodes", "4", "--json"])
    err = one_line(proc, "replay")
    assert proc.returncode == status, err
    assert f": {path}" in err, err
    assert text in err, err
    assert proc.stdout == b""


@pytest.mark.parametrize(
    "args,text",
    [
        (["--nodes", "0"], "--nodes: must be at least 1"),
        (["--nodes", "100000000000000"], "--nodes: at most"),
        (["--cores-per-node", "0"], "--cores-per-node: must be at least 1"),
        (["--compare", "fcfs,sjf"], "unknown queue policy 'sjf'"),
        (["--compare", "easy,fcfs,easy"], "named twice"),
        (["--queue-policy", "sjf"], "invalid choice"),
        (["--reserve-depth", "abc"], "reserve-depth"),
        (["--walltime", "default:-5"], "--walltime"),
        (["--walltime", "default:nan"], "--walltime"),
        (["--procs-per-node", "0"], "--procs-per-node"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_replay_bad_option_values_exit_2(args, text):
    proc = run(["replay", str(EXAMPLE), *args])
    err = one_line(proc, "replay")
    assert proc.returncode == 2 and text in err, err


def test_replay_unwritable_output_dir_fails_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run(["replay", str(EXAMPLE), "--output-dir", str(blocker / "out")])
    err = one_line(proc, "replay")
    assert proc.returncode == 2 and f"{blocker / 'out'}: --output-dir: cannot write there" in err
    assert proc.stdout == b""  # no table: nothing was replayed


def test_replay_reads_devices_and_stdin_with_a_cap():
    proc = run(["replay", "/dev/zero", "--nodes", "4"])
    err = one_line(proc, "replay")
    assert proc.returncode == 1 and "/dev/zero: larger than" in err
    proc = run(["replay", "-", "--nodes", "4"], stdin=b"\0" * (20 << 20))
    err = one_line(proc, "replay")
    assert proc.returncode == 1 and "larger than" in err


@pytest.mark.parametrize(
    "xml,text",
    [
        ('<cluster id="c" prefix="n" suffix="" radical="0-999999999999" speed="1Gf" bw="1Gbps" lat="0"/>', "radical"),
        ('<cluster id="c" prefix="n" suffix="" radical="0-3" core="-2" speed="1Gf" bw="1Gbps" lat="0"/>', "core=-2"),
        ('<cluster id="c" prefix="n" suffix="" radical="a-b" speed="1Gf" bw="1Gbps" lat="0"/>', "radical"),
    ],
)
def test_replay_bad_batsim_platform(tmp_path, xml, text):
    plat = tmp_path / "p[1].xml"
    plat.write_text(
        f'<?xml version="1.0"?>\n<platform version="4.1"><zone id="z" routing="Full">{xml}</zone></platform>\n'
    )
    proc = run(["replay", str(EXAMPLE), "--platform", str(plat)])
    err = one_line(proc, "replay")
    assert proc.returncode == 1 and str(plat) in err and text in err, err


@pytest.mark.parametrize(
    "recipe,text",
    [
        ("cluster:\n  nodes: 1000000000000\n  cores_per_socket: 4\n", "over the limit of 262144 nodes"),
        ("cluster:\n  nodes: 4\n  cores_per_socket: 100000000000\n", "over the limit of 65536 cores"),
        ('cluster:\n  nodes: 4\n  cores_per_socket: 1\n  hostname: "n[x-y]"\n', "invalid hostlist 'n[x-y]'"),
    ],
)
def test_replay_bad_recipe_platform_reports_values_as_written(tmp_path, recipe, text):
    plat = tmp_path / "recipe.yaml"
    plat.write_text(recipe)
    proc = run(["replay", str(EXAMPLE), "--platform", str(plat)])
    err = one_line(proc, "replay")
    assert proc.returncode == 1 and str(plat) in err and text in err, err


def test_replay_json_never_prints_infinity_or_nan(tmp_path):
    # Large but allowed times, a job that can never start, unlimited walltimes.
    w = tmp_path / "w.swf"
    w.write_text(
        "; MaxNodes: 2\n"
        + SWF_LINE.format(submit="1e11", run=10, procs=1)
        + SWF_LINE.format(submit=0, run=5, procs=4).replace("1 0 ", "2 0 ", 1)
    )
    proc = run(["replay", str(w), "--json", "--walltime", "none"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert "Infinity" not in text and "NaN" not in text
    json.loads(text)


@pytest.mark.parametrize(
    "commands,text",
    [
        (b"match allocate /dev/zero\n", b"ERROR: can't open /dev/zero: larger than"),
        (b"match allocate {garbage}\n", b"Jobspec error"),
        (b"match allocate x\0y\n", b"ERROR: malformed command: NUL byte"),
        (b"\xff\xfe\xfd\n", b"ERROR: unknown command"),
        (b"\x1b[2J\x1b]0;owned\x07\n", b"ERROR: unknown command: \\x1b[2J\\x1b]0;owned\\x07"),
        (b"m" * 200_000 + b"\n", b"ERROR: malformed command: line longer than"),
    ],
)
def test_match_hostile_commands_keep_the_session_going(tmp_path, commands, text):
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(bytes(range(256)) * 4)
    commands = commands.replace(b"{garbage}", str(garbage).encode())
    proc = run(["match", "-L", str(SMALL_GRAPH)], stdin=commands + b"match allocate /no/such\nquit\n")
    assert proc.returncode == 0
    err = proc.stderr
    assert b"Traceback" not in err and text in err, err
    assert b"\x1b" not in err and b"\x07" not in err  # nothing reaches the terminal as a control sequence
    assert err.count(b"\n") == 2 and b"can't open /no/such" in err  # the next command still ran


@pytest.mark.parametrize("graph", ["/dev/zero", "{garbage}", "{deep}"])
@pytest.mark.parametrize("fmt", ["grug", "jgf", "rv1exec", "hwloc"])
def test_match_bad_graph_file_is_one_line(tmp_path, graph, fmt):
    garbage = tmp_path / "g[1].bin"
    garbage.write_bytes(bytes(range(256)) * 40)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000)
    graph = graph.format(garbage=garbage, deep=deep)
    proc = run(["match", "-L", graph, "-f", fmt])
    err = one_line(proc, "match")
    assert proc.returncode == 1 and f": {graph}: " in err, err


def test_match_bad_options_exit_2():
    for args in (["-L", str(SMALL_GRAPH), "-P", "sideways"], ["-L", str(SMALL_GRAPH), "-S", "XYZ"], []):
        proc = run(["match", *args])
        one_line(proc, "match")
        assert proc.returncode == 2


def test_match_unwritable_test_output_exit_2(tmp_path):
    proc = run(["match", "-L", str(SMALL_GRAPH), "-t", str(tmp_path / "no" / "out.txt")])
    err = one_line(proc, "match")
    assert proc.returncode == 2 and "-t: cannot write" in err


@pytest.mark.parametrize(
    "args,text",
    [
        (["--timeout", "-1"], "--timeout: must be a finite number >= 0"),
        (["--timeout", "nan"], "--timeout"),
        (["--nodes", "0", "--protocol", "legacy"], "--nodes"),
        (["--record", "{tmp}/no/such/rec.jsonl"], "--record: cannot write"),
        (["--stats", "{tmp}/no/such/stats.json"], "--stats: cannot write"),
        (["--queue-policy", "sjf"], "invalid choice"),
        (["--reserve-depth", "-3"], "reserve-depth"),
        (["--protocol", "batprotocol", "--dynamic-jobs"], "--dynamic-jobs is only for --protocol v4"),
        (["--protocol", "legacy", "--job-metadata"], "--job-metadata is only for --protocol v4"),
    ],
)
def test_batsim_bad_options_exit_2_before_listening(tmp_path, args, text):
    args = [a.format(tmp=tmp_path) for a in args]
    proc = run(["batsim", "--socket", "ipc://" + str(tmp_path / "sock"), *args])
    err = one_line(proc, "batsim")
    assert proc.returncode == 2 and text in err, err
    assert not (tmp_path / "sock").exists()


@pytest.mark.parametrize(
    "content,text",
    [
        (batsim_workload(res=10**12), "res must be an integer"),
        ("[" * 200_000, "not JSON"),
        (b"\xff\x00" * 100, "not JSON"),
        ('{"nb_res": 1e300, "jobs": []}', "nb_res"),
    ],
)
def test_batsim_bad_legacy_workload_exit_1(tmp_path, content, text):
    w = tmp_path / "w[1].json"
    w.write_bytes(content if isinstance(content, bytes) else content.encode())
    proc = run(["batsim", "--protocol", "legacy", "--socket", str(tmp_path / "sock"), "--workload", str(w)])
    err = one_line(proc, "batsim")
    assert proc.returncode == 1 and str(w) in err and text in err, err


def test_validate_binary_and_nul_input_one_line_each(tmp_path):
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"version: 1\0\n")
    binary = tmp_path / "bin[x].yaml"
    binary.write_bytes(bytes(range(256)))
    proc = run(["validate", str(nul), str(binary), "-", "/dev/zero"], stdin=b"\0" * 1000)
    out = proc.stdout.decode().splitlines()
    assert proc.returncode == 1 and len(out) == 4 and b"Traceback" not in proc.stderr
    assert out[0].startswith(f"{nul}: ") and out[1].startswith(f"{binary}: ") and out[2].startswith("-: ")
    assert out[3].startswith("/dev/zero: ") and "larger than" in out[3]
    proc = run(["validate", "--bogus"])
    one_line(proc, "validate")
    assert proc.returncode == 2


def test_synthetic_bad_options_exit_2(tmp_path):
    for args in (
        ["--jobs", "0", "--json", "-"],
        ["--nodes", "10000000", "--swf", "-"],
        ["--load", "nan", "--swf", "-"],
    ):
        proc = run(["synthetic", *args])
        one_line(proc, "synthetic")
        assert proc.returncode == 2
    proc = run(["synthetic", "--json", str(tmp_path)])
    err = one_line(proc, "synthetic")
    assert proc.returncode == 2 and str(tmp_path) in err


@pytest.mark.parametrize("where", ["workload", "platform", "directory"])
def test_sweep_unreadable_input_is_one_line_before_any_run(tmp_path, where):
    example = str(REPO / "examples" / "synthetic_seed42_64nodes.json")
    missing = str(tmp_path / "no[such]file.swf")
    args = {
        "workload": [missing],
        "platform": [example, "--platform", missing],
        "directory": [str(tmp_path)],
    }[where]
    proc = run(["sweep", *args, "-o", str(tmp_path / "out"), "--no-report", "--no-progress"])
    err = one_line(proc, "sweep").rstrip("\n")
    name = str(tmp_path) if where == "directory" else missing
    assert proc.returncode == 1 and err.endswith(
        f"{name}: cannot read: " + ("is a directory" if where == "directory" else "No such file or directory")
    )
    assert not (tmp_path / "out").exists(), "nothing is run or written"


@pytest.mark.parametrize(
    "args, text",
    [
        (["--nodes", "1,999999999999"], "nodes='999999999999': expected 1..262144"),
        (["--nodes", "8,x"], "nodes='x': not an integer"),
        (["--cores-per-node", "0"], "cores-per-node='0': expected 1..65536"),
        (["--reserve-depth=-1"], "reserve-depth='-1'"),
        (["--policy", "first,bogus"], "policy='bogus'"),
        (["-j", "100000"], "-j must be 0 (all cores) or 1..1024, got 100000"),
    ],
)
def test_sweep_bad_option_values_exit_2_before_any_run(tmp_path, args, text):
    example = str(REPO / "examples" / "synthetic_seed42_64nodes.json")
    proc = run(["sweep", example, *args, "-o", str(tmp_path / "out"), "--no-report", "--no-progress"])
    err = one_line(proc, "sweep")
    assert proc.returncode == 2 and text in err
    assert not (tmp_path / "out").exists(), "nothing is run or written"


def test_unknown_command_and_module_path_args_are_one_line():
    proc = run(["frobnicate"])
    one_line_err = proc.stderr.decode()
    assert proc.returncode == 2 and one_line_err.count("\n") == 1 and "unknown command 'frobnicate'" in one_line_err
    proc = run(["module-path", "extra"])
    one_line(proc, "module-path")
    assert proc.returncode == 2


def test_python_dash_m_synthetic_help_creates_nothing(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py.replay.synthetic", "--help"],
        cwd=tmp_path,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0 and b"--jobs" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_no_console_script_needed_for_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "replay", str(tmp_path / "[red]missing[/red].swf")],
        capture_output=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "20"},
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1
    assert f"{tmp_path / '[red]missing[/red].swf'}: cannot read" in err


@pytest.mark.slow
def test_largest_accepted_machine_fits_in_2_gib():
    """The node limit (262,144: Fugaku has 158,976 nodes) still replays the bundled workload
    within 2 GiB of address space; one node more is refused before anything is built."""
    from fluxsched_py.limits import MAX_NODES

    # a legitimate (if large) run, not hostile input: no 10 s bound on a shared machine
    proc = run(["replay", "--nodes", str(MAX_NODES), "--queue-policy", "easy", "--json"], timeout=180, memory=2 * GIB)
    assert proc.returncode == 0, proc.stderr
    proc = run(["replay", "--nodes", str(MAX_NODES + 1)])
    one_line(proc, "replay")
    assert proc.returncode == 2


def test_workload_names_in_the_table_title_are_not_markup(tmp_path):
    w = tmp_path / "[red]x[bold].swf"
    w.write_text("; MaxNodes: 2\n" + SWF_LINE.format(submit=0, run=10, procs=1))
    proc = run(["replay", str(w), "--queue-policy", "easy"])
    assert proc.returncode == 0, proc.stderr
    assert "[red]x[bold]: 1 jobs on 2 nodes" in proc.stdout.decode()


@pytest.mark.parametrize("case", ["missing", "not csv", "binary", "bad row", "bad submit", "label twice"])
def test_report_bad_input_is_one_line(tmp_path, case):
    head = "job_id,submission_time,starting_time,finish_time,allocated_resources\n"
    good = tmp_path / "good.csv"
    good.write_text(head + "1,0,0,10,0-1\n")
    path = tmp_path / "in.csv"
    if case == "not csv":
        path.write_text('{"jobs": []}\n')
    elif case == "binary":
        path.write_bytes(b"\xff\xfe\x00" * 100)
    elif case == "bad row":
        path.write_text(head + "1,0,0,10,zero-one\n")
    elif case == "bad submit":
        path.write_text(head + "1,soon,0,10,0\n")
    args = {"label twice": [f"a={good}", f"a={good}"]}.get(case, [str(path)])
    proc = run(["report", *args, "-o", str(tmp_path / "out"), "--no-progress"])
    err = one_line(proc, "report")
    expected = {
        "missing": (1, f"{path}: cannot read: No such file or directory"),
        "not csv": (1, f"{path}: not a jobs.csv: no column submission_time, starting_time"),
        "binary": (1, f"{path}: not a jobs.csv"),
        "bad row": (1, f"{path}:2: invalid literal for int()"),
        "bad submit": (1, f"{path}:2: submission_time 'soon' is not a time"),
        "label twice": (2, "the label 'a' is given twice"),
    }[case]
    assert proc.returncode == expected[0] and expected[1] in err, err
    assert not (tmp_path / "out" / "index.html").exists()
