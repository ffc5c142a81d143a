"""The project's own error type.

Every reader and decoder reports bad input with a subclass of
:class:`FluxschedError` (``JobspecError``, ``ResourceError``,
``IdSetError``, ``WorkloadError``, ``ProtocolError``...), so a caller (a
CLI's error boundary, the fuzz tests) can tell "this input is wrong" from a
bug with one ``except`` clause.  The subclasses that are also ValueErrors
stay ValueErrors.
"""

from __future__ import annotations

__all__ = ["FluxschedError"]


class FluxschedError(Exception):
    """Bad input or a refused request, reported by fluxsched-py itself."""
