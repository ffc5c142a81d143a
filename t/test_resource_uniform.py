"""A machine of identical nodes built as arrays (``ResourceGraph.from_nodes``,
``Topology.uniform``) is the machine R describes: every field of the
compiled index equals what ``Topology.compile`` makes of the networkx model
of the same R, and the model made on demand is that model."""

from __future__ import annotations

import networkx as nx
import pytest

from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.errors import ResourceError
from fluxsched_py.resource.rv1 import model_from_rv1
from fluxsched_py.resource.topology import Topology

CASES = [(["node0"], 1), ([f"node{i}" for i in range(7)], 1), ([f"n{i:02d}" for i in range(12)], 4), (["a", "b"], 64)]


def _fields(topo: Topology) -> dict:
    return {k: v for k, v in vars(topo).items() if k not in ("_model", "_cores", "gattr")}


@pytest.mark.parametrize(("hosts", "cores"), CASES)
def test_uniform_index_equals_the_compiled_one(hosts: list[str], cores: int) -> None:
    R = Topology.uniform_rv1(hosts, cores)
    compiled = Topology.compile(model_from_rv1(R))
    uniform = Topology.uniform(hosts, cores)
    want, got = _fields(compiled), _fields(uniform)
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k] == want[k], k
    assert uniform.gattr == compiled.gattr


@pytest.mark.parametrize(("hosts", "cores"), CASES)
def test_model_made_on_demand_is_the_model_of_R(hosts: list[str], cores: int) -> None:
    want = model_from_rv1(Topology.uniform_rv1(hosts, cores))
    g = ResourceGraph.from_nodes(hosts, cores)
    got = g.nx
    assert nx.utils.graphs_equal(got, want)
    assert dict(got.nodes(data=True)) == dict(want.nodes(data=True))
    assert got.graph == want.graph
    assert got.graph is g.topo.gattr


def test_a_graph_of_nodes_schedules_and_grows_like_one_read_from_R() -> None:
    hosts = [f"node{i}" for i in range(4)]
    a = ResourceGraph.from_nodes(hosts, 2)
    b = ResourceGraph.from_rv1(Topology.uniform_rv1(hosts, 2))
    for g in (a, b):
        g.set_down([1])
        g.update(grow={"version": 1, "execution": {"R_lite": [{"rank": "4", "children": {"core": "0-1"}}]}})
    assert str(a.ranks) == str(b.ranks) == "0-4"
    assert a.free().count("core") == b.free().count("core") == 8
    assert a.to_rv1() == b.to_rv1()


def test_no_nodes_is_an_error() -> None:
    with pytest.raises(ResourceError, match="at least one node"):
        ResourceGraph.from_nodes([])
