"""Flux broker module entry file for fluxsched-py: ``flux module load sched-py``.

``flux module-python-exec`` imports this file and calls :func:`mod_main`.
The scheduler itself lives in the ``fluxsched_py`` package
(:mod:`fluxsched_py.flux.module`); this file only finds and imports it.

Options are the engine's (``queue-policy=fcfs|easy|conservative|hybrid``,
``reserve-depth=N``, ``queue-depth=N|unlimited``, ``policy=first|low|...``,
``annotate-depth=N``, ``log-level=...``)::

    flux module load sched-py queue-policy=easy queue-depth=unlimited
"""

import os
import sys


def _import_package():
    try:
        import fluxsched_py.flux.module as m
    except ImportError as first:
        # Installed as <site-packages>/fluxsched_py/flux/modules/sched-py.py:
        # that site-packages folder (with the dependencies) may not be on the
        # broker interpreter's path.  Append it, never shadowing flux's own.
        site = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        if site not in sys.path:
            sys.path.append(site)
        try:
            import fluxsched_py.flux.module as m
        except ImportError as exc:
            raise ImportError(
                f"sched-py: cannot import fluxsched_py with {sys.executable} ({exc}; first: {first}). "
                "Install fluxsched-py for this interpreter, or start the instance with "
                "FLUX_PYTHONPATH_PREPEND=<site-packages holding fluxsched_py and its dependencies>"
            ) from exc
    return m


def mod_main(h, *args):
    _import_package().mod_main(h, *args)
