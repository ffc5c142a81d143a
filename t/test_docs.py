"""The manual builds without a warning, the committed man pages are what it makes,
and ``--help`` says what the manual says.

The manual (``docs/``) and the man pages are built with Sphinx; when Sphinx
is not installed (``pip install '.[docs]'`` brings it) the tests that build
them skip with one line.  The man pages under ``man/`` are committed so that
``pip install .`` installs them with no Sphinx; a test builds them again and
compares, so they cannot drift from their sources.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.cli import DELEGATED
from fluxsched_py.engine.options import OPTIONS

from .conftest import REPO

DOCS = REPO / "docs"
COMMITTED = REPO / "man"
REBUILD = "sphinx-build -b man docs build/man && cp build/man/*.1 man/man1/ && cp build/man/*.5 man/man5/"
_NO_SPHINX = "Sphinx is not installed (pip install '.[docs]'): the manual is not built"


def _sphinx(builder: str, out: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_parser") is None:
        pytest.skip(_NO_SPHINX)
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder, str(DOCS), str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def man_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("man")
    proc = _sphinx("man", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _roff_text(page: Path) -> str:
    """A man page's words, roff escapes undone and lines joined, for looking text up."""
    text = page.read_text()
    text = re.sub(r"\\f[BIPR]", "", text)
    for escape, char in (("\\-", "-"), ("\\(aq", "'"), ("\\(ga", "`"), ("\\e", "\\"), ("\\(rs", "\\"), ("\\&", "")):
        text = text.replace(escape, char)
    # a macro line (.TP, .B WORDS, a comment) keeps only its words
    text = "\n".join(re.sub(r"^\.(\\\"|[A-Za-z]+)\s*", "", line) for line in text.splitlines())
    return " ".join(text.split())


def test_the_manual_builds_without_a_warning(tmp_path):
    proc = _sphinx("html", tmp_path / "html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "html" / "index.html").exists()


def test_the_committed_man_pages_are_what_the_sources_make(man_build):
    built = {p.name: p.read_text() for p in man_build.iterdir() if re.fullmatch(r".+\.[15]", p.name)}
    committed = {p.name: p.read_text() for p in COMMITTED.glob("man[15]/*.[15]")}
    assert sorted(committed) == sorted(built), f"man/ is out of date: {REBUILD}"
    stale = [name for name in built if built[name] != committed[name]]
    assert stale == [], f"{', '.join(stale)}: out of date, run {REBUILD}"


def test_every_command_has_a_man_page():
    names = {p.name for p in COMMITTED.glob("man1/*.1")}
    want = {f"fluxsched-py-{c}.1" for c in [*DELEGATED, "validate"]} | {"fluxsched-py.1", "flux-sched-py.1"}
    assert want <= names, sorted(want - names)
    assert (COMMITTED / "man5" / "sched-py.5").exists()


def _parsers():
    from fluxsched_py.batsim.cli import build_parser as batsim
    from fluxsched_py.cli import validate_parser
    from fluxsched_py.flux.ctl import build_parser as ctl
    from fluxsched_py.matchcli.cli import build_parser as match
    from fluxsched_py.replay.cli import build_parser as replay
    from fluxsched_py.replay.synthetic import build_parser as synthetic
    from fluxsched_py.report.cli import build_parser as report
    from fluxsched_py.sweep.cli import build_parser as sweep

    return {
        "fluxsched-py-replay.1": replay(),
        "fluxsched-py-sweep.1": sweep(),
        "fluxsched-py-report.1": report(),
        "fluxsched-py-match.1": match(),
        "fluxsched-py-synthetic.1": synthetic(),
        "fluxsched-py-batsim.1": batsim(),
        "fluxsched-py-validate.1": validate_parser(),
        "flux-sched-py.1": ctl(),
        "fluxsched-py-ctl.1": ctl("fluxsched-py ctl", True),
    }


def _helps(parser):
    """Every option's help text as ``--help`` prints it, subcommands' included."""
    import argparse

    formatter = parser.formatter_class(prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _helps(sub)
        elif action.help and action.help != argparse.SUPPRESS:
            yield action.option_strings, formatter._expand_help(action)


@pytest.mark.parametrize("page", sorted(_parsers()))
def test_help_and_the_man_page_say_the_same_of_every_option(page):
    """The committed page (what ``man`` shows) has each option's ``--help`` words."""
    text = _roff_text(COMMITTED / "man1" / page)
    missing = [flags for flags, words in _helps(_parsers()[page]) if " ".join(words.split()) not in text]
    assert missing == []


def test_sched_py_5_lists_every_module_option():
    text = _roff_text(COMMITTED / "man5" / "sched-py.5")
    missing = [o.name for o in OPTIONS if f"{o.name}=" not in text or " ".join(o.meaning.split()) not in text]
    assert missing == []


def test_the_readme_fits_a_few_screens():
    assert len((REPO / "README.md").read_text().splitlines()) < 250


def test_the_wheel_installs_the_man_pages_under_share_man(tmp_path):
    """``pip install .`` puts the committed pages in the environment's share/man (no Sphinx needed)."""
    import zipfile

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    pages = {n.split(".data/data/", 1)[1] for n in names if ".data/data/share/man/" in n}
    committed = {str(p.relative_to(REPO)).replace("man/", "share/man/", 1) for p in COMMITTED.glob("man[15]/*.[15]")}
    assert pages == committed
