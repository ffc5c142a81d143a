"""The module's options from the instance's TOML config: the ``[sched-py]`` table.

A site configures the scheduler where it configures the rest of Flux::

    [sched-py]
    queue-policy = "easy"
    reserve-depth = 32
    queue-policy-per-queue = { debug = "fcfs" }   # or "debug:fcfs,batch:easy"

The keys are the module arguments' (``queue-policy``, ``reserve-depth``,
``queue-depth``, ``policy``, ``annotate-depth``, ``log-level``,
``queue-policy-per-queue``, ``mode``).  The table is named after the module
(``flux module load --name=NAME`` reads ``[NAME]``).  Module arguments
override the table.  Values are TOML strings or integers
(``queue-policy-per-queue`` may also be a table); anything else, an unknown
key or a bad value is a ``ValueError`` whose one-line message names the
table, the key and the reason.

No ``flux`` import: :mod:`fluxsched_py.flux.module` fetches the config
(``config.get`` at load, the ``<name>.config-reload`` request payload on
``flux config reload``) and calls :func:`config_options`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine import EngineError, EngineOptions
from .wire import parse_module_args

__all__ = ["config_args", "config_options"]


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
        if isinstance(value, Mapping) and key == "queue-policy-per-queue":
            text = ",".join(f"{q}:{p}" for q, p in value.items())
        elif isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"bad config: [{name}] {key}: expected a string or an integer, not {_toml_type(value)}")
        else:
            text = str(value)
        arg = f"{key}={text}"
        try:
            EngineOptions.parse([arg])
        except EngineError as exc:
            raise ValueError(f"bad config: [{name}] {exc}") from None
        out.append(arg)
    return out


def config_options(conf: Any, name: str, args: Iterable[str] = ()) -> EngineOptions:
    """Options from the ``[name]`` table of ``conf``, then the module ``args``
    (which win).  ValueError with one line: ``bad config: [NAME] ...`` or
    ``bad module argument: ...``."""
    from_conf = config_args(conf, name)
    args = [str(a) for a in args]
    try:
        parse_module_args(args)
    except ValueError as exc:
        raise ValueError(f"bad module argument: {exc}") from None
    return parse_module_args(from_conf + args)


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
