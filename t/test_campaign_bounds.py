"""``campaign-max-running`` and ``attributes.user.campaign-max-running`` (engine/bounds.py).

Six nodes, ranks 0-2 with property ``lyon``, 3-5 ``grenoble`` (R's
``execution.properties``).  Under ``policy=high`` best-effort jobs take
nodes from the low end (``far_end``), so the Lyon nodes fill first; the
expected ranks and held jobs are counted by hand from the rule.
"""

from __future__ import annotations

import pytest

from fluxsched_py.engine import Engine, EngineError, EngineOptions, ResponseType

from .test_affinity import graph, jobspec

SITES = {"lyon": "0-2", "grenoble": "3-5"}


def be(campaign="c", bound=None):
    spec = jobspec(1, 1000.0, campaign)
    spec["attributes"]["system"]["preemptible-after"] = 0
    if bound is not None:
        spec["attributes"]["user"]["campaign-max-running"] = bound
    return spec


def engine(bounds=""):
    opts = {"policy": "high"}
    if bounds:
        opts["campaign-max-running"] = bounds
    return Engine(graph(6, SITES), opts)


def run(e, now=0.0):
    """(started {id: ranks}, reason_pending {id: text}) of one pass."""
    starts, reasons = {}, {}
    for r in e.schedule(now).responses:
        if r.type is ResponseType.SUCCESS:
            starts[r.id] = list(r.resources.ranks)
        elif r.type is ResponseType.ANNOTATE:
            why = ((r.annotations or {}).get("sched") or {}).get("reason_pending")
            if why:
                reasons[r.id] = why
    e.check_invariants()
    return starts, reasons


def test_without_a_bound_the_lyon_nodes_fill_first():
    e = engine()
    for j in range(1, 7):
        e.alloc(j, 0, 0, 0.0, be())
    assert run(e)[0] == {1: [0], 2: [1], 3: [2], 4: [3], 5: [4], 6: [5]}


def test_at_most_two_jobs_of_each_campaign_on_lyon():
    e = engine("*@lyon:2")
    for j in range(1, 8):
        e.alloc(j, 0, 0, 0.0, be())
    starts, reasons = run(e)
    # jobs 1, 2 on Lyon; then Lyon is at the bound: 3, 4, 5 on Grenoble; 6, 7 held (rank 2 stays idle)
    assert starts == {1: [0], 2: [1], 3: [3], 4: [4], 5: [5]}
    why = "campaign c: 2 jobs running on lyon nodes, its bound (campaign-max-running *@lyon:2)"
    assert reasons == {6: why, 7: why}
    assert (e.bounds.running("c"), e.bounds.running("c", "lyon"), e.bounds.running("c", "grenoble")) == (5, 2, 3)
    e.alloc(8, 0, 0, 0.0, be(campaign="d"))  # each campaign on its own: d's first job takes rank 2
    assert run(e, 1.0)[0] == {8: [2]}
    e.free(1)  # a Lyon job of c ends: one more may run there
    starts, _ = run(e, 10.0)
    assert starts == {6: [0]} and e.job(7).state.value == "pending"  # its reason_pending unchanged: not sent again


def test_a_whole_campaign_bound_holds_it_anywhere_and_the_tightest_bound_is_named():
    e = engine("c:3,*@lyon:5")
    for j in range(1, 6):
        e.alloc(j, 0, 0, 0.0, be())
    starts, reasons = run(e)
    assert starts == {1: [0], 2: [1], 3: [2]}
    why = "campaign c: 3 jobs running, its bound (campaign-max-running c:3)"
    assert reasons == {4: why, 5: why}


