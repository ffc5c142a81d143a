"""The module's options from the instance's TOML config: the ``[sched-py]`` table.

A site configures the scheduler where it configures the rest of Flux::

    [sched-py]
    queue-policy = "easy"
    reserve-depth = 32
    queue-policy-per-queue = { debug = "fcfs" }   # or "debug:fcfs,batch:easy"

The keys are the engine options' names, the module arguments' (the table
:data:`~fluxsched_py.engine.options.OPTIONS`; ``nice`` and
``annotate-interval`` are module arguments only).  The table is named after
the module (``flux module load --name=NAME`` reads ``[NAME]``).  Module
arguments override the table.  A value is a TOML string (the module
argument's text), or a value of a type the option takes
(:attr:`~fluxsched_py.engine.options.Syntax.toml`): an integer, a boolean
for a true/false option, a number for seconds, a table for a list of
``NAME:VALUE`` pairs.  Anything else, an unknown key or a bad value is a
``ValueError`` whose one-line message names the table, the key and the
reason.  RFC 33's ``[queues.NAME] parent`` keys (virtual queues) give
``queue-parent`` (:func:`queue_parent_args`), which the table overrides.

The ``limits`` sub-table of ``[sched-py]``, and RFC 33's ``policy.scheduler``
tables, are the run limits (:func:`config_limits`,
:mod:`fluxsched_py.engine.runlimits`), not options.

No ``flux`` import: :mod:`fluxsched_py.flux.module` fetches the config
(``config.get`` at load, the ``<name>.config-reload`` request payload on
``flux config reload``) and calls :func:`config_options`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine import OPTIONS, EngineError, EngineOptions
from ..engine.runlimits import RunLimits
from .wire import parse_module_args

__all__ = ["config_args", "config_limits", "config_options", "queue_parent_args"]

#: The key of ``[sched-py]`` that holds limits, not an option.
LIMITS_KEY = "limits"


def config_args(conf: Any, name: str) -> list[str]:
    """The ``[name]`` table of the instance config as ``key=value`` module
    arguments, each checked on its own (ValueError names the key)."""
    if conf is None:
        return []
    if not isinstance(conf, Mapping):
        raise ValueError(f"bad config: expected a TOML table at the top, got {type(conf).__name__}")
    table = conf.get(name)
    if table is None:
        return []
    if not isinstance(table, Mapping):
        raise ValueError(f"bad config: [{name}] must be a table, not {_toml_type(table)}")
    out = []
    for key, value in table.items():
        if key == LIMITS_KEY or key in NOT_OPTIONS:
            continue  # config_limits() and the reservation store read them
        arg = f"{key}={_text(name, key, value)}"
        try:
            EngineOptions.parse([arg])
        except EngineError as exc:
            raise ValueError(f"bad config: [{name}] {exc}") from None
        out.append(arg)
    return out


#: Keys of the table that are no option: ``[[sched-py.reservation]]``
#: entries (advance reservations, :mod:`fluxsched_py.flux.reservestore`) and
#: ``[sched-py.power]`` (the power model and programs, :mod:`fluxsched_py.flux.powerctl`).
NOT_OPTIONS = frozenset({"reservation", "power"})

#: TOML value types, as an error names them.
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "a boolean", Mapping: "a table"}


def _text(name: str, key: str, value: Any) -> str:
    """A TOML value as module-argument text: a string as it is, or a value of a
    type the option's :attr:`~fluxsched_py.engine.options.Syntax.toml` takes (a
    key that is no option takes strings and integers, and is refused by name later)."""
    option = next((o for o in OPTIONS if o.name == key), None)
    types = option.syntax.toml if option is not None else (int,)
    if isinstance(value, bool):
        ok = bool in types
    else:
        ok = isinstance(value, str) or any(t is not bool and isinstance(value, t) for t in types)
    if not ok:
        *first, last = ["a string", *(_TYPE_NAMES[t] for t in types)]
        words = f"{', '.join(first)} or {last}"
        raise ValueError(f"bad config: [{name}] {key}: expected {words}, not {_toml_type(value)}")
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_options(conf: Any, name: str, args: Iterable[str] = ()) -> EngineOptions:
    """Options from the ``[name]`` table of ``conf``, then the module ``args``
    (which win).  ValueError with one line: ``bad config: [NAME] ...`` or
    ``bad module argument: ...``."""
    from_conf = queue_parent_args(conf) + config_args(conf, name)
    args = [str(a) for a in args]
    try:
        parse_module_args(args)
    except ValueError as exc:
        raise ValueError(f"bad module argument: {exc}") from None
    return parse_module_args(from_conf + args)


def config_limits(conf: Any, name: str) -> RunLimits | None:
    """The run limits of the instance config (``[name.limits]``, ``policy.scheduler``,
    ``queues.NAME.policy.scheduler``), None when it sets none; user names are
    looked up in the passwd database.  ValueError with one line naming the key."""
    return RunLimits.from_config(conf, name, uid_of=_uid_of)


def _uid_of(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def queue_parent_args(conf: Any) -> list[str]:
    """RFC 33 virtual queues: ``[queues.NAME] parent = "PARENT"`` as a
    ``queue-parent=`` module argument (none when no queue has a parent; the
    ``[name]`` table and the module arguments, read after it, override it).
    flux-core checks the queues table itself; what is not a string is skipped."""
    queues = conf.get("queues") if isinstance(conf, Mapping) else None
    if not isinstance(queues, Mapping):
        return []
    pairs = [
        f"{q}:{t['parent']}"
        for q, t in queues.items()
        if isinstance(t, Mapping) and isinstance(t.get("parent"), str) and t["parent"]
    ]
    return [f"queue-parent={','.join(pairs)}"] if pairs else []


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__
