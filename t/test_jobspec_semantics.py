"""Jobspec semantic checks, counts and the normalized request tree."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxsched_py.jobspec import Count, JobspecError, parse_jobspec
from fluxsched_py.jobspec.counts import parse_count


def spec(resources, tasks=None, system=None, version=1):
    doc = {
        "version": version,
        "resources": resources,
        "tasks": tasks or [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 60, **(system or {})}},
    }
    return json.dumps(doc)


def slot(count=1, *children, label="task", **extra):
    return {"type": "slot", "count": count, "label": label, "with": list(children) or [core(1)], **extra}


def core(n):
    return {"type": "core", "count": n}


def gpu(n):
    return {"type": "gpu", "count": n}


def node(n, *children, **extra):
    return {"type": "node", "count": n, **({"with": list(children)} if children else {}), **extra}


# -- counts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (4, Count(4, 4)),
        ({"min": 2}, Count(2, None)),
        ({"min": 2, "max": 8, "operator": "*", "operand": 2}, Count(2, 8, "*", 2)),
        ("2-32:2:*", Count(2, 32, "*", 2)),
        ("4+", Count(4, None)),
        ("[1-5]", Count(1, 5)),
        ("1-9:2", Count(1, 9, "+", 2)),
        ("3", Count(3, 3)),
        ("1,4,16", Count(1, 16, "+", 1, (1, 4, 16))),
    ],
)
def test_every_count_form_is_accepted(value, expected):
    assert parse_count(value, "/c", "node") == expected


@pytest.mark.parametrize(
    "value, reason",
    [
        (2**80, "exceeds the maximum"),
        ({"min": 3, "max": 2}, "less than min"),
        ({"min": 1, "max": 4, "operator": "^", "operand": 2}, "min must be >= 2"),
        ({"min": 1, "max": 4, "operator": "*", "operand": 1}, "operand must be >= 2"),
        ({"min": 1, "operator": "+"}, "together"),
        ("0-3", "min must be >= 1"),
        ("0,2", "values >= 1"),
        ("x", "neither a range nor an idset"),
        (True, "boolean"),
        (0, "node count must be >= 1"),
    ],
)
def test_invalid_counts_are_rejected_with_a_reason(value, reason):
    with pytest.raises(JobspecError, match=reason):
        parse_count(value, "/c", "node")


def test_zero_is_a_valid_count_for_optional_types():
    assert parse_count(0, "/c", "gpu") == Count(0, 0)


@given(
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=0, max_value=50),
    st.sampled_from("+*^"),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=4000),
)
def test_count_candidates_are_in_range_on_the_step_and_largest_first(lo, extra, op, operand, limit):
    if op in "*^":
        operand = max(operand, 2)
    if op == "^":
        lo = max(lo, 2)
    c = Count(lo, lo + extra, op, operand)
    got = list(c.candidates(limit))
    assert got == sorted(got, reverse=True)
    assert all(lo <= v <= min(lo + extra, limit) for v in got)
    if lo <= limit:
        assert got[-1] == lo
    step = {"+": lambda v: v + operand, "*": lambda v: v * operand, "^": lambda v: v**operand}[op]
    for smaller, larger in zip(got[1:], got[:-1], strict=False):
        assert step(smaller) == larger


# -- structure and semantics -----------------------------------------------------


def test_request_tree_is_normalized_and_hashable():
    r = parse_jobspec(spec([node(2, slot(4, core(4), gpu(1)))]))
    assert r.nnodes == 2 and r.nslots == 8 and r.slot_size == 4 and r.slot_gpus == 1
    assert r.exclusive is False and r.duration == 60.0
    assert hash(r.key) == hash(parse_jobspec(spec([node(2, slot(4, core(4), gpu(1)))])).key)
    assert r.resources[0].with_[0].count == Count(4, 4)


def test_a_node_inside_a_slot_is_exclusive_by_default():
    r = parse_jobspec(spec([slot(3, node(1))]))
    assert r.exclusive and r.nnodes == 3


def test_explicit_node_exclusive_flag():
    assert parse_jobspec(spec([node(2, slot(1), exclusive=True)])).exclusive
    assert not parse_jobspec(spec([node(2, slot(1))])).exclusive


def test_queue_duration_and_constraints_are_exposed():
    r = parse_jobspec(spec([slot(1)], system={"queue": "debug", "constraints": {"properties": ["^login"]}}))
    assert r.queue == "debug"
    assert r.constraints.describe() == "properties=^login"
    assert r.constraints.matches(0, "n0", set()) and not r.constraints.matches(0, "n0", {"login"})


@pytest.mark.parametrize(
    "constraints, path",
    [
        ({"properties": "login"}, "/attributes/system/constraints/properties"),
        ({"properties": ["a&b"]}, "/attributes/system/constraints/properties/0"),
        ({"hostlist": ["n[1-"]}, "/attributes/system/constraints/hostlist/0"),
        ({"ranks": ["x"]}, "/attributes/system/constraints/ranks/0"),
        ({"and": [{"bogus": []}]}, "/attributes/system/constraints/and/0/bogus"),
        ({"not": [5]}, "/attributes/system/constraints/not/0"),
    ],
)
def test_malformed_constraints_are_rejected_at_their_path(constraints, path):
    with pytest.raises(JobspecError) as e:
        parse_jobspec(spec([slot(1)], system={"constraints": constraints}))
    assert e.value.path == path


def test_constraint_operators_combine():
    c = {"or": [{"ranks": ["0-3"]}, {"hostlist": ["big[0-1]"]}], "not": [{"properties": ["down"]}]}
    r = parse_jobspec(spec([slot(1)], system={"constraints": c}))
    assert r.constraints.matches(2, "n2", set())
    assert r.constraints.matches(9, "big1", set())
    assert not r.constraints.matches(9, "n9", set())
    assert not r.constraints.matches(2, "n2", {"down"})


def test_duplicate_slot_labels_are_rejected():
    with pytest.raises(JobspecError, match="already used"):
        parse_jobspec(spec([node(1, slot(1)), node(1, slot(1))]))


def test_per_resource_type_must_be_requested():
    tasks = [{"command": ["a"], "slot": "task", "count": {"per_resource": {"type": "gpu", "count": 1}}}]
    with pytest.raises(JobspecError, match="per_resource type 'gpu'"):
        parse_jobspec(spec([slot(1)], tasks=tasks))


def test_v1_requires_task_slot_labels_to_exist_but_canonical_tolerates_it():
    text = spec([slot(1)], tasks=[{"command": ["a"], "slot": "nope", "count": {"per_slot": 1}}])
    parse_jobspec(text)
    with pytest.raises(JobspecError, match="names no slot label"):
        parse_jobspec(text, v1=True)


def test_negative_duration_is_rejected():
    with pytest.raises(JobspecError, match="/attributes/system/duration"):
        parse_jobspec(spec([slot(1)], system={"duration": -1}))


def test_a_slot_must_contain_something():
    with pytest.raises(JobspecError, match="at least one resource"):
        parse_jobspec(spec([{"type": "slot", "count": 1, "label": "task"}]))


def test_v1_forbids_canonical_only_forms():
    with pytest.raises(JobspecError, match="V1"):
        parse_jobspec(spec([slot("2-4")]), v1=True)
    parse_jobspec(spec([slot("2-4")]))
