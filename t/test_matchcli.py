"""resource-query compatible CLI: command parser, output formats, errors.

Each test builds its own small GRUG recipe (2 nodes x 2 sockets x 4 cores)
in a temporary folder; no corpus file is needed.
"""

from __future__ import annotations

import io
import json

import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec import JobspecError
from fluxsched_py.matchcli.cli import load_graph, main
from fluxsched_py.matchcli.compat import parse_policy, read_jobspec
from fluxsched_py.matchcli.session import SYSTEM_MAX_DURATION, Session
from fluxsched_py.resource import ResourceError

GRUG = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
  <key id="type" for="node" attr.name="type" attr.type="string"/>
  <key id="basename" for="node" attr.name="basename" attr.type="string"/>
  <key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
  <key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
  <key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
  <graph id="mini" edgedefault="directed">
    <node id="cluster"><data key="root">1</data><data key="type">cluster</data><data key="basename">mini</data></node>
    <node id="node"><data key="type">node</data><data key="basename">node</data></node>
    <node id="socket"><data key="type">socket</data><data key="basename">socket</data></node>
    <node id="core"><data key="type">core</data><data key="basename">core</data></node>
    <edge id="c2n" source="cluster" target="node"><data key="multi_scale">2</data></edge>
    <edge id="n2s" source="node" target="socket"><data key="multi_scale">2</data></edge>
    <edge id="s2c" source="socket" target="core"><data key="id_scope">1</data><data key="multi_scale">4</data></edge>
  </graph>
</graphml>
"""

SOCKET_JOB = """version: 9999
resources:
  - type: node
    count: 1
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: socket
            count: 1
            with:
              - type: core
                count: 1
attributes:
  system:
    duration: {duration}
tasks:
  - command: [app]
    slot: default
    count: {{per_slot: 1}}
