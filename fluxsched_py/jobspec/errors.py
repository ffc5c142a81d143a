"""The one error type the jobspec package raises."""

from __future__ import annotations

from ..errors import FluxschedError

__all__ = ["JobspecError"]


class JobspecError(FluxschedError, ValueError):
    """A jobspec that cannot be read or is invalid.

    :attr:`path` is a JSON pointer to the offending element (``/`` for the
    whole document) and :attr:`reason` says what is wrong with it, so the
    message reads ``invalid at /resources/0/count: count must be >= 1``.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path or "/"
        self.reason = reason
        super().__init__(f"invalid at {self.path}: {reason}")


def pointer(parts) -> str:
    """A JSON pointer (RFC 6901) for a sequence of keys and indices."""
    out = []
    for p in parts:
        out.append(str(p).replace("~", "~0").replace("/", "~1"))
    return "/" + "/".join(out) if out else "/"
