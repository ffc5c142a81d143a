"""Platforms for the replay: a resource graph from a file or a node count.

``--platform FILE`` accepts what :class:`~fluxsched_py.resource.ResourceGraph`
reads (a YAML recipe, RFC 20 R in JSON, a GRUG GraphML file, an hwloc XML
topology) and a SimGrid platform XML as Batsim uses it.  XML is told apart by
its root element: ``<topology>`` is hwloc (one node, see
:mod:`fluxsched_py.resource.hwloc`), ``<platform>`` is SimGrid.  In a SimGrid
platform every compute host becomes a node (rank in document order, its
``id`` as host name, ``core`` attribute as its core count, default 1);
``<cluster>``/``<cabinet>`` elements expand
``prefix + radical + suffix``; the host or cluster whose ``role`` property is
``master`` (Batsim's scheduler host) or ``storage`` is skipped.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..ids import Hostlist, IdSet
from ..inputs import MAX_NODES, MAX_PER_NODE, read_bytes

__all__ = ["PlatformError", "load_platform", "nodes_graph", "nodes_R", "batsim_hosts"]


class PlatformError(ValueError):
    """A platform file that cannot be turned into a resource graph."""


def _graph_cls() -> Any:
    from ..resource import ResourceGraph

    return ResourceGraph


def nodes_R(hostnames: list[str], cores: list[int] | int = 1) -> dict:
    """RFC 20 R with one rank per host name, ``cores`` cores each."""
    n = len(hostnames)
    if n == 0:
        raise PlatformError("a platform needs at least one node")
    per = [cores] * n if isinstance(cores, int) else list(cores)
    R_lite = []
    start = 0
    for i in range(1, n + 1):
        if i == n or per[i] != per[start]:
            cores_ids = str(IdSet.range(0, per[start] - 1))
            R_lite.append({"rank": str(IdSet.range(start, i - 1)), "children": {"core": cores_ids}})
            start = i
    return {
        "version": 1,
        "execution": {
            "R_lite": R_lite,
            "nodelist": [Hostlist(hostnames).encode()],
            "starttime": 0.0,
            "expiration": 0.0,
        },
    }


def nodes_graph(n: int, cores: int = 1, prefix: str = "node") -> Any:
    """A graph of ``n`` nodes named ``node0..``, ``cores`` cores each."""
    if not 1 <= n <= MAX_NODES:
        raise PlatformError(f"a platform has 1..{MAX_NODES} nodes, not {n}")
    if not 1 <= cores <= MAX_PER_NODE:
        raise PlatformError(f"a node has 1..{MAX_PER_NODE} cores, not {cores}")
    return _graph_cls().from_rv1(nodes_R([f"{prefix}{i}" for i in range(n)], cores))


def _expand_radical(radical: str, where: str, room: int = MAX_NODES) -> list[int]:
    """``0-3,7`` as ``[0, 1, 2, 3, 7]``; the count is checked against ``room`` before expanding."""
    spans: list[tuple[int, int]] = []
    total = 0
    for part in radical.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
            elif part:
                lo = hi = int(part)
            else:
                continue
        except ValueError:
            raise PlatformError(f"{where}: radical {radical[:40]!r} is not a list of integers and ranges") from None
        if lo < 0 or hi < lo:
            raise PlatformError(f"{where}: radical range {part!r} is empty or negative")
        total += hi - lo + 1
        if total > room:
            raise PlatformError(f"{where}: radical {radical[:40]!r} names more than {MAX_NODES} hosts (the limit)")
        spans.append((lo, hi))
    return [i for lo, hi in spans for i in range(lo, hi + 1)]


def _cores(el: ET.Element, where: str) -> int:
    text = el.get("core", "1")
    try:
        n = int(text)
    except ValueError:
        raise PlatformError(f"{where}: core={text[:40]!r} is not an integer") from None
    if not 1 <= n <= MAX_PER_NODE:
        raise PlatformError(f"{where}: core={n} is outside 1..{MAX_PER_NODE}")
    return n


def _role(el: ET.Element) -> str | None:
    for prop in el.findall("prop"):
        if prop.get("id") == "role":
            return prop.get("value")
    return None


def batsim_hosts(path: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """``(hostname, cores)`` of the compute hosts of a SimGrid platform XML."""
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise PlatformError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if b"<!ENTITY" in data:
        raise PlatformError(f"{path}: XML entity declarations are not accepted in a platform")
    try:
        # lstrip: some Batsim platforms start with a blank line before <?xml.
        root = ET.fromstring(data.lstrip())
    except ET.ParseError as exc:
        raise PlatformError(f"{path}: not a readable platform XML: {exc}") from None
    hosts: list[tuple[str, int]] = []
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        where = f"{path}: <{tag} id={el.get('id', '')[:40]!r}>"
        if tag == "host":
            name = el.get("id") or ""
            if _role(el) in ("master", "storage") or name == "master_host":
                continue
            hosts.append((name, _cores(el, where)))
        elif tag in ("cluster", "cabinet"):
            if _role(el) in ("master", "storage"):
                continue
            prefix, suffix = el.get("prefix", ""), el.get("suffix", "")
            cores = _cores(el, where)
            for i in _expand_radical(el.get("radical", ""), where, MAX_NODES - len(hosts)):
                hosts.append((f"{prefix}{i}{suffix}", cores))
        if len(hosts) > MAX_NODES:
            raise PlatformError(f"{path}: more than {MAX_NODES} hosts (the limit)")
    if not hosts:
        raise PlatformError(f"{path}: no compute hosts found")
    return hosts


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
        return G.from_rv1(nodes_R([h for h, _ in hosts], [c for _, c in hosts]))
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
            return G.from_rv1(data)
        return G.load(p)
    if suffix in (".yaml", ".yml"):
        return G.from_recipe(p)
    return G.load(p)
