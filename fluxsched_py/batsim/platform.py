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
from pathlib import Path

__all__ = ["PlatformError", "batsim_hosts"]


class PlatformError(ValueError):
    """A platform file that cannot be turned into a resource graph."""


def _expand_radical(radical: str) -> list[int]:
    out: list[int] = []
    for part in radical.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def _role(el: ET.Element) -> str | None:
    for prop in el.findall("prop"):
        if prop.get("id") == "role":
            return prop.get("value")
    return None


def batsim_hosts(path: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """``(hostname, cores)`` of the compute hosts of a SimGrid platform XML."""
    try:
        # lstrip: some Batsim platforms start with a blank line before <?xml.
        root = ET.fromstring(Path(path).read_text().lstrip())
    except (ET.ParseError, OSError, UnicodeDecodeError) as exc:
        raise PlatformError(f"{path}: not a readable platform XML: {exc}") from None
    hosts: list[tuple[str, int]] = []
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "host":
            name = el.get("id") or ""
            if _role(el) in ("master", "storage") or name == "master_host":
                continue
            hosts.append((name, int(el.get("core", "1"))))
        elif tag in ("cluster", "cabinet"):
            if _role(el) in ("master", "storage"):
                continue
            prefix, suffix = el.get("prefix", ""), el.get("suffix", "")
            cores = int(el.get("core", "1"))
            for i in _expand_radical(el.get("radical", "")):
                hosts.append((f"{prefix}{i}{suffix}", cores))
    if not hosts:
        raise PlatformError(f"{path}: no compute hosts found")
    return hosts
