"""hwloc XML topologies (format v1 and v2) as a resource graph.

One XML file describes one machine, as ``lstopo --of xml`` or flux-core
(``flux resource reload -x``) writes it.  The reader keeps what a scheduler
allocates and numbers it the way flux-core's ``librlist`` does, so R written
from the graph agrees with the R a Flux instance on that machine would hold:

* **Machine** becomes a ``node`` vertex with one rank (0 unless given), named
  after its ``HostName`` info (``node<rank>`` when there is none).
* **Package** (``Socket`` in old v1 files) becomes a ``socket`` vertex; sockets
  are numbered 0.. in topology order.
* **Core** objects are the ``core`` leaves, pooled on their socket (on the node
  when they sit in no package).  Their ids are hwloc logical indexes: 0..n-1
  across the machine in topology order, socket 1's cores after socket 0's.
* **PU** objects are ignored: cores are the leaves.  Only their cpusets matter:
  a core whose PUs are all outside the machine's allowed (and, in v1, online)
  cpuset is dropped and the others renumbered, as hwloc does when loading.
* **NUMANode**, **Group**, **Die**, caches and **Misc** objects are walked
  through, not kept: their contents land on the enclosing socket or node.
  Their memory is optional (``memory=True``): each NUMA node with CPUs gives
  ``memory`` leaves of 1 GiB (unit ``GB``, as in the YAML recipe) to the
  socket whose cpuset covers it, else to the node.  NUMA nodes without CPUs
  (GPU or CXL memory) are not counted.
* **GPUs** come from OS devices whose ``Backend`` (or, in old files,
  ``CoProcType``, ``subtype`` or name prefix) is CUDA, NVML, OpenCL or RSMI.
  Plain DRM devices (``card0``, ``renderD128``) are not GPUs.  One physical
  GPU seen by two backends (``cuda0`` and ``opencl0d0`` on one PCI device) is
  counted once: a device is skipped when an earlier GPU sits on the same PCI
  device with another backend.  Several devices of one backend on one PCI
  device (AMD MI300 CPX/TPX partitions) are distinct GPUs.  GPU ids are
  0..n-1 in hwloc's OS-device order (depth first, normal children before
  memory, I/O and misc children), and a GPU goes to the socket whose cpuset
  covers the cpuset of its nearest non-I/O ancestor, else to the node.
* Bridges, PCI devices, disks and network devices are not resources here.

Files are parsed with :mod:`xml.etree.ElementTree`: the DOCTYPE's external
DTD is never fetched, and a document declaring entities is refused.

>>> from fluxsched_py.resource.hwloc import parse_hwloc
>>> t = parse_hwloc(b'''<topology version="2.0"><object type="Machine" cpuset="0x3">
...   <object type="Package" cpuset="0x3"><object type="Core" cpuset="0x1"/><object type="Core" cpuset="0x2"/>
...   </object></object></topology>''')
>>> t.ncores, [s.cores for s in t.sockets]
(2, [(0, 1)])
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx

from ..inputs import read_bytes
from ..limits import MAX_GRAPH_BYTES, MAX_PER_NODE
from .builder import ModelBuilder
from .errors import ResourceError

__all__ = [
    "GPU_BACKENDS",
    "HwlocSocket",
    "HwlocTopology",
    "model_from_hwloc",
    "is_hwloc_xml",
    "parse_hwloc",
    "read_hwloc",
    "xml_root_tag",
]

StrPath = str | os.PathLike[str]

#: OS-device backends that are compute GPUs (flux-core's list).
GPU_BACKENDS = ("CUDA", "NVML", "OpenCL", "RSMI")
_NAME_PREFIXES = (("cuda", "CUDA"), ("nvml", "NVML"), ("opencl", "OpenCL"), ("rsmi", "RSMI"))

_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev"})
_MEMORY_TYPES = frozenset({"NUMANode", "MemCache"})
_PACKAGE_TYPES = frozenset({"Package", "Socket"})

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class HwlocSocket:
    """One package: its core and GPU ids, and the bytes of NUMA memory local to it."""

    cores: tuple[int, ...]
    gpus: tuple[int, ...]
    memory: int = 0


@dataclass(frozen=True, slots=True)
class HwlocTopology:
    """What the reader keeps of one hwloc XML machine (see the module docstring).

    ``cores``, ``gpus`` and ``memory`` are the ones outside every socket.
    ``gpu_names[i]`` is the OS-device name of GPU ``i`` (``cuda0``, ``rsmi3``...).
    """

    source: str | None
    version: int
    hostname: str | None
    sockets: tuple[HwlocSocket, ...]
    cores: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    memory: int = 0
    gpu_names: tuple[str, ...] = field(default=())

    @property
    def ncores(self) -> int:
        return len(self.cores) + sum(len(s.cores) for s in self.sockets)

    @property
    def ngpus(self) -> int:
        return len(self.gpus) + sum(len(s.gpus) for s in self.sockets)


# -- XML helpers -----------------------------------------------------------------


def xml_root_tag(head: str | bytes) -> str | None:
    """The root element's name from the first characters of an XML document, or None.

    Skips the XML declaration, comments, processing instructions and the
    DOCTYPE; anything but white space before the root element means "not XML".

    >>> xml_root_tag('<?xml version="1.0"?>\\n<!DOCTYPE topology SYSTEM "hwloc.dtd">\\n<topology>')
    'topology'
    """
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    i = 0
    n = len(head)
    while i < n:
        j = head.find("<", i)
        if j < 0 or j + 1 >= n or head[i:j].lstrip("\ufeff").strip():
            return None
        nxt = head[j + 1]
        if head.startswith("<!--", j):
            k = head.find("-->", j + 4)
            i = n if k < 0 else k + 3
        elif nxt in "?!":
            k = head.find(">", j + 2)
            if head.startswith("<!DOCTYPE", j):
                b = head.find("[", j, k if k >= 0 else n)
                if b >= 0:  # internal subset: skip to "]>"
                    k = head.find("]>", b)
                    k = -1 if k < 0 else k + 1
            i = n if k < 0 else k + 1
        else:
            k = j + 1
            while k < n and not head[k].isspace() and head[k] not in "/>":
                k += 1
            name = head[j + 1 : k]
            return name.rsplit(":", 1)[-1] or None
    return None


def is_hwloc_xml(path: StrPath) -> bool:
    """True when ``path`` is an XML file whose root element is ``<topology>``."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return xml_root_tag(head) == "topology"


