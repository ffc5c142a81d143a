"""The hwloc XML reader: every machine of ../shared/conformance/hwloc loads with the right counts.

Expected counts are counted here from the XML with plain ElementTree, not
with the reader, and a few are pinned to known facts about the machines.
The per-socket core split, GPU numbering and the restricted-cpuset case were
also checked against libhwloc 2.8 (``hwloc_get_next_osdev`` order, Core
logical indexes, ``hwloc_topology_load`` of an XML with a smaller
``allowed_cpuset``) when the reader was written.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.match import match
from fluxsched_py.resource import ResourceError, ResourceGraph
from fluxsched_py.resource.hwloc import parse_hwloc, read_hwloc, xml_root_tag

from .conftest import shared_path

FILES = ["corona.xml", "ipa20.xml", "sierra.xml", "tuo.CPX.xml", "tuo.SPX.xml", "tuo.TPX.xml"]

#: Known facts: (hostname, sockets, cores per socket, GPUs).  Corona: 2 AMD EPYC
#: 7401 x 24 cores, 8 AMD MI50; Sierra: 2 POWER9 x 22 cores, 4 NVIDIA V100;
#: Tuolumne: 4 MI300A APUs x 24 cores, 1/3/6 GPU partitions each in SPX/TPX/CPX.
FACTS = {
    "corona.xml": ("corona263", 2, 24, 8),
    "ipa20.xml": ("testhost-nvidia", 2, 56, 4),
    "sierra.xml": ("sierra3682", 2, 22, 4),
    "tuo.CPX.xml": ("testhost-amd", 4, 24, 24),
    "tuo.SPX.xml": ("testhost-amd", 4, 24, 4),
    "tuo.TPX.xml": ("testhost-amd", 4, 24, 12),
}

COMPUTE_BACKENDS = {"CUDA", "NVML", "OpenCL", "RSMI"}


def hwloc_file(name: str) -> Path:
    return shared_path("conformance", "hwloc", name)


# -- independent counting ------------------------------------------------------


def count_xml(path: Path) -> dict:
    """Count packages, cores per package and GPUs straight from the XML."""
    root = ET.parse(path).getroot()
    objects = list(root.iter("object"))
    packages = [o for o in objects if o.get("type") in ("Package", "Socket")]
    per_package = [sum(1 for o in p.iter("object") if o.get("type") == "Core") for p in packages]
    # GPUs: per PCI device, the compute OS devices of its most numerous backend
    # (one V100 seen as cuda0 + opencl0d0 + nvml0 is one GPU; an MI300A in CPX
    # mode shows six rsmi devices on one PCI device: six GPUs).
    gpus = 0
    for dev in (o for o in objects if o.get("type") == "PCIDev"):
        by_backend: dict[str, int] = {}
        for osdev in dev.findall("object"):
            backend = {i.get("name"): i.get("value") for i in osdev.findall("info")}.get("Backend")
            if osdev.get("type") == "OSDev" and backend in COMPUTE_BACKENDS:
                by_backend[backend] = by_backend.get(backend, 0) + 1
        gpus += max(by_backend.values(), default=0)
    host = next(i.get("value") for i in root.iter("info") if i.get("name") == "HostName")
    return {
        "host": host,
        "sockets": len(packages),
        "cores": sum(1 for o in objects if o.get("type") == "Core"),
        "per_package": per_package,
        "gpus": gpus,
    }


@pytest.mark.parametrize("name", FILES)
def test_every_machine_loads_with_the_counts_the_xml_holds(name):
    path = hwloc_file(name)
    want = count_xml(path)
    host, nsock, per_sock, ngpus = FACTS[name]
    assert (want["host"], want["sockets"], want["per_package"], want["gpus"]) == (
        host,
        nsock,
        [per_sock] * nsock,
        ngpus,
    )

    t = read_hwloc(path)
    assert t.hostname == host
    assert len(t.sockets) == want["sockets"]
    assert [len(s.cores) for s in t.sockets] == want["per_package"]
    assert t.ncores == want["cores"] and t.ngpus == want["gpus"]
    # ids are 0..n-1 across the machine, socket by socket
    assert [c for s in t.sockets for c in s.cores] == list(range(t.ncores))
    assert sorted(g for s in t.sockets for g in s.gpus) == list(range(t.ngpus))
    assert not t.cores and not t.gpus  # every core and GPU of these machines is local to one package

    g = ResourceGraph.load(path)
    assert str(g.ranks) == "0" and g.hostname(0) == host
    everything = g.all()
    assert everything.count("core") == want["cores"] and everything.count("gpu") == want["gpus"]
    assert everything.count("socket") == want["sockets"] and everything.count("node") == 1
    lite = g.to_rv1()["execution"]["R_lite"]
    assert lite == [{"rank": "0", "children": {"core": f"0-{want['cores'] - 1}", "gpu": f"0-{want['gpus'] - 1}"}}]
    assert g.to_rv1()["execution"]["nodelist"] == [host]


def test_corona_is_two_sockets_of_24_cores_and_eight_amd_gpus():
    path = hwloc_file("corona.xml")
    text = path.read_text()
    # the facts, from the XML itself
    assert text.count('type="Core"') == 48 and text.count('type="Socket"') == 2
    assert len(re.findall(r'name="rsmi\d+" osdev_type="1"', text)) == 8
    assert text.count('name="GPUModel" value="deon Instinct MI50 32GB"') == 8
    t = read_hwloc(path)
    assert [(s.cores[0], s.cores[-1]) for s in t.sockets] == [(0, 23), (24, 47)]
    assert [s.gpus for s in t.sockets] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    # numbered in hwloc's OS-device order, which is not the rsmiN name order
    assert t.gpu_names == ("rsmi2", "rsmi3", "rsmi1", "rsmi0", "rsmi6", "rsmi7", "rsmi5", "rsmi4")
    assert t.version == 1


def test_one_gpu_seen_by_several_backends_counts_once():
    t = read_hwloc(hwloc_file("ipa20.xml"))  # each A100: opencl0dN, cudaN and nvmlN on one PCI device
    assert t.ngpus == 4 and [s.gpus for s in t.sockets] == [(0, 1), (2, 3)]
    assert all(n.startswith("opencl") for n in t.gpu_names)  # the first backend met wins


def test_drm_devices_are_not_gpus():
    t = read_hwloc(hwloc_file("sierra.xml"))  # card0..4 and renderD128..131 are osdev_type 1 too
    assert t.gpu_names == ("cuda0", "cuda1", "cuda2", "cuda3")
    assert [s.gpus for s in t.sockets] == [(0, 1), (2, 3)]


def test_partitioned_mi300a_gpus_are_distinct():
    for name, per in (("tuo.SPX.xml", 1), ("tuo.TPX.xml", 3), ("tuo.CPX.xml", 6)):
        t = read_hwloc(hwloc_file(name))
        assert [len(s.gpus) for s in t.sockets] == [per] * 4, name


def test_disallowed_pus_drop_their_cores_as_hwloc_does(tmp_path):
    text = hwloc_file("tuo.SPX.xml").read_text()
    full = "0xffffffff," * 5 + "0xffffffff"
    # PU 0 and its sibling PU 96 (core 0) disallowed; PU 1 alone (core 1 keeps PU 97)
    allowed = "0xffffffff,0xffffffff,0xfffffffe,0xffffffff,0xffffffff,0xfffffffc"
    assert f'allowed_cpuset="{full}"' in text
    (tmp_path / "r.xml").write_text(text.replace(f'allowed_cpuset="{full}"', f'allowed_cpuset="{allowed}"', 1))
    t = read_hwloc(tmp_path / "r.xml")
    assert t.ncores == 95 and [len(s.cores) for s in t.sockets] == [23, 24, 24, 24]


def test_memory_is_optional():
    path = hwloc_file("corona.xml")
    assert ResourceGraph.from_hwloc(path).all().count("memory") == 0
    t = read_hwloc(path)
    assert [s.memory for s in t.sockets] == [134734184448, 135238848512]  # NUMANode local_memory
    g = ResourceGraph.from_hwloc(path, memory=True)
    assert g.all().count("memory") == 125 + 125  # whole GiB per socket
    assert "memory" not in g.to_rv1()["execution"]["R_lite"][0]["children"]


# -- matching --------------------------------------------------------------------

SLOT = """
version: 1
resources:
  - type: slot
    count: 1
    label: task
    with:
      - {type: core, count: 4}
      - {type: gpu, count: 1}
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
"""

NODE = """
version: 1
resources:
  - type: node
    count: 1
    exclusive: true
    with:
      - type: slot
        count: 1
        label: task
        with: [{type: core, count: 1}]
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
"""


@pytest.mark.parametrize("name", ["corona.xml", "sierra.xml", "tuo.TPX.xml"])
def test_matched_R_names_cores_and_gpus_of_one_socket(name):
    path = hwloc_file(name)
    t = read_hwloc(path)
    g = ResourceGraph.from_hwloc(path)
    socket_of = {("core", c): i for i, s in enumerate(t.sockets) for c in s.cores}
    socket_of.update({("gpu", x): i for i, s in enumerate(t.sockets) for x in s.gpus})
    req = parse_jobspec(SLOT)
    seen: dict[str, int] = {"core": 0, "gpu": 0}
    njobs = 0
    while (rs := match(g, req, policy="locality")) is not None:
        njobs += 1
        g.allocate(njobs, rs)
        (entry,) = rs.to_rv1(g)["execution"]["R_lite"]
        assert entry["rank"] == "0"
        ids = {k: IdSet.parse(v) for k, v in entry["children"].items()}
        assert len(ids["core"]) == 4 and len(ids["gpu"]) == 1
        for kind in ("core", "gpu"):
            assert not ids[kind].mask & seen[kind], "allocated twice"
            seen[kind] |= ids[kind].mask
        sockets = {socket_of[(kind, i)] for kind in ("core", "gpu") for i in ids[kind]}
        assert len(sockets) == 1, f"slot spans sockets: {entry}"
    per_socket = min(min(len(s.cores) // 4, len(s.gpus)) for s in t.sockets)
    assert njobs == per_socket * len(t.sockets)
    assert seen["gpu"] == (1 << t.ngpus) - 1  # every GPU id the topology has, and no other


def test_exclusive_node_gets_every_core_and_gpu():
    g = ResourceGraph.load(hwloc_file("tuo.CPX.xml"))
    rs = match(g, parse_jobspec(NODE))
    R = rs.to_rv1(g)
    assert R["execution"]["R_lite"] == [{"rank": "0", "children": {"core": "0-95", "gpu": "0-23"}}]
    assert R["execution"]["nodelist"] == ["testhost-amd"]


def test_several_files_are_several_ranks():
    g = ResourceGraph.from_hwloc([hwloc_file("sierra.xml"), hwloc_file("corona.xml")])
    assert str(g.ranks) == "0-1" and (g.hostname(0), g.hostname(1)) == ("sierra3682", "corona263")
    R = g.to_rv1()["execution"]
    assert R["R_lite"] == [
        {"rank": "0", "children": {"core": "0-43", "gpu": "0-3"}},
        {"rank": "1", "children": {"core": "0-47", "gpu": "0-7"}},
    ]
    g = ResourceGraph.from_hwloc(hwloc_file("corona.xml"), ranks=5, hostnames="c5")
    assert str(g.ranks) == "5" and g.hostname(5) == "c5"
    with pytest.raises(ResourceError, match="2 hwloc files but 1 ranks"):
        ResourceGraph.from_hwloc([hwloc_file("sierra.xml"), hwloc_file("corona.xml")], ranks=[0])


def test_matchcli_loads_hwloc(monkeypatch, capsys, tmp_path):
    from fluxsched_py.matchcli.cli import main

    job = tmp_path / "job.yaml"
    job.write_text(SLOT)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"match allocate {job}\nquit\n"))
    assert main(["-L", str(hwloc_file("corona.xml")), "-f", "hwloc", "-F", "rv1_nosched", "-P", "low"]) == 0
    out = capsys.readouterr().out
    R = json.loads(out.splitlines()[0])
    assert R["execution"]["R_lite"] == [{"rank": "0", "children": {"core": "0-3", "gpu": "0"}}]
    assert "RESOURCES=ALLOCATED" in out


def test_replay_platform_routes_topology_to_hwloc():
    from fluxsched_py.replay.platform import load_platform

    g = load_platform(hwloc_file("sierra.xml"))
    assert g.all().count("core") == 44 and g.all().count("gpu") == 4


# -- small documents: v1 names, fallbacks, errors ------------------------------------

V1 = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x0000000f" online_cpuset="0x0000000f" allowed_cpuset="0x0000000f">
    <info name="HostName" value="tiny7"/>
    <object type="Socket" os_index="0" cpuset="0x00000003">
      <object type="Core" os_index="0" cpuset="0x00000001"><object type="PU" os_index="0" cpuset="0x00000001"/></object>
      <object type="Core" os_index="1" cpuset="0x00000002"><object type="PU" os_index="1" cpuset="0x00000002"/></object>
    </object>
    <object type="Core" os_index="2" cpuset="0x00000004"/>
    <object type="Core" os_index="3" cpuset="0x00000008"/>
    <object type="Bridge" bridge_type="0-1">
      <object type="PCIDev" pci_busid="0000:04:00.0">
        <object type="OSDev" name="card0" osdev_type="1"/>
        <object type="OSDev" name="cuda0" osdev_type="5"><info name="CoProcType" value="CUDA"/></object>
        <object type="OSDev" name="opencl0d0" osdev_type="5"/>
      </object>
    </object>
  </object>
</topology>
"""


