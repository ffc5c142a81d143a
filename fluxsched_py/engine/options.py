"""Engine options: one table of (name, parser, default, meaning).

``flux module load sched-py queue-policy=easy reserve-depth=4 ...``, the
replay's and the Batsim driver's options all end up here.  :data:`OPTIONS`
is the only place an option is defined: :class:`EngineOptions` takes its
fields and defaults from it, :meth:`EngineOptions.parse` its parsers, and
error messages its names.

Conventions, the same for every option:

* names are spelled with hyphens, as on the command line (``log_level`` is
  refused with a hint);
* a depth of ``None`` means unlimited (``unlimited``, ``0`` or an empty
  value on the command line); ``reserve-depth`` left out is
  :data:`~fluxsched_py.policy.base.POLICY_DEFAULT`: each queue policy uses
  its own default;
* the placement policy (``policy=``, Fluxion's name, the matcher's node and
  core order) is the field :attr:`EngineOptions.placement`; the queue policy
  is :attr:`EngineOptions.queue_policy`.  Nothing is called just "policy".
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..match.policy import POLICIES as MATCH_POLICIES
from ..policy import POLICIES
from ..policy.base import POLICY_DEFAULT, PolicyDefault
from .states import EngineError

__all__ = ["LOG_LEVELS", "OPTIONS", "EngineOptions", "Option", "PLACEMENTS"]

#: ``log-level=`` values (syslog's names and Python's) -> logging levels.
LOG_LEVELS = {
    "emerg": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "crit": logging.CRITICAL,
    "critical": logging.CRITICAL,
    "err": logging.ERROR,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "notice": logging.INFO,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}

#: ``policy=`` values the engine accepts (the matcher has a few more, for resource-query).
PLACEMENTS = ("first", "low", "high", "worstfit", "lonodex", "hinodex", "locality", "variation", "network")
assert all(p in MATCH_POLICIES for p in PLACEMENTS)


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if value not in choices:
            raise EngineError(f"{key}={value!r}: choose from {', '.join(choices)}")
        return value

    return parse


def _choice_int(choices: tuple[int, ...]) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        text = str(value).strip()
        if text not in {str(c) for c in choices}:
            raise EngineError(f"{key}={value!r}: choose from {', '.join(map(str, choices))}")
        return int(text)

    return parse


def _log_level(key: str, value: Any) -> str:
    if str(value).lower() not in LOG_LEVELS:
        raise EngineError(f"{key}={value!r}: choose from {', '.join(LOG_LEVELS)}")
    return str(value).lower()


def _depth(key: str, value: Any) -> int | None:
    """A positive integer, or None for ``unlimited`` (also ``0`` or empty)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "0", ""):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise EngineError(f"{key}={value!r}: expected a positive integer or 'unlimited'") from None
    if n < 0:
        raise EngineError(f"{key}={value!r}: expected a positive integer or 'unlimited'")
    return n or None


def _annotate_depth(key: str, value: Any) -> int | None:
    """Like :func:`_depth`, but ``0`` is zero: annotate no pending job."""
    if str(value).strip() in ("0",) or value == 0:
        return 0
    return _depth(key, value)


def _mode(key: str, value: Any) -> int | None:
    """sched-simple's spellings of the ready mode: ``unlimited``, ``limited=N``."""
    value = str(value)
    if value == "unlimited":
        return None
    n = value[len("limited=") :] if value.startswith("limited=") else ""
    if not n.isdigit() or int(n) < 1:
        raise EngineError(f"{key}={value!r}: expected 'unlimited' or 'limited=N' with N a positive integer")
    return int(n)


def _per_queue(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """``debug:fcfs,batch:easy`` (or a ``{queue: policy}`` mapping) -> pairs;
    EngineError names every bad entry."""
    if isinstance(value, Mapping):
        entries = [f"{k}:{v}" for k, v in value.items()]
    else:
        entries = str(value).replace(",", " ").split()
    pairs: dict[str, str] = {}
    bad: list[str] = []
    for entry in entries:
        name, sep, pol = entry.partition(":")
        name, pol = name.strip(), pol.strip()
        if not sep or not name or pol not in POLICIES:
            bad.append(repr(entry))
        elif name in pairs:
            bad.append(f"{entry!r} (queue {name!r} listed twice)")
        else:
            pairs[name] = pol
    if bad or not entries:
        what = f"bad entries {', '.join(bad)}" if bad else "no entries"
        raise EngineError(
            f"{key}={value!r}: {what}; expected QUEUE:POLICY[,QUEUE:POLICY...] with POLICY one of {', '.join(POLICIES)}"
        )
    return tuple(pairs.items())


def _bool(key: str, value: Any) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``, or a bool)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise EngineError(f"{key}={value!r}: expected true or false")