#: Most 32-bit words in a cpuset: PUs of MAX_PER_NODE cores with up to 8 threads each.
_MAX_WORDS = MAX_PER_NODE * 8 // 32


def _bitmap(text: str, source: str | None, element: str, what: str) -> int:
    """An hwloc bitmap string (``0xffffffff,,0x00000003``: 32-bit words, most
    significant first), in time linear in its length: the words become one
    hexadecimal string read at once (shifting word by word is quadratic)."""
    words = text.strip().split(",", _MAX_WORDS)
    if len(words) > _MAX_WORDS:
        raise ResourceError(
            f"{what} has more than {_MAX_WORDS} words (over the limit of {MAX_PER_NODE} cores per node)",
            source=source,
            element=element,
        )
    digits = []
    for word in words:
        word = word.strip()
        if word == "0xf...f":  # infinitely set: keep the bits a finite word can hold
            w = 0xFFFFFFFF
        elif not word:
            w = 0
        else:
            try:
                w = int(word, 16)
            except ValueError:
                w = -1
            if w < 0 or w >> 32:
                raise ResourceError(f"invalid {what} {text[:60]!r}", source=source, element=element) from None
        digits.append(f"{w:08x}")
    return int("".join(digits), 16)


def _infos(el: ET.Element) -> dict[str, str]:
    return {i.get("name", ""): i.get("value", "") for i in el.findall("info")}


