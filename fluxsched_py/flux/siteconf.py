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
:mod:`fluxsched_py.engine.runlimits`), not options.  The reading of the
table is :mod:`fluxsched_py.engine.config`'s, which the simulators' ``--config``
share.

No ``flux`` import: :mod:`fluxsched_py.flux.module` fetches the config
(``config.get`` at load, the ``<name>.config-reload`` request payload on
``flux config reload``) and calls :func:`config_options`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.config import LIMITS_KEY, NOT_OPTIONS, config_args, queue_parent_args
from ..engine.options import EngineOptions
from ..engine.runlimits import RunLimits
from .wire import parse_module_args

__all__ = ["LIMITS_KEY", "NOT_OPTIONS", "config_args", "config_limits", "config_options", "queue_parent_args"]


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
