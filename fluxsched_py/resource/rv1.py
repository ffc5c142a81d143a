"""RFC 20 R version 1: read a graph or a resource set from R, write R.

Writing follows RFC 20 and flux-core's ``rlist`` conventions:

* ``R_lite`` entries group every rank with identical children, sorted by
  their lowest rank; idsets are in compressed RFC 22 form;
* ``nodelist`` holds the host names in rank order, RFC 29-compressed (only
  when the graph knows host names);
* ``properties`` maps each property to the allocated ranks that have it;
  ``+``-prefixed (instance-local) properties are dropped, and the key is
  omitted when empty;
* ``nslots`` only when given; ``starttime``/``expiration`` always;
* ``scheduling`` holds JGF only when asked for (``with_jgf=True``).

Reading takes ``scheduling`` as JGF only when its ``writer`` (RFC 20) is
absent (Fluxion), ``fluxion:...`` or ``sched-py:...``: any other writer's
data is left alone and the graph is built from ``R_lite``.  ``nslots``,
when present, must be at least 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from ..ids import Hostlist, HostlistError, IdSet, IdSetError
from ..inputs import read_text
from ..limits import MAX_LEAF_BITS, MAX_NODES, MAX_PER_NODE
from .builder import RLITE_TYPES, ModelBuilder
from .errors import ResourceError
from .resourceset import ResourceSet

if TYPE_CHECKING:
    from .graph import ResourceGraph

__all__ = ["model_from_rv1", "resourceset_from_rv1", "resourceset_to_rv1", "check_rv1", "hosts_rv1"]


def _read_json(obj: Any, source: str | None) -> tuple[Any, str | None]:
    if isinstance(obj, (str, Path)):
        path = str(obj)
        try:
            text = read_text(path)
        except OSError as e:
            raise ResourceError(f"cannot read: {e.strerror}", source=path) from None
        except UnicodeDecodeError as e:
            raise ResourceError(f"not UTF-8 text: {e.reason} at byte {e.start}", source=path) from None
        try:
            return json.loads(text), path
        except json.JSONDecodeError as e:
            raise ResourceError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", source=path) from None
        except RecursionError:
            raise ResourceError("invalid JSON: nested too deeply", source=path) from None
    return obj, source


def _idset(text: Any, source: str | None, element: str) -> IdSet:
    if not isinstance(text, str):
        raise ResourceError(f"expected an idset string, got {type(text).__name__}", source=source, element=element)
    try:
        return IdSet.parse(text)
    except IdSetError as e:
        raise ResourceError(str(e), source=source, element=element) from None


def check_rv1(R: Any, source: str | None = None) -> list[tuple[IdSet, dict[str, IdSet]]]:
    """Validate the parts of R this package reads; return the parsed ``R_lite``.

    Raises :class:`ResourceError` naming the JSON path of the first problem.
    """
    if not isinstance(R, dict):
        raise ResourceError("R must be a JSON object", source=source, element="/")
    if R.get("version") != 1:
        raise ResourceError(
            f"unsupported R version {R.get('version')!r} (expected 1)", source=source, element="/version"
        )
    ex = R.get("execution")
    if not isinstance(ex, dict):
        raise ResourceError("missing or invalid 'execution' object", source=source, element="/execution")
    rl = ex.get("R_lite")
    if not isinstance(rl, list):
        raise ResourceError("missing or invalid 'R_lite' array", source=source, element="/execution/R_lite")
    out = []
    seen = 0
    nranks = 0
    width = 0
    for i, entry in enumerate(rl):
        el = f"/execution/R_lite/{i}"
        if not isinstance(entry, dict):
            raise ResourceError("an R_lite entry must be an object", source=source, element=el)
        ranks = _idset(entry.get("rank"), source, el + "/rank")
        if ranks.mask & seen:
            raise ResourceError(
                f"ranks {IdSet.from_mask(ranks.mask & seen)} appear twice", source=source, element=el + "/rank"
            )
        seen |= ranks.mask
        nranks += ranks.mask.bit_count()
        if nranks > MAX_NODES:
            raise ResourceError(
                f"{nranks} ranks or more: over the limit of {MAX_NODES} nodes",
                source=source,
                element=el + "/rank",
            )
        ch = entry.get("children")
        if not isinstance(ch, dict):
            raise ResourceError("missing or invalid 'children' object", source=source, element=el + "/children")
        children = {}
        for t, ids in ch.items():
            if not isinstance(t, str) or not t:
                raise ResourceError(f"invalid resource type {t!r}", source=source, element=el + "/children")
            children[t] = _idset(ids, source, f"{el}/children/{t}")
            if children[t].mask.bit_count() > MAX_PER_NODE:
                raise ResourceError(
                    f"{children[t].mask.bit_count()} {t} per rank: over the limit of {MAX_PER_NODE} per node",
                    source=source,
                    element=f"{el}/children/{t}",
                )
            width += children[t].mask.bit_length()
        width += ranks.mask.bit_length()
        if width > MAX_LEAF_BITS:  # each idset is a bitmask as wide as its largest id
            raise ResourceError(
                f"ids this large or sparse are not supported (over {MAX_LEAF_BITS} bits of idsets)",
                source=source,
                element=el,
            )
        out.append((ranks, children))
    for key in ("starttime", "expiration"):
        if key in ex and (not isinstance(ex[key], (int, float)) or isinstance(ex[key], bool)):
            raise ResourceError(f"'{key}' must be a number", source=source, element=f"/execution/{key}")
    if "nslots" in ex and (not isinstance(ex["nslots"], int) or isinstance(ex["nslots"], bool) or ex["nslots"] < 1):
        # RFC 20 (2025): "if present it MUST be greater than 0"
        raise ResourceError("'nslots' must be an integer greater than 0", source=source, element="/execution/nslots")
    return out


def _nodelist(ex: dict, nranks: int, source: str | None) -> list[str] | None:
    if "nodelist" not in ex:
        return None
    nl = ex["nodelist"]
    if not isinstance(nl, list) or not all(isinstance(x, str) for x in nl):
        raise ResourceError("'nodelist' must be an array of strings", source=source, element="/execution/nodelist")
    try:
        hosts = list(Hostlist.from_strings(nl))
    except HostlistError as e:
        raise ResourceError(str(e), source=source, element="/execution/nodelist") from None
    if len(hosts) != nranks:
        raise ResourceError(
            f"nodelist names {len(hosts)} hosts but R_lite has {nranks} ranks",
            source=source,
            element="/execution/nodelist",
        )
    return hosts


def _properties(ex: dict, all_ranks: IdSet, source: str | None) -> dict[int, set[str]]:
    props = ex.get("properties", {})
    if not isinstance(props, dict):
        raise ResourceError("'properties' must be an object", source=source, element="/execution/properties")
    out: dict[int, set[str]] = {}
    for name, ids in props.items():
        el = f"/execution/properties/{name}"
        ranks = _idset(ids, source, el)
        if not ranks.issubset(all_ranks):
            raise ResourceError(f"ranks {ranks - all_ranks} are not in R_lite", source=source, element=el)
        for r in ranks:
            out.setdefault(r, set()).add(name)
    return out


def model_from_rv1(R: dict | str | Path, *, source: str | None = None) -> nx.DiGraph:
    """The networkx model of R (see :meth:`ResourceGraph.from_rv1`); ``G.graph["rv1_defaults"]`` keeps its times."""
    from .jgf import builder_from_jgf

    R, source = _read_json(R, source)
    rlite = check_rv1(R, source)
    ex = R["execution"]
    all_ranks = IdSet()
    for ranks, _ in rlite:
        all_ranks = all_ranks | ranks
    if not all_ranks:
        raise ResourceError("R_lite has no ranks: a machine with no nodes", source=source, element="/execution/R_lite")
    hosts = _nodelist(ex, len(all_ranks), source)
    props = _properties(ex, all_ranks, source)
    sched = R.get("scheduling")
    if sched is not None and not isinstance(sched, dict):
        raise ResourceError("'scheduling' must be an object", source=source, element="/scheduling")
    if sched is not None and jgf_writer(sched):
        b = builder_from_jgf(sched, source=source, element="/scheduling")
    else:
        b = ModelBuilder(source)
        root = b.add_vertex("cluster", "cluster0", 0, basename="cluster")
        by_rank: dict[int, dict[str, IdSet]] = {}
        for ranks, children in rlite:
            for r in ranks:
                by_rank[r] = children
        for idx, r in enumerate(sorted(by_rank)):
            name = hosts[idx] if hosts else f"node{r}"
            v = b.add_vertex("node", name, r, root, rank=r, basename="node")
            for t, ids in by_rank[r].items():
                if ids:
                    b.add_leaves(v, t, ids.mask, element=f"/execution/R_lite (rank {r})")
    for _, children in rlite:
        for t in children:
            if t not in b.rlite_types:
                b.rlite_types.append(t)
    if hosts:
        b.hostnames = {r: hosts[i] for i, r in enumerate(all_ranks)}
    if props or "properties" in ex:
        b.properties = props
    G = b.finish()
    if sched is not None:
        have = IdSet(r for _, r in G.nodes(data="rank") if r is not None and r >= 0)
        missing = all_ranks.mask & ~have.mask
        if missing:
            raise ResourceError(
                f"R_lite ranks {IdSet.from_mask(missing)} are not in the JGF", source=source, element="/scheduling"
            )
    defaults = {k: ex[k] for k in ("starttime", "expiration", "nslots") if k in ex}
    defaults.setdefault("starttime", 0.0)
    defaults.setdefault("expiration", 0.0)
    G.graph["rv1_defaults"] = defaults
    return G


def resourceset_from_rv1(g: ResourceGraph, R: dict | str | Path, *, source: str | None = None) -> ResourceSet:
    """The leaves of ``g`` that R's ``R_lite`` names.

    Raises :class:`ResourceError` when R names a rank, type or id the graph
    lacks.
    """
    R, source = _read_json(R, source)
    rlite = check_rv1(R, source)
    topo = g.topo
    pools: dict[int, dict[str, int]] = {}
    for i, (ranks, children) in enumerate(rlite):
        el = f"/execution/R_lite/{i}"
        for r in ranks:
            root = topo.rank_root.get(r)
            if root is None:
                raise ResourceError(f"rank {r} is not in the resource graph", source=source, element=el + "/rank")
            for t, ids in children.items():
                want = ids.mask
                for v in range(root, topo.end[root]):
                    m = topo.pools[v].get(t, 0) & want
                    if m:
                        d = pools.setdefault(v, {})
                        d[t] = d.get(t, 0) | m
                        want &= ~m
                if want:
                    raise ResourceError(
                        f"rank {r} has no {t} {IdSet.from_mask(want)}", source=source, element=f"{el}/children/{t}"
                    )
    return ResourceSet(topo, 0, pools)


#: ``scheduling.writer`` URI schemes whose ``scheduling`` is JGF this reader
#: takes: Fluxion's (also when ``writer`` is absent, RFC 20) and our own.
JGF_WRITERS = frozenset(("fluxion", "sched-py"))


def jgf_writer(sched: dict) -> bool:
    """Whether R's ``scheduling`` was written by a scheduler whose JGF we read.

    RFC 20 (2026): ``scheduling.writer`` is a URI whose scheme names the
    scheduler that wrote the key (``fluxion`` when absent); another
    scheduler's ``scheduling`` is not ours to interpret, so R is read from
    ``R_lite`` alone (and the key is still copied as it is)."""
    writer = sched.get("writer")
    if writer is None:
        return True
    if not isinstance(writer, str):
        return False
    scheme, sep, _ = writer.partition(":")
    return bool(sep) and scheme.lower() in JGF_WRITERS


def resourceset_to_rv1(
    g: ResourceGraph,
    rs: ResourceSet,
    *,
    starttime: float = 0.0,
    expiration: float = 0.0,
    nslots: int | None = None,
    with_jgf: bool = False,
) -> dict:
    """R version 1 for ``rs`` (see the module docstring for the rules).

    What is written is read from the model (``g.nx``): each vertex's rank
    and name, the host names, rank properties and R_lite types of
    ``G.graph``.  The compiled index only says which model vertex each of
    the set's items is (``topo.vertex_attrs``: the model's attributes by index).
    """
    topo = g.topo
    gattr = g.nx.graph
    attrs = topo.vertex_attrs
    types = tuple(dict.fromkeys(gattr.get("rlite_types") or RLITE_TYPES))
    acc: dict[int, dict[str, int]] = {}
    for v, tm in rs.leaf_masks.items():
        r = attrs[v]["rank"]
        if r < 0:
            continue
        d = acc.setdefault(r, {})
        for t, m in tm.items():
            if t in types:
                d[t] = d.get(t, 0) | m
    # ranks held only as containers (e.g. a node with no cores) still appear
    for lo, hi in IdSet.from_mask(rs.container_mask).runs():
        for v in range(lo, hi + 1):
            r = attrs[v]["rank"]
            if r >= 0 and r not in acc:
                acc[r] = {}
    groups: dict[tuple, int] = {}
    for r in sorted(acc):
        ch = acc[r]
        grp = tuple((t, IdSet.from_mask(ch[t]).encode()) for t in types if ch.get(t))
        groups[grp] = groups.get(grp, 0) | (1 << r)
    entries = sorted(groups.items(), key=lambda kv: kv[1] & -kv[1])
    rlite = [{"rank": IdSet.from_mask(mask).encode(), "children": dict(grp)} for grp, mask in entries]
    ex: dict[str, Any] = {"R_lite": rlite}
    ranks = sorted(acc)
    hostnames = gattr.get("hostnames") or {}
    if hostnames:
        ex["nodelist"] = [Hostlist(hostnames.get(r) or attrs[topo.rank_root[r]]["name"] for r in ranks).encode()]
        if not ranks:
            ex["nodelist"] = []
    rank_props = gattr.get("rank_properties") or {}
    props: dict[str, int] = {}
    for r in ranks:
        for p in rank_props.get(r, ()):
            if not p.startswith("+"):
                props[p] = props.get(p, 0) | (1 << r)
    if props:
        ex["properties"] = {p: IdSet.from_mask(m).encode() for p, m in sorted(props.items())}
    if nslots is not None:
        ex["nslots"] = nslots
    ex["starttime"] = starttime
    ex["expiration"] = expiration
    R: dict[str, Any] = {"version": 1, "execution": ex}
    if with_jgf:
        from .jgf import resourceset_to_jgf

        R["scheduling"] = resourceset_to_jgf(g, rs)
    return R


def hosts_rv1(
    hostnames: Sequence[str], cores: int | Sequence[int] = 1, properties: Sequence[Iterable[str]] | None = None
) -> dict:
    """R for a machine of whole hosts, host ``i`` as rank ``i``: ``cores``
    cores each (one count, or one per host) and each host's ``properties``
    when given.  The simulators' machines (a Batsim platform, the replay's)
    are written this way; ``hostnames`` is not empty."""
    n = len(hostnames)
    if n == 0:
        raise ValueError("a machine needs at least one host")
    per = [cores] * n if isinstance(cores, int) else list(cores)
    rlite = []
    start = 0
    for i in range(1, n + 1):
        if i == n or per[i] != per[start]:
            children = {"core": IdSet.range(0, per[start] - 1).encode()}
            rlite.append({"rank": IdSet.range(start, i - 1).encode(), "children": children})
            start = i
    ex: dict[str, Any] = {
        "R_lite": rlite,
        "nodelist": [Hostlist(hostnames).encode()],
        "starttime": 0.0,
        "expiration": 0.0,
    }
    ranks: dict[str, list[int]] = {}
    for rank, names in enumerate(properties or ()):
        for name in names:
            ranks.setdefault(name, []).append(rank)
    if ranks:
        ex["properties"] = {name: IdSet(r).encode() for name, r in sorted(ranks.items())}
    return {"version": 1, "execution": ex}


__all__ += ["RLITE_TYPES"]
