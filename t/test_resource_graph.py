"""The resource graph: readers, state, allocation accounting, bad input.

One test per requirement, named after it.
"""

from __future__ import annotations

import json

import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.resource import ResourceError, ResourceGraph, ResourceSet

from .conftest import shared_path

SMALL = {"cluster": {"racks": 2, "nodes_per_rack": 2, "sockets": 2, "cores_per_socket": 4, "gpus_per_socket": 1}}


def small() -> ResourceGraph:
    return ResourceGraph.from_recipe(SMALL)


def node_items(g: ResourceGraph, rank: int) -> ResourceSet:
    return g.all().restrict(IdSet([rank]))


def check_invariant(g: ResourceGraph) -> None:
    free, alloc, down, everything = g.free(), g.allocated(), g.down(), g.all()
    assert free | alloc | down == everything
    assert not (free & alloc) and not (free & down) and not (alloc & down)


# -- readers -------------------------------------------------------------------


def test_recipe_builds_vertex_per_container_and_pools_leaves():
    g = small()
    topo = g.topo
    assert str(g.ranks) == "0-3"
    # cluster + 2 racks + 4 nodes + 8 sockets: cores and GPUs are pools, not vertices
    assert topo.n == 1 + 2 + 4 + 8
    assert g.all().count("core") == 32 and g.all().count("gpu") == 8
    assert g.hostname(3) == "node3"
    sock1 = topo.children[g.rank_vertex(0)][1]
    assert topo.pools[sock1] == {"core": 0b11110000, "gpu": 0b10}


def test_recipe_subtree_counts_for_pruning():
    g = small()
    av = g.availability()
    assert av.units[0] == {"core": 32, "gpu": 8}
    assert av.whole[0]["node"] == 4
    assert av.busy[0] == 0


def test_grug_ids_names_and_ranks_follow_fluxion_generator():
    g = ResourceGraph.from_grug(shared_path("conformance", "fluxion-resource", "grugs", "tiny.graphml"))
    topo = g.topo
    assert [topo.name[v] for v in range(topo.n) if topo.type[v] in ("cluster", "rack", "node")] == [
        "tiny0",
        "rack0",
        "node0",
        "node1",
    ]
    assert str(g.ranks) == "0-1"
    # socket2core has id_scope=1: core ids are per node (socket1 holds 18-35)
    node1 = g.rank_vertex(1)
    s0, s1 = topo.children[node1]
    assert IdSet.from_mask(topo.pools[s1]["core"]) == IdSet.parse("18-35")
    assert IdSet.from_mask(topo.pools[s0]["memory"]) == IdSet.parse("0-3")
    assert topo.pool_info[(s0, "memory")][:2] == (2, "GB")


def test_grug_16k_bench_recipe_has_global_node_ids():
    g = ResourceGraph.from_grug(shared_path("bench", "nodes1024.graphml"))
    assert len(g.ranks) == 1024
    assert g.hostname(1023) == "node1023"
    assert g.all().count("core") == 1024 * 64 and g.all().count("gpu") == 1024 * 4


def test_jgf_reader_pools_leaves_and_keeps_ranks():
    g = ResourceGraph.from_jgf(shared_path("conformance", "fluxion-resource", "jgfs", "tiny.json"))
    assert str(g.ranks) == "0-1"
    assert g.all().count("core") == 72
    assert g.topo.n == 8  # cluster, rack, 2 nodes, 4 sockets


def test_jgf_written_by_to_jgf_reads_back_identically():
    g = small()
    g2 = ResourceGraph.from_jgf(g.to_jgf())
    assert g2.to_rv1() == g.to_rv1()
    assert g2.topo.n == g.topo.n


def test_load_sniffs_format(tmp_path):
    p = tmp_path / "R.json"
    p.write_text(json.dumps(small().to_rv1()))
    assert str(ResourceGraph.load(p).ranks) == "0-3"
    y = tmp_path / "r.yaml"
    y.write_text("cluster: {nodes: 3, cores_per_socket: 2}\n")
    assert str(ResourceGraph.load(y).ranks) == "0-2"


# -- allocation ------------------------------------------------------------------


def test_free_allocated_down_partition_all():
    g = small()
    check_invariant(g)
    g.allocate(1, node_items(g, 0))
    g.set_down(IdSet([3]))
    g.drain(IdSet([2]), "bad dimm")
    check_invariant(g)
    assert g.free().ranks == IdSet([1])
    assert g.down().ranks == IdSet.parse("2-3")


