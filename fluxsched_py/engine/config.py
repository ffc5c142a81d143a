"""An instance's TOML config, read the same way by every driver.

A site writes one file for its Flux instance: ``[sched-py]`` holds the
engine options (the keys are the names of :data:`~.options.OPTIONS`), its
``limits`` sub-table and RFC 33's ``policy.scheduler`` tables hold the run
limits (:mod:`.runlimits`), and ``[queues.NAME] parent`` keys make virtual
queues (``queue-parent``).  The Flux module reads it from the broker
(:mod:`fluxsched_py.flux.siteconf`); the simulators read it from a file
with :func:`read_config`, so a site can try its own config on a trace or
under Batsim: ``batsim --config`` and ``replay --config`` take its options
and limits as the module would apply them, a flag given winning over the
file (and the replay's ``--compare`` over the file's queue policy).

Every option's value goes through the same checks here whatever reads it:
a TOML string is the module argument's text; otherwise the value must be of
a type the option takes (:attr:`~.options.Syntax.toml`).  An unknown key or
a bad value is a ``ValueError`` whose one-line message names the table, the
key and the reason.

No I/O but :func:`read_config`'s one read of the file, and no ``flux`` import.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import FluxschedError
from ..inputs import read_text
from .options import OPTIONS, EngineOptions
from .runlimits import RunLimits
from .states import EngineError

__all__ = [
    "LIMITS_KEY",
    "NOT_OPTIONS",
    "ConfigError",
    "SiteConfig",
    "config_args",
    "queue_parent_args",
    "read_config",
]

#: The key of ``[sched-py]`` that holds limits, not an option.
LIMITS_KEY = "limits"

#: Keys of the table that are no option: ``[[sched-py.reservation]]``
#: entries (advance reservations, :mod:`fluxsched_py.flux.reservestore`) and
#: ``[sched-py.power]`` (the power model and programs, :mod:`fluxsched_py.flux.powerctl`).
NOT_OPTIONS = frozenset({"reservation", "power"})

#: TOML value types, as an error names them.
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "a boolean", Mapping: "a table"}


class ConfigError(FluxschedError, ValueError):
    """A config file that cannot be used; the message starts with the file."""


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
            continue  # the limits and the module's own tables are read elsewhere
        arg = f"{key}={_text(name, key, value)}"
        try:
            EngineOptions.parse([arg])
        except EngineError as exc:
            raise ValueError(f"bad config: [{name}] {exc}") from None
        out.append(arg)
    return out


def _text(name: str, key: str, value: Any) -> str:
    """A TOML value as module-argument text: a string as it is, or a value of a
    type the option's :attr:`~.options.Syntax.toml` takes (a key that is no
    option takes strings and integers, and is refused by name later)."""
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


@dataclass(frozen=True, slots=True)
class SiteConfig:
    """What a simulator takes from a config file: the engine options it sets
    (by option name, as module-argument text, in the module's order: virtual
    queues first, then ``[sched-py]``), and the run limits (None: none set).
    A driver's own defaults go under ``options`` and its command-line flags
    over them (:func:`~.options.from_flags`), as module arguments go over
    the table under Flux."""

    options: Mapping[str, str] = field(default_factory=dict)
    limits: RunLimits | None = None
    #: ``[sched-py]`` keys the simulators do not read (``reservation``, ``power``).
    ignored: tuple[str, ...] = ()


def read_config(path: str, uid_of: Callable[[str], int], name: str = "sched-py") -> SiteConfig:
    """The options and limits of the TOML file ``path``; ``uid_of`` turns a
    user name of the limits into a uid.  Raises :class:`ConfigError`,
    ``PATH: reason`` (the key named), for a file that cannot be read, is not
    TOML, or holds an unknown key or a bad value."""
    try:
        conf = tomllib.loads(read_text(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a TOML file: {exc}") from None
    try:
        args = queue_parent_args(conf) + config_args(conf, name)
        limits = RunLimits.from_config(conf, name, uid_of=uid_of)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    options: dict[str, str] = {}
    for arg in args:
        key, _, value = arg.partition("=")
        options[key] = value
    own = conf.get(name)
    ignored = tuple(sorted(k for k in own if k in NOT_OPTIONS)) if isinstance(own, Mapping) else ()
    return SiteConfig(options, limits, ignored)
