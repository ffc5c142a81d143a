"""A node's power model: what it draws in each state, and what switching costs.

One :class:`PowerModel` per node, from any of three sources, each checked
here so that every driver refuses the same bad values with the same words:

- a Batsim energy platform (:func:`fluxsched_py.batsim.platform.batsim_power`:
  ``wattage_per_state``, ``wattage_off``, ``sleep_pstates`` and the speeds of
  the two virtual pstates, read as Batsim reads them);
- the replay's ``power`` table of a resource recipe, and the Flux module's
  ``[sched-py.power]`` table (:meth:`PowerModel.from_table`).

The states are Batsim's: ``idle`` (on, no job), ``computing`` (on, running a
job), ``switching_off``, ``sleeping`` and ``switching_on``.  Switching a node
off takes ``off_time`` seconds at ``off_watts``; switching it on,
``on_time`` at ``on_watts``.  The arithmetic the scheduler needs
(:meth:`PowerModel.break_even`, :meth:`PowerModel.watts`) lives here, so the
engine, the replay's energy accounting and the report agree.

Batsim's switching: a node sent to its sleep pstate passes through the
switch-off virtual pstate, where it computes one flop at that pstate's speed
(so ``off_time`` is one over that speed), then sits in the sleep pstate; it
is woken through the switch-on virtual pstate the same way.  The watts of a
virtual or sleep pstate are its ``wattage_per_state`` entry (all three
values are equal there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import FluxschedError

__all__ = ["PowerError", "PowerModel"]


class PowerError(FluxschedError, ValueError):
    """A power model that cannot be used; the message names the file and field."""


@dataclass(frozen=True, slots=True)
class PowerModel:
    """What one node draws (watts) and how long switching takes (seconds).

    ``compute_pstate`` and ``sleep_pstate`` are Batsim's pstate numbers
    (``SET_RESOURCE_STATE`` sends them); elsewhere they are 0 and -1."""

    idle_watts: float
    computing_watts: float
    sleeping_watts: float
    off_time: float
    off_watts: float
    on_time: float
    on_watts: float
    compute_pstate: int = 0
    sleep_pstate: int = -1

    def watts(self, state: str) -> float:
        """What the node draws in ``state``: ``idle``, ``computing``,
        ``sleeping``, ``switching_off`` or ``switching_on`` (Batsim's names)."""
        if state == "idle":
            return self.idle_watts
        if state == "computing":
            return self.computing_watts
        if state == "sleeping":
            return self.sleeping_watts
        if state == "switching_off":
            return self.off_watts
        if state == "switching_on":
            return self.on_watts
        raise ValueError(f"unknown power state {state!r}")

    @property
    def switch_energy(self) -> float:
        """Joules of one switch off and back on."""
        return self.off_time * self.off_watts + self.on_time * self.on_watts

    @property
    def break_even(self) -> float:
        """The shortest idle gap that switching off for saves energy (seconds):
        staying idle costs ``idle_watts`` a second, sleeping costs the switch
        plus ``sleeping_watts`` for what is left of the gap.  Never less than
        the switch itself; infinite when sleeping saves nothing."""
        turn = self.off_time + self.on_time
        saved = self.idle_watts - self.sleeping_watts
        if saved <= 0:
            return math.inf
        gap = (self.switch_energy - self.sleeping_watts * turn) / saved
        return max(gap, turn)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> PowerModel:
        """A model from a TOML/JSON table (the replay's recipe ``power``
        table, the Flux module's ``[sched-py.power]``)::

            idle-watts = 95.0        computing-watts = 190.7   sleeping-watts = 9.75
            off-time = 6.1           off-watts = 101.0
            on-time = 151.5          on-watts = 125.2

        Every key is required but ``computing-watts`` (default:
        ``idle-watts``); ``where`` names the file and table in errors."""
        if not isinstance(table, Mapping):
            raise PowerError(f"{where}: expected a table of power values, not {type(table).__name__}")
        known = {
            "idle-watts",
            "computing-watts",
            "sleeping-watts",
            "off-time",
            "off-watts",
            "on-time",
            "on-watts",
        }
        extra = sorted(set(table) - known)
        if extra:
            raise PowerError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")

        def number(key: str, default: float | None = None) -> float:
            if key not in table:
                if default is None:
                    raise PowerError(f"{where}: {key} is missing")
                return default
            return checked(table[key], f"{where}: {key}")

        idle = number("idle-watts")
        return cls(
            idle_watts=idle,
            computing_watts=number("computing-watts", idle),
            sleeping_watts=number("sleeping-watts"),
            off_time=number("off-time"),
            off_watts=number("off-watts"),
            on_time=number("on-time"),
            on_watts=number("on-watts"),
        )


def checked(value: Any, where: str) -> float:
    """``value`` as a finite, non-negative number; PowerError naming ``where``."""
    if isinstance(value, bool):
        raise PowerError(f"{where}: expected a number, not {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise PowerError(f"{where}: expected a number, not {str(value)[:40]!r}") from None
    if not math.isfinite(x):
        raise PowerError(f"{where}: {value!r} is not a finite number")
    if x < 0:
        raise PowerError(f"{where}: {value!r} is negative")
    return x
