"""A short fuzz run of every target in t/fuzzing.py (deterministic seed).

Each target gets ``FUZZ_EXAMPLES`` mutated inputs seeded from the real
corpora (``../shared/conformance/``, skipped when absent) and the recorded
traffic in ``t/data/``; any input must give a result or a FluxschedError,
within the time bound.  The long run is ``python bench/fuzz.py --minutes N``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from t.conftest import CONFORMANCE
from t.fuzzing import TARGETS, check

FUZZ_EXAMPLES = 60

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

    from fluxsched_py.resource import ResourceGraph
    from fluxsched_py.rq.compat import parse_policy
    from fluxsched_py.rq.session import Session

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


def test_batsim_workload_with_many_duplicate_ids_is_fast():
    """batsim-workload fuzz: the jobs list repeated (every id a duplicate)
    took quadratic time (each duplicate scanned every id seen)."""
    import time

    from fluxsched_py.replay.workload import read_batsim

    jobs = [{"id": 0, "subtime": 0, "res": 1, "profile": "p"}] * 50_000
    t0 = time.perf_counter()
    w = read_batsim({"nb_res": 4, "profiles": {"p": {"type": "delay", "delay": 1}}, "jobs": jobs})
    assert time.perf_counter() - t0 < 5
    assert sorted(j.id for j in w.jobs) == list(range(50_000))