def _seconds(key: str, value: Any) -> float:
    """A positive number of seconds."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (x > 0 and math.isfinite(x)):
        raise EngineError(f"{key}={value!r}: expected a positive number of seconds")
    return x


def _count(key: str, value: Any) -> int:
    """A non-negative integer (0 turns the feature off)."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise EngineError(f"{key}={value!r}: expected a non-negative integer (0: off)")
    return n


def _affinity(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """``alice:lyon,bob:grenoble`` (or a mapping) -> (user or campaign, node property) pairs."""
    entries = [f"{k}:{v}" for k, v in value.items()] if isinstance(value, Mapping) else str(value).split(",")
    pairs: dict[str, str] = {}
    bad: list[str] = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        name, sep, prop = (x.strip() for x in entry.partition(":"))
        if not sep or not name or not prop or ":" in prop or any(c.isspace() for c in name + prop):
            bad.append(repr(entry))
        elif name in pairs:
            bad.append(f"{entry!r} ({name!r} listed twice)")
        else:
            pairs[name] = prop
    if bad:
        raise EngineError(f"{key}={value!r}: bad entries {', '.join(bad)}; expected NAME:PROPERTY[,NAME:PROPERTY...]")
    return tuple(pairs.items())


@dataclass(frozen=True, slots=True)
class Option:
    """One row of :data:`OPTIONS`.  ``field`` is the :class:`EngineOptions`
    attribute it sets (``mode`` sets ``queue_depth``, as an alias)."""

    name: str
    field: str
    parse: Callable[[str, Any], Any]
    default: Any
    meaning: str


#: Every engine option, in the order error messages list them.
OPTIONS: tuple[Option, ...] = (
    Option("queue-policy", "queue_policy", _choice(POLICIES), "fcfs",
           "the queue policy of every queue not named in queue-policy-per-queue"),
    Option("queue-policy-per-queue", "queue_policy_per_queue", _per_queue, (),
           "QUEUE:POLICY pairs (Fluxion's spelling; commas or spaces separate them)"),
    Option("reserve-depth", "reserve_depth", _depth, POLICY_DEFAULT,
           "reservations (fcfs: forecasts) a queue policy makes per pass; None unlimited; "
           "left out, each policy's own default"),
    Option("queue-depth", "queue_depth", _depth, None,
           "pending jobs a pass considers, over all queues; selects the RFC 27 ready mode "
           "(limited when set, unlimited when None)"),
    Option("policy", "placement", _choice(PLACEMENTS), "first",
           "the placement policy: the matcher's node and core order"),
    Option("log-level", "log_level", _log_level, "info",
           "for the driver that owns logging (the Flux module); the engine never sets a level"),
    Option("annotate-depth", "annotate_depth", _annotate_depth, 64,
           "pending jobs, from the head of each queue, that get reason_pending and jobs_ahead "
           "(every reserved job gets t_estimate); 0 none, None unlimited"),
    Option("preempt-victims", "preempt_victims", _choice(("plan", "fewest")), "plan",
           "which best-effort jobs a regular job preempts: plan, those on the placement its plan "
           "chose (regular jobs start exactly as with no best-effort load); fewest, the fewest "
           "jobs, then the least lost work (the placement may differ from the plan's)"),
    Option("mode", "queue_depth", _mode, None,
           "sched-simple's spelling of queue-depth: mode=unlimited or mode=limited=N"),
    Option("predict-runtimes", "predict_runtimes", _bool, False,
           "EASY++ (Tsafrir et al. 2007): plan with the mean of the user's last two run times, "
           "capped at the walltime, instead of the walltime"),
    Option("predict-history", "predict_history", _choice_int((1, 2)), 1,
           "EASY++: completed jobs of a user before their run times are trusted (1: from the first, "
           "one job's run time alone; 2: as Gaussier et al.'s predictsim); before, the walltime"),
    Option("predict-correction", "predict_correction", _choice(("increment", "walltime")), "increment",
           "EASY++: a running job that reaches its prediction is planned longer: increment, the paper's "
           "rule (its first prediction + 1 min, then + 5 min, 15 min, 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, "
           "50 h, 100 h, capped at the walltime); walltime, to its walltime at once"),
    Option("backfill-order", "backfill_order", _choice(("queue", "sjbf")), "queue",
           "easy: the order backfill candidates are tried in: queue, the queue's; sjbf, shortest planned "
           "duration first (the prediction under predict-runtimes, else the walltime), as EASY++ does"),
    Option("affinity", "affinity", _affinity, (),
           "USER-or-CAMPAIGN:PROPERTY pairs: a job starts on nodes with that property when it fits "
           "there now, else on any free nodes"),
    Option("campaign-half-life", "campaign_half_life", _seconds, 86400.0,
           "half-life in seconds of a campaign's decayed usage (fair share among default campaigns)"),
    Option("campaign-predictor", "campaign_predictor", _bool, True,
           "start a best-effort job first where its campaign's predicted run time ends before a "
           "regular reservation claims the nodes (less work lost to preemption)"),
    Option("sink-jobs", "sink_jobs", _count, 5,
           "drain a node where a campaign's last N jobs each ended in under a tenth of its median "
           "run time (the sink effect); 0 off"),
)  # fmt: skip

_BY_NAME = {o.name: o for o in OPTIONS}


def _default(field: str) -> Any:
    return next(o.default for o in OPTIONS if o.field == field)


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The engine's options, parsed (see :data:`OPTIONS` for what each means)."""

    queue_policy: str = _default("queue_policy")
    reserve_depth: int | None | PolicyDefault = _default("reserve_depth")
    queue_depth: int | None = _default("queue_depth")
    placement: str = _default("placement")
    log_level: str = _default("log_level")
    annotate_depth: int | None = _default("annotate_depth")
    queue_policy_per_queue: tuple[tuple[str, str], ...] = _default("queue_policy_per_queue")
    preempt_victims: str = _default("preempt_victims")
    predict_runtimes: bool = _default("predict_runtimes")
    predict_history: int = _default("predict_history")
    predict_correction: str = _default("predict_correction")
    backfill_order: str = _default("backfill_order")
    affinity: tuple[tuple[str, str], ...] = _default("affinity")
    campaign_half_life: float = _default("campaign_half_life")
    campaign_predictor: bool = _default("campaign_predictor")
    sink_jobs: int = _default("sink_jobs")

    @classmethod
    def parse(cls, args: Iterable[str] | Mapping[str, Any] | None = None) -> EngineOptions:
        """Options from ``key=value`` strings or a mapping; raises EngineError."""
        if args is None:
            return cls()
        if isinstance(args, Mapping):
            items = [(str(k), v) for k, v in args.items()]
        else:
            items = []
            for arg in args:
                key, sep, value = str(arg).partition("=")
                if not sep:
                    raise EngineError(f"option {arg!r}: expected key=value")
                items.append((key, value))
        kw: dict[str, Any] = {}
        for key, value in items:
            k = key.strip()
            if "_" in k:
                raise EngineError(f"unknown option {key!r} (did you mean {k.replace('_', '-')!r}?)")
            option = _BY_NAME.get(k)
            if option is None:
                raise EngineError(f"unknown option {key!r} (known: {', '.join(_BY_NAME)})")
            kw[option.field] = option.parse(k, value)
        return cls(**kw)

    def as_dict(self) -> dict[str, Any]:
        """The options by name, as the Flux module's stats report them
        (``reserve-depth`` left out is null, unlimited is ``"unlimited"``)."""
        rd = self.reserve_depth
        return {
            "queue-policy": self.queue_policy,
            "queue-policy-per-queue": dict(self.queue_policy_per_queue),
            "policy": self.placement,
            "queue-depth": self.queue_depth,
            "reserve-depth": None if rd is POLICY_DEFAULT else ("unlimited" if rd is None else rd),
            "annotate-depth": self.annotate_depth,
            "log-level": self.log_level,
            "preempt-victims": self.preempt_victims,
            "predict-runtimes": self.predict_runtimes,
            "predict-history": self.predict_history,
            "predict-correction": self.predict_correction,
            "backfill-order": self.backfill_order,
            "affinity": dict(self.affinity),
            "campaign-half-life": self.campaign_half_life,
            "campaign-predictor": self.campaign_predictor,
            "sink-jobs": self.sink_jobs,
        }
