"""The matcher: shapes, exclusivity, counts, constraints, policies, purity, feasibility.

One test per requirement, named after it.  Graphs are small and built by hand.
"""

from __future__ import annotations

import pytest

from fluxsched_py.ids import IdSet
from fluxsched_py.jobspec import parse_jobspec
from fluxsched_py.jobspec.constraints import parse_constraint
from fluxsched_py.jobspec.request import Count, Request, ResourceRequest
from fluxsched_py.match import MatchError, check_request, feasibility, match, match_result
from fluxsched_py.resource import ResourceError, ResourceGraph

from .conftest import shared_path


def rr(t, n, *with_, exclusive=None):
    return ResourceRequest(t, Count.fixed(n) if isinstance(n, int) else n, tuple(with_), exclusive=exclusive)


def req(*resources, constraints=None):
    return Request(tuple(resources), constraints=parse_constraint(constraints) if constraints else None)


def graph(nodes=4, sockets=2, cores=4, gpus=1, **extra):
    return ResourceGraph.from_recipe(
        {"cluster": {"nodes": nodes, "sockets": sockets, "cores_per_socket": cores, "gpus_per_socket": gpus, **extra}}
    )


def cores_of(g, rs):
    return {r: str(d.get("core", IdSet())) for r, d in rs.by_rank().items()}


# -- shapes ----------------------------------------------------------------------


def test_slot_of_cores_lands_on_one_node():
    g = graph()
    rs = match(g, req(rr("slot", 1, rr("core", 6))), policy="low")
    assert cores_of(g, rs) == {0: "0-5"}


def test_slot_never_spans_nodes():
    g = graph(nodes=2, sockets=1, cores=4)
    assert match(g, req(rr("slot", 1, rr("core", 5))), policy="low") is None


def test_slots_pack_onto_a_node_before_the_next():
    g = graph()
    res = match_result(g, req(rr("slot", 3, rr("core", 3))), policy="low")
    assert res.nslots == 3
    assert cores_of(g, res.resources) == {0: "0-5", 1: "0-2"}


def test_socket_and_gpu_types_are_matched():
    g = graph()
    rs = match(g, req(rr("node", 1, rr("socket", 2, rr("slot", 1, rr("core", 1), rr("gpu", 1))))), policy="low")
    assert rs.count("gpu") == 2 and rs.count("core") == 2
    assert rs.ranks == IdSet([0])


def test_memory_units_are_matched_by_amount():
    g = graph(memory_gb=16)  # 8 x 1 GB per socket
    rs = match(g, req(rr("slot", 1, rr("core", 1), rr("memory", 10))), policy="low")
    assert rs.amount("memory") == 10 and rs.ranks == IdSet([0])


def test_any_type_in_the_graph_is_matched():
    g = graph(nodes=4)
    rs = match(g, req(rr("cluster", 1, rr("node", 2, rr("slot", 1, rr("core", 1))))), policy="high")
    assert rs.ranks == IdSet.parse("2-3")


def test_slot_containing_nodes_spans_nodes():
    g = graph(nodes=4)
    rs = match(g, req(rr("slot", 1, rr("node", 2, rr("core", 1)))), policy="low")
    assert rs.ranks == IdSet.parse("0-1")
    assert rs.count("node") == 2  # nodes under a slot are exclusive


# -- exclusivity ---------------------------------------------------------------------


def test_node_exclusive_takes_the_whole_node():
    g = graph()
    rs = match(g, req(rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True)), policy="low")
    assert rs.count("core") == 8 and rs.count("gpu") == 2 and rs.count("node") == 1


def test_node_exclusive_needs_a_wholly_free_node():
    g = graph(nodes=2)
    g.allocate(1, match(g, req(rr("slot", 1, rr("core", 1))), policy="low"))
    rs = match(g, req(rr("node", 1, rr("slot", 1, rr("core", 1)), exclusive=True)), policy="low")
    assert rs.ranks == IdSet([1])


def test_slot_exclusive_gives_socket_wholly_to_the_job():
    g = graph(nodes=1)
    rs = match(g, req(rr("slot", 1, rr("socket", 1, rr("core", 1)))), policy="low")
    assert rs.count("core") == 4 and rs.count("socket") == 1  # the whole socket
    g.allocate(1, rs)
    rs2 = match(g, req(rr("slot", 1, rr("socket", 1, rr("core", 1)))), policy="low")
    assert rs2 is not None and not (rs2 & rs)
    g.allocate(2, rs2)
    assert match(g, req(rr("slot", 1, rr("core", 1))), policy="low") is None


