"""Batsim's platforms: the compute hosts of a SimGrid platform XML.

Every compute host becomes a node (rank in document order, its ``id`` as
host name, ``core`` attribute as its core count, default 1);
``<cluster>``/``<cabinet>`` elements expand ``prefix + radical + suffix``;
the host or cluster whose ``role`` property is ``master`` (Batsim's
scheduler host) or ``storage`` is skipped.  A file-format module: the Batsim
driver and the replay (``--platform``) both read it; it imports nothing
above :mod:`fluxsched_py.ids`.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from ..errors import FluxschedError
from ..inputs import read_bytes
from ..limits import MAX_NODES, MAX_PER_NODE

__all__ = ["PlatformError", "batsim_hosts"]


class PlatformError(FluxschedError, ValueError):
    """A platform file that cannot be turned into a resource graph."""


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
