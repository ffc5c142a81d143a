"""Hostile inputs of issue 23, generated on demand: each is a command line and
the files it reads, built in a scratch folder (nothing big is committed).

``t/test_hostile_inputs.py`` runs every case under a memory cap and checks
its behaviour (a non-zero exit and one plain line naming the input and the
reason); ``bench/bench_hostile.py`` runs the same cases and prints the wall
time and peak memory of each, the figures ``docs/rfcs/RELIABILITY.md`` quotes.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fluxsched_py.limits import MAX_JOBS, MAX_NODES, MAX_PER_NODE

SCRIPT = Path(sys.executable).with_name("fluxsched-py")
REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "synthetic_seed42_64nodes.json"


@dataclass(frozen=True)
class Case:
    """``make(folder)`` writes the inputs and returns the arguments of
    ``fluxsched-py`` (or, with ``shell``, a shell line where ``{fluxsched_py}``
    is the script); the error line must hold every one of ``says``."""

    name: str
    make: Callable[[Path], list[str]]
    says: tuple[str, ...]
    status: int = 1
    shell: bool = False
    stdin: bytes = b""


def _write(path: Path, data: str | bytes) -> str:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def _rv1(ranks: str, cores: str = "0-3") -> str:
    return json.dumps({"version": 1, "execution": {"R_lite": [{"rank": ranks, "children": {"core": cores}}]}})


_GRUG_KEYS = """<key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
<key id="type" for="node" attr.name="type" attr.type="string"/>
<key id="basename" for="node" attr.name="basename" attr.type="string"/>
<key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
<key id="subsystem" for="node" attr.name="subsystem" attr.type="string"><default>containment</default></key>
<key id="e_subsystem" for="edge" attr.name="e_subsystem" attr.type="string"><default>containment</default></key>
<key id="relation" for="edge" attr.name="relation" attr.type="string"><default>contains</default></key>
<key id="rrelation" for="edge" attr.name="rrelation" attr.type="string"><default>in</default></key>
<key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
<key id="id_start" for="edge" attr.name="id_start" attr.type="int"><default>0</default></key>
<key id="id_stride" for="edge" attr.name="id_stride" attr.type="int"><default>1</default></key>
<key id="gen_method" for="edge" attr.name="gen_method" attr.type="string"><default>MULTIPLY</default></key>
<key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
<key id="as_tgt_subsystem" for="edge" attr.name="as_tgt_subsystem" attr.type="string">
<default>containment</default></key>
<key id="as_tgt_uplvl" for="edge" attr.name="as_tgt_uplvl" attr.type="int"><default>1</default></key>
<key id="as_src_uplvl" for="edge" attr.name="as_src_uplvl" attr.type="int"><default>1</default></key>"""


def _grug(nodes: int, cores: int) -> str:
    """A GRUG recipe: cluster -> ``nodes`` nodes -> ``cores`` cores each."""

    def vertex(name: str, root: int = 0) -> str:
        return (
            f'<node id="{name}"><data key="root">{root}</data><data key="type">{name}</data>'
            f'<data key="basename">{name}</data></node>'
        )

    def edge(s: str, t: str, n: int) -> str:
        return f'<edge source="{s}" target="{t}"><data key="multi_scale">{n}</data></edge>'

    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        f'{_GRUG_KEYS}\n<graph id="g" edgedefault="directed">\n'
        f"{vertex('cluster', 1)}{vertex('node')}{vertex('core')}\n"
        f"{edge('cluster', 'node', nodes)}{edge('node', 'core', cores)}\n</graph>\n</graphml>\n"
    )


def _hwloc(cores: int, cpuset: str | None = None) -> str:
    """An hwloc topology: one Machine, one Package, ``cores`` cores of one PU each."""
    words = -(-cores // 32)
    full = cpuset or ",".join(["0xffffffff"] * words)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n<topology version="2.0">\n',
        f'<object type="Machine" os_index="0" cpuset="{full}">\n<object type="Package" cpuset="{full}">\n',
    ]
    for c in range(cores):  # PU c % 32: a core's cpuset stays one word, the file linear
        parts.append(f'<object type="Core" os_index="{c}" cpuset="0x{1 << c % 32:08x}"/>\n')
    parts.append("</object>\n</object>\n</topology>\n")
    return "".join(parts)


def _jgf(nodes: int, cores: int) -> str:
    """A JGF: cluster -> ``nodes`` nodes (rank = index) -> ``cores`` cores each."""
    out_nodes = [{"id": "0", "metadata": {"type": "cluster", "name": "c0", "id": 0, "paths": {}}}]
    edges = []
    n = 1
    for r in range(nodes):
        nid = str(n)
        out_nodes.append({"id": nid, "metadata": {"type": "node", "name": f"n{r}", "id": r, "rank": r}})
        edges.append({"source": "0", "target": nid})
        n += 1
        for c in range(cores):
            out_nodes.append({"id": str(n), "metadata": {"type": "core", "name": f"core{c}", "id": c, "rank": r}})
            edges.append({"source": nid, "target": str(n)})
            n += 1
    return json.dumps({"graph": {"nodes": out_nodes, "edges": edges}})


def _gzip_members(chunk: bytes, total: int) -> bytes:
    """A gzip file expanding to ``total`` bytes of ``chunk`` repeated: one
    member compressed once and concatenated (gzip readers read every member)."""
    block = chunk * max(1, (64 << 20) // len(chunk))
    member = gzip.compress(block, 9)
    return member * max(1, total // len(block))


def _jobspec(duration: str) -> str:
    return (
        "version: 1\nresources:\n  - type: slot\n    count: 1\n    label: task\n"
        "    with:\n      - type: core\n        count: 1\n"
        "tasks:\n  - command: [app]\n    slot: task\n    count: {per_slot: 1}\n"
        f"attributes:\n  system:\n    duration: {duration}\n"
    )


def _yaml_workload(duration: str) -> str:
    return "jobs:\n  - submit: 0\n    runtime: 10\n    jobspec:\n" + "".join(
        f"      {line}\n" for line in _jobspec(duration).splitlines()
    )


def _big_yaml_workload(size: int) -> str:
    one = (
        "  - {submit: %d, runtime: 10, jobspec: {version: 1, resources: [{type: slot, count: 1, label: task, "
        "with: [{type: core, count: 1}]}], tasks: [{command: [app], slot: task, count: {per_slot: 1}}], "
        "attributes: {system: {duration: 60}}}}\n"
    )
    lines = ["jobs:\n"]
    total, i = 6, 0
    while total < size:
        line = one % i
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)


def _recipe_bomb() -> str:
    """A 1.4 KB recipe whose ``name`` expands to 10**10 strings through aliases."""
    lines = ["x0: &a0 [" + ",".join(['"xxxxxxxxxx"'] * 10) + "]"]
    lines += [f"x{k}: &a{k} [" + ",".join([f"*a{k - 1}"] * 10) + "]" for k in range(1, 10)]
    return "cluster:\n  nodes: 1\n  cores_per_socket: 1\n  name:\n" + "".join(f"    {x}\n" for x in lines)


def _swf_jobs(n: int) -> bytes:
    """A gzip SWF trace of ``n`` jobs: MAX_JOBS + 1 distinct ones, then one
    block of 100,000 repeated (the reader must stop at MAX_JOBS + 1)."""
    line = b"%d %d -1 10 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1\n"
    head = b"".join(line % (i + 1, i) for i in range(MAX_JOBS + 1))
    block = gzip.compress(b"".join(line % (i + 1, i) for i in range(100_000)), 1)
    return gzip.compress(head, 1) + block * max(0, (n - MAX_JOBS - 1) // 100_000)


def _entity_bomb(root: str, inner: str) -> str:
    """XML whose one entity expands to 10**10 characters ("billion laughs")."""
    ents = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(f'<!ENTITY a{k} "{f"&a{k - 1};" * 10}">' for k in range(1, 10))
    return f'<?xml version="1.0"?>\n<!DOCTYPE {root} [{ents}]>\n{inner}\n'


_NO_RANKS = '{"version": 1, "execution": {"R_lite": []}}'

CASES: list[Case] = [
    # -- graph readers: the node and per-node limits, enforced before building
    Case(
        "rv1-300k-ranks",
        lambda d: ["match", "-L", _write(d / "R.json", _rv1(f"0-{300_000 - 1}")), "-f", "rv1exec"],
        ("R.json", f"limit of {MAX_NODES} nodes"),
    ),
    Case(
        "rv1-10x-nodes",
        lambda d: ["match", "-L", _write(d / "R.json", _rv1(f"0-{10 * MAX_NODES - 1}")), "-f", "rv1exec"],
        ("R.json", f"limit of {MAX_NODES} nodes"),
    ),
    Case(
        "rv1-10x-cores",
        lambda d: ["match", "-L", _write(d / "R.json", _rv1("0", f"0-{10 * MAX_PER_NODE - 1}")), "-f", "rv1exec"],
        ("R.json", f"limit of {MAX_PER_NODE}"),
    ),
    Case(
        "rv1-no-ranks",
        lambda d: [
            "replay",
            str(EXAMPLE),
            "--platform",
            _write(d / "R.json", '{"version": 1, "execution": {"R_lite": []}}'),
        ],
        ("R.json", "no ranks"),
    ),
    Case(
        "grug-10M-nodes",
        lambda d: ["match", "-L", _write(d / "g.graphml", _grug(10_000_000, 1)), "-f", "grug"],
        ("g.graphml", f"limit of {MAX_NODES} nodes"),
    ),
    Case(
        "grug-10x-cores",
        lambda d: ["match", "-L", _write(d / "g.graphml", _grug(1, 10 * MAX_PER_NODE)), "-f", "grug"],
        ("g.graphml", f"limit of {MAX_PER_NODE}"),
    ),
    Case(
        "hwloc-100002-cores",
        lambda d: ["match", "-L", _write(d / "h.xml", _hwloc(100_002)), "-f", "hwloc"],
        ("h.xml", f"limit of {MAX_PER_NODE}"),
    ),
    Case(
        "hwloc-cpuset-100k-words",
        lambda d: ["match", "-L", _write(d / "h.xml", _hwloc(4, ",".join(["0xffffffff"] * 100_000))), "-f", "hwloc"],
        ("h.xml", "cpuset"),
    ),
    Case(
        "jgf-30MB",
        lambda d: ["match", "-L", _write(d / "g.json", _jgf(600, 400)), "-f", "jgf"],
        ("g.json", "limit"),
    ),
    Case(
        "jgf-10x-nodes",
        lambda d: ["match", "-L", _write(d / "g.json", _jgf(10 * MAX_NODES // 20, 0)), "-f", "jgf"],
        ("g.json", "limit"),
    ),
    Case(
        "recipe-10x-nodes",
        lambda d: [
            "replay",
            str(EXAMPLE),
            "--platform",
            _write(d / "p.yaml", f"cluster:\n  nodes: {10 * MAX_NODES}\n  cores_per_socket: 1\n"),
        ],
        ("p.yaml", f"limit of {MAX_NODES} nodes"),
    ),
    Case(
        "recipe-alias-bomb",
        lambda d: ["replay", str(EXAMPLE), "--platform", _write(d / "p.yaml", _recipe_bomb())],
        ("p.yaml", "alias"),
    ),
    Case(
        "grug-entity-bomb",
        lambda d: [
            "match",
            "-L",
            _write(
                d / "g.graphml",
                _entity_bomb(
                    "graphml",
                    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
                    '<graph id="g" edgedefault="directed"><node id="&a9;"/></graph></graphml>',
                ),
            ),
            "-f",
            "grug",
        ],
        ("g.graphml", "amplification"),
    ),
    Case(
        "platform-entity-bomb",
        lambda d: [
            "replay",
            str(EXAMPLE),
            "--platform",
            _write(d / "p.xml", _entity_bomb("platform", '<platform version="4.1"><zone id="&a9;"/></platform>')),
        ],
        ("p.xml", "entity declarations"),
    ),
    # -- streams: bounded in time, not only in bytes
    Case(
        "swf-gz-5GB-of-newlines",
        lambda d: ["replay", _write(d / "w.swf.gz", _gzip_members(b"\n", 5 << 30)), "--nodes", "4"],
        ("w.swf.gz", "no job in the first"),
    ),
    Case(
        "yes-semicolon-stdin",
        lambda d: ["sh", "-c", f"yes ';' | '{SCRIPT}' replay - --nodes 4"],
        ("replay: -:", "no job in the first"),
        shell=True,
    ),
    Case(
        "swf-10x-jobs",
        lambda d: [
            "replay",
            _write(d / "w.swf.gz", _swf_jobs(10 * MAX_JOBS)),
            "--nodes",
            "4",
        ],
        ("w.swf.gz", "limit"),
    ),
    Case(
        "yaml-workload-14MB",
        lambda d: ["replay", _write(d / "w.yaml", _big_yaml_workload(14 << 20)), "--nodes", "4"],
        ("w.yaml", "limit"),
    ),
    Case(
        "batsim-json-10x-size",
        lambda d: ["replay", _write(d / "w.json", b"{" + b" " * (10 * (64 << 20))), "--nodes", "4"],
        ("w.json", "larger than"),
    ),
    # -- numbers out of range
    Case(
        "jobspec-duration-1e18",
        lambda d: ["replay", _write(d / "w.yaml", _yaml_workload("1.0e+18")), "--nodes", "4"],
        ("w.yaml", "duration"),
    ),
    Case(
        "jobspec-duration-1e308",
        lambda d: ["replay", _write(d / "w.yaml", _yaml_workload("1.0e+308")), "--nodes", "4"],
        ("w.yaml", "duration"),
    ),
    Case("batsim-timeout-30-days", lambda d: ["batsim", "--timeout", str(30 * 86400)], ("--timeout", "at most"), 2),
    Case("synthetic-tiny-load", lambda d: ["synthetic", "--swf", str(d / "w.swf"), "--load", "1e-300"], ("--load",), 2),
]
