"""The package's layers, checked from its import graph (every ``import`` in
every module, including imports inside functions), and its file sizes.

    sweep -> drivers (flux/, batsim/, replay/, matchcli/, cli) -> engine -> policy
        -> match/planner -> resource/jobspec/report -> ids/inputs/cliutil

A module may import its own subpackage, anything in a lower layer, and
another subpackage of its own layer below the drivers (``planner`` reads
``match``'s policy table).  Drivers never import each other, with one
exception: Batsim's file formats, which the replay reads and writes too:
:mod:`fluxsched_py.batsim.platform` (platform files),
:mod:`fluxsched_py.batsim.intervals` (interval sets, in events files),
:mod:`fluxsched_py.batsim.metadata` (``out_jobs.csv``'s metadata column),
:mod:`fluxsched_py.batsim.entry` (a workload entry's fields) and
:mod:`fluxsched_py.batsim.external_events` (the external events the drivers and the replay read).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fluxsched_py"

#: Top-level subpackage (or module) -> layer; higher may import lower.
LAYER = {
    "ids": 0,
    "memo": 0,  # the memos' off switch
    "errors": 0,  # FluxschedError, the base of every project error
    "limits": 0,  # the one table of input limits
    "inputs": 0,  # capped reads, for every reader
    "power": 0,  # a node's power model (watts per state, switch times)
    "cliutil": 0,  # the commands' error boundary
    "report": 1,  # figures and index.html from replay results; imports nothing of ours
    "": 0,  # fluxsched_py/__init__.py: the version
    "resource": 1,
    "jobspec": 1,
    "match": 2,
    "planner": 2,
    "policy": 3,
    "engine": 4,
    "flux": 5,
    "batsim": 5,
    "replay": 5,
    "matchcli": 5,
    "cli": 5,
    "sweep": 6,  # runs replays (a driver) in a pool or as Flux jobs
    "__main__": 7,
}
DRIVERS = {name for name, layer in LAYER.items() if layer == 5}
#: Modules any driver may import (file formats shared by drivers).
SHARED = {
    "fluxsched_py.batsim.platform",
    "fluxsched_py.batsim.intervals",
    "fluxsched_py.batsim.metadata",
    "fluxsched_py.batsim.entry",
    "fluxsched_py.batsim.external_events",
}
#: Reads and writes of another module's ``_private`` names allowed per file:
#: none is left (issue 21), so a file not listed must have none.
PRIVATE_USES: dict[str, int] = {}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The fluxsched_py modules ``path`` imports (``from X import name``
    counts as importing ``X.name`` when that is a module)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                rel = Path(*sub.split("."))
                is_module = (PKG.parent / rel).with_suffix(".py").exists() or (
                    PKG.parent / rel / "__init__.py"
                ).exists()
                out.add(sub if is_module else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "fluxsched_py" or m.startswith("fluxsched_py.")}


def _top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _edges() -> list[tuple[str, str]]:
    return sorted((_module(p), m) for p in PKG.rglob("*.py") for m in _imports(p))


def test_every_subpackage_has_a_layer():
    tops = {_top(_module(p)) for p in PKG.rglob("*.py")}
    assert tops <= set(LAYER), f"add these to LAYER: {sorted(tops - set(LAYER))}"


def _violations(edges: list[tuple[str, str]]) -> list[str]:
    bad = []
    for a, b in edges:
        ta, tb = _top(a), _top(b)
        if ta == tb or b in SHARED:
            continue
        if LAYER[tb] > LAYER[ta] or (LAYER[tb] == LAYER[ta] and ta in DRIVERS):
            bad.append(f"{a} -> {b}")
    return bad


def test_no_module_imports_a_module_above_it_or_beside_it():
    bad = _violations(_edges())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_layering_check_can_fail():
    """Upward and driver-to-driver imports are caught; downward ones, the
    shared format module and imports inside functions are seen as such."""
    edges = [
        ("fluxsched_py.ids", "fluxsched_py.engine"),
        ("fluxsched_py.planner.search", "fluxsched_py.policy.base"),
        ("fluxsched_py.batsim.driver", "fluxsched_py.replay.workload"),
        ("fluxsched_py.engine.core", "fluxsched_py.planner"),
        ("fluxsched_py.planner.matchcache", "fluxsched_py.match.policy"),
        ("fluxsched_py.replay.platform", "fluxsched_py.batsim.platform"),
    ]
    assert _violations(edges) == [f"{a} -> {b}" for a, b in edges[:3]]
    # engine/core.py imports the jobspec parser inside a function
    assert "fluxsched_py.jobspec" in _imports(PKG / "engine" / "core.py")


def private_uses(source: str) -> list[str]:
    """``x._name`` in ``source`` where ``x`` is not ``self``, ``cls`` or
    ``super()`` and ``_name`` is not defined in that source (as a function,
    class, ``self.`` attribute or assigned name): another module's private
    name, read or written."""
    tree = ast.parse(source)
    own = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            own.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            own.add(n.id)
    out = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")):
            continue
        if n.attr in own:
            continue
        v = n.value
        if isinstance(v, ast.Name) and v.id in ("self", "cls"):
            continue
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
            continue
        out.append(f"line {n.lineno}: .{n.attr}")
    return out


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_reaches_into_another_modules_private_names(path):
    """One owner per fact: a module asks another, never reads or writes its
    ``_private`` names.  The uses left from before this check are counted in
    PRIVATE_USES and may only go down."""
    rel = str(path.relative_to(PKG))
    uses = private_uses(path.read_text())
    allowed = PRIVATE_USES.get(rel, 0)
    assert len(uses) <= allowed, (
        f"{rel}: {len(uses)} uses of another module's private names (at most {allowed}): {uses}"
    )


def test_the_private_name_check_can_fail():
    src = """
import other


class Mine:
    def __init__(self):
        self._own = 1

    def peek(self, x):
        return x._theirs + self._own + other._hidden + super()._base()


def _helper():
    return 2


print(other.obj._helper, Mine()._own)
"""
    assert sorted(private_uses(src)) == ["line 10: ._hidden", "line 10: ._theirs"]
