"""The order of a reply's decisions for Batsim's clock (v4 and batprotocol).

Batsim applies the events of a reply one after the other, each as one
simulated message to its server actor, and each of those messages takes
simulated time (1.2 ms per event on ``cluster512.xml``; Batsim 4.2.1
``src/protocol.cpp:728,1580-1593``, ``src/ipp.cpp:19,25``).  So:

* every kill of a reply goes out as ONE kill event, first (one message, one
  killer actor, one JOB_KILLED), ahead of the EXECUTE_JOBs that need its
  hosts (Batsim aborts on an allocation of a host still computing);
* regular jobs' EXECUTE_JOBs go before best-effort ones, whose start time
  matters less;
* then the rest in the engine's order (best-effort EXECUTE_JOBs and
  rejections), the CALL_ME_LATER last.

See docs/rfcs/preemption.md for the measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .driver import CallMeLater, Decision, Execute, Kill

__all__ = ["order_decisions"]


def order_decisions(
    decisions: Sequence[Decision], is_best_effort: Callable[[str], bool]
) -> tuple[list[str], list[Decision]]:
    """``(kill ids to send first in one event, the other decisions in order)``.

    A job started and killed in the same reply (the engine never did so in
    any recorded run) keeps the engine's order: no kill ids first, and the
    :class:`Kill` decisions stay in the list, one event each.
    """
    killed = [d.job_id for d in decisions if isinstance(d, Kill)]
    if any(isinstance(d, Execute) and d.job_id in killed for d in decisions):
        return [], list(decisions)
    regular = [d for d in decisions if isinstance(d, Execute) and not is_best_effort(d.job_id)]
    first = {d.job_id for d in regular}
    rest = [d for d in decisions if not isinstance(d, Kill) and not (isinstance(d, Execute) and d.job_id in first)]
    rest.sort(key=lambda d: isinstance(d, CallMeLater))
    return killed, regular + rest
