"""The job table is the one door to spans and allocations, checked on the source (an AST walk).

- Only ``engine/jobtable.py`` calls the span mutators of the engine's
  planner (``add_running``, ``reserve``, ``remove``, ``set_end``,
  ``clear_reservations``, and ``block`` / ``unblock`` for the windows of
  advance reservations) and the allocation mutators of its graph
  (``allocate``, ``release``), on a receiver named ``planner`` or ``graph``
  (a name, or an attribute such as ``e.planner``).  Not counted: the
  planner package itself (its own internals), the resource-query command
  (``matchcli/``: a planner of its own, with no engine and no job table),
  and the planner's clock (``set_now``), which changes no span.
- Which modules keep a reference to the engine (``self.e`` or
  ``self.engine``): the drivers may; no other module does
  (:data:`HOLDS_ENGINE` is empty, and may not grow).
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fluxsched_py"
SPAN_MUTATORS = {"add_running", "reserve", "remove", "set_end", "clear_reservations", "block", "unblock"}
ALLOCATION_MUTATORS = {"allocate", "release"}
DOOR = "engine/jobtable.py"
NOT_THE_ENGINES = ("planner/", "matchcli/")
DRIVERS = ("flux/", "batsim/", "replay/", "matchcli/", "sweep/")
#: Modules below the drivers that keep the engine (``self.e = engine``):
#: none is left.  A feature is given what it uses (the job table, the graph,
#: getters of what a reload replaces, the engine's own acts as callables).
HOLDS_ENGINE: set[str] = set()


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(PKG).as_posix(), ast.parse(path.read_text(), str(path))


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def mutator_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, ``receiver.method``) of each call of a span or allocation mutator."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            who, what = _receiver(node.func.value), node.func.attr
            if (who == "planner" and what in SPAN_MUTATORS) or (who == "graph" and what in ALLOCATION_MUTATORS):
                found.append((node.lineno, f"{who}.{what}"))
    return found


def holds_engine(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr in ("e", "engine")
                ):
                    return True
    return False


def test_only_the_job_table_changes_spans_and_allocations():
    outside = [
        f"{name}:{line}: {call}"
        for name, tree in _modules()
        if name != DOOR and not name.startswith(NOT_THE_ENGINES)
        for line, call in mutator_calls(tree)
    ]
    assert not outside, "spans and allocations change only through the job table:\n" + "\n".join(outside)


def test_the_job_table_is_where_they_change():
    # the check above would pass on a tree where nothing is found at all
    tree = ast.parse((PKG / DOOR).read_text())
    calls = {call for _, call in mutator_calls(tree)}
    spans = {"planner.add_running", "planner.reserve", "planner.remove", "planner.set_end"}
    assert calls == spans | {"planner.block", "planner.unblock"} | {
        "graph.allocate",
        "graph.release",
    }


def test_no_new_module_holds_the_engine():
    holding = {name for name, tree in _modules() if not name.startswith(DRIVERS) and holds_engine(tree)}
    assert holding <= HOLDS_ENGINE, f"new holders of the engine: {sorted(holding - HOLDS_ENGINE)}"
    assert holding == HOLDS_ENGINE, f"no longer hold it (remove from HOLDS_ENGINE): {sorted(HOLDS_ENGINE - holding)}"
