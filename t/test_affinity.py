"""``affinity=``: a soft placement preference by user or campaign, on RFC 20 node properties.

The seed's example (seed 003, "Priorities"): Lyon users' jobs run on the Lyon
nodes and Grenoble users' on the Grenoble nodes; a Grenoble job may run on
Lyon nodes when Lyon nodes are free.  Graphs are built by hand from R with
``execution.properties``; expected ranks are worked out from the rule, not
from a run.
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import Engine, EngineError, EngineOptions, ResponseType
from fluxsched_py.resource import ResourceGraph
from fluxsched_py.resource.rv1 import hosts_rv1

NAMES = {"alice": 1001, "bob": 1002, "carol": 1003}


def graph(nodes, properties):
    R = hosts_rv1([f"node{i}" for i in range(nodes)], 2)
    R["execution"]["properties"] = properties
    return ResourceGraph.from_rv1(R)


def jobspec(nnodes, duration=100.0, campaign=None):
    spec = {
        "version": 1,
        "resources": [
            {
                "type": "node",
                "count": nnodes,
                "exclusive": True,
                "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
            }
        ],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": duration}},
    }
    if campaign is not None:
        spec["attributes"]["user"] = {"campaign": campaign}
    return spec


def engine(g, affinity):
    # low: lowest ranks first
    return Engine(g, {"queue-policy": "easy", "policy": "low", "affinity": affinity}, user_id=NAMES.get)


def started(e, now=0.0):
    out = {}
    for r in e.schedule(now).responses:
        if r.type is ResponseType.SUCCESS:
            out[r.id] = list(r.resources.ranks)
    e.check_invariants()
    return out


# Ranks 0-1 are in Lyon, 2-3 in Grenoble.
LYON_GRENOBLE = {"lyon": "0-1", "grenoble": "2-3"}


def test_lyon_and_grenoble_users_get_their_own_site():
    e = engine(graph(4, LYON_GRENOBLE), "alice:lyon,bob:grenoble")
    e.alloc(1, 0, 1002, 0.0, jobspec(1))  # bob: grenoble
    e.alloc(2, 0, 1001, 0.0, jobspec(1))  # alice: lyon
    e.alloc(3, 0, 1002, 0.0, jobspec(1))  # bob: grenoble
    assert started(e) == {1: [2], 2: [0], 3: [3]}


def test_without_affinity_the_lowest_ranks_go_first():
    e = engine(graph(4, LYON_GRENOBLE), "")
    for jobid, uid in ((1, 1002), (2, 1001), (3, 1002)):
        e.alloc(jobid, 0, uid, 0.0, jobspec(1))
    assert started(e) == {1: [0], 2: [1], 3: [2]}


def test_grenoble_jobs_use_free_lyon_nodes_when_grenoble_is_full():
    e = engine(graph(4, LYON_GRENOBLE), "alice:lyon,bob:grenoble")
    for jobid in (1, 2, 3):
        e.alloc(jobid, 0, 1002, 0.0, jobspec(1))
    assert started(e) == {1: [2], 2: [3], 3: [0]}


def test_a_job_too_big_for_its_site_is_placed_as_without_affinity():
    e = engine(graph(4, LYON_GRENOBLE), "bob:grenoble")
    e.alloc(1, 0, 1002, 0.0, jobspec(3))
    assert started(e) == {1: [0, 1, 2]}


def test_a_campaign_name_goes_before_its_user():
    e = engine(graph(4, LYON_GRENOBLE), "alice:lyon,climate:grenoble")
    e.alloc(1, 0, 1001, 0.0, jobspec(1, campaign="climate"))
    e.alloc(2, 0, 1001, 0.0, jobspec(1))
    assert started(e) == {1: [2], 2: [0]}


def test_a_uid_names_a_user_and_unknown_users_have_no_preference():
    e = engine(graph(4, LYON_GRENOBLE), "1003:grenoble")
    e.alloc(1, 0, 1003, 0.0, jobspec(1))
    e.alloc(2, 0, 4242, 0.0, jobspec(1))  # no name, not listed
    assert started(e) == {1: [2], 2: [0]}


def test_affinity_changes_where_never_whether_or_when():
    # 3 nodes; the preferred one (rank 2) is busy: bob's job still starts now.
    e = engine(graph(3, {"grenoble": "2"}), "bob:grenoble")
    e.alloc(1, 0, 1001, 0.0, jobspec(1))
    e.alloc(2, 0, 1001, 0.0, jobspec(1))
    e.alloc(3, 0, 1001, 0.0, jobspec(1))
    assert started(e) == {1: [0], 2: [1], 3: [2]}
    e.free(1)
    e.alloc(4, 0, 1002, 1.0, jobspec(1))
    assert started(e, 1.0) == {4: [0]}


@pytest.mark.parametrize(
    "value",
    ["alice", "alice:", ":lyon", "alice:lyon,alice:grenoble", "alice:ly on", "a:b:c"],
)
def test_bad_values_name_the_option(value):
    with pytest.raises(EngineError, match=r"^affinity="):
        EngineOptions.parse({"affinity": value})


def test_the_option_parses_to_pairs():
    o = EngineOptions.parse(["affinity=alice:lyon, bob:grenoble"])
    assert o.affinity == (("alice", "lyon"), ("bob", "grenoble"))
    assert o.as_dict()["affinity"] == {"alice": "lyon", "bob": "grenoble"}


def test_a_property_change_moves_the_preference():
    # Rank 3 becomes grenoble's only node (resource.acquire property update):
    # bob's next job goes there, not to rank 2.
    e = engine(graph(4, LYON_GRENOBLE), "bob:grenoble")
    e.alloc(1, 0, 1002, 0.0, jobspec(1))
    assert started(e) == {1: [2]}
    e.free(1)
    e.resource_update(properties={2: [], 3: ["grenoble"]})
    e.alloc(2, 0, 1002, 1.0, jobspec(1))
    assert started(e, 1.0) == {2: [3]}
