"""A short fuzz run of every target in t/fuzzing.py (deterministic seed).

Each target gets ``FUZZ_EXAMPLES`` mutated inputs seeded from the real
corpora (``../shared/conformance/``, skipped when absent) and the recorded
traffic in ``t/data/``; any input must give a result or a FluxschedError,
within the time bound.  The long run is ``python bench/fuzz.py --minutes N``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from .conftest import CONFORMANCE
from .fuzzing import TARGETS, check

FUZZ_EXAMPLES = 100

#: targets whose seeds all come from ../shared/conformance
NEEDS_SHARED = {"jobspec", "graph-rv1", "graph-jgf", "graph-grug", "graph-hwloc", "swf", "match"}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz(name):
    if name in NEEDS_SHARED and not CONFORMANCE.exists():
        pytest.skip(f"conformance corpus not found at {CONFORMANCE} (../shared is absent)")
    target = TARGETS[name]()

    @settings(
        max_examples=FUZZ_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(target.inputs())
    def run(value):
        check(target, value)

    run()
    assert target.stats["inputs"] >= FUZZ_EXAMPLES


# -- regressions: each input the fuzzer found, by name ------------------------------


def test_jobspec_that_is_not_an_object_is_a_jobspec_error():
    """jobspec fuzz: ``None`` and a list made parse_jobspec raise TypeError
    / AttributeError instead of JobspecError."""
    from fluxsched_py.jobspec import JobspecError, parse_jobspec

    for doc in (None, [1, 2], 3, 1.5):
        with pytest.raises(JobspecError):
            parse_jobspec(doc)


def test_match_with_a_nul_byte_in_the_jobspec_path_is_an_error_line(tmp_path):
    """match fuzz: ``match allocate \\x00...`` raised ValueError (embedded null byte)."""
    import io

    from fluxsched_py.matchcli.compat import parse_policy
    from fluxsched_py.matchcli.session import Session
    from fluxsched_py.resource import ResourceGraph

    g = ResourceGraph.from_recipe({"cluster": {"nodes": 1, "sockets": 1, "cores_per_socket": 2}})
    out, err = io.StringIO(), io.StringIO()
    s = Session(g, parse_policy("first"), out=out, term=out, err=err)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    assert s.execute("match allocate 'a\x00b.yaml'") == 0
    assert s.execute("match allocate /dev/null") == 0
    assert s.execute(f"partial-cancel 1 rv1exec '{binary}'") == 0
    lines = err.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("ERROR: ") for line in lines), lines


def test_batsim_workload_with_odd_types_is_a_workload_error():
    """batsim-workload fuzz: a list as profile name (TypeError: unhashable),
    ``true`` as profile (AttributeError), ``null``/a list as nb_res (TypeError)."""
    from fluxsched_py.replay.workload import WorkloadError, read_batsim

    def doc(**job):
        j = {"id": 0, "subtime": 0, "res": 1, "profile": "p", **job}
        return {"nb_res": 4, "profiles": {"p": {"type": "delay", "delay": 1}, "b": True}, "jobs": [j]}

    for bad in (doc(profile=["p"]), doc(profile="b"), {**doc(), "nb_res": [4]}, {**doc(), "profiles": [1]}):
        with pytest.raises(WorkloadError):
            read_batsim(bad)


def test_batsim_workload_with_many_duplicate_ids_gets_distinct_numbers():
    """batsim-workload fuzz: the jobs list repeated (every id a duplicate)
    took quadratic time (each duplicate scanned every id seen)."""

    from fluxsched_py.replay.workload import read_batsim

    # distinct names that all carry the number 0 ("w0!0", "w1!0"...)
    jobs = [{"id": f"w{i}!0", "subtime": 0, "res": 1, "profile": "p"} for i in range(50_000)]
    w = read_batsim({"nb_res": 4, "profiles": {"p": {"type": "delay", "delay": 1}}, "jobs": jobs})
    assert sorted(j.id for j in w.jobs) == list(range(50_000))


def test_jobspec_of_a_megabyte_of_tasks_is_refused_by_count():
    """bench/fuzz.py 1 MB input: 14,000 tasks took 2.4 s (10 s traced) in schema validation."""
    import json

    from fluxsched_py.jobspec import JobspecError, parse_jobspec

    task = {"command": ["app"], "slot": "task", "count": {"per_slot": 1}}
    doc = {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [task] * 14_000,
        "attributes": {"system": {"duration": 10}},
    }
    # refused by counting, before schema validation (its time: bench/fuzz.py's 1 MB column)
    with pytest.raises(JobspecError, match="more than 4096 values"):
        parse_jobspec(json.dumps(doc))


@pytest.mark.parametrize("fmt", ["grug", "hwloc"])
def test_xml_with_an_unknown_encoding_is_a_resource_error(tmp_path, fmt):
    """graph-grug / graph-hwloc fuzz: ``encoding="TTF-8"`` raised LookupError."""
    from fluxsched_py.resource.errors import ResourceError
    from fluxsched_py.resource.load import load_graph

    root = "<topology/>" if fmt == "hwloc" else '<graphml xmlns="http://graphml.graphdrawing.org/xmlns"/>'
    p = tmp_path / "x.xml"
    p.write_text(f'<?xml version="1.0" encoding="TTF-8"?>\n{root}\n')
    with pytest.raises(ResourceError, match="TTF-8"):
        load_graph(p, fmt)


def test_json_string_given_as_R_is_a_resource_error(tmp_path):
    """graph-rv1 fuzz: the JSON text ``"\\u0000"`` was taken for a path (ValueError: embedded null byte)."""
    from fluxsched_py.resource.errors import ResourceError
    from fluxsched_py.resource.load import load_graph

    p = tmp_path / "R.json"
    for text in ('"\\u0000"', '"/etc/passwd"', "[1]"):
        p.write_text(text)
        with pytest.raises(ResourceError, match="expected a JSON object"):
            load_graph(p, "rv1")


def test_jgf_edge_metadata_that_is_not_an_object_is_a_resource_error():
    """graph-jgf fuzz: edge metadata ``1`` / ``"x"`` raised TypeError / AttributeError."""
    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.resource.errors import ResourceError

    nodes = [
        {"id": "0", "metadata": {"type": "cluster", "name": "c0", "id": 0}},
        {"id": "1", "metadata": {"type": "node", "name": "n0", "id": 0, "rank": 0}},
    ]
    for md in (1, "x", [1], True):
        jgf = {"graph": {"nodes": nodes, "edges": [{"source": "0", "target": "1", "metadata": md}]}}
        with pytest.raises(ResourceError, match="metadata"):
            ResourceGraph.from_jgf(jgf)


def test_sparse_huge_leaf_ids_are_refused_before_taking_gigabytes():
    """graph-rv1 / graph-jgf fuzz: a 4 KB R naming core 67108863-i on 100
    ranks took 900 MB and 5.5 s (one 8 MB bitmask per rank); a JGF core
    with id 10**5000 raised OverflowError (1 << id)."""
    import resource as rlimit

    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.resource.errors import ResourceError

    R = {
        "version": 1,
        "execution": {"R_lite": [{"rank": str(i), "children": {"core": str(67108863 - i)}} for i in range(100)]},
    }
    before = rlimit.getrusage(rlimit.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ResourceError, match="large or sparse"):
        ResourceGraph.from_rv1(R)
    assert rlimit.getrusage(rlimit.RUSAGE_SELF).ru_maxrss - before < 300 * 1024  # KB: well under the 900 MB it took
    nodes = [
        {"id": "0", "metadata": {"type": "node", "name": "n0", "id": 0, "rank": 0}},
        {"id": "1", "metadata": {"type": "core", "name": "core", "id": 10**5000}},
    ]
    with pytest.raises(ResourceError, match="above"):
        ResourceGraph.from_jgf({"graph": {"nodes": nodes, "edges": [{"source": "0", "target": "1"}]}})


def test_recipe_with_odd_properties_or_huge_counts_is_a_resource_error():
    """graph-recipe fuzz: ``properties: true`` raised AttributeError;
    ``cores_per_socket: 10**12`` MemoryError and 10**5000 OverflowError (1 << count)."""
    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.resource.errors import ResourceError

    base = {"nodes": 2, "sockets": 1, "cores_per_socket": 2}
    for extra in (
        {"properties": True},
        {"cores_per_socket": 10**12},
        {"gpus_per_socket": 10**5000},
        {"memory_gb": 2**40},
    ):
        with pytest.raises(ResourceError):
            ResourceGraph.from_recipe({"cluster": {**base, **extra}})


def test_jgf_vertex_with_a_huge_rank_is_a_resource_error():
    """graph-jgf fuzz (bench/fuzz.py): a node with rank 2**40 raised
    MemoryError (ranks are bits of a mask); rank 10**9 took 125 MB."""
    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.resource.errors import ResourceError

    for rank in (10**9, 2**40, 10**5000):
        nodes = [
            {"id": "0", "metadata": {"type": "cluster", "name": "c0", "id": 0}},
            {"id": "1", "metadata": {"type": "node", "name": "n0", "id": 0, "rank": rank}},
            {"id": "2", "metadata": {"type": "core", "name": "core0", "id": 0}},
        ]
        edges = [{"source": "0", "target": "1"}, {"source": "1", "target": "2"}]
        with pytest.raises(ResourceError, match="rank above"):
            ResourceGraph.from_jgf({"graph": {"nodes": nodes, "edges": edges}})


def test_swf_with_an_infinite_processor_count_is_a_workload_error():
    """swf fuzz (bench/fuzz.py): ``inf`` as allocated or requested processors
    raised OverflowError (int(float("inf")))."""
    from fluxsched_py.replay.workload import WorkloadError, read_swf

    for fields in ("1 0 0 10 inf -1 -1 2 100", "1 0 0 10 2 -1 -1 -inf 100", "1 0 0 10 nan -1 -1 2 100"):
        with pytest.raises(WorkloadError):
            read_swf(fields + " -1 1 1 1 -1 1 -1 -1 -1\n")
