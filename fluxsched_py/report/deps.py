"""The optional plotting dependency, imported on demand."""

from __future__ import annotations

from types import ModuleType

__all__ = ["ReportError", "require_matplotlib"]

INSTALL_HINT = "pip install 'fluxsched-py[plot]'"


class ReportError(RuntimeError):
    """A report that cannot be drawn; the message is one line for the user."""


def require_matplotlib() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend, or a one-line :class:`ReportError`."""
    try:
        import matplotlib
    except ImportError:
        raise ReportError(f"--report needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
