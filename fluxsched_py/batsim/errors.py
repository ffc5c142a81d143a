"""The one error type the Batsim codecs raise."""

from __future__ import annotations

from ..errors import FluxschedError

__all__ = ["ProtocolError"]


class ProtocolError(FluxschedError, ValueError):
    """A message from Batsim that breaks the protocol.

    The driver logs it and exits non-zero instead of replying, because a
    decision process that guesses after a protocol violation would make the
    simulation silently wrong.
    """
