"""fluxsched-py as a Flux broker module (``flux module load sched-py``).

Two layers, so that everything but the last few calls into libflux can be
tested without Flux:

:mod:`fluxsched_py.flux.driver`
    the sans-flux RFC 27 driver: message payloads in, engine calls, reply
    payloads and KVS writes out through a small :class:`~.driver.Transport`
    interface.  It never imports ``flux``.
:mod:`fluxsched_py.flux.module`
    the binding to a real ``flux.Flux`` handle (services, message watchers,
    the ``resource.acquire`` and ``job-manager.sched-hello`` streams, KVS
    commits, timers).  It imports ``flux`` and is only imported by the broker
    module entry file ``modules/sched-py.py``.
:mod:`fluxsched_py.flux.paths`
    ``fluxsched-py module-path`` and ``fluxsched-py modprobe-path``.

Importing this package does not import ``flux``.
"""

from __future__ import annotations

__all__ = ["MODULE_NAME"]

#: The broker module name (the entry file is ``modules/sched-py.py``).
MODULE_NAME = "sched-py"
