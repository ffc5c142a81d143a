"""Platforms for the replay: a resource graph from a file or a node count.

``--platform FILE`` accepts what :class:`~fluxsched_py.resource.ResourceGraph`
reads (a YAML recipe, RFC 20 R in JSON, a GRUG GraphML file, an hwloc XML
topology) and a SimGrid platform XML as Batsim uses it.  XML is told apart by
its root element: ``<topology>`` is hwloc (one node, see
:mod:`fluxsched_py.resource.hwloc`), ``<platform>`` is SimGrid.  In a SimGrid
platform every compute host becomes a node (ranked by name, as Batsim numbers
them; its ``id`` as host name, ``core`` attribute as its core count, default 1);
``<cluster>``/``<cabinet>`` elements expand
``prefix + radical + suffix``; the host or cluster whose ``role`` property is
``master`` (Batsim's scheduler host) or ``storage`` is skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..batsim.platform import PlatformError, batsim_hosts, batsim_power, property_names
from ..inputs import read_bytes
from ..limits import MAX_NODES, MAX_PER_NODE
from ..power import PowerModel
from ..resource.rv1 import hosts_rv1

__all__ = ["PlatformError", "batsim_hosts", "load_platform", "load_power", "nodes_graph"]


def _graph_cls() -> Any:
    from ..resource import ResourceGraph

    return ResourceGraph


def nodes_graph(n: int, cores: int = 1, prefix: str = "node") -> Any:
    """A graph of ``n`` nodes named ``node0..``, ``cores`` cores each."""
    if not 1 <= n <= MAX_NODES:
        raise PlatformError(f"a platform has 1..{MAX_NODES} nodes, not {n}")
    if not 1 <= cores <= MAX_PER_NODE:
        raise PlatformError(f"a node has 1..{MAX_PER_NODE} cores, not {cores}")
    return _graph_cls().from_nodes([f"{prefix}{i}" for i in range(n)], cores)


def _xml_root(p: Path) -> str | None:
    """The root element name of an XML file (None if unreadable or not XML)."""
    from ..resource.hwloc import xml_root_tag

    try:
        with open(p, "rb") as f:
            return xml_root_tag(f.read(4096))
    except OSError:
        return None


def load_platform(path: str | os.PathLike[str]) -> Any:
    """A resource graph from a platform file (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise PlatformError(f"{p}: no such file")
    suffix = p.suffix.lower()
    G = _graph_cls()
    root = _xml_root(p) if suffix in (".xml", "") else None
    if root == "topology":
        return G.from_hwloc(p)
    if suffix == ".xml" or root == "platform":
        hosts = batsim_hosts(p)
        names = [property_names(props) for _, _, props in hosts]
        return G.from_rv1(hosts_rv1([h for h, _, _ in hosts], [c for _, c, _ in hosts], names))
    if suffix in (".graphml", ".grug"):
        return G.from_grug(p)
    if suffix == ".json":
        try:
            data = json.loads(read_bytes(p))
        except OSError as exc:
            raise PlatformError(f"{p}: cannot read: {exc.strerror or exc}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PlatformError(f"{p}: not JSON: {exc}") from None
        except RecursionError:
            raise PlatformError(f"{p}: not JSON: nested too deeply") from None
        if isinstance(data, dict) and "execution" in data:
            return G.from_rv1(data, source=str(p))
        return G.load(p)
    if suffix in (".yaml", ".yml"):
        return G.from_recipe(p)
    return G.load(p)


def load_power(path: str | os.PathLike[str], required: str | None = None) -> list[PowerModel] | None:
    """Each node's power model from a platform file: a SimGrid platform
    that gives ``wattage_per_state`` (an energy platform, as ``batsim -E``
    reads it).  None for a platform without one, unless ``required``
    (what needs it: the error says so)."""
    p = Path(path)
    models = batsim_power(p) if p.suffix.lower() == ".xml" or _xml_root(p) == "platform" else None
    if models is None and required:
        raise PlatformError(f"{p}: {required} needs a power model per node: give a Batsim energy platform (XML)")
    return models