"""


@pytest.fixture
def env(tmp_path):
    grug = tmp_path / "mini.graphml"
    grug.write_text(GRUG)
    job = tmp_path / "job.yaml"
    job.write_text(SOCKET_JOB.format(duration=3600))
    return tmp_path, grug, job


def session(grug, policy="high", fmt="simple"):
    g = load_graph(str(grug))
    out, term, err = io.StringIO(), io.StringIO(), io.StringIO()
    return Session(g, parse_policy(policy), match_format=fmt, out=out, term=term, err=err)


def test_grug_recipe_is_expanded_with_scoped_ids(env):
    _, grug, _ = env
    g = load_graph(str(grug))
    topo = g.topo
    assert topo.n == 1 + 2 + 4  # cores are pooled on their socket
    (node1,) = [v for v in range(topo.n) if topo.path(v) == "/mini0/node1"]
    sock = topo.children[node1][1]
    assert str(IdSet.from_mask(topo.pools[sock]["core"])) == "4-7"
    assert topo.rank[node1] == 1


def test_simple_format_prints_post_order_with_depth_prefix(env):
    _, grug, job = env
    s = session(grug)
    s.execute(f"match allocate {job}")
    assert s.out.getvalue() == (
        "      ------------core7[1:x]\n"
        "      ---------socket1[1:x]\n"
        "      ------node1[1:s]\n"
        "      ---mini0[1:s]\n"
        "INFO: =============================\n"
        "INFO: JOBID=1\n"
        "INFO: RESOURCES=ALLOCATED\n"
        "INFO: SCHEDULED AT=Now\n"
        "INFO: =============================\n"
    )


def test_pretty_simple_reverses_and_spells_out_modes(env):
    _, grug, job = env
    s = session(grug, fmt="pretty_simple")
    s.execute(f"match allocate {job}")
    lines = s.out.getvalue().splitlines()
    assert lines[0] == "      ---mini0[1:shared]"
    assert lines[3] == "      ------------core7[1:exclusive]"


def test_rv1_nosched_writes_an_R_object(env):
    _, grug, job = env
    s = session(grug, fmt="rv1_nosched")
    s.execute(f"match allocate {job}")
    r = json.loads(s.out.getvalue().splitlines()[0])
    # the socket is the job's (exclusive under the slot), so R names all its cores; resource-query names core7
    assert r["execution"]["R_lite"] == [{"rank": "1", "children": {"core": "4-7"}}]
    assert r["execution"]["nodelist"] == ["node1"]
    assert (r["execution"]["starttime"], r["execution"]["expiration"]) == (0, 3600)
    assert "scheduling" not in r


def test_allocate_orelse_reserve_reserves_at_the_earliest_end(env):
    _, grug, job = env
    s = session(grug)
    for _ in range(5):
        s.execute(f"match allocate_orelse_reserve {job}")
    text = s.out.getvalue()
    assert text.count("RESOURCES=ALLOCATED") == 4
    assert "INFO: JOBID=5\nINFO: RESOURCES=RESERVED\nINFO: SCHEDULED AT=3600\n" in text


def test_allocate_fails_when_busy_and_job_ids_still_advance(env):
    _, grug, job = env
    s = session(grug)
    for _ in range(5):
        s.execute(f"match allocate {job}")
    s.execute(f"match allocate {job}")
    text = s.out.getvalue()
    assert "INFO: No matching resources found\nINFO: JOBID=5\n" in text
    assert "INFO: JOBID=6\n" in text
    assert "Unsatisfiable" not in text


def test_cancel_frees_resources(env):
    _, grug, job = env
    s = session(grug)
    for _ in range(4):
        s.execute(f"match allocate {job}")
    s.execute("cancel 2")
    s.execute(f"match allocate {job}")
    assert "INFO: JOBID=5\nINFO: RESOURCES=ALLOCATED" in s.out.getvalue()


def test_satisfiability_and_unsatisfiable_requests(env):
    tmp, grug, _ = env
    big = tmp / "big.yaml"
    big.write_text(
        SOCKET_JOB.format(duration=10)
        .replace("count: 1\n                count: 1", "x")
        .replace("- type: core\n                count: 1", "- type: core\n                count: 5")
    )
    s = session(grug)
    s.execute(f"match satisfiability {big}")
    s.execute(f"match allocate_with_satisfiability {big}")
    text = s.out.getvalue()
    assert "INFO: Unsatisfiable request\nINFO: =============================\n" in text
    assert "INFO: No matching resources found\nINFO: Unsatisfiable request\nINFO: JOBID=1\n" in text


def test_zero_duration_uses_system_max_duration(env):
    tmp, grug, _ = env
    job0 = tmp / "job0.yaml"
    job0.write_text(SOCKET_JOB.format(duration=0))
    s = session(grug)
    for _ in range(5):
        s.execute(f"match allocate_orelse_reserve {job0}")
    assert f"SCHEDULED AT={SYSTEM_MAX_DURATION}" in s.out.getvalue()


def test_info_and_stat_go_to_the_terminal(env):
    _, grug, job = env
    s = session(grug)
    s.execute(f"match allocate {job}")
    s.execute("info 1")
    s.execute("stat")
    assert s.term.getvalue().startswith(f"INFO: 1, ALLOCATED, 0, {job}, 0.0\nINFO: Num. of Jobs Matched: 1\n")


def test_stat_reports_measured_match_times(env):
    _, grug, job = env
    s = session(grug)
    s.execute(f"match allocate {job}")
    s.execute(f"match allocate {job}")
    s.execute("stat")
    lines = dict(line.removeprefix("INFO: ").split(": ") for line in s.term.getvalue().splitlines())
    assert lines["Num. of Jobs Matched"] == "2"
    lo, hi, avg = (float(lines[f"{w} Match Time"]) for w in ("Min.", "Max.", "Avg."))
    assert 0 < lo <= avg <= hi < 5


def test_comments_blank_lines_and_quit(env):
    _, grug, job = env
    s = session(grug)
    s.run(["# comment", "", f"match allocate {job}", "quit", f"match allocate {job}"])
    assert s.out.getvalue().count("JOBID=") == 1


@pytest.mark.parametrize(
    "line,message",
    [
        ("bogus", "ERROR: unknown command: bogus"),
        ("match allocate", "ERROR: malformed command"),
        ("match sideways x.yaml", "ERROR: unknown subcmd sideways"),
        ("cancel 42", "ERROR: cancel: nonexistent job 42"),
        ("info 42", "ERROR: info: nonexistent job 42"),
        ("cancel abc", "ERROR: invalid jobid 'abc'"),
        ("match allocate /no/such/file.yaml", "ERROR: can't open /no/such/file.yaml"),
    ],
)
def test_bad_commands_give_one_line_errors(env, line, message):
    _, grug, _ = env
    s = session(grug)
    s.execute(line)
    err = s.err.getvalue()
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert s.out.getvalue() == ""


def test_invalid_jobspec_reports_no_match_and_keeps_the_job_id(env):
    tmp, grug, job = env
    bad = tmp / "bad.yaml"
    bad.write_text("version: 9999\nresources: []\ntasks: []\n")
    s = session(grug)
    s.execute(f"match allocate {bad}")
    s.execute(f"match allocate {job}")
    text = s.out.getvalue()
    assert "INFO: No matching resources found\nINFO: JOBID=1\n" in text
    assert "INFO: JOBID=1\nINFO: RESOURCES=ALLOCATED" in text
    assert "Jobspec error for 1: invalid at /resources" in s.err.getvalue()


def test_set_status_down_makes_nodes_unavailable(env):
    _, grug, job = env
    s = session(grug)
    s.execute("set-status /mini0/node1 down")
    for _ in range(3):
        s.execute(f"match allocate {job}")
    assert s.out.getvalue().count("RESOURCES=ALLOCATED") == 2
    s.execute("set-status /mini0/nowhere down")
    assert "Could not find path /mini0/nowhere in resource graph." in s.out.getvalue()


@pytest.mark.parametrize(
    "policy",
    [
        "high",
        "low",
        "first",
        "lonode",
        "hinode",
        "lonodex",
        "hinodex",
        "firstnodex",
        "locality",
        "variation",
        "policy=low node_centric=true node_exclusive=true",
    ],
)
def test_policies_are_accepted(policy):
    parse_policy(policy)


@pytest.mark.parametrize("policy", ["sideways", "policy=mid", "node_centric=maybe policy=low"])
def test_bad_policies_are_rejected(policy):
    with pytest.raises(ValueError):
        parse_policy(policy)


def test_low_and_hinodex_choices(env):
    _, grug, job = env
    s = session(grug, policy="low")
    s.execute(f"match allocate {job}")
    expected = "      ------------core0[1:x]\n      ---------socket0[1:x]\n      ------node0[1:s]\n"
    assert s.out.getvalue().startswith(expected)
    s = session(grug, policy="hinodex")
    s.execute(f"match allocate {job}")
    text = s.out.getvalue()
    assert "------node1[1:x]" in text and text.count("core") == 8


def test_main_reads_stdin_and_writes_test_output(env, monkeypatch, capsys):
    tmp, grug, job = env
    out = tmp / "out.txt"
    monkeypatch.setattr("sys.stdin", io.StringIO(f"match allocate {job}\nquit\n"))
    argv = ["-L", str(grug), "-S", "CA", "-P", "high", "-t", str(out), "--prune-filters=ALL:core", "-r", "10"]
    assert main(argv) == 0
    assert "INFO: JOBID=1" in out.read_text()


@pytest.mark.parametrize(
    "argv,status,message",
    [
        (["-L", "/no/such.graphml"], 1, "fluxsched-py match: /no/such.graphml: cannot read"),
        (["-L", "{grug}", "-P", "sideways"], 2, "fluxsched-py match: -P: unknown match policy 'sideways'"),
        (["-L", "{grug}", "-f", "hwloc"], 1, "fluxsched-py match: {grug}: /graphml: not an hwloc topology"),
        (["-L", "{grug}", "-S", "XYZ"], 2, "fluxsched-py match: -S: unknown match subsystems 'XYZ'"),
        (["-L", "{grug}", "-S", "PA"], 1, "fluxsched-py match: {grug}: the resource graph has no power root"),
    ],
)
def test_main_errors_are_one_line(env, capsys, argv, status, message):
    _, grug, _ = env
    argv = [a.format(grug=grug) for a in argv]
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith(message.format(grug=grug))
    assert err.count("\n") == 1


def test_malformed_graph_files_raise_resource_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"graph": {"nodes": [{"id": "0"}], "edges": []}}')
    with pytest.raises(ResourceError, match=r"graph/nodes/0"):
        load_graph(str(bad), "jgf")
    cyc = tmp_path / "cyc.graphml"
    cyc.write_text(GRUG.replace('<edge id="s2c"', '<edge id="back" source="core" target="node"/><edge id="s2c"'))
    with pytest.raises(ResourceError, match="cycle"):
        load_graph(str(cyc))


def test_partial_cancel_releases_the_ranks_named(env):
    tmp, grug, job = env
    two = tmp / "two.yaml"
    two.write_text(SOCKET_JOB.format(duration=3600).replace("- type: node\n    count: 1", "- type: node\n    count: 2"))
    r = tmp / "rank1.json"
    r.write_text(json.dumps({"version": 1, "execution": {"R_lite": [{"rank": "1", "children": {"core": "0-7"}}]}}))
    s = session(grug, policy="low")
    s.execute(f"match allocate {two}")
    assert s.g.allocation(1).ranks == IdSet.parse("0-1")
    s.execute(f"partial-cancel 1 rv1exec {r} stats")
    assert s.g.allocation(1).ranks == IdSet([0])
    assert 'PARTIAL CANCEL PREORDER COUNT="0"' in s.out.getvalue()
    s.execute("find sched-now=allocated")
    assert s.out.getvalue().endswith('INFO: EXPRESSION="sched-now=allocated"\nINFO: =============================\n')
    assert "node0" in s.out.getvalue().split("POSTORDER")[1]
    assert "node1" not in s.out.getvalue().split("POSTORDER")[1]


def test_reservations_come_from_the_planner(env):
    _, grug, job = env
    s = session(grug)
    for _ in range(5):
        s.execute(f"match allocate_orelse_reserve {job}")
    span = s.planner.span(5)
    assert span is not None and not span.running and span.start == 3600
    assert 5 not in s.g.jobs  # a reservation holds nothing in the graph now
    s.execute("cancel 5")
    assert s.planner.span(5) is None


def test_jobspecs_go_through_the_project_parser(env):
    tmp, _, job = env
    assert read_jobspec(job).duration == 3600
    flex = tmp / "flex.yaml"
    flex.write_text(
        "version: 9999\nresources:\n"
        "  - {type: slot, count: 1, label: default, with: [{type: core, count: 1}]}\n"
        "  - {type: slot, count: 1, label: default, with: [{type: core, count: 2}]}\n"
        "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\nattributes: {}\n"
    )
    with pytest.raises(JobspecError, match="already used"):
        read_jobspec(flex)
    labels = [r.label for r in read_jobspec(flex, flexible=True).resources]
    assert labels == ["default", "default#2"]


@pytest.mark.parametrize(
    "spec,dominant",
    [("CA", "containment"), ("PA", "power"), ("C+PA", "containment"), ("IBBA", "ibnetbw"), ("ALL", "containment")],
)
def test_the_first_subsystem_of_s_is_the_tree_matched(spec, dominant):
    from fluxsched_py.matchcli.cli import dominant_subsystem

    assert dominant_subsystem(spec) == dominant
