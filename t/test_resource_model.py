"""The networkx resource model: readers build it, users hand one over, subsystems and second parents.

Small hand-built graphs, networkx style; the expected answers are counted by
hand from each graph's definition.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import match
from fluxsched_py.resource import ResourceError, ResourceGraph

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "fluxion-resource"


def cores(n: int) -> Request:
    return Request((ResourceRequest("slot", Count.fixed(1), (ResourceRequest("core", Count.fixed(n)),), label="t"),))


def two_nodes() -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_node("c", type="cluster")
    G.add_node("n0", type="node", id=0, rank=0, pools={"core": "0-3"})
    G.add_node("n1", type="node", id=1, rank=1, pools={"core": [0, 1], "gpu": {"ids": IdSet([0])}})
    G.add_edge("c", "n0")
    G.add_edge("c", "n1")
    return G


def test_from_networkx_adopts_the_graph_as_the_model():
    G = two_nodes()
    g = ResourceGraph.from_networkx(G)
    assert g.nx is G
    assert str(g.ranks) == "0-1"
    assert g.free().count("core") == 6 and g.free().count("gpu") == 1
    assert g.hostname(1) == "node1"  # name defaults to basename + id
    # defaults were filled in place
    assert G.nodes["n0"]["basename"] == "node" and G.edges["c", "n0"]["subsystem"] == "containment"
    assert G.graph["roots"] == {"containment": "c"}
    rs = match(g, cores(3), policy="low")
    assert rs is not None and str(rs.ranks) == "0" and rs.count("core") == 3


def test_from_networkx_inherits_ranks_and_keeps_child_order():
    G = nx.DiGraph()
    G.add_node("c", type="cluster")
    for i in (1, 0):  # inserted high first: the model keeps insertion order
        G.add_node(f"n{i}", type="node", id=i, rank=i)
        G.add_node(f"s{i}", type="socket", pools={"core": "0-1"})
        G.add_edge("c", f"n{i}")
        G.add_edge(f"n{i}", f"s{i}")
    g = ResourceGraph.from_networkx(G)
    t = g.topo
    assert [t.name[v] for v in range(t.n)] == ["cluster0", "node1", "socket0", "node0", "socket0"]
    assert [t.rank[v] for v in range(t.n)] == [-1, 1, 1, 0, 0]


def test_from_networkx_accepts_a_multidigraph_keyed_by_subsystem():
    M = nx.MultiDiGraph()
    M.add_node("c", type="cluster")
    M.add_node("n0", type="node", rank=0, pools={"core": "0-1"})
    M.add_node("sw", type="switch")
    M.add_edge("c", "n0", key="containment")
    M.add_edge("sw", "n0", key="network")
    g = ResourceGraph.from_networkx(M)
    assert isinstance(g.nx, nx.DiGraph)
    assert g.nx.edges["sw", "n0"]["subsystem"] == "network"
    assert g.nx.graph["roots"] == {"containment": "c", "network": "sw"}
    net = ResourceGraph(g.nx, subsystem="network")
    assert [net.topo.type[v] for v in range(net.topo.n)] == ["switch", "node"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda G: G.add_node("x"), "'x'.*needs a 'type'"),
        (lambda G: G.add_edge("n1", "c"), "cycle in the containment subsystem"),
        (lambda G: G.add_edge("orphan", "o2") or G.add_nodes_from(["orphan", "o2"], type="rack"), "one root, found 2"),
        (lambda G: G.nodes["n0"].update(pools={"core": "0-x"}), "'n0'.*pool 'core'"),
        (lambda G: G.nodes["n0"].update(pools={"core": {"ids": [1], "size": 0}}), "'size' must be a positive"),
        (lambda G: G.nodes["n0"].update(id=-1), "'id' must not be negative"),
        (lambda G: G.nodes["n0"].update(rank="zero"), "'rank' must be an integer"),
    ],
)
def test_from_networkx_names_what_is_wrong(mutate, message):
    G = two_nodes()
    mutate(G)
    with pytest.raises(ResourceError, match=message):
        ResourceGraph.from_networkx(G)


def test_from_networkx_refuses_a_rank_nested_in_another():
    G = two_nodes()
    G.add_node("s", type="socket", rank=7, pools={"core": "0"})
    G.add_edge("n0", "s")
    with pytest.raises(ResourceError, match="has rank 7 inside rank 0"):
        ResourceGraph.from_networkx(G)


@pytest.mark.parametrize(
    "load",
    [
        lambda: ResourceGraph.from_recipe({"cluster": {"nodes": 2, "sockets": 2, "cores_per_socket": 2}}),
        lambda: ResourceGraph.from_rv1(
            {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}]}}
        ),
    ],
)
def test_readers_build_a_model_with_pools_on_containers(load):
    g = load()
    G = g.nx
    assert g.topo.model is G
    assert all(s == "containment" for _, _, s in G.edges(data="subsystem"))
    core_ids = sum(len(p["core"].ids) for _, p in G.nodes(data="pools") if "core" in p)
    assert core_ids == 8 == g.all().count("core")
    nodes = [a for _, a in G.nodes(data=True) if a["type"] == "node"]
    assert sorted(a["rank"] for a in nodes) == [0, 1]
    assert all({"type", "basename", "id", "rank", "properties", "pools"} <= set(a) for _, a in G.nodes(data=True))


needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason="no ../shared conformance corpus")


@needs_corpus
def test_grug_power_subsystem_feeds_each_racks_nodes_from_its_pdu():
    g = ResourceGraph.from_grug(CORPUS / "grugs" / "power.graphml")
    G = g.nx
    power = [(u, v) for u, v, s in G.edges(data="subsystem") if s == "power"]
    # powerpanel -> 4 pdus, each pdu -> the 18 nodes of its rack
    assert len(power) == 4 + 4 * 18
    for u, v in power:
        if G.nodes[v]["type"] == "node":
            (rack,) = (p for p in G.predecessors(v) if G.edges[p, v]["subsystem"] == "containment")
            assert G.edges[rack, u]["subsystem"] == "containment"  # the pdu sits in the node's rack
    pg = ResourceGraph(G, subsystem="power")
    t = pg.topo
    assert t.type[0] == "powerpanel" and t.pools[0]["power"] == (1 << 200) - 1
    assert [t.type[c] for c in t.children[0]] == ["pdu"] * 4
    # the containment index of the same model has no power pools
    assert "power" not in g.topo.pool_types


@needs_corpus
def test_jgf_power_subsystem_is_read():
    g = ResourceGraph.from_jgf(CORPUS / "jgfs" / "power.json")
    subs = {s for _, _, s in g.nx.edges(data="subsystem")}
    assert subs == {"containment", "power"}
    pg = ResourceGraph(g.nx, subsystem="power")
    assert pg.topo.type[0] == "powerpanel" and len(pg.ranks) == 72


def second_parent() -> nx.DiGraph:
    """cluster -> rack -> {node, store[ssd 0-3]}, and cluster -> pool -> the same store."""
    G = nx.DiGraph()
    G.add_node("c", type="cluster")
    G.add_node("r", type="rack")
    G.add_node("n", type="node", rank=0, pools={"core": "0-1"})
    G.add_node("st", type="store", pools={"ssd": "0-3"})
    G.add_node("p", type="pool")
    G.add_edges_from([("c", "r"), ("r", "n"), ("r", "st"), ("c", "p"), ("p", "st")])
    return G


def test_a_second_parent_shares_its_items_between_both_paths():
    g = ResourceGraph.from_networkx(second_parent())
    t = g.topo
    copies = [v for v in range(t.n) if t.type[v] == "store"]
    assert len(copies) == 2 and t.twins[copies[0]] == (copies[1],)
    via_pool = Request(
        (
            ResourceRequest(
                "pool",
                Count.fixed(1),
                (ResourceRequest("store", Count.fixed(1), (ResourceRequest("ssd", Count.fixed(3)),)),),
            ),
        )
    )
    rs = match(g, via_pool, policy="low")
    assert rs is not None
    g.allocate(1, rs)
    # three of the four ssds are gone whichever parent one looks through
    for v in copies:
        assert bin(g.availability().loc[v].get("ssd", 0)).count("1") == 1
    via_rack = Request(
        (
            ResourceRequest(
                "rack",
                Count.fixed(1),
                (ResourceRequest("store", Count.fixed(1), (ResourceRequest("ssd", Count.fixed(2)),)),),
            ),
        )
    )
    assert match(g, via_rack, policy="low") is None
    g.release(1)
    assert match(g, via_rack, policy="low") is not None


def test_a_cycle_through_a_second_parent_is_an_error():
    G = second_parent()
    G.add_edge("st", "p")
    with pytest.raises(ResourceError, match="cycle"):
        ResourceGraph.from_networkx(G)


def node_request(n: int) -> Request:
    core = ResourceRequest("core", Count.fixed(1))
    return Request((ResourceRequest("node", Count.fixed(n), (core,), exclusive=True),))


def test_recipe_switches_form_a_network_subsystem():
    g = ResourceGraph.from_recipe(
        {"cluster": {"nodes": 10, "sockets": 1, "cores_per_socket": 1, "nodes_per_switch": 4}}
    )
    G = g.nx
    under = {}
    for u, v, s in G.edges(data="subsystem"):
        if s == "network" and G.nodes[v]["type"] == "node":
            under.setdefault(G.nodes[u]["name"], []).append(G.nodes[v]["rank"])
    assert under == {"switch0": [0, 1, 2, 3], "switch1": [4, 5, 6, 7], "switch2": [8, 9]}
    assert G.graph["roots"]["network"] != G.graph["roots"]["containment"]


def test_network_policy_keeps_a_job_under_one_switch_when_one_fits():
    from fluxsched_py.match.network import switch_count

    g = ResourceGraph.from_recipe({"cluster": {"nodes": 8, "sockets": 1, "cores_per_socket": 1, "nodes_per_switch": 4}})
    g.allocate(1, match(g, node_request(1), policy="low"))  # rank 0: switch0 keeps 3 free nodes
    low = match(g, node_request(4), policy="low")
    net = match(g, node_request(4), policy="network")
    assert str(low.ranks) == "1-4" and switch_count(g, low) == 2
    assert str(net.ranks) == "4-7" and switch_count(g, net) == 1
    # best fit: a 3-node job goes where exactly 3 are free, keeping switch1 whole
    assert str(match(g, node_request(3), policy="network").ranks) == "1-3"
    # too big for any one switch: the fewest switches
    assert switch_count(g, match(g, node_request(6), policy="network")) == 2


def test_network_policy_without_a_network_is_low():
    g = ResourceGraph.from_recipe({"cluster": {"nodes": 4, "sockets": 1, "cores_per_socket": 2}})
    for n in (1, 3):
        assert match(g, node_request(n), policy="network") == match(g, node_request(n), policy="low")


def test_the_builder_names_an_edge_given_twice():
    from fluxsched_py.resource.builder import ModelBuilder

    b = ModelBuilder(source="two.json")
    root = b.add_vertex("cluster", "c0", 0)
    node = b.add_vertex("node", "n0", 0, root, rank=0)
    b.add_vertex("core", "core0", 0, node)
    G = b.finish()
    assert sorted(G.edges) == [(0, 1), (1, 2)] and G.nodes[1]["name"] == "n0"
    b.link(root, node)  # the same containment edge again
    with pytest.raises(ResourceError, match="two edges 'c0' -> 'n0'"):
        b.finish()
