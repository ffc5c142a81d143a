"""The flux-core and RFC jobspec corpora (../shared/conformance/jobspec)."""

from __future__ import annotations

import re

import pytest

from fluxsched_py.jobspec import JobspecError, load_jobspec

from .conftest import shared_path

POINTER = re.compile(r"^invalid at /\S*: \S")


def corpus(*parts: str):
    return sorted(shared_path("conformance", "jobspec", *parts).glob("*.yaml"))


def test_all_26_flux_core_valid_jobspecs_are_accepted_as_canonical():
    files = corpus("flux-core", "valid")
    assert len(files) == 26
    for f in files:
        load_jobspec(f)


def test_all_7_flux_core_valid_v1_jobspecs_are_accepted_with_v1():
    files = corpus("flux-core", "valid_v1")
    assert len(files) == 7
    for f in files:
        load_jobspec(f, v1=True)


@pytest.mark.parametrize("folder, expected", [("invalid", 55), ("invalid_v1", 13)])
def test_every_invalid_jobspec_is_rejected_with_v1_naming_a_path(folder, expected):
    files = corpus("flux-core", folder)
    assert len(files) == expected
    for f in files:
        with pytest.raises(JobspecError) as e:
            load_jobspec(f, v1=True)
        assert POINTER.match(str(e.value)), f"{f.name}: {e.value}"


@pytest.mark.parametrize(
    "name", ["invalid_yaml1.yaml", "resource_count_missing_min.yaml", "resource_count_missing_operand.yaml"]
)
def test_files_flux_core_skips_are_rejected_too(name):
    f = shared_path("conformance", "jobspec", "flux-core", "invalid", name)
    with pytest.raises(JobspecError):
        load_jobspec(f, v1=True)
    with pytest.raises(JobspecError):
        load_jobspec(f)


def test_every_rfc14_example_is_accepted():
    files = corpus("rfc", "spec_14")
    assert files
    for f in files:
        load_jobspec(f)


def test_every_rfc25_example_is_accepted_with_v1():
    files = corpus("rfc", "spec_25")
    assert files
    for f in files:
        load_jobspec(f, v1=True)


def test_the_reason_names_the_offending_element():
    base = ("conformance", "jobspec", "flux-core")
    cases = {
        ("invalid", "resource_count_bad_exp_min.yaml"): "/resources/0/count: count min must be >= 2 with operator '^'",
        ("invalid", "task_count_total_zero.yaml"): "/tasks/0/count/total:",
        ("invalid_v1", "gpu_count_invalid.yaml"): "/resources/0/with/0/with/1/count:",
        ("invalid_v1", "res_type_unknown.yaml"): "/resources/0/type:",
        ("invalid_v1", "duration_missing.yaml"): "/attributes/system: V1 (RFC 25): 'duration' is a required property",
    }
    for (folder, name), expected in cases.items():
        with pytest.raises(JobspecError) as e:
            load_jobspec(shared_path(*base, folder, name), v1=True)
        assert expected in str(e.value), str(e.value)