def test_shared_node_lets_other_jobs_use_the_rest():
    g = graph(nodes=1)
    j = req(rr("node", 1, rr("slot", 1, rr("core", 2))))
    a = match(g, j, policy="low")
    assert a.count("node") == 0  # the node is not held
    g.allocate(1, a)
    b = match(g, j, policy="low")
    assert b is not None and b.ranks == IdSet([0]) and not (a & b)


# -- counts ------------------------------------------------------------------------


def test_count_range_takes_the_largest_that_fits():
    g = graph(nodes=4)
    rs = match(g, req(rr("node", Count(1, 8), rr("slot", 1, rr("core", 1)), exclusive=True)), policy="low")
    assert len(rs.ranks) == 4
    g.allocate(1, g.all().restrict(IdSet([0])))
    rs = match(g, req(rr("slot", Count(2, 20, "*", 2), rr("core", 1))), policy="low")
    # slots on node 1 only hold 8 cores: 2, 4, 8 allowed, 8 is the largest that fits one node
    assert match_result(g, req(rr("node", 1, rr("slot", Count(2, 20, "*", 2), rr("core", 1))))).nslots == 8
    assert rs.count("core") == 16  # without a node, slots fill nodes 1 and 2


def test_count_range_of_cores_takes_the_largest_that_fits():
    g = graph(nodes=1)
    rs = match(g, req(rr("slot", 1, rr("core", Count(2, 100)))), policy="low")
    assert rs.count("core") == 8


def test_count_range_min_not_met_fails():
    g = graph(nodes=2)
    assert match(g, req(rr("node", Count(3, 5), rr("slot", 1, rr("core", 1)), exclusive=True))) is None


# -- constraints ---------------------------------------------------------------------


def test_constraint_properties_restricts_nodes():
    g = graph(nodes=4, properties={"login": "0", "gpu": "2-3"})
    rs = match(g, req(rr("slot", 1, rr("core", 1)), constraints={"properties": ["^login"]}), policy="low")
    assert rs.ranks == IdSet([1])
    rs = match(g, req(rr("slot", 1, rr("core", 1)), constraints={"properties": ["gpu"]}), policy="low")
    assert rs.ranks == IdSet([2])


def test_constraint_hostlist_and_ranks_and_or_not():
    g = graph(nodes=4)
    c = {"or": [{"hostlist": ["node3"]}, {"ranks": ["1"]}], "not": [{"ranks": ["3"]}]}
    rs = match(g, req(rr("node", 1, rr("core", 1)), constraints=c), policy="low")
    assert rs.ranks == IdSet([1])


@pytest.mark.parametrize(
    "obj",
    [
        {"properties": ["lyon", "^login"]},
        {"hostlist": ["node[0-3]", "x1"], "ranks": ["0-2,5"]},
        {"or": [{"hostlist": ["node3"]}, {"ranks": ["1"]}], "not": [{"ranks": ["3"]}]},
        {},
    ],
)
def test_a_constraint_written_back_as_json_parses_to_an_equal_one(obj):
    """``Constraint.to_json`` (a reservation keeps its ``requires`` in the KVS
    that way, and a config reload compares it): parsed again, it is equal."""
    c = parse_constraint(obj)
    assert parse_constraint(c.to_json()) == c
    assert parse_constraint(c.to_json()).to_json() == c.to_json()


def test_constraint_that_no_node_meets_never_matches():
    g = graph(nodes=2)
    assert match(g, req(rr("slot", 1, rr("core", 1)), constraints={"hostlist": ["nowhere"]})) is None


# -- policies --------------------------------------------------------------------------


def test_policy_low_takes_lowest_ids_and_high_the_highest():
    g = graph(nodes=2)
    j = req(rr("slot", 1, rr("core", 2)))
    assert cores_of(g, match(g, j, policy="low")) == {0: "0-1"}
    assert cores_of(g, match(g, j, policy="high")) == {1: "6-7"}


