"""Fault injection for t/flux: a queue policy that raises, inside a real broker.

When this folder is on the broker's Python path (``FLUX_PYTHONPATH_PREPEND``)
and ``FLUXSCHED_T_FAULT=policy`` is in the broker's environment, Python's
standard ``sitecustomize`` hook patches every queue policy so that it
raises ``RuntimeError("injected policy fault")`` when it reaches a job whose
duration is :data:`FAULT_DURATION` seconds.  The package holds no test code:
the fault comes from here.  The unit tests call :func:`install_policy_fault`
directly.
"""

from __future__ import annotations

import os

#: ``flux submit -t 4242s``: the job the patched policies raise on
FAULT_DURATION = 4242.0


def install_policy_fault() -> list:
    """Patch every queue policy's ``run``; return ``(cls, original)`` pairs to undo it."""
    from fluxsched_py.policy import REGISTRY

    undo = []
    for cls in REGISTRY.values():
        orig = cls.__dict__.get("run")
        if orig is None:
            continue

        def run(self, ctx, _orig=orig):
            jobs = ctx.jobs

            def faulty():
                for job in jobs():
                    if job.duration == FAULT_DURATION:
                        raise RuntimeError("injected policy fault")
                    yield job

            ctx.jobs = faulty
            try:
                yield from _orig(self, ctx)
            finally:
                del ctx.jobs

        cls.run = run
        undo.append((cls, orig))
    return undo


def uninstall(undo: list) -> None:
    for cls, orig in undo:
        cls.run = orig


if os.environ.get("FLUXSCHED_T_FAULT") == "policy":  # pragma: no cover - runs in the broker
    try:
        import sys

        if any("module-python-exec" in a for a in sys.argv):
            install_policy_fault()
    except Exception:
        pass