def _backend(el: ET.Element) -> str | None:
    info = _infos(el)
    for key in ("Backend", "CoProcType"):
        if info.get(key) in GPU_BACKENDS:
            return info[key]
    if el.get("subtype") in GPU_BACKENDS:
        return el.get("subtype")
    if "Backend" in info:
        return None
    name = el.get("name", "")
    for prefix, backend in _NAME_PREFIXES:
        if name.startswith(prefix) and name[len(prefix) :][:1].isdigit():
            return backend
    return None


@dataclass(slots=True)
class _Walk:
    source: str | None
    usable: int
    packages: list[int] = field(default_factory=list)  # effective cpuset per socket
    cores: list[int] = field(default_factory=list)  # socket index per core, -1 for the node
    numa: list[tuple[int, int]] = field(default_factory=list)  # (effective cpuset, bytes)
    gpus: list[tuple[str, int]] = field(default_factory=list)  # (name, locality cpuset)
    _gpu_pci: list[tuple[int, str]] = field(default_factory=list)  # (id(PCIDev), backend)


def _kind(t: str) -> int:
    if t in _IO_TYPES:
        return 2
    if t in _MEMORY_TYPES:
        return 1
    if t == "Misc":
        return 3
    return 0


def _children(el: ET.Element, path: str, source: str | None) -> list[tuple[ET.Element, str, str]]:
    """Object children as ``(element, path, type)``: normal, then memory, I/O and misc (hwloc's order)."""
    out: list[tuple[int, int, ET.Element, str, str]] = []
    for i, ch in enumerate(el.findall("object"), 1):
        p = f"{path}/object[{i}]"
        t = ch.get("type")
        if not t:
            raise ResourceError("an <object> without a 'type'", source=source, element=p)
        out.append((_kind(t), i, ch, p, t))
    out.sort(key=lambda x: (x[0], x[1]))
    return [(ch, p, t) for _, _, ch, p, t in out]


def _walk(w: _Walk, el: ET.Element, path: str, t: str, socket: int, locality: int, pcidev: ET.Element | None) -> None:
    src = w.source
    cpuset = None
    if t not in _IO_TYPES and el.get("cpuset") is not None:
        cpuset = _bitmap(el.get("cpuset", ""), src, path, f"{t} cpuset")
        locality = cpuset
    if t in _PACKAGE_TYPES:
        eff = (cpuset if cpuset is not None else locality) & w.usable
        if eff:
            socket = len(w.packages)
            w.packages.append(eff)
    elif t == "Core":
        if cpuset is None:
            raise ResourceError("a Core without a cpuset", source=src, element=path)
        if cpuset & w.usable:
            w.cores.append(socket)
            if len(w.cores) > MAX_PER_NODE:
                raise ResourceError(
                    f"more than {MAX_PER_NODE} cores: over the limit of {MAX_PER_NODE} per node",
                    source=src,
                    element=path,
                )
    elif t == "PU":
        return
    elif t == "NUMANode":
        mem = el.get("local_memory", "0")
        try:
            nbytes = int(mem)
        except ValueError:
            raise ResourceError(f"invalid NUMANode local_memory {mem!r}", source=src, element=path) from None
        w.numa.append(((cpuset if cpuset is not None else 0) & w.usable, nbytes))
    elif t == "PCIDev":
        pcidev = el
    elif t == "OSDev":
        backend = _backend(el)
        if backend is not None:
            key = id(pcidev) if pcidev is not None else None
            if key is None or not any(k == key and b != backend for k, b in w._gpu_pci):
                w.gpus.append((el.get("name", f"gpu{len(w.gpus)}"), locality & w.usable))
                if key is not None:
                    w._gpu_pci.append((key, backend))
    for ch, p, ct in _children(el, path, src):
        _walk(w, ch, p, ct, socket, locality, pcidev)


