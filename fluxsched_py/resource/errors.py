"""The one error type of the resource package."""

from __future__ import annotations

from ..errors import FluxschedError

__all__ = ["ResourceError"]


class ResourceError(FluxschedError, ValueError):
    """Bad resource input or an impossible resource operation.

    The message always names where the problem is: the file (when known) and
    the element (a JSON path, a GraphML vertex or edge id, a rank...).

    >>> str(ResourceError("rank 3 is not in the graph", source="R.json", element="/execution/R_lite/0"))
    'R.json: /execution/R_lite/0: rank 3 is not in the graph'
    """

    def __init__(self, reason: str, *, source: str | None = None, element: str | None = None) -> None:
        self.reason = reason
        self.source = source
        self.element = element
        parts = [p for p in (source, element) if p]
        super().__init__(": ".join([*parts, reason]))

    def at(self, source: str) -> ResourceError:
        """A copy of this error that also names ``source`` (when it named none)."""
        if self.source:
            return self
        return ResourceError(self.reason, source=source, element=self.element)
