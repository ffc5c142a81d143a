"""RFC 20 R: R -> graph -> R is identical; R writing rules.

Corpus tests read ../shared/conformance/R/ and skip when it is absent.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxsched_py.ids import Hostlist, IdSet
from fluxsched_py.resource import ResourceGraph, ResourceSet

from .conftest import CONFORMANCE, shared_path


def canon(obj) -> str:
    return json.dumps(json.loads(json.dumps(obj)), sort_keys=True)


R_FILES = sorted(p.name for p in (CONFORMANCE / "R").glob("*")) if (CONFORMANCE / "R").is_dir() else ["(absent)"]


@pytest.mark.parametrize("name", R_FILES)
def test_r_roundtrip_is_identical_for_corpus_file(name):
    path = shared_path("conformance", "R", name)
    R = json.loads(path.read_text())
    g = ResourceGraph.from_rv1(path)
    assert canon(g.to_rv1()) == canon(R)
    # and through the resource set API with the same metadata
    ex = R["execution"]
    out = g.all().to_rv1(g, starttime=ex["starttime"], expiration=ex["expiration"], nslots=ex.get("nslots"))
    assert canon(out) == canon(R)


def test_r_roundtrip_rfc20_example_keeps_nslots_and_times():
    R = json.loads(shared_path("conformance", "R", "rfc20-example1.json").read_text())
    g = ResourceGraph.from_rv1(R)
    out = g.to_rv1()
    assert out["execution"]["nslots"] == 32 and out["execution"]["starttime"] == 1676560542
    assert canon(out) == canon(R)


def test_r_with_jgf_in_scheduling_is_read_from_the_jgf():
    g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "sockets": 2, "cores_per_socket": 2}})
    R = g.all().to_rv1(g, with_jgf=True)
    assert "scheduling" in R
    g2 = ResourceGraph.from_rv1(R)
    assert g2.topo.n == g.topo.n  # sockets came back from the JGF
    assert canon(g2.to_rv1()) == canon(g.to_rv1())


def test_r_lite_is_sorted_by_rank_and_grouped_by_identical_children():
    R = {
        "version": 1,
        "execution": {
            "R_lite": [
                {"rank": "3", "children": {"core": "0-3"}},
                {"rank": "0-1", "children": {"core": "0-3", "gpu": "0"}},
                {"rank": "2", "children": {"core": "0-3"}},
            ],
            "starttime": 0.0,
            "expiration": 0.0,
        },
    }
    out = ResourceGraph.from_rv1(R).to_rv1()
    assert out["execution"]["R_lite"] == [
        {"rank": "0-1", "children": {"core": "0-3", "gpu": "0"}},
        {"rank": "2-3", "children": {"core": "0-3"}},
    ]


def test_nodelist_is_in_rank_order_and_compressed():
    R = {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": "0-4", "children": {"core": "0"}}],
            "nodelist": ["pi[3,0-2,4]"],
            "starttime": 0,
            "expiration": 0,
        },
    }
    g = ResourceGraph.from_rv1(R)
    assert g.hostname(0) == "pi3" and g.hostname(1) == "pi0"
    part = g.all().restrict(IdSet.parse("0,4"))
    assert part.to_rv1(g)["execution"]["nodelist"] == ["pi[3-4]"]


def test_properties_restricted_to_allocated_ranks_and_plus_properties_dropped():
    R = {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": "0-3", "children": {"core": "0-1"}}],
            "properties": {"batch": "0-1", "debug": "2-3", "+local": "0-3"},
            "starttime": 0,
            "expiration": 0,
        },
    }
    g = ResourceGraph.from_rv1(R)
    assert "+local" in g.properties(0)
    out = g.all().restrict(IdSet.parse("1-2")).to_rv1(g)["execution"]
    assert out["properties"] == {"batch": "1", "debug": "2"}
    out = g.all().restrict(IdSet.parse("0")).to_rv1(g)["execution"]
    assert out["properties"] == {"batch": "0"}


def test_r_has_nslots_and_times_when_given_and_jgf_only_on_request():
    g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "cores_per_socket": 4}})
    R = g.all().to_rv1(g, starttime=10.0, expiration=20.5, nslots=8)
    ex = R["execution"]
    assert (ex["nslots"], ex["starttime"], ex["expiration"]) == (8, 10.0, 20.5)
    assert "scheduling" not in R
    assert "nslots" not in g.all().to_rv1(g)["execution"]


def test_resourceset_from_rv1_rejects_unknown_ids_with_the_element():
    g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "cores_per_socket": 4}})
    R = {"version": 1, "execution": {"R_lite": [{"rank": "1", "children": {"core": "2-9"}}]}}
    with pytest.raises(Exception, match=r"/execution/R_lite/0/children/core: rank 1 has no core 4-9"):
        ResourceSet.from_rv1(g, R)


# -- generated graphs ----------------------------------------------------------------

idsets = st.sets(st.integers(0, 40), min_size=1, max_size=8).map(IdSet)


@st.composite
def r_objects(draw):
    nranks = draw(st.integers(1, 12))
    ranks = sorted(draw(st.sets(st.integers(0, 60), min_size=nranks, max_size=nranks)))
    shapes = draw(st.lists(st.fixed_dictionaries({"core": idsets}, optional={"gpu": idsets}), min_size=1, max_size=3))
    by_rank = {r: shapes[draw(st.integers(0, len(shapes) - 1))] for r in ranks}
    groups: dict = {}
    for r in ranks:
        key = tuple((t, by_rank[r][t].encode()) for t in ("core", "gpu") if t in by_rank[r])
        groups.setdefault(key, []).append(r)
    rlite = [
        {"rank": IdSet(rs).encode(), "children": dict(k)} for k, rs in sorted(groups.items(), key=lambda kv: kv[1][0])
    ]
    ex = {"R_lite": rlite, "starttime": draw(st.sampled_from([0.0, 12.5])), "expiration": 0.0}
    if draw(st.booleans()):
        prefix = draw(st.sampled_from(["n", "node", "x-"]))
        ex["nodelist"] = [Hostlist(f"{prefix}{r * 3}" for r in ranks).encode()]
    if draw(st.booleans()):
        ex["properties"] = {"batch": IdSet(ranks[: max(1, len(ranks) // 2)]).encode()}
    if draw(st.booleans()):
        ex["nslots"] = draw(st.integers(1, 100))  # RFC 20: nslots > 0
    return {"version": 1, "execution": ex}


@settings(max_examples=80, deadline=None)
@given(r_objects())
def test_r_roundtrip_is_identical_for_generated_r(R):
    g = ResourceGraph.from_rv1(R)
    assert canon(g.to_rv1()) == canon(R)
    # and R of the set read back from R is the same R
    rs = ResourceSet.from_rv1(g, R)
    ex = R["execution"]
    assert canon(rs.to_rv1(g, starttime=ex["starttime"], expiration=0.0, nslots=ex.get("nslots"))) == canon(R)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 2),
    st.integers(0, 5),
    st.integers(0, 2),
)
def test_r_roundtrip_is_identical_for_generated_recipe_graphs(racks, per_rack, sockets, cores, gpus):
    g = ResourceGraph.from_recipe(
        {
            "cluster": {
                "racks": racks,
                "nodes_per_rack": per_rack,
                "sockets": sockets,
                "cores_per_socket": cores,
                "gpus_per_socket": gpus,
            }
        }
    )
    R = g.to_rv1()
    g2 = ResourceGraph.from_rv1(R)
    assert canon(g2.to_rv1()) == canon(R)
    assert g2.all().count("core") == g.all().count("core")


# -- RFC 20 changes since 2024 (docs/rfcs/rfc20-R.md, "Changes since 2024") --------


@pytest.mark.parametrize(
    ("writer", "from_jgf"), [(None, True), ("fluxion", True), ("sched-py:jgf", True), ("x", False)]
)
def test_scheduling_is_read_as_jgf_only_from_fluxion_or_sched_py(writer, from_jgf):
    # RFC 20 8dfe0be: scheduling.writer names the scheduler (fluxion when absent)
    g = ResourceGraph.from_recipe({"cluster": {"nodes": 2, "sockets": 2, "cores_per_socket": 2}})
    R = g.all().to_rv1(g, with_jgf=True)
    if writer is not None:
        R["scheduling"]["writer"] = writer if writer != "fluxion" else "fluxion://rv1exec"
    if writer == "x":
        R["scheduling"]["writer"] = "sched-other://v2"
    g2 = ResourceGraph.from_rv1(R)
    sockets = sum(1 for _, d in g2.nx.nodes(data=True) if d.get("type") == "socket")
    assert sockets == (4 if from_jgf else 0)
    assert canon(g2.to_rv1()) == canon(g.to_rv1())  # the same R either way


def test_nslots_must_be_greater_than_zero():
    # RFC 20 8da980e: "if present it MUST be greater than 0"
    from fluxsched_py.resource import ResourceError

    R = {"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1"}}], "nslots": 0}}
    with pytest.raises(ResourceError, match="nslots"):
        ResourceGraph.from_rv1(R)
    R["execution"]["nslots"] = 2
    g = ResourceGraph.from_rv1(R)
    assert g.all().to_rv1(g, nslots=2)["execution"]["nslots"] == 2


def test_nodelist_maps_to_sorted_ranks_whatever_the_r_lite_order():
    # RFC 20 03f7beb: R_lite entries in any order; nodelist follows the sorted ranks
    R = {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": "2-3", "children": {"core": "0"}}, {"rank": "0-1", "children": {"core": "0-1"}}],
            "nodelist": ["n[0-3]"],
        },
    }
    g = ResourceGraph.from_rv1(R)
    assert [g.hostname(r) for r in range(4)] == ["n0", "n1", "n2", "n3"]
    assert g.all().restrict(IdSet.parse("2")).to_rv1(g)["execution"]["nodelist"] == ["n2"]


def test_the_dropped_attributes_section_is_ignored_and_never_written():
    # RFC 20 e775b80 (2026): no more "attributes" (Fluxion's old queue name)
    R = {
        "version": 1,
        "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}]},
        "attributes": {"system": {"scheduler": {"queue": "batch"}}},
    }
    g = ResourceGraph.from_rv1(R)
    assert set(g.all().to_rv1(g)) == {"version", "execution"}
