"""``match -S C+PA``: several match subsystems, against Fluxion's own resource-query.

The recordings (``t/data/rq-subsystems``, see its README) are resource-query
0.54 runs with the containment subsystem dominant and the power subsystem
auxiliary, on Fluxion's power GRUG and JGF graphs.  Every row must come out
byte for byte.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from fluxsched_py.matchcli.cli import main

from .shared import CONFORMANCE

DATA = Path(__file__).parent / "data" / "rq-subsystems"
CORPUS = CONFORMANCE / "fluxion-resource"


def _cases() -> list[tuple[str, str]]:
    rows = (DATA / "CASES.tsv").read_text().splitlines()[1:]
    return [tuple(r.split("\t")) for r in rows if r.strip()]  # type: ignore[misc]


@pytest.mark.skipif(not (CORPUS / "grugs").is_dir(), reason="Fluxion's resource-query corpus (../shared) is absent")
@pytest.mark.parametrize("name,options", _cases())
def test_matches_resource_query_byte_for_byte(name, options, tmp_path, monkeypatch):
    argv = []
    for word in options.split():
        argv.append(str(CORPUS / word) if word.startswith(("grugs/", "jgfs/")) else word)
    out = tmp_path / "out"
    cmds = (DATA / "commands.in").read_text().replace("@DATA@", str(DATA))
    monkeypatch.setattr("sys.stdin", io.StringIO(cmds))
    assert main([*argv, "-t", str(out)]) == 0
    assert out.read_text() == (DATA / "expected" / f"{name}.out").read_text()


def test_an_auxiliary_subsystem_does_not_change_fluxions_answers():
    """What the recording shows, and why the matcher walks only the dominant tree."""
    expected = DATA / "expected"
    assert (expected / "grug-CPA-low.out").read_text() == (expected / "grug-CA-low.out").read_text()
