"""docs/rfcs/features.md: every cell says something, and every test it names exists and runs.

The page is one table of features against drivers.  Each driver's cell is a
test (a backquoted pytest node id or test file), ``cannot [n]`` with note
*n* under the table, ``not built`` or ``untested``.  Every test the page
names, in a cell or a note, must be collected by pytest (``--collect-only``
in a subprocess, restricted to the files named: the node id must be one it
lists) and not be skipped unconditionally (a ``pytest.mark.skip``, a
``skipif(True)`` or an ``xfail(run=False)`` on the function or its module).
Skips that depend on the machine (Flux not installed: ``t/flux/conftest.py``
marks its tests at collection) are not unconditional: the tests are still
collected and run where Flux is.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

from .conftest import REPO

PAGE = REPO / "docs" / "rfcs" / "features.md"
COLUMNS = ["feature", "Flux module", "replay", "Batsim 3/4 (`v4`)", "Batsim legacy", "Batsim 5 (`batprotocol`)"]
#: A test named on the page: a file under t/, with or without ``::name[params]``.
TEST_REF = re.compile(r"`(t/[\w/]+\.py(?:::[^`\s]+)?)`")
VERDICT = re.compile(r"^(?:`t/|cannot \[(\d+)\]|not built\b|untested\b)")


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """The page's one table: its header and its rows, each a list of cells."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines, "no table"
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in lines]
    header, rule, *body = rows
    assert set("".join(rule)) <= set("-:| "), f"not a table rule: {rule}"
    return header, body


def notes(text: str) -> set[int]:
    """The numbers of the notes under the table."""
    return {int(n) for n in re.findall(r"^(\d+)\. ", text, re.M)}


def cell_problems(text: str) -> list[str]:
    """What is wrong with the table's shape and cells (empty: nothing)."""
    header, body = table(text)
    problems = [] if header == COLUMNS else [f"header {header}, expected {COLUMNS}"]
    have = notes(text)
    for row in body:
        if len(row) != len(COLUMNS):
            problems.append(f"{row[0]}: {len(row)} cells, expected {len(COLUMNS)}")
            continue
        for column, cell in zip(COLUMNS[1:], row[1:], strict=True):
            m = VERDICT.match(cell)
            if not m:
                problems.append(f"{row[0]} / {column}: {cell!r} is no test, cannot [n], not built or untested")
            elif m.group(1) and int(m.group(1)) not in have:
                problems.append(f"{row[0]} / {column}: note {m.group(1)} is not under the table")
    return problems


def referenced(text: str) -> list[str]:
    """Every test the page names, in order, once each."""
    return list(dict.fromkeys(TEST_REF.findall(text)))


def collected(files: tuple[str, ...]) -> set[str]:
    """The node ids pytest collects from these files (a subprocess: no plugin state of ours)."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider", *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    ids = {line for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")}
    assert proc.returncode in (0, 5) or ids, proc.stdout[-2000:] + proc.stderr[-2000:]
    return ids


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _always_skipped(decorators: list[ast.expr]) -> bool:
    for d in decorators:
        call = d if isinstance(d, ast.Call) else None
        name = ast.unparse(call.func if call else d)
        if name == "pytest.mark.skip":
            return True
        if call and name == "pytest.mark.skipif" and call.args and ast.unparse(call.args[0]) == "True":
            return True
        if (
            call
            and name == "pytest.mark.xfail"
            and any(k.arg == "run" and ast.unparse(k.value) == "False" for k in call.keywords)
        ):
            return True
    return False


def unconditionally_skipped(path: Path, function: str) -> bool:
    """Whether a test function (or its whole module) is skipped whatever the machine."""
    tree = _tree(path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            if _always_skipped(marks):
                return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            return _always_skipped(node.decorator_list)
    return False


def reference_problems(refs: list[str]) -> list[str]:
    """What is wrong with the tests named (empty: each exists, is collected and not always skipped)."""
    problems = []
    files = []
    for ref in refs:
        path = ref.split("::", 1)[0]
        if not (REPO / path).is_file():
            problems.append(f"{ref}: no file {path}")
        elif path not in files:
            files.append(path)
    ids = collected(tuple(files)) if files else set()
    for ref in refs:
        path, _, name = ref.partition("::")
        if path not in files:
            continue
        if not name:
            if not any(i.startswith(path + "::") for i in ids):
                problems.append(f"{ref}: pytest collects no test from it")
            continue
        if ref not in ids and not any(i.startswith(ref + "[") for i in ids):
            problems.append(f"{ref}: not a test pytest collects")
        elif unconditionally_skipped(REPO / path, name.split("[", 1)[0]):
            problems.append(f"{ref}: always skipped")
    return problems


def test_the_page_is_one_table_with_a_verdict_in_every_cell():
    text = PAGE.read_text()
    assert cell_problems(text) == []
    _, body = table(text)
    assert len(body) >= 25  # one row per feature


def test_every_test_the_page_names_exists_and_runs():
    refs = referenced(PAGE.read_text())
    assert len(refs) > 50
    assert reference_problems(refs) == []


def test_the_checks_can_fail(tmp_path):
    """A mistyped test name, a missing file, an always-skipped test, an empty
    cell and a note that is not there are each reported."""
    skipped = tmp_path / "t" / "test_skipped_here.py"
    skipped.parent.mkdir()
    skipped.write_text("import pytest\n\n\n@pytest.mark.skip(reason='x')\ndef test_never():\n    pass\n")
    assert unconditionally_skipped(skipped, "test_never")
    assert not unconditionally_skipped(REPO / "t" / "flux" / "test_flux_policies.py", "test_start_order")
    bad = [
        "t/test_features_table.py::test_the_checks_can_fial",
        "t/test_no_such_file.py::test_x",
        "t/test_features_table.py::test_the_checks_can_fail[nothing]",
    ]
    got = reference_problems(bad)
    assert [p.split(":", 1)[0] for p in got] == ["t/test_no_such_file.py", *["t/test_features_table.py"] * 2]
    assert reference_problems(["t/test_features_table.py::test_the_checks_can_fail"]) == []
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    text = header + "| x | `t/a.py::b` |  | cannot [3] | not built | supported |\n\n1. a note\n"
    wrong = [p.split(": ", 1)[0] for p in cell_problems(text)]
    assert wrong == ["x / replay", "x / Batsim 3/4 (`v4`)", "x / Batsim 5 (`batprotocol`)"]
