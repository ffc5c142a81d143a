"""flux-core job-manager behaviour since 2024 that a scheduler must meet,
through the driver (RecordingTransport, see test_flux_driver.py); listed in
docs/rfcs/rfc27-sched-protocol.md, "Changes since 2024"."""

from __future__ import annotations

from .test_flux_driver import FULL, alloc, make, replies


def test_a_job_canceled_while_its_R_commits_gets_success_then_its_free():
    # flux-core b743c7fef (0.61.2): a job canceled with sched.alloc outstanding
    # leaves at once; if the scheduler's answer is SUCCESS, the job-manager
    # sends sched.free for it right away.
    d, t = make(defer_commits=True)
    alloc(d, t, 1, FULL)
    alloc(d, t, 2, FULL)  # waits behind it
    d.handle("sched.cancel", None, {"id": 1})  # R is being committed: too late to cancel
    assert replies(t, "alloc-1") == []
    t.complete_commits()
    R = replies(t, "alloc-1")[-1]["R"]
    assert replies(t, "alloc-1")[-1]["type"] == 0
    d.handle("sched.free", "f", {"id": 1, "R": R, "final": True})
    t.run_passes()
    t.complete_commits()
    assert replies(t, "f") == [] and replies(t, "alloc-2")[-1]["type"] == 0


def test_a_free_without_final_is_taken_as_final():
    # RFC 27 ee0f60a reads an absent "final" as "more frees to come", and so
    # does flux.scheduler (0.88); every flux-core that sends partial frees
    # (>= 0.65, 7f688694f) sends "final" on each, and those before it send one
    # free with no "final": sched-py takes that one as the last (rfc27 doc).
    d, t = make()
    alloc(d, t, 1, FULL)
    R = replies(t, "alloc-1")[-1]["R"]
    d.handle("sched.free", "f", {"id": 1, "R": R})
    assert d.engine.job(1) is None and d.graph.free().count("core") == 8