def test_the_campaigns_own_attribute_bounds_it():
    e = engine()
    e.alloc(1, 0, 0, 0.0, be(bound="@lyon:1,4"))
    e.alloc(2, 0, 0, 0.0, be(bound="@lyon:1,4"))
    e.alloc(3, 0, 0, 0.0, be(bound=4))
    e.alloc(4, 0, 0, 0.0, be(bound="4"))
    e.alloc(5, 0, 0, 0.0, be(bound="4"))
    starts, reasons = run(e)
    # 1 on Lyon (rank 0); 2 may not use Lyon: rank 3; 3 and 4 carry only the
    # whole-campaign bound of 4: ranks 1 and 2; 5: four running, held
    assert starts == {1: [0], 2: [3], 3: [1], 4: [2]}
    assert reasons == {5: "campaign c: 4 jobs running, its bound (campaign-max-running c:4)"}


@pytest.mark.parametrize("bad", ["many", "@lyon", "0", "@:3", True])
def test_a_malformed_attribute_is_denied_with_its_value(bad):
    e = engine()
    (r,) = e.alloc(1, 0, 0, 0.0, be(bound=bad))
    assert r.type is ResponseType.DENY
    assert r.note == (f"invalid jobspec: attributes.user.campaign-max-running={bad!r}: expected N or [@PROPERTY:]N,...")


def test_the_attribute_needs_a_campaign():
    spec = be(campaign=None)
    spec["attributes"]["user"] = {"campaign-max-running": 3}
    (r,) = engine().alloc(1, 0, 0, 0.0, spec)
    assert r.note == "invalid jobspec: attributes.user.campaign-max-running needs attributes.user.campaign"


@pytest.mark.parametrize(
    "value, message",
    [
        ("c", "campaign-max-running='c': bad entries 'c'; expected CAMPAIGN[@PROPERTY]:N[,...] with N > 0"),
        ("c:0", "campaign-max-running='c:0': bad entries 'c:0'; expected CAMPAIGN[@PROPERTY]:N[,...] with N > 0"),
        ("c@:3", "campaign-max-running='c@:3': bad entries 'c@:3'; expected CAMPAIGN[@PROPERTY]:N[,...] with N > 0"),
        (
            "c:3,c:4",
            "campaign-max-running='c:3,c:4': bad entries 'c:4' (listed twice); "
            "expected CAMPAIGN[@PROPERTY]:N[,...] with N > 0",
        ),
    ],
)
def test_bad_option_values_are_one_line_naming_the_option(value, message):
    with pytest.raises(EngineError) as exc:
        EngineOptions.parse({"campaign-max-running": value})
    assert str(exc.value) == message


def test_a_toml_table_and_regular_jobs_are_counted_not_held():
    o = EngineOptions.parse({"campaign-max-running": {"*@lyon": 1, "c": 2}})
    assert o.as_dict()["campaign-max-running"] == {"*@lyon": 1, "c": 2}
    e = Engine(graph(6, SITES), o)
    e.alloc(1, 0, 0, 0.0, jobspec(1, 100.0, "c"))  # regular, campaign c: counted
    e.alloc(2, 0, 0, 0.0, jobspec(1, 100.0, "c"))
    e.alloc(3, 0, 0, 0.0, be())
    starts, reasons = run(e)
    assert set(starts) == {1, 2}  # the regular jobs start whatever the bound
    assert reasons == {3: "campaign c: 2 jobs running, its bound (campaign-max-running c:2)"}


def test_no_copy_is_asked_for_past_a_bound():
    # campaign c on Lyon at most 2: two jobs on ranks 0, 1; a copy may not use rank 2 (Lyon) but may use Grenoble
    e = Engine(graph(6, SITES), {"policy": "high", "campaign-max-running": "c@lyon:2", "duplicates": "1"})
    e.alloc(1, 0, 0, 0.0, be())
    e.alloc(2, 0, 0, 0.0, be())
    assert run(e)[0] == {1: [0], 2: [1]}
    assert [a.of for a in e.copies(0.0)] == [1, 2]  # on Grenoble: 3 nodes idle there
    e = Engine(graph(6, SITES), {"policy": "high", "campaign-max-running": "c:2", "duplicates": "1"})
    e.alloc(1, 0, 0, 0.0, be())
    e.alloc(2, 0, 0, 0.0, be())
    run(e)
    assert e.copies(0.0) == []  # the campaign is at its bound: a copy could not start
