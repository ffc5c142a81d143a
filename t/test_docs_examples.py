"""Every ``console`` block of the README and the manual is run, and its output compared.

Sybil finds the blocks (:class:`~sybil.parsers.markdown.CodeBlockParser`);
each ``$ `` line (with its ``\\`` continuation lines) is a command, and the
lines up to the next one are what it prints, stdout and stderr together.
The commands of a block run in order in one ``bash`` session, so an
``export`` or a ``cd`` holds for the rest of the block.  Every page gets a
scratch folder of its own, the same for all its blocks, in which the
repository's ``examples``, ``jobspec``, ``t`` and ``bench`` are linked, the
files of ``docs/examples`` as well, and ``../shared`` is the shared corpora
(:mod:`t.shared`).

What changes from run to run is matched by pattern, as doctest's ELLIPSIS
does: ``...`` in an expected line stands for any text (a replay time, a
path, a date), and a line that is only ``...`` for any lines.  Everything
else must be printed exactly; trailing blanks are not compared, nor the
replay's plain progress lines (``... jobs done (10 s)``), which a slow
machine prints in a run a fast one finishes in 5 s.  Commands
are run with ``COLUMNS=100``, the width the pages were written at, and
unbuffered, so that stdout and stderr interleave as on a terminal.

A block that runs ``flux`` is run only where the Flux tests run (``flux``
on PATH, with this interpreter's Python), in the environment they give the
broker; one that runs ``batsim`` only where ``batsim`` is on PATH; one that
reads ``../shared`` only where the shared corpora are.  Otherwise it is
skipped, with one line saying why.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser

from .conftest import REPO, SHARED

#: The pages whose console blocks are run: the README and every page of the manual.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: What a page's scratch folder links to from the repository.
LINKED = ("examples", "jobspec", "t", "bench")
_MARK = "@@fluxsched-docs-example@@"
_CHECKER = doctest.OutputChecker()


def commands(text: str) -> list[tuple[str, str]]:
    """A console block's (command, expected output) pairs."""
    pairs: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = [line[2:]]
            while cmd[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd.append(lines[i])
            pairs.append(("\n".join(cmd), []))
        elif pairs:
            pairs[-1][1].append(line)
        i += 1
    return [(cmd, "\n".join(out)) for cmd, out in pairs]


def _words(cmd: str) -> set[str]:
    """The programs a command line runs (the first word of each pipeline stage)."""
    return {m.group(1) for m in re.finditer(r"(?:^|[|;&(]|\$\()\s*(?:\w+=\S+\s+)*([\w.-]+)", cmd)}


def _flux_env() -> dict[str, str] | str:
    """The broker's environment for a block that runs ``flux``, or why there is none."""
    from .flux.conftest import _why_not
    from .flux.instance import MODPROBE_DIR, MODULE_DIR, python_path_for_broker

    why = _why_not()
    if why:
        return why
    return {
        "FLUX_PYTHONPATH_PREPEND": python_path_for_broker(),
        "FLUX_MODULE_PATH_PREPEND": str(MODULE_DIR),
        "FLUX_MODPROBE_PATH_APPEND": str(MODPROBE_DIR),
    }


def _scratch(namespace: dict, tmp_root: Path) -> Path:
    """The page's scratch folder, made at its first block."""
    if "cwd" not in namespace:
        root = Path(tmp_root) / f"page{len(list(Path(tmp_root).iterdir()))}"
        cwd = root / "repo"
        cwd.mkdir(parents=True)
        for name in LINKED:
            (cwd / name).symlink_to(REPO / name)
        for f in (REPO / "docs" / "examples").iterdir():
            (cwd / f.name).symlink_to(f)
        if SHARED.is_dir():
            (root / "shared").symlink_to(SHARED)
        namespace["cwd"] = cwd
    return namespace["cwd"]


def _first_difference(want: str, got: str) -> str:
    """The first line of output that its line on the page does not match, to read first."""
    for n, (w, g) in enumerate(zip(want.splitlines(), got.splitlines(), strict=False), 1):
        if w != "..." and not _CHECKER.check_output(w + "\n", g + "\n", doctest.ELLIPSIS):
            return f"first difference, output line {n}:\n  page:    {w}\n  printed: {g}"
    return "the output has other lines than the page's"


#: The replay's plain progress line (``replay/cli.py``): how many appear depends on the machine's speed.
_PROGRESS = re.compile(r"(?m)^fluxsched-py replay: \S+: \d+/\d+ jobs done \(\d+ s\)\n")


def evaluate(example) -> None:
    pairs = commands(example.parsed)
    text = "\n".join(cmd for cmd, _ in pairs)
    words = set().union(*(_words(cmd) for cmd, _ in pairs))
    env = {**os.environ, "COLUMNS": "100", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    path = Path(example.path)
    where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} line {example.line}"
    if "flux" in words:
        flux = _flux_env()
        if isinstance(flux, str):
            pytest.skip(f"{where}: needs Flux ({flux})")
        env.update(flux)
    if "batsim" in words and shutil.which("batsim") is None:
        pytest.skip(f"{where}: needs batsim on PATH")
    if "../shared/" in text and not SHARED.is_dir():
        pytest.skip(f"{where}: needs the shared corpora ({SHARED} is absent)")
    cwd = _scratch(example.namespace, example.namespace["tmp_root"])
    script = "".join(f"echo {_MARK}\n{{\n{cmd}\n}} 2>&1\n" for cmd, _ in pairs)
    proc = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    got = proc.stdout.split(f"{_MARK}\n")[1:]
    for (cmd, want), out in zip(pairs, got + [""] * (len(pairs) - len(got)), strict=True):
        want_n = "\n".join(line.rstrip() for line in want.splitlines()).strip("\n") + "\n"
        want_n = re.sub(r"(?m)^\.\.\.\n", "...", want_n)  # a "..." line: any lines, or none
        # a slow machine's replay prints progress lines (every 5 s, stderr not a terminal): never on a page
        out = _PROGRESS.sub("", out)
        out_n = "\n".join(line.rstrip() for line in out.splitlines()).strip("\n") + "\n"
        if not _CHECKER.check_output(want_n, out_n, doctest.ELLIPSIS):
            pytest.fail(
                f"{where}: $ {cmd}\n{_first_difference(want_n, out_n)}\n"
                f"--- the page shows\n{want_n}--- the command printed\n{out_n}{proc.stderr}",
                pytrace=False,
            )


_SYBIL = Sybil(parsers=[CodeBlockParser(language="console", evaluator=evaluate)])


def _examples():
    for page in PAGES:
        document = _SYBIL.parse(page)
        for example in document.examples():
            yield pytest.param(example, id=f"{page.relative_to(REPO)}:{example.line}")


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs-examples")


@pytest.mark.parametrize("example", list(_examples()))
def test_console_example(example, tmp_root):
    example.namespace.setdefault("tmp_root", tmp_root)
    example.evaluate()


def _run_page(tmp_path, text: str) -> None:
    """Run the console blocks of a page written here, as the pages of the repository are."""
    page = tmp_path / "page.md"
    page.write_text(text)
    root = tmp_path / "scratch"
    root.mkdir()
    for example in _SYBIL.parse(page).examples():
        example.namespace.setdefault("tmp_root", root)
        example.evaluate()


def test_a_changed_value_on_a_page_fails(tmp_path):
    """The check itself: a page whose printed value is not the command's fails, naming both."""
    (tmp_path / "a").mkdir()
    _run_page(tmp_path / "a", "```console\n$ echo 42\n42\n```\n")
    (tmp_path / "b").mkdir()
    with pytest.raises(pytest.fail.Exception, match="page:    43\n  printed: 42"):
        _run_page(tmp_path / "b", "```console\n$ echo 42\n43\n```\n")


def test_dots_stand_for_what_changes_and_nothing_else(tmp_path):
    """``...`` in a line matches a time, a ``...`` line the lines between; the rest is exact."""
    page = "```console\n$ printf 'took 0.31 s\\nA\\nB\\nend\\n'\ntook ... s\n...\nend\n```\n"
    (tmp_path / "a").mkdir()
    _run_page(tmp_path / "a", page)
    (tmp_path / "b").mkdir()
    with pytest.raises(pytest.fail.Exception):
        _run_page(tmp_path / "b", page.replace("\nend\n```", "\nfin\n```"))


def test_progress_lines_of_a_slow_run_are_not_compared_and_nothing_else_is_dropped(tmp_path):
    """A replay slower than 5 s prints ``... jobs done (5 s)`` on stderr: the
    page need not show it; any other line it does not show still fails."""
    line = "fluxsched-py replay: easy: 8137/18239 jobs done (10 s)"
    (tmp_path / "a").mkdir()
    _run_page(tmp_path / "a", f"```console\n$ printf 'A\\n{line}\\nB\\n'\nA\nB\n```\n")
    (tmp_path / "b").mkdir()
    with pytest.raises(pytest.fail.Exception):
        _run_page(tmp_path / "b", f"```console\n$ printf 'A\\n{line} more\\nB\\n'\nA\nB\n```\n")
