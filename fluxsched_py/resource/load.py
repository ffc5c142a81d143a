"""Load a resource graph from a file, sniffing its format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..inputs import read_text
from ..limits import MAX_GRAPH_BYTES
from .errors import ResourceError
from .hwloc import xml_root_tag

if TYPE_CHECKING:
    from .graph import ResourceGraph

__all__ = ["load_graph", "FORMATS", "sniff_format"]

#: Accepted ``format`` names (``rv1exec`` is resource-query's name for R).
FORMATS = ("grug", "jgf", "rv1", "rv1exec", "recipe", "hwloc")


def sniff_format(path: Path, head: str) -> str:
    """``grug``, ``hwloc``, ``json`` (R or JGF) or ``recipe``, from the extension and the first characters.

    XML whose root element is ``<topology>`` is hwloc; ``<platform>`` (SimGrid,
    as Batsim uses it) is ``platform``, which only the replay's platform loader
    reads; any other XML is GRUG.
    """
    ext = path.suffix.lower()
    if ext in (".graphml", ".xml") or head.lstrip().startswith("<"):
        root = xml_root_tag(head)
        if root == "topology":
            return "hwloc"
        if root == "platform":
            return "platform"
        return "grug"
    if ext in (".yaml", ".yml"):
        return "recipe"
    if ext in (".json", ".r", ".jgf") or head.lstrip().startswith("{"):
        return "json"
    return "recipe"


def load_graph(path: str | Path, format: str | None = None) -> ResourceGraph:
    """Load ``path`` as GRUG, hwloc XML, JGF, R or a YAML recipe.

    With no ``format``, XML is hwloc when its root element is ``<topology>``
    and GRUG otherwise, ``.yaml`` is a recipe, and JSON is R when it has
    ``execution`` and JGF when it has ``graph``.
    """
    from .graph import ResourceGraph

    p = Path(path)
    source = str(path)
    if format is not None and format not in FORMATS:
        raise ResourceError(f"unknown graph format {format!r} (expected one of {', '.join(FORMATS)})", source=source)
    try:
        text = read_text(p, MAX_GRAPH_BYTES)
    except OSError as e:
        raise ResourceError(f"cannot read: {e.strerror}", source=source) from None
    except UnicodeDecodeError as e:
        raise ResourceError(f"not UTF-8 text: {e.reason} at byte {e.start}", source=source) from None
    fmt = format or sniff_format(p, text[:4096])
    if fmt == "hwloc":
        return ResourceGraph.from_hwloc(p)
    if fmt == "platform":
        raise ResourceError(
            "a SimGrid/Batsim platform XML is not a resource graph: use `fluxsched-py replay --platform`",
            source=source,
            element="/platform",
        )
    if fmt == "grug":
        return ResourceGraph.from_grug(p)
    if fmt == "recipe":
        return ResourceGraph.from_recipe(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ResourceError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", source=source) from None
    except RecursionError:
        raise ResourceError("invalid JSON: nested too deeply", source=source) from None
    if fmt == "json":
        if isinstance(data, dict) and "execution" in data:
            fmt = "rv1"
        elif isinstance(data, dict) and "graph" in data:
            fmt = "jgf"
        else:
            raise ResourceError("JSON is neither R (no 'execution') nor JGF (no 'graph')", source=source, element="/")
    if not isinstance(data, dict):
        # from_rv1/from_jgf would take a JSON string for a path to read.
        raise ResourceError(f"{fmt}: expected a JSON object, got {type(data).__name__}", source=source, element="/")
    if fmt in ("rv1", "rv1exec"):
        return ResourceGraph.from_rv1(data, source=source)
    return ResourceGraph.from_jgf(data, source=source)
