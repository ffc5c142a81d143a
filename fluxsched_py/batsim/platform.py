"""Batsim's platforms: the compute hosts of a SimGrid platform XML.

Every compute host becomes a node (ranked by name, the ids Batsim gives the
hosts SimGrid lists, so a rank is Batsim's resource id; its ``id`` as
host name, ``core`` attribute as its core count, default 1);
``<cluster>``/``<cabinet>`` elements expand ``prefix + radical + suffix``;
the host or cluster whose ``role`` property is ``master`` (Batsim's
scheduler host) or ``storage`` is skipped.  A file-format module: the Batsim
driver and the replay (``--platform``) both read it; it imports nothing
above :mod:`fluxsched_py.ids`.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from ..errors import FluxschedError
from ..inputs import read_bytes
from ..limits import MAX_NODES, MAX_PER_NODE
from ..power import PowerError, PowerModel, checked

__all__ = ["PlatformError", "batsim_hosts", "batsim_power", "property_names"]


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


def _compute_hosts(path: str | os.PathLike[str]) -> list[tuple[str, int, ET.Element, str]]:
    """(hostname, cores, the element that declares it, where) of each compute host."""
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
    hosts: list[tuple[str, int, ET.Element, str]] = []
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        where = f"{path}: <{tag} id={el.get('id', '')[:40]!r}>"
        if tag == "host":
            name = el.get("id") or ""
            if _role(el) in ("master", "storage") or name == "master_host":
                continue
            hosts.append((name, _cores(el, where), el, where))
        elif tag in ("cluster", "cabinet"):
            if _role(el) in ("master", "storage"):
                continue
            prefix, suffix = el.get("prefix", ""), el.get("suffix", "")
            cores = _cores(el, where)
            for i in _expand_radical(el.get("radical", ""), where, MAX_NODES - len(hosts)):
                hosts.append((f"{prefix}{i}{suffix}", cores, el, where))
        if len(hosts) > MAX_NODES:
            raise PlatformError(f"{path}: more than {MAX_NODES} hosts (the limit)")
    if not hosts:
        raise PlatformError(f"{path}: no compute hosts found")
    # Batsim numbers the compute hosts in the order SimGrid lists them, by name.
    hosts.sort(key=lambda h: h[0])
    return hosts


def batsim_hosts(path: str | os.PathLike[str]) -> list[tuple[str, int, dict[str, str]]]:
    """``(hostname, cores, properties)`` of the compute hosts of a SimGrid
    platform XML; the properties as Batsim 4 sends them in
    ``SIMULATION_BEGINS``: the ``<prop>`` of the host's element (a
    cluster's are each of its hosts'), and ``role`` empty when none is given."""
    return [(name, cores, {"role": "", **_props(el)}) for name, cores, el, _ in _compute_hosts(path)]


def property_names(props: Mapping[str, Any]) -> list[str]:
    """RFC 20 property names for a SimGrid host's ``<prop id=K value=V>`` pairs.

    ``K=V`` for a non-empty value, ``K`` alone for an empty or true one, and
    nothing for a false one — so a jobspec constraint can say
    ``properties=role=compute`` or just ``properties=gpu``.
    """
    out = []
    for k, v in props.items():
        if v is False or v in ("false", "False"):
            continue
        if v in ("", None, True, "true", "True"):
            out.append(str(k))
        else:
            out.append(f"{k}={v}")
    return out


#: SimGrid's speed units (``surf_parse_get_speed``), flops per second.
_SPEED_UNITS = {
    "": 1.0, "f": 1.0, "flops": 1.0,
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24,
}  # fmt: skip


def _speed(text: str, where: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kMGTPEZY]?)(f|flops)?\s*", text)
    try:
        value = float(m.group(1)) if m else math.nan
    except ValueError:
        value = math.nan
    if not (m and math.isfinite(value) and value >= 0):
        raise PlatformError(f"{where}: speed {text.strip()[:40]!r} is not a SimGrid speed such as 100Mf")
    return value * _SPEED_UNITS[m.group(2)]


def _props(el: ET.Element) -> dict[str, str]:
    return {p.get("id", ""): p.get("value", "") for p in el.findall("prop")}


def batsim_power(path: str | os.PathLike[str]) -> list[PowerModel] | None:
    """The power model of each compute host (in :func:`batsim_hosts`'s
    order), read as Batsim reads an energy platform (``batsim -E``), or
    None for a platform that gives no host one (no ``wattage_per_state``):

    - ``speed``: the host's pstates, one speed each, comma-separated;
      ``pstate``, the one it starts in (its computing pstate);
    - ``wattage_per_state``: ``idle:one-core:all-cores`` watts per pstate;
      a node idle draws the first, computing the last;
    - ``sleep_pstates``: ``sleep:off:on``, the sleep pstate and the virtual
      pstates a switch off and a switch on pass through.  A switch computes
      one flop in its virtual pstate, so it takes one over that pstate's
      speed, at that pstate's watts.

    A host without ``sleep_pstates`` cannot be switched off (its model says
    so with infinite switch times).  PlatformError names the file, the host
    and the field (a host without ``wattage_per_state`` where others have one)."""
    hosts = _compute_hosts(path)
    if not any("wattage_per_state" in _props(el) for _, _, el, _ in hosts):
        return None
    models: dict[int, PowerModel] = {}  # per element: a cluster's hosts share one
    for name, _, el, _ in hosts:
        if id(el) not in models:
            models[id(el)] = _host_power(el, f"{path}: host {name!r}")
    return [models[id(el)] for _, _, el, _ in hosts]


def _host_power(el: ET.Element, where: str) -> PowerModel:
    props = _props(el)
    speeds = [_speed(s, f"{where}: speed") for s in (el.get("speed") or el.get("power") or "").split(",")]
    n = len(speeds)
    wattage = props.get("wattage_per_state")
    if wattage is None:
        raise PlatformError(f"{where}: wattage_per_state is missing (an energy platform gives it for every host)")
    states: list[tuple[float, float, float]] = []
    for i, part in enumerate(wattage.split(",")):
        values = [v.strip() for v in part.split(":")]
        if len(values) == 2:  # SimGrid's older idle:max form
            values = [values[0], values[0], values[1]]
        if len(values) != 3:
            raise PlatformError(
                f"{where}: wattage_per_state pstate {i}: expected idle:one-core:all-cores, not {part.strip()[:40]!r}"
            )
        try:
            idle, one, full = (checked(v, f"{where}: wattage_per_state pstate {i}") for v in values)
        except PowerError as exc:
            raise PlatformError(str(exc)) from None
        states.append((idle, one, full))
    if len(states) != n:
        raise PlatformError(f"{where}: wattage_per_state has {len(states)} pstates but speed has {n}")
    try:
        start = int(el.get("pstate", "0"))
    except ValueError:
        raise PlatformError(f"{where}: pstate={el.get('pstate')!r} is not an integer") from None
    if not 0 <= start < n:
        raise PlatformError(f"{where}: pstate={start} does not exist (the host has {n} pstates)")
    idle, _, computing = states[start]
    sleep = props.get("sleep_pstates")
    if sleep is None:
        return PowerModel(idle, computing, idle, math.inf, idle, math.inf, idle, start, -1)
    triplet = sleep.split(",")[0].split(":")
    if len(triplet) != 3:
        raise PlatformError(f"{where}: sleep_pstates {sleep[:40]!r}: expected sleep:off:on pstates, such as 13:14:15")
    try:
        sleep_ps, off_ps, on_ps = (int(x.strip()) for x in triplet)
    except ValueError:
        raise PlatformError(f"{where}: sleep_pstates {sleep[:40]!r}: the pstates are not integers") from None
    for label, ps in (("sleep", sleep_ps), ("off", off_ps), ("on", on_ps)):
        if not 0 <= ps < n:
            raise PlatformError(
                f"{where}: sleep_pstates: the {label} pstate {ps} does not exist (the host has {n} pstates)"
            )
    if start in (sleep_ps, off_ps, on_ps):
        raise PlatformError(f"{where}: pstate={start} is a sleep or switching pstate, not a computing one")
    for label, ps in (("off", off_ps), ("on", on_ps)):
        if not speeds[ps] > 0:
            raise PlatformError(f"{where}: the {label} pstate {ps} has speed 0: the switch would never end")
    return PowerModel(
        idle_watts=idle,
        computing_watts=computing,
        sleeping_watts=states[sleep_ps][0],
        off_time=1.0 / speeds[off_ps],
        off_watts=states[off_ps][2],
        on_time=1.0 / speeds[on_ps],
        on_watts=states[on_ps][2],
        compute_pstate=start,
        sleep_pstate=sleep_ps,
    )