def test_policy_first_prefers_the_most_available_subtree():
    g = graph(nodes=2)
    g.allocate(1, match(g, req(rr("slot", 1, rr("core", 1))), policy="first"))
    assert g.allocation(1).ranks == IdSet([1])  # ties go to the higher vertex
    rs = match(g, req(rr("slot", 1, rr("core", 1))), policy="first")
    assert rs.ranks == IdSet([0])  # node 0 has more free cores


@pytest.mark.parametrize("policy, rank", [("lonodex", 0), ("hinodex", 3)])
def test_policy_nodex_gives_whole_nodes(policy, rank):
    g = graph(nodes=4)
    rs = match(g, req(rr("slot", 1, rr("core", 1))), policy=policy)
    assert rs.ranks == IdSet([rank]) and rs.count("core") == 8
    g.allocate(1, rs)
    assert match(g, req(rr("slot", 1, rr("core", 1))), policy=policy).ranks != IdSet([rank])


def test_policy_locality_keeps_a_slot_in_one_socket():
    g = graph(nodes=1, sockets=2, cores=4, gpus=1)
    g.allocate(1, match(g, req(rr("slot", 1, rr("core", 1))), policy="low"))  # core 0 of socket 0
    j = req(rr("slot", 1, rr("core", 4), rr("gpu", 1)))
    rs = match(g, j, policy="locality")
    assert cores_of(g, rs) == {0: "4-7"} and str(rs.by_rank()[0]["gpu"]) == "1"
    spread = match(g, j, policy="low")
    assert cores_of(g, spread) == {0: "1-4"}


def test_unknown_policy_is_a_match_error():
    with pytest.raises(MatchError, match="unknown match policy 'best'"):
        match(graph(), req(rr("core", 1)), policy="best")


def test_policies_are_deterministic():
    for policy in ("first", "low", "high", "lonodex", "hinodex", "locality"):
        results = {match(graph(), req(rr("slot", 3, rr("core", 3))), policy=policy) for _ in range(3)}
        assert len({tuple(sorted(cores_of(graph(), r).items())) for r in results}) == 1


# -- purity and snapshots ----------------------------------------------------------------


def test_match_has_no_side_effects_on_the_graph():
    g = graph()
    before = (g.free(), g.version, dict(g.jobs))
    rs = match(g, req(rr("node", 2, rr("slot", 1, rr("core", 1)), exclusive=True)))
    assert rs is not None
    assert (g.free(), g.version, dict(g.jobs)) == before


def test_match_uses_the_available_snapshot():
    g = graph(nodes=4)
    g.allocate(1, g.all().restrict(IdSet.parse("0-1")))
    future = g.all() - g.down()  # e.g. the planner's view once job 1 ends
    j = req(rr("node", 4, rr("slot", 1, rr("core", 1)), exclusive=True))
    assert match(g, j) is None
    assert match(g, j, available=future).ranks == IdSet.parse("0-3")
    reserved = g.all().restrict(IdSet([3]))
    one = req(rr("node", 1, rr("core", 1), exclusive=True))
    assert match(g, one, available=future - reserved, policy="high").ranks == IdSet([2])


# -- feasibility and bad requests -----------------------------------------------------------


def test_feasibility_ok_for_a_job_that_could_run_when_nodes_are_busy_or_down():
    g = graph(nodes=4)
    g.set_down(IdSet([0]))
    g.allocate(1, g.all().restrict(IdSet.parse("1-3")))
    assert feasibility(g, req(rr("node", 4, rr("core", 1)))) is None


def test_feasibility_too_many_nodes():
    assert feasibility(graph(nodes=4), req(rr("node", 5, rr("core", 1)))) == "requested 5 nodes, only 4 exist"


def test_feasibility_unknown_type():
    reason = feasibility(graph(), req(rr("slot", 1, rr("ssd", 1))))
    assert reason.startswith("no resource of type 'ssd' in the graph")


def test_feasibility_unsatisfiable_constraint():
    g = graph(nodes=2, properties={"login": "0-1"})
    reason = feasibility(g, req(rr("slot", 1, rr("core", 1)), constraints={"properties": ["^login"]}))
    assert reason == "no node satisfies constraint properties=^login"


def test_feasibility_shape_that_fits_no_node():
    reason = feasibility(graph(nodes=2), req(rr("slot", 1, rr("core", 9))))
    assert reason.startswith("the request does not fit the resource graph")