def _covering(packages: list[int], cpuset: int) -> int:
    """The socket whose cpuset covers ``cpuset`` (non-empty), else -1."""
    if cpuset:
        for i, pk in enumerate(packages):
            if cpuset & ~pk == 0:
                return i
    return -1


def parse_hwloc(data: bytes | str, source: str | None = None) -> HwlocTopology:
    """Read one machine from hwloc XML text (see the module docstring).

    Raises :class:`ResourceError` naming ``source`` and the element (a line and
    column for XML syntax, else an ``/topology/object[1]/...`` path).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if b"<!ENTITY" in data:
        raise ResourceError("entity declarations are not allowed in hwloc XML", source=source, element="DOCTYPE")
    try:
        root = ET.fromstring(data.lstrip())
    except ET.ParseError as e:
        line, col = e.position
        msg = str(e).split(":", 1)[0]
        raise ResourceError(f"malformed XML: {msg}", source=source, element=f"line {line} column {col}") from None
    except LookupError as e:  # <?xml encoding="..."?> names no codec Python knows
        raise ResourceError(f"malformed XML: {e}", source=source, element="line 1") from None
    tag = root.tag.rsplit("}", 1)[-1]  # without its namespace
    if tag != "topology":
        what = " (a SimGrid/Batsim platform: use the replay's --platform)" if tag == "platform" else ""
        raise ResourceError(
            f"not an hwloc topology: the root element is <{tag}>{what}", source=source, element=f"/{tag}"
        )
    vtext = root.get("version", "1.0")
    try:
        version = int(vtext.split(".", 1)[0])
    except ValueError:
        raise ResourceError(f"invalid topology version {vtext!r}", source=source, element="/topology") from None
    tops = _children(root, "/topology", source)
    if len(tops) != 1:
        raise ResourceError(f"expected one top-level <object>, found {len(tops)}", source=source, element="/topology")
    mel, mpath, mtype = tops[0]
    if mtype != "Machine":
        hint = " (multi-machine System topologies are not supported)" if mtype == "System" else ""
        raise ResourceError(f"the top-level object is a {mtype}, not a Machine{hint}", source=source, element=mpath)
    if mel.get("cpuset") is None:
        raise ResourceError("the Machine has no cpuset", source=source, element=mpath)
    usable = _bitmap(mel.get("cpuset", ""), source, mpath, "Machine cpuset")
    for attr in ("allowed_cpuset", "online_cpuset"):
        if mel.get(attr) is not None:
            usable &= _bitmap(mel.get(attr, ""), source, mpath, f"Machine {attr}")
    w = _Walk(source, usable)
    _walk(w, mel, mpath, mtype, -1, usable, None)

    sock_cores: list[list[int]] = [[] for _ in w.packages]
    node_cores: list[int] = []
    for cid, s in enumerate(w.cores):
        (sock_cores[s] if s >= 0 else node_cores).append(cid)
    sock_gpus: list[list[int]] = [[] for _ in w.packages]
    node_gpus: list[int] = []
    for gid, (_, loc) in enumerate(w.gpus):
        s = _covering(w.packages, loc)
        (sock_gpus[s] if s >= 0 else node_gpus).append(gid)
    sock_mem = [0] * len(w.packages)
    node_mem = 0
    if w.numa:
        for cpuset, nbytes in w.numa:
            if not cpuset:
                continue  # memory without CPUs (GPU HBM, CXL): not node memory
            s = _covering(w.packages, cpuset)
            if s >= 0:
                sock_mem[s] += nbytes
            else:
                node_mem += nbytes
    else:  # v1 machine without NUMA nodes
        try:
            node_mem = int(mel.get("local_memory", "0"))
        except ValueError:
            raise ResourceError("invalid Machine local_memory", source=source, element=mpath) from None
    hostname = _infos(mel).get("HostName") or None
    return HwlocTopology(
        source=source,
        version=version,
        hostname=hostname,
        sockets=tuple(
            HwlocSocket(tuple(c), tuple(g), m) for c, g, m in zip(sock_cores, sock_gpus, sock_mem, strict=True)
        ),
        cores=tuple(node_cores),
        gpus=tuple(node_gpus),
        memory=node_mem,
        gpu_names=tuple(name for name, _ in w.gpus),
    )


def read_hwloc(path: StrPath) -> HwlocTopology:
    """Read one machine from an hwloc XML file (see :func:`parse_hwloc`)."""
    source = os.fspath(path)
    try:
        data = read_bytes(path, MAX_GRAPH_BYTES)
    except OSError as e:
        raise ResourceError(f"cannot read: {e.strerror}", source=source) from None
    return parse_hwloc(data, source=source)


def _mask(ids: Sequence[int]) -> int:
    m = 0
    for i in ids:
        m |= 1 << i
    return m


def model_from_hwloc(
    paths: StrPath | Sequence[StrPath],
    *,
    ranks: int | Sequence[int] | None = None,
    hostnames: str | Sequence[str] | None = None,
    memory: bool = False,
) -> nx.DiGraph:
    """The networkx model of hwloc XML file(s).

    ``paths`` is one file or a list of files, one machine (node, rank) each,
    under a ``cluster0`` root.  ``ranks`` gives their ranks (default 0, 1, ...
    in list order); ``hostnames`` overrides the ``HostName`` the files carry.
    With ``memory=True`` NUMA memory becomes ``memory`` leaves of 1 GiB.
    """
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not files:
        raise ResourceError("no hwloc XML file given")
    source = os.fspath(files[0]) if len(files) == 1 else None
    if ranks is None:
        rank_list = list(range(len(files)))
    elif isinstance(ranks, int):
        rank_list = [ranks]
    else:
        rank_list = list(ranks)
    names: list[str | None]
    if hostnames is None:
        names = [None] * len(files)
    elif isinstance(hostnames, str):
        names = [hostnames]
    else:
        names = list(hostnames)
    if len(rank_list) != len(files) or len(names) != len(files):
        raise ResourceError(
            f"{len(files)} hwloc files but {len(rank_list)} ranks and {len(names)} host names", source=source
        )
    if len(set(rank_list)) != len(rank_list) or any(not isinstance(r, int) or r < 0 for r in rank_list):
        raise ResourceError(f"ranks must be distinct non-negative integers, got {rank_list}", source=source)
    b = ModelBuilder(source)
    root = b.add_vertex("cluster", "cluster0", 0, basename="cluster")
    hosts: dict[int, str] = {}
    for f, r, name in sorted(zip(files, rank_list, names, strict=True), key=lambda x: x[1]):
        t = read_hwloc(f)
        host = name or t.hostname
        if host:
            hosts[r] = host
        node = b.add_vertex("node", host or f"node{r}", r, root, rank=r, basename="node")
        mem_next = 0
        for i, s in enumerate(t.sockets):
            sock = b.add_vertex("socket", f"socket{i}", i, node, basename="socket")
            if s.cores:
                b.add_leaves(sock, "core", _mask(s.cores))
            if s.gpus:
                b.add_leaves(sock, "gpu", _mask(s.gpus))
            if memory and s.memory >= GIB:
                n = s.memory // GIB
                b.add_leaves(sock, "memory", ((1 << n) - 1) << mem_next, unit="GB")
                mem_next += n
        if t.cores:
            b.add_leaves(node, "core", _mask(t.cores))
        if t.gpus:
            b.add_leaves(node, "gpu", _mask(t.gpus))
        if memory and t.memory >= GIB:
            n = t.memory // GIB
            b.add_leaves(node, "memory", ((1 << n) - 1) << mem_next, unit="GB")
    b.hostnames = hosts
    return b.finish()