def test_allocate_never_double_allocates():
    g = small()
    g.allocate(1, node_items(g, 0))
    with pytest.raises(ResourceError, match="not free"):
        g.allocate(2, node_items(g, 0))
    assert list(g.jobs) == [1]


def test_allocate_refuses_down_ranks():
    g = small()
    g.set_down(IdSet([1]))
    with pytest.raises(ResourceError, match="rank 1"):
        g.allocate(1, node_items(g, 1))


def test_release_returns_everything_the_job_held():
    g = small()
    rs = node_items(g, 0) | node_items(g, 1)
    g.allocate(7, rs)
    assert g.allocation(7) == rs
    assert g.release(7) == rs
    assert not g.allocated() and 7 not in g.jobs
    assert g.free() == g.all()


def test_partial_release_by_r_frees_whole_ranks():
    g = small()
    rs = node_items(g, 0) | node_items(g, 1)
    g.allocate(7, rs)
    R1 = {"version": 1, "execution": {"R_lite": [{"rank": "1", "children": {"core": "0-7", "gpu": "0-1"}}]}}
    freed = g.release(7, ResourceSet.from_rv1(g, R1))
    assert freed == node_items(g, 1)  # cores and GPUs, and the node and socket containers
    assert g.allocation(7) == node_items(g, 0)
    check_invariant(g)


def test_partial_release_of_some_cores_keeps_the_rest():
    g = small()
    rs = node_items(g, 0)
    g.allocate(7, rs)
    part = ResourceSet.from_rv1(
        g, {"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1"}}]}}
    )
    g.release(7, part)
    assert g.allocation(7).count("core") == 6
    assert g.free().count("core") == 26


def test_release_of_resources_not_held_is_an_error():
    g = small()
    g.allocate(7, node_items(g, 0))
    with pytest.raises(ResourceError, match="does not hold"):
        g.release(7, node_items(g, 1))
    with pytest.raises(ResourceError, match="job 8"):
        g.release(8)


def test_down_rank_keeps_running_job_and_returns_to_down_on_release():
    g = small()
    g.allocate(1, node_items(g, 2))
    g.set_down(IdSet([2]))
    assert g.allocation(1) == node_items(g, 2)
    g.release(1)
    assert g.down() == node_items(g, 2)
    g.set_up(IdSet([2]))
    assert g.free() == g.all()


def test_undrain_makes_rank_free_again():
    g = small()
    g.drain(IdSet([0]), "maintenance")
    assert g.drained_ranks() == {0: "maintenance"}
    assert 0 not in g.free().ranks
    g.undrain(IdSet([0]))
    assert g.free() == g.all()


def test_shrink_removes_ranks_from_the_instance():
    g = small()
    g.shrink(IdSet([3]))
    assert str(g.ranks) == "0-2"
    assert 3 not in g.all().ranks
    check_invariant(g)


def test_status_rv1_reports_all_allocated_down():
    g = small()
    g.allocate(1, node_items(g, 0))
    g.set_down(IdSet([3]))
    st = g.status_rv1()
    assert st["all"]["execution"]["R_lite"] == [{"rank": "0-3", "children": {"core": "0-7", "gpu": "0-1"}}]
    assert st["allocated"]["execution"]["R_lite"][0]["rank"] == "0"
    assert st["down"]["execution"]["R_lite"][0]["rank"] == "3"


def test_resourceset_algebra_and_hashing():
    g = small()
    a, b = node_items(g, 0), node_items(g, 1)
    assert (a | b) - b == a and (a | b) & b == b
    assert not (a & b) and bool(a)
    assert len({a, node_items(g, 0)}) == 1
    assert (a ^ b) == (a | b)
    assert a <= (a | b)
    assert (a | b).ranks == IdSet.parse("0-1")


def test_resourceset_of_another_graph_is_refused():
    g1, g2 = small(), small()
    with pytest.raises(ResourceError, match="another graph"):
        g1.allocate(1, g2.all())


# -- bad input ---------------------------------------------------------------------


def test_malformed_grug_names_the_file(tmp_path):
    p = tmp_path / "bad.graphml"
    p.write_text("<graphml><graph><node id='a'>")
    with pytest.raises(ResourceError, match="bad.graphml: malformed GraphML"):
        ResourceGraph.from_grug(p)