def test_jobspec_asking_for_a_type_the_graph_lacks_is_a_clear_error():
    js = parse_jobspec(
        {
            "version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "t", "with": [{"type": "ssd", "count": 1}]}],
            "tasks": [{"command": ["x"], "slot": "t", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0}},
        }
    )
    g = graph()
    with pytest.raises(ResourceError, match=r"/resources/0/with/0: no resource of type 'ssd' in the graph"):
        check_request(g, js)
    assert match(g, js) is None


# -- Fluxion corpus spot checks (allocation choices of resource-query) -------------------------------


TEST001 = ("conformance", "fluxion-resource", "jobspecs", "basics", "test001.yaml")


@pytest.mark.parametrize(
    "policy, picks",
    [
        ("high", [("node1", "socket1", "35"), ("node1", "socket0", "17"), ("node0", "socket1", "35")]),
        ("low", [("node0", "socket0", "0"), ("node0", "socket1", "18"), ("node1", "socket0", "0")]),
        ("first", [("node1", "socket1", "35"), ("node0", "socket1", "35"), ("node1", "socket0", "17")]),
    ],
)
def test_policy_order_reproduces_resource_query_on_tiny(policy, picks):
    from fluxsched_py.jobspec import load_jobspec

    g = ResourceGraph.from_grug(shared_path("conformance", "fluxion-resource", "grugs", "tiny.graphml"))
    js = load_jobspec(shared_path(*TEST001))
    topo = g.topo
    for jobid, (node, socket, _core) in enumerate(picks, 1):
        rs = match(g, js, policy=policy)
        (sock,) = [v for v in rs.containers if topo.type[v] == "socket"]
        assert (topo.name[topo.parent[sock]], topo.name[sock]) == (node, socket)
        g.allocate(jobid, rs)


# -- resource-query's slot placement (Policy.slot_host, Policy.flexible) ----------------------


def test_slot_host_children_keeps_a_slot_inside_one_socket():
    from dataclasses import replace

    from fluxsched_py.match import POLICIES

    g = graph(nodes=1, sockets=2, cores=4)
    six = req(rr("slot", 1, rr("core", 6)))
    assert cores_of(g, match(g, six, policy="low")) == {0: "0-5"}  # default: a slot spans the node's sockets
    assert match(g, six, policy=replace(POLICIES["low"], slot_host="children")) is None
    rs = match(g, req(rr("slot", 2, rr("core", 3))), policy=replace(POLICIES["low"], slot_host="children"))
    assert cores_of(g, rs) == {0: "0-2,4-6"}  # one slot per socket


def test_flexible_sibling_slots_are_alternatives():
    from dataclasses import replace

    from fluxsched_py.match import POLICIES

    g = graph(nodes=1, sockets=1, cores=8, gpus=1)
    small = ResourceRequest("slot", Count.fixed(1), (rr("core", 2), rr("gpu", 1)), label="a")
    big = ResourceRequest("slot", Count.fixed(1), (rr("core", 6),), label="b")
    j = req(small, big)
    assert match(g, j, policy="low").count("core") == 8  # plain RFC 14: both slots
    pol = replace(POLICIES["low"], slot_host="children", flexible=True)
    first = match_result(g, j, policy=pol)
    assert first.nslots == 1 and first.resources.count("gpu") == 1  # the first alternative of the best choice
    g.allocate(1, first.resources)
    second = match(g, j, policy=pol)
    assert second.count("core") == 6 and second.count("gpu") == 0  # only the other alternative fits now
    mixed = req(small, rr("core", 1))
    assert match(g, mixed, policy=pol) is None  # alternatives next to a non-slot sibling


@pytest.mark.parametrize("name", ["role=compute", "zone:a", "gpu,nvidia", "mem 4", "^login"])
def test_a_property_flux_core_accepts_in_a_constraint_is_accepted(name):
    # flux-core 0.88 src/common/librlist/match.c refuses only !&'"`|() in a
    # property query string (a leading ^ is "not"); K=V is how a Batsim host's
    # <prop id=K value=V> is named
    assert parse_constraint({"properties": [name]}).op == "properties"


@pytest.mark.parametrize("char", list("!&'\"`|()"))
def test_a_property_with_a_query_operator_is_refused_as_flux_core_does(char):
    from fluxsched_py.jobspec.constraints import ConstraintError

    with pytest.raises(ConstraintError, match="invalid character"):
        parse_constraint({"properties": [f"a{char}b"]})
