"""Hostile input to ``fluxsched-py validate``: one clear line, exit 1, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fluxsched_py.cli import main

GOOD = b"""version: 1
resources: [{type: slot, count: 1, label: task, with: [{type: core, count: 1}]}]
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 0}}
"""

ALIAS_BOMB = b"""a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""

HOSTILE = {
    "non_utf8": (b"version: 1\nresources: \xff\xfe\n", "not valid UTF-8"),
    "alias_bomb": (ALIAS_BOMB, "alias bomb"),
    # A node holding an alias of itself never expands (the size count looped forever on these).
    "self_alias": (b"version: 1\nresources: &a [*a]\n", "refers to a node that contains it (line 2)"),
    "alias_cycle_through_children": (
        b"version: 1\nresources:\n  - &s {type: slot, count: 1, with: [{type: core, count: 1, with: [*s]}]}\n",
        "refers to a node that contains it (line 3)",
    ),
    "alias_shared_not_cyclic": (b"a: &x [1, 2]\nb: [*x, *x]\nc: {k: *x}\n", "'version' is a required property"),
    "deep_flow_nesting": (b"[" * 10000 + b"]" * 10000, "nested deeper"),
    "deep_block_nesting": (b"- " * 10000 + b"x\n", "nested deeper"),
    "huge_count": (GOOD.replace(b"count: 1, label", b"count: 1208925819614629174706176, label"), "exceeds the maximum"),
    "empty_file": (b"", "empty document"),
    "json_array": (b"[1, 2, 3]", "must be a mapping, not array"),
    "yaml_timestamp": (GOOD.replace(b"duration: 0", b"duration: 2024-01-01"), "not allowed"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_gets_one_clear_line_and_exit_1(name, tmp_path, capsys):
    data, reason = HOSTILE[name]
    f = tmp_path / f"{name}.yaml"
    f.write_bytes(data)
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"{f}: invalid at /")
    assert reason in out[0]


def test_good_and_bad_inputs_get_a_line_each(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.json"
    good.write_bytes(GOOD)
    bad.write_text('{"version": 1}')
    assert main(["validate", str(good), str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{good}: ok", f"{bad}: invalid at /: 'resources' is a required property"]


def test_validate_reads_stdin_and_exits_0_when_all_ok():
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "validate", "-"], input=GOOD, capture_output=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.decode() == "-: ok\n"


def test_no_traceback_on_garbage_from_stdin():
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "validate", "--v1", "-"],
        input=b"\x00\x01garbage: [",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert b"Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout.startswith(b"-: invalid at /: ")


def test_missing_file_is_reported_not_raised(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().out


def test_bundled_examples_validate():
    assert main(["validate"]) == 0