GRUG_CYCLE = """<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
  <key id="type" for="node" attr.name="type" attr.type="string"/>
  <key id="subsystem" for="node" attr.name="subsystem" attr.type="string"><default>containment</default></key>
  <key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
  <graph id="g" edgedefault="directed">
    <node id="cluster"><data key="root">1</data><data key="type">cluster</data></node>
    <node id="node"><data key="type">node</data></node>
    <node id="socket"><data key="type">socket</data></node>
    <edge id="c2n" source="cluster" target="node"/>
    <edge id="n2s" source="node" target="socket"/>
    <edge id="s2n" source="socket" target="node"/>
  </graph>
</graphml>
"""


def test_cycle_in_grug_recipe_is_a_clear_error(tmp_path):
    p = tmp_path / "cycle.graphml"
    p.write_text(GRUG_CYCLE)
    with pytest.raises(ResourceError, match=r"cycle.graphml: edge .*cycle in the recipe"):
        ResourceGraph.from_grug(p)


def test_cycle_in_jgf_is_a_clear_error():
    def n(i, t):
        return {"id": str(i), "metadata": {"type": t, "name": f"{t}{i}", "id": i}}

    jgf = {
        "graph": {
            "nodes": [n(0, "cluster"), n(1, "node"), n(2, "socket")],
            "edges": [{"source": "1", "target": "2"}, {"source": "2", "target": "1"}, {"source": "0", "target": "1"}],
        }
    }
    with pytest.raises(ResourceError, match="two containment parents|cycle"):
        ResourceGraph.from_jgf(jgf, source="g.json")
    jgf["graph"]["edges"] = [{"source": "1", "target": "2"}, {"source": "2", "target": "1"}]
    with pytest.raises(ResourceError, match="g.json: /graph/edges: cycle in the containment graph"):
        ResourceGraph.from_jgf(jgf, source="g.json")


def test_containment_edge_to_a_vertex_outside_containment_is_a_clear_error():
    """A vertex whose ``paths`` name other subsystems only is not in the
    containment tree; a containment edge to it is an error naming it (found
    by the graph-jgf fuzz target: it was a NetworkXError)."""

    def n(i, t, paths):
        return {"id": str(i), "metadata": {"type": t, "name": f"{t}{i}", "id": i, "paths": paths}}

    jgf = {
        "graph": {
            "nodes": [n(0, "cluster", {"containment": "/c0"}), n(1, "core", {"power": "/p0/core1"})],
            "edges": [{"source": "0", "target": "1", "metadata": {"subsystem": "containment"}}],
        }
    }
    with pytest.raises(ResourceError, match=r"g.json: /graph/edges/0: containment edge '0' -> '1', but vertex 'core1'"):
        ResourceGraph.from_jgf(jgf, source="g.json")


def test_malformed_jgf_names_the_element():
    jgf = {"graph": {"nodes": [{"id": "0", "metadata": {"name": "x"}}], "edges": []}}
    with pytest.raises(ResourceError, match="j.json: /graph/nodes/0: metadata 'type'"):
        ResourceGraph.from_jgf(jgf, source="j.json")


@pytest.mark.parametrize(
    "R, where",
    [
        ({"version": 2, "execution": {"R_lite": []}}, "/version"),
        ({"version": 1}, "/execution"),
        ({"version": 1, "execution": {"R_lite": [{"rank": "0-x", "children": {}}]}}, "/execution/R_lite/0/rank"),
        (
            {"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": 3}}]}},
            "/execution/R_lite/0/children/core",
        ),
        (
            {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], "nodelist": ["a"]}},
            "/execution/nodelist",
        ),
        (
            {
                "version": 1,
                "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "properties": {"x": "5"}},
            },
            "/execution/properties/x",
        ),
    ],
)
def test_malformed_r_names_the_file_and_element(R, where):
    with pytest.raises(ResourceError) as e:
        ResourceGraph.from_rv1(R, source="R.json")
    assert str(e.value).startswith(f"R.json: {where}: ")


def test_unreadable_and_invalid_json_files_are_resource_errors(tmp_path):
    with pytest.raises(ResourceError, match="cannot read"):
        ResourceGraph.load(tmp_path / "nope.json")
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ResourceError, match="bad.json: invalid JSON"):
        ResourceGraph.load(p)


def test_recipe_unknown_key_is_named():
    with pytest.raises(ResourceError, match="/cluster/cpus: unknown key"):
        ResourceGraph.from_recipe({"cluster": {"nodes": 1, "cpus": 4}})
