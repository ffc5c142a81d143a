"""Power saving under Flux: the site's suspend and resume programs.

``[sched-py.power]`` in the instance config gives each node's power model
(the keys of :meth:`~fluxsched_py.power.PowerModel.from_table`) and the
programs the module runs, as Slurm's ``SuspendProgram`` and
``ResumeProgram``::

    [sched-py]
    power-save = "planned"
    [sched-py.power]
    suspend-program = "/usr/local/sbin/node-suspend"   # or a list: argv
    resume-program = "/usr/local/sbin/node-resume"
    suspend-timeout = "2m"        # default 60s
    resume-timeout = "15m"        # default 600s
    idle-watts = 95.0             # ... and the other model keys

Each program gets the hostlist of the nodes as its last argument and runs
from the reactor without blocking it (:meth:`Transport.run_program
<fluxsched_py.flux.wire.Transport>`).  A suspend that fails leaves its
nodes on.  A node switched off is drained with the reason
:data:`POWERED_DOWN`, so that ``flux resource status`` shows it powered
down (flux-core then reports it down, which the module takes as asleep),
and undrained once it is on again, unless someone drained it meanwhile
with another reason.  A resume that fails or outlives ``resume-timeout``
leaves its nodes down: the module drains them with the reason, as a site
would see a node that did not come back.  Only the instance config sets any of it: no
RPC changes it, so a guest cannot.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.options import EngineOptions
from ..ids import IdSet
from ..jobspec.fsd import parse_fsd
from ..power import PowerError, PowerModel

__all__ = ["POWERED_DOWN", "POWER_KEY", "PowerConfig", "config_power", "drain_reasons"]

#: The sub-table of ``[sched-py]`` that holds the power model and programs.
POWER_KEY = "power"
#: The drain reason of a node the module switched off: ``flux resource``
#: shows it drained, powered down rather than failed, until it is on again.
POWERED_DOWN = "sched-py: powered down"
_PROGRAM_KEYS = ("suspend-program", "resume-program", "suspend-timeout", "resume-timeout")


@dataclass(frozen=True, slots=True)
class PowerConfig:
    """The power model every node shares, and the programs that switch
    nodes (empty when ``power-save`` is off: only a power cap reads the model)."""

    model: PowerModel
    suspend: tuple[str, ...]
    resume: tuple[str, ...]
    suspend_timeout: float = 60.0
    resume_timeout: float = 600.0


def _argv(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        argv = tuple(shlex.split(value))
    elif isinstance(value, list) and all(isinstance(x, str) for x in value):
        argv = tuple(value)
    else:
        raise ValueError(f"{where}: expected a command (a string or a list of strings)")
    if not argv:
        raise ValueError(f"{where}: empty command")
    return argv


def config_power(conf: Any, name: str, options: EngineOptions) -> PowerConfig | None:
    """``[name.power]`` of the instance config, None when there is none.

    Checked against the ``options`` it serves, so that the module load
    fails rather than the engine once resources arrive: ``power-save`` and
    ``power-cap`` need the table, and only ``power-save`` switches nodes,
    so only it needs the suspend and resume programs.  ValueError with one
    line naming the table and the key."""
    table = conf.get(name) if isinstance(conf, Mapping) else None
    power = table.get(POWER_KEY) if isinstance(table, Mapping) else None
    where = f"bad config: [{name}.{POWER_KEY}]"
    switches = options.power_save != "off"
    if power is None:
        if switches or options.power_cap is not None:
            need = f"power-save={options.power_save}" if switches else f"power-cap={options.power_cap:g}"
            raise ValueError(f"{where} is missing: {need} needs the nodes' power model")
        return None
    if not isinstance(power, Mapping):
        raise ValueError(f"{where} must be a table")
    for key in ("suspend-program", "resume-program"):
        if switches and key not in power:
            raise ValueError(f"{where} {key} is missing (power-save switches nodes with it)")
    timeouts = {}
    for key, default in (("suspend-timeout", 60.0), ("resume-timeout", 600.0)):
        try:
            timeouts[key] = parse_fsd(power[key]) if key in power else default
        except ValueError as exc:
            raise ValueError(f"{where} {key}: {exc}") from None
        if not timeouts[key] > 0:
            raise ValueError(f"{where} {key}: must be more than 0")
    try:
        model = PowerModel.from_table({k: v for k, v in power.items() if k not in _PROGRAM_KEYS}, where)
    except PowerError as exc:
        raise ValueError(str(exc)) from None
    return PowerConfig(
        model,
        _argv(power["suspend-program"], f"{where} suspend-program") if "suspend-program" in power else (),
        _argv(power["resume-program"], f"{where} resume-program") if "resume-program" in power else (),
        timeouts["suspend-timeout"],
        timeouts["resume-timeout"],
    )


def drain_reasons(status: Any) -> tuple[dict[int, str], IdSet]:
    """Each drained rank's reason, and the ranks online, from a flux-core
    ``resource.status`` answer (``drain``: ``{idset: {timestamp, reason}}``,
    ``online``: an idset; flux-core ``src/modules/resource/status.c``).
    ValueError when it is not that shape."""
    if not isinstance(status, Mapping) or not isinstance(status.get("drain"), Mapping):
        raise ValueError(f"resource.status: no drain object in {status!r:.80}")
    reasons: dict[int, str] = {}
    for ids, info in status["drain"].items():
        reason = info.get("reason") if isinstance(info, Mapping) else None
        for r in IdSet.parse(ids):
            reasons[r] = reason if isinstance(reason, str) else ""
    online = status.get("online", "")
    if not isinstance(online, str):
        raise ValueError(f"resource.status: online is not an idset: {online!r:.80}")
    return reasons, IdSet.parse(online)
