"""The project's own YAML recipe: a regular cluster in a few numbers.

.. code-block:: yaml

    cluster:
      racks: 4            # optional; 0 or absent puts nodes right under the cluster
      nodes_per_rack: 32  # with racks; or ``nodes: 128`` without
      sockets: 2          # per node
      cores_per_socket: 32
      gpus_per_socket: 2  # optional
      memory_gb: 256      # optional, per node, split evenly across sockets, 1 GB units
      hostname: node      # optional host name prefix (node0, node1...), or a hostlist
      properties: {batch: "0-63", debug: "64-127"}   # optional, rank idsets
      nodes_per_switch: 16  # optional: a network subsystem, fabric0 -> switchK -> 16 nodes each

Node ``k`` (in rack order) has rank ``k``.  With ``nodes_per_switch``, leaf
switch ``k`` links nodes ``k * n .. (k + 1) * n - 1`` in the ``network``
subsystem (a two-level fat tree), which ``policy=network`` packs jobs into.  Cores, GPUs and memory units are
numbered per node (socket 1's cores follow socket 0's), as hwloc and R do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from ..ids import Hostlist, HostlistError, IdSet, IdSetError
from ..inputs import read_text
from ..jobspec.errors import JobspecError
from ..jobspec.loader import load_document
from ..limits import MAX_NODES, MAX_PER_NODE, MAX_YAML_BYTES
from .builder import ModelBuilder
from .errors import ResourceError

__all__ = ["model_from_recipe", "RECIPE_KEYS"]

RECIPE_KEYS = (
    "racks",
    "nodes_per_rack",
    "nodes",
    "sockets",
    "cores_per_socket",
    "gpus_per_socket",
    "memory_gb",
    "hostname",
    "properties",
    "name",
    "nodes_per_switch",
)


def _load(recipe: Any) -> tuple[dict, str | None]:
    if isinstance(recipe, (str, Path)):
        source = str(recipe)
        try:
            text = read_text(recipe, MAX_YAML_BYTES)
        except OSError as e:
            raise ResourceError(f"cannot read: {e.strerror}", source=source) from None
        except UnicodeDecodeError as e:
            raise ResourceError(f"not UTF-8 text: {e.reason} at byte {e.start}", source=source) from None
        try:
            # the jobspec loader's defences: nesting, alias expansion (a 1 KB alias bomb), JSON types only
            return load_document(text), source
        except JobspecError as e:
            raise ResourceError(f"invalid YAML: {e.reason}", source=source) from None
    return recipe, None


def _count(c: dict, key: str, source: str | None, default: int | None = None, minimum: int = 0) -> int:
    if key not in c:
        if default is None:
            raise ResourceError(f"missing '{key}'", source=source, element="/cluster")
        return default
    v = c[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ResourceError(f"'{key}' must be an integer >= {minimum}", source=source, element=f"/cluster/{key}")
    return v


def model_from_recipe(recipe: dict | str | Path) -> nx.DiGraph:
    """The networkx model of a recipe dict or YAML file (see the module docstring)."""
    data, source = _load(recipe)
    if not isinstance(data, dict) or not isinstance(data.get("cluster"), dict) or len(data) != 1:
        raise ResourceError("a recipe is an object with one key, 'cluster'", source=source, element="/")
    c = data["cluster"]
    for k in c:
        if k not in RECIPE_KEYS:
            raise ResourceError(
                f"unknown key {k!r} (expected one of {', '.join(RECIPE_KEYS)})", source=source, element=f"/cluster/{k}"
            )
    racks = _count(c, "racks", source, 0)
    if racks:
        per_rack = _count(c, "nodes_per_rack", source, minimum=1)
        nnodes = racks * per_rack
    else:
        nnodes = _count(c, "nodes", source, minimum=1)
        per_rack = nnodes
    sockets = _count(c, "sockets", source, 1, minimum=1)
    cps = _count(c, "cores_per_socket", source, minimum=0)
    gps = _count(c, "gpus_per_socket", source, 0)
    mem = _count(c, "memory_gb", source, 0)
    if nnodes > MAX_NODES:
        raise ResourceError(f"{nnodes} nodes: over the limit of {MAX_NODES} nodes", source=source, element="/cluster")
    if sockets * max(cps, gps, 1) > MAX_PER_NODE or mem > MAX_PER_NODE:
        raise ResourceError(
            f"over the limit of {MAX_PER_NODE} cores, GPUs or GB per node", source=source, element="/cluster"
        )
    hn = c.get("hostname", "node")
    if not isinstance(hn, str) or not hn:
        raise ResourceError("'hostname' must be a string", source=source, element="/cluster/hostname")
    if "[" in hn:
        try:
            hosts = list(Hostlist.parse(hn))
        except HostlistError as e:
            raise ResourceError(str(e), source=source, element="/cluster/hostname") from None
        if len(hosts) != nnodes:
            raise ResourceError(
                f"hostlist names {len(hosts)} hosts for {nnodes} nodes", source=source, element="/cluster/hostname"
            )
    else:
        hosts = [f"{hn}{r}" for r in range(nnodes)]
    props: dict[int, set[str]] = {}
    properties = c.get("properties") or {}
    if not isinstance(properties, dict):
        raise ResourceError("properties map a name to an idset of ranks", source=source, element="/cluster/properties")
    for name, ids in properties.items():
        el = f"/cluster/properties/{name}"
        try:
            ranks = IdSet.parse(ids) if isinstance(ids, str) else IdSet([ids]) if isinstance(ids, int) else None
        except IdSetError as e:
            raise ResourceError(str(e), source=source, element=el) from None
        if ranks is None or (ranks and ranks.last() >= nnodes):
            raise ResourceError("properties map a name to an idset of existing ranks", source=source, element=el)
        for r in ranks:
            props.setdefault(r, set()).add(name)
    b = ModelBuilder(source)
    cname = str(c.get("name", "cluster"))
    root = b.add_vertex("cluster", f"{cname}0", 0, basename=cname)
    core_m = (1 << cps) - 1
    gpu_m = (1 << gps) - 1
    mem_ps, mem_extra = divmod(mem, sockets)
    rank = 0
    nodes: list[int] = []
    for k in range(racks or 1):
        parent = b.add_vertex("rack", f"rack{k}", k, root, basename="rack") if racks else root
        for _ in range(per_rack):
            node = b.add_vertex("node", hosts[rank], rank, parent, rank=rank, basename="node")
            nodes.append(node)
            mem_next = 0
            for s in range(sockets):
                sock = b.add_vertex("socket", f"socket{s}", s, node, basename="socket")
                if cps:
                    b.add_leaves(sock, "core", core_m << (s * cps))
                if gps:
                    b.add_leaves(sock, "gpu", gpu_m << (s * gps))
                m = mem_ps + (1 if s < mem_extra else 0)
                if m:
                    b.add_leaves(sock, "memory", ((1 << m) - 1) << mem_next, unit="GB")
                    mem_next += m
            rank += 1
    per_switch = _count(c, "nodes_per_switch", source, 0)
    if per_switch:
        # a two-level fat tree in the ``network`` subsystem: fabric0 -> switchK -> its nodes
        fabric = b.add_vertex("switch", "fabric0", 0, basename="fabric", subsystem="network")
        for k, first in enumerate(range(0, rank, per_switch)):
            sw = b.add_vertex("switch", f"switch{k}", k, fabric, basename="switch", subsystem="network")
            for r in range(first, min(first + per_switch, rank)):
                b.link(sw, nodes[r], "network")
    b.hostnames = dict(enumerate(hosts))
    b.properties = props
    return b.finish()
