"""Fluxion's resource-query corpus, replayed by bench/conformance_fluxion.py.

Requirement (issue 3): at least 90% of the 374 cases outcome-identical, and no
regression below the level reached (rfcs/resource-query.md lists every
mismatch).  The two ``disaggr.graphml`` cases (355k vertices, ~55 CPU-s) run
only with ``FLUXSCHED_CONFORMANCE_FULL=1``; both are outcome-identical.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "conformance" / "fluxion-resource"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/conformance/fluxion-resource")

# outcome-identical cases reached so far (of 374, disaggr included)
OUTCOME_FLOOR = 325
BYTE_FLOOR = 261
DISAGGR_CASES = 2  # both outcome- and byte-identical


def _runner():
    spec = importlib.util.spec_from_file_location("conformance_fluxion", ROOT / "bench" / "conformance_fluxion.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and worker pickling look the module up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not (CORPUS / "MANIFEST.tsv").exists(),
                    reason="../shared/conformance/fluxion-resource is absent: corpus not available here")
def test_resource_query_corpus_outcome_identical_rate_does_not_regress():
    mod = _runner()
    full = os.environ.get("FLUXSCHED_CONFORMANCE_FULL") == "1"
    cases = mod.read_manifest(CORPUS)
    assert len(cases) == 374
    results = mod.run_all(CORPUS) if full else _run_without_disaggr(mod)
    skipped = 0 if full else DISAGGR_CASES
    outcome = sum(r.outcome for r in results) + skipped
    byte = sum(r.byte for r in results) + skipped
    print(mod.summary(results))
    assert outcome >= OUTCOME_FLOOR, f"outcome-identical {outcome}/374 fell below {OUTCOME_FLOOR}"
    assert byte >= BYTE_FLOOR, f"byte-identical {byte}/374 fell below {BYTE_FLOOR}"


def _run_without_disaggr(mod):
    import os as _os
    from concurrent.futures import ProcessPoolExecutor

    work = [(c, str(CORPUS)) for c in mod.read_manifest(CORPUS) if "disaggr" not in c.options]
    with ProcessPoolExecutor(max_workers=_os.cpu_count()) as ex:
        return list(ex.map(mod.run_case, work, chunksize=1))