def test_v1_socket_name_coproc_fallbacks_and_unpackaged_cores():
    t = parse_hwloc(V1, source="tiny.xml")
    assert t.version == 1 and t.hostname == "tiny7"
    assert [s.cores for s in t.sockets] == [(0, 1)] and t.cores == (2, 3)
    assert t.gpu_names == ("cuda0",) and t.gpus == (0,)  # machine-wide locality: on the node


def test_root_sniffing():
    assert xml_root_tag('<?xml version="1.0"?>\n<!-- c -->\n<!DOCTYPE topology SYSTEM "x">\n<topology>') == "topology"
    assert xml_root_tag('<?xml version="1.0"?><graphml xmlns="x">') == "graphml"
    assert xml_root_tag("cluster: {nodes: 1}  # <topology>") is None


@pytest.mark.parametrize(
    "text,element,reason",
    [
        (V1[:600], "line", "malformed XML"),
        (V1.replace('cpuset="0x00000004"', 'cpuset="0xzz"'), "/topology/object[1]/object[2]", "invalid Core cpuset"),
        (V1.replace('<object type="Core" os_index="3"', '<object os_index="3"'), "/object[3]", "without a 'type'"),
        (V1.replace("<topology>", "<platform>").replace("</topology>", "</platform>"), "/platform", "Batsim"),
        ('<topology version="2.0"></topology>', "/topology", "one top-level <object>, found 0"),
        ('<topology><object type="System" cpuset="0x1"/></topology>', "/topology/object[1]", "System"),
        (V1.replace('"hwloc.dtd">', '"hwloc.dtd" [<!ENTITY x "y">]>'), "DOCTYPE", "entity declarations"),
        (
            V1.replace('<object type="Core" os_index="3" cpuset="0x00000008"/>', '<object type="Core"/>'),
            "/object[3]",
            "Core without a cpuset",
        ),
    ],
)
def test_bad_xml_is_a_resource_error_naming_file_and_element(tmp_path, text, element, reason):
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    with pytest.raises(ResourceError) as exc:
        ResourceGraph.from_hwloc(bad)
    msg = str(exc.value)
    assert msg.startswith(f"{bad}: ") and element in msg and reason in msg


def test_load_refuses_platform_xml_and_matchcli_reports_one_line(tmp_path, capsys):
    from fluxsched_py.matchcli.cli import main

    plat = tmp_path / "p.xml"
    plat.write_text('<?xml version="1.0"?>\n<platform version="4.1"><zone id="z"/></platform>')
    with pytest.raises(ResourceError, match="replay --platform"):
        ResourceGraph.load(plat)
    binary = tmp_path / "binary.xml"
    binary.write_bytes(b"\xff\xfe<topology>")
    with pytest.raises(ResourceError, match="not UTF-8"):
        ResourceGraph.load(binary)
    bad = tmp_path / "bad.xml"
    bad.write_text(V1[:600])
    assert main(["-L", str(bad), "-f", "hwloc"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fluxsched-py match: {bad}: line ") and "Traceback" not in err and err.count("\n") == 1
