"""Engine options: one table of (name, syntax, default, meaning).

:data:`OPTIONS` is the only place an engine option is declared.  Every
spelling of it is made from there:

* ``flux module load sched-py queue-policy=easy reserve-depth=4 ...`` and
  the ``[sched-py]`` keys of the instance config (:meth:`EngineOptions.parse`;
  the TOML types a key takes are its :attr:`Syntax.toml`);
* the replay's and the Batsim driver's flags, ``--queue-policy easy
  --reserve-depth 4`` (:func:`add_flags` builds them, help text, choices and
  default included; :func:`from_flags` reads them back);
* ``flux module stats``' report of the options in force (:meth:`EngineOptions.as_dict`);
* :class:`EngineOptions`' defaults, and the error messages' names.

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

import argparse
import logging
import math
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, make_dataclass
from typing import Any, get_type_hints

from ..jobspec.fsd import parse_fsd
from ..match.policy import POLICIES as MATCH_POLICIES
from ..policy import POLICIES, REGISTRY
from ..policy.base import POLICY_DEFAULT, PolicyDefault
from .bounds import Bound, parse_bounds
from .states import EngineError

__all__ = [
    "LOG_LEVELS",
    "OPTIONS",
    "EngineOptions",
    "Option",
    "PLACEMENTS",
    "Syntax",
    "add_flags",
    "from_flags",
    "shown_default",
    "values_of",
]

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


def _reserve_depth(key: str, value: Any) -> int | None | PolicyDefault:
    """Like :func:`_depth`; left out, the option is :data:`POLICY_DEFAULT` (each queue policy's own)."""
    return _depth(key, value)


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


def _positive(key: str, value: Any, what: str) -> float:
    """A positive, finite number, else EngineError expecting ``what``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (x > 0 and math.isfinite(x)):
        raise EngineError(f"{key}={value!r}: expected {what}")
    return x


def _seconds(key: str, value: Any) -> float:
    """A positive number of seconds."""
    return _positive(key, value, "a positive number of seconds")


def _watts(key: str, value: Any) -> float | None:
    """A positive, finite number of watts, or None (``none``, ``off`` or empty) for no cap."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "off", "")):
        return None
    what = "a positive number of watts, or 'none'"
    if isinstance(value, bool):
        raise EngineError(f"{key}={value!r}: expected {what}")
    return _positive(key, value, what)


def _span(key: str, value: Any) -> tuple[float, float] | None:
    """``START-END`` in seconds of the driver's clock (END may be ``inf``), or None for always."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "always", "")):
        return None
    text = value if isinstance(value, str) else None
    a, sep, b = (text or "").partition("-")
    try:
        start, end = float(a), float(b)
    except ValueError:
        sep = ""
    if not sep or not (0 <= start < end) or math.isnan(end) or math.isinf(start):
        raise EngineError(f"{key}={value!r}: expected START-END, seconds of the driver's clock with START < END")
    return (start, end)


def _span_report(value: tuple[float, float] | None) -> str | None:
    return None if value is None else f"{value[0]:g}-{value[1]:g}"


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


def _queue_parent(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """``express:batch`` (or a ``{vqueue: parent}`` mapping) -> (virtual queue,
    parent) pairs; a parent may not itself be virtual (RFC 33)."""
    pairs = _affinity(key, value) if value not in ("", None) else ()
    virtual = {v for v, _ in pairs}
    bad = [f"{v}:{p}" for v, p in pairs if p in virtual or p == v]
    if bad:
        raise EngineError(f"{key}={value!r}: a parent may not be a virtual queue: {', '.join(bad)}")
    return pairs


def _bounds(key: str, value: Any) -> tuple[Bound, ...]:
    """``CAMPAIGN[@PROPERTY]:N,...`` (or a mapping) -> bounds (:mod:`.bounds`)."""
    try:
        return parse_bounds(value)
    except ValueError as exc:
        raise EngineError(f"{key}={value!r}: {exc}") from None


def _duration(key: str, value: Any) -> float:
    """An RFC 23 Flux Standard Duration (``60``, ``"90s"``, ``"5m"``), >= 0."""
    try:
        return parse_fsd(value)
    except ValueError as exc:
        raise EngineError(f"{key}={value!r}: {exc}") from None


def _bounds_report(value: tuple[Bound, ...]) -> dict[str, int]:
    return {b.text().rpartition(":")[0]: b.limit for b in value}


def _signal(key: str, value: Any) -> int:
    """A signal: its name (``SIGUSR1``, ``USR1``, any case) or its number (1..64)."""
    text = str(value).strip()
    if text.isdigit() and 0 < int(text) < 65:
        return int(text)
    name = text.upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    sig = getattr(signal.Signals, name, None) if name.isidentifier() else None
    if not isinstance(sig, signal.Signals):
        raise EngineError(f"{key}={value!r}: expected a signal name (e.g. SIGUSR1) or number")
    return int(sig)


def _names(key: str, value: Any) -> tuple[str, ...]:
    """``a,b,c`` (or a TOML list) -> names, without blanks or repeats."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    names = tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))
    if any(any(c.isspace() for c in n) for n in names):
        raise EngineError(f"{key}={value!r}: expected NAME[,NAME...] with no blanks in a name")
    return names


def _ranks(key: str, value: Any) -> frozenset[int]:
    """An RFC 22 idset of ranks (``0-3,7``), or empty."""
    from ..ids import IdSet

    text = ",".join(str(x) for x in value) if isinstance(value, list | tuple) else str(value).strip()
    if not text:
        return frozenset()
    try:
        return frozenset(IdSet.of(text))
    except (TypeError, ValueError) as exc:
        raise EngineError(f"{key}={value!r}: expected an idset of ranks such as 0-3,7 ({exc})") from None


def _ranks_report(value: frozenset[int]) -> str:
    from ..ids import IdSet

    return str(IdSet(sorted(value)))


def _same(value: Any) -> Any:
    return value


def _pairs_report(value: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(value)


def _reserve_report(value: int | None | PolicyDefault) -> int | str | None:
    """``reserve-depth`` left out is null, unlimited is ``"unlimited"``."""
    return None if value is POLICY_DEFAULT else ("unlimited" if value is None else value)


@dataclass(frozen=True, slots=True)
class Syntax:
    """How one kind of value is written, in each of an option's spellings.

    ``parse`` reads a ``key=value`` module argument's text, a command-line
    flag's text or a TOML value (EngineError names the option);
    ``metavar`` and ``choices`` are what ``--help`` shows (``choices`` also
    let argparse check the value); ``switch`` makes the command-line flag
    one with no value, which sets the value opposite to the default;
    ``toml`` lists the TOML value types a ``[sched-py]`` key takes besides
    strings; ``report`` gives the value as ``flux module stats`` shows it."""

    parse: Callable[[str, Any], Any]
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    switch: bool = False
    toml: tuple[type, ...] = (int,)
    report: Callable[[Any], Any] = _same


def _choices(*choices: str) -> Syntax:
    return Syntax(_choice(choices), choices=choices)


#: A list of NAME:VALUE pairs in TOML: a table (an integer is taken as text, and refused by the parser).
_PAIRS_TOML = (int, Mapping)
#: true/false: a TOML boolean too, and a command-line flag with no value.
_SWITCH = Syntax(_bool, switch=True, toml=(bool, int))


@dataclass(frozen=True, slots=True)
class Option:
    """One row of :data:`OPTIONS`.  ``field`` is the :class:`EngineOptions`
    attribute it sets (``mode`` sets ``queue_depth``, as an alias: the first
    option of a field is the one reported).  ``module_only`` says why an
    option is a Flux module argument (and ``[sched-py]`` key) but no
    command-line flag; empty, it is all three."""

    name: str
    field: str
    syntax: Syntax
    default: Any
    meaning: str
    module_only: str = ""

    @property
    def dest(self) -> str:
        """The attribute an argparse flag of this option stores its text in."""
        return self.name.replace("-", "_")

    def parse(self, value: Any) -> Any:
        """``value`` (text, or a TOML or JSON value) parsed; EngineError names the option."""
        return self.syntax.parse(self.name, value)


#: Every engine option, in the order error messages, ``--help`` and ``flux
#: module stats`` list them.  Each driver spells them from here: module
#: arguments and ``[sched-py]`` keys (:meth:`EngineOptions.parse`), the
#: replay's and the Batsim driver's flags (:func:`add_flags`, :func:`from_flags`).
OPTIONS: tuple[Option, ...] = (
    Option("queue-policy", "queue_policy", _choices(*POLICIES), "fcfs",
           "the queue policy of every queue not named in queue-policy-per-queue"),
    Option("queue-policy-per-queue", "queue_policy_per_queue",
           Syntax(_per_queue, "QUEUE:POLICY,...", toml=_PAIRS_TOML, report=_pairs_report), (),
           "a named queue's own queue policy (Fluxion's spelling; commas or spaces separate the pairs)"),
    Option("policy", "placement", _choices(*PLACEMENTS), "first",
           "the placement policy: the matcher's node and core order"),
    Option("queue-depth", "queue_depth", Syntax(_depth, "N"), None,
           "pending jobs a pass considers, over all queues (N or unlimited); also the RFC 27 ready mode "
           "(limited with that limit, else unlimited)"),
    Option("mode", "queue_depth", Syntax(_mode, "unlimited|limited=N"), None,
           "sched-simple's spelling of queue-depth: mode=unlimited or mode=limited=N",
           module_only="sched-simple's spelling; a command line has --queue-depth"),
    Option("reserve-depth", "reserve_depth", Syntax(_reserve_depth, "N", report=_reserve_report), POLICY_DEFAULT,
           "jobs a queue policy reserves (fcfs: forecasts) per pass, N or unlimited; easy always reserves "
           "for the head only"),
    Option("annotate-depth", "annotate_depth", Syntax(_annotate_depth, "N"), 64,
           "pending jobs, from the head of each queue, that get reason_pending and jobs_ahead "
           "(every reserved job gets t_estimate); 0 none, or unlimited"),
    Option("log-level", "log_level", Syntax(_log_level, "LEVEL"), "info",
           "the Flux module's log level (syslog's or Python's names); the engine never sets a level",
           module_only="the Flux module owns its logging; a command line has its own (batsim: -v, -q)"),
    Option("preempt-victims", "preempt_victims", _choices("plan", "fewest"), "plan",
           "which best-effort jobs a regular job preempts: plan, those on the placement its plan "
           "chose (regular jobs start exactly as with no best-effort load); fewest, the fewest "
           "jobs, then the least lost work (the placement may differ from the plan's)"),
    Option("predict-runtimes", "predict_runtimes", _SWITCH, False,
           "EASY++ (Tsafrir et al. 2007): plan with the mean of the user's last two run times, "
           "capped at the walltime, instead of the walltime"),
    Option("predict-history", "predict_history", Syntax(_choice_int((1, 2)), choices=("1", "2")), 1,
           "EASY++: completed jobs of a user before their run times are trusted (1: from the first, "
           "one job's run time alone; 2: as Gaussier et al.'s predictsim); before, the walltime"),
    Option("predict-correction", "predict_correction", _choices("increment", "walltime"), "increment",
           "EASY++: a running job that reaches its prediction is planned longer: increment, the paper's "
           "rule (its first prediction + 1 min, then + 5 min, 15 min, 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, "
           "50 h, 100 h, capped at the walltime); walltime, to its walltime at once"),
    Option("backfill-order", "backfill_order", _choices("queue", "sjbf"), "queue",
           "easy: the order backfill candidates are tried in: queue, the queue's; sjbf, shortest planned "
           "duration first (the prediction under predict-runtimes, else the walltime), as EASY++ does"),
    Option("reservation-nodes", "reservation_nodes", _choices("pinned", "counted"), "pinned",
           "what a reservation of whole nodes holds: pinned, the nodes chosen when it was made; counted, "
           "a number of nodes, named again when they are needed (Mu'alem and Feitelson's profile of "
           "free nodes: jobs may start earlier, none later)"),
    Option("affinity", "affinity", Syntax(_affinity, "NAME:PROPERTY,...", toml=_PAIRS_TOML, report=_pairs_report), (),
           "a user's (name or uid) or a campaign's jobs start on nodes with that property when they fit "
           "there now, else on any free nodes"),
    Option("campaign-half-life", "campaign_half_life", Syntax(_seconds, "SECONDS", toml=(int, float)), 86400.0,
           "half-life in seconds of a campaign's decayed usage (fair share among default campaigns)"),
    Option("campaign-predictor", "campaign_predictor", _SWITCH, True,
           "start a best-effort job first where its campaign's predicted run time ends before a "
           "regular reservation claims the nodes (less work lost to preemption)"),
    Option("sink-jobs", "sink_jobs", Syntax(_count, "N"), 5,
           "drain a node where a campaign's last N jobs each ended in under a tenth of its median "
           "run time (the sink effect); 0 off"),
    Option("queue-parent", "queue_parent",
           Syntax(_queue_parent, "VQUEUE:PARENT,...", toml=_PAIRS_TOML, report=_pairs_report), (),
           "virtual queues (RFC 33 queues.NAME.parent): a job of VQUEUE waits in PARENT's queue, in one "
           "priority order with PARENT's own jobs, under PARENT's policy; under Flux also read from the "
           "instance config's [queues.NAME] parent keys"),
    Option("duplicates", "duplicates", Syntax(_count, "N"), 0,
           "end-of-campaign duplication: when a campaign's jobs all run and nodes are idle, copies of "
           "the job with the longest predicted remaining run time, at most N live copies per job; the "
           "first to finish wins, the others are cancelled; 0 off"),
    Option("duplicates-running", "duplicates_running", Syntax(_depth, "N"), None,
           "end-of-campaign duplication: at most N live copies (asked for, pending or running) in all, "
           "or unlimited"),
    Option("campaign-max-running", "campaign_max_running",
           Syntax(_bounds, "CAMPAIGN[@PROPERTY]:N,...", toml=_PAIRS_TOML, report=_bounds_report), (),
           "at most N running jobs of a campaign (* each campaign), or of its jobs on nodes with PROPERTY; "
           "pending best-effort jobs past a bound are held, reason_pending names it"),
    Option("preempt-grace", "preempt_grace", Syntax(_duration, "FSD", toml=(int, float)), 0.0,
           "notice a best-effort victim gets before it is preempted (a Flux Standard Duration, e.g. 60s): "
           "it is sent preempt-signal that long before a regular reservation's start, or when a regular "
           "job that can start now needs its resources (that job then waits at most this long); a job's "
           "attributes.system.preempt-grace may ask for less"),
    Option("preempt-signal", "preempt_signal", Syntax(_signal, "SIGNAL"), int(signal.SIGUSR1),
           "the signal a best-effort victim gets as its notice (a name such as SIGUSR1, or a number)"),
    Option("checkpoint-campaigns", "checkpoint_campaigns", Syntax(_names, "NAME,...", report=list), (),
           "campaigns whose jobs all checkpoint on the notice signal, as attributes.user.checkpoint=signal "
           "says of one job: a preempted one is requeued with its remaining work"),
    Option("besteffort-fit", "besteffort_fit", _choices("prefer", "require"), "require",
           "where a pending best-effort job starts: require, only where its campaign's predicted run "
           "time ends before a regular reservation claims the nodes (it waits otherwise: less work lost "
           "to preemption); prefer, there first, else on any free nodes"),
    Option("preempt-wait", "preempt_wait", _choices("grace", "checkpoint", "none"), "grace",
           "which victims a regular job that can start now waits for when their notice (preempt-grace) is "
           "not over: grace, every victim; checkpoint, only victims that checkpoint on the notice (the "
           "others are preempted at once, so regular jobs start as with no grace time); none, no victim"),
    Option("power-save", "power_save", _choices("off", "idle", "planned"), "off",
           "switch idle nodes off (needs a power model per node): idle, a node idle for power-idle-time "
           "(Slurm's SuspendTime), a job that needs it waits for its boot; planned, never a node a pending "
           "job is reserved on (it may start there before its planned start), and a sleeping node it is "
           "reserved on is woken a boot before that start, or at once when as many of its nodes wait on "
           "for it; off, never"),
    Option("power-idle-time", "power_idle_time", Syntax(_duration, "FSD", toml=(int, float)), 60.0,
           "how long a node is idle before power-save may switch it off (a Flux Standard Duration)"),
    Option("power-keep-on", "power_keep_on", Syntax(_count, "N"), 0,
           "power-save keeps at least N idle nodes on, so short jobs do not wait for a boot"),
    Option("power-exclude", "power_exclude", Syntax(_ranks, "IDSET", report=_ranks_report), frozenset(),
           "ranks power-save never switches off (Slurm's SuspendExcNodes)"),
    Option("power-rate", "power_rate", Syntax(_depth, "N"), None,
           "power-save switches at most N nodes off a minute (Slurm's SuspendRate), or unlimited"),
    Option("power-cap", "power_cap", Syntax(_watts, "WATTS", toml=(int, float)), None,
           "a machine-wide power budget: a job starts only if the machine's planned draw, idle nodes "
           "included, stays at most WATTS over its whole run (its walltime); reservations and t_estimate "
           "plan around it; none, no cap (needs a power model per node and power-save=off)"),
    Option("power-cap-window", "power_cap_window", Syntax(_span, "START-END", report=_span_report), None,
           "when power-cap applies: from START to END, seconds of the driver's clock (the replay's and "
           "Batsim's simulated time, Unix time under Flux); none, always"),
)  # fmt: skip

_BY_NAME = {o.name: o for o in OPTIONS}
#: The options reported by :meth:`EngineOptions.as_dict`: the first of each field (not its aliases).
_REPORTED = tuple(o for o in OPTIONS if next(x for x in OPTIONS if x.field == o.field) is o)


class _Parsed:
    """What :class:`EngineOptions` does besides holding the values."""

    __slots__ = ()

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
            kw[option.field] = option.parse(value)
        return cls(**kw)

    def as_dict(self) -> dict[str, Any]:
        """The options by name, as the Flux module's stats report them
        (``reserve-depth`` left out is null, unlimited is ``"unlimited"``;
        an alias such as ``mode`` is reported under the option it spells)."""
        return {o.name: o.syntax.report(getattr(self, o.field)) for o in _REPORTED}


def values_of(name: str, table: Iterable[Option], doc: str, module: str, bases: tuple[type, ...] = ()) -> type:
    """A frozen dataclass with one field per option of ``table`` (an alias
    shares the field of the first option that names it), made from the
    table so that no field, type or default is written twice: a field's
    type is what its option's parser returns, its default the option's.
    ``module`` is where pickle finds the class."""
    rows: dict[str, Option] = {}
    for o in table:
        rows.setdefault(o.field, o)
    fields = [(o.field, get_type_hints(o.syntax.parse)["return"], field(default=o.default)) for o in rows.values()]
    cls = make_dataclass(name, fields, bases=bases, frozen=True, slots=True)
    cls.__module__, cls.__doc__ = module, doc
    return cls


EngineOptions = values_of(
    "EngineOptions",
    OPTIONS,
    "The engine's options, parsed (see :data:`OPTIONS` for what each means).",
    __name__,
    (_Parsed,),
)


# -- the command lines' flags ---------------------------------------------------


def shown_default(value: Any) -> str:
    """A default as ``--help`` shows it."""
    if value is POLICY_DEFAULT:
        own = ", ".join(f"{name} {cls.default_reserve_depth or 'unlimited'}" for name, cls in REGISTRY.items())
        return f"each queue policy's own: {own}"
    if value is None:
        return "unlimited"
    if value == ():
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def add_flags(
    parser: argparse.ArgumentParser, defaults: Mapping[str, str] | None = None, shown: Mapping[str, str] | None = None
) -> None:
    """Give ``parser`` a flag per engine option (``--queue-policy``, ``--reserve-depth``, ...)
    in an "engine options" group: help from the option's meaning, choices from its
    syntax, the default shown.  ``defaults`` are the driver's own defaults (as
    command-line text), and ``shown`` says in words what a driver does when a flag is
    left out, where that is not a value.  A flag stores its text (None when not
    given) under :attr:`Option.dest`; :func:`from_flags` parses them."""
    defaults = defaults or {}
    shown = shown or {}
    group = parser.add_argument_group(
        "engine options", "the Flux module's arguments (NAME=VALUE) and [sched-py] keys, as flags"
    )
    for o in OPTIONS:
        if o.module_only:
            continue
        if o.syntax.switch:
            on = not o.parse(defaults.get(o.name, o.default))
            text = "true" if on else "false"
            flag = f"--{o.name}" if on else f"--no-{o.name}"
            what = o.meaning if on else f"turn off: {o.meaning}"
            doc = f"{what} ({o.name}={text})".replace("%", "%%")
            group.add_argument(flag, dest=o.dest, action="store_const", const=text, help=doc)
            continue
        default = shown.get(o.name) or shown_default(defaults.get(o.name, o.default))
        group.add_argument(
            f"--{o.name}",
            dest=o.dest,
            choices=o.syntax.choices or None,
            metavar=o.syntax.metavar,
            help=f"{o.meaning} (default: {default})".replace("%", "%%"),
        )


def from_flags(
    args: argparse.Namespace, defaults: Mapping[str, str] | None = None, fixed: Mapping[str, str] | None = None
) -> EngineOptions:
    """The engine options of a command line that :func:`add_flags` built: the driver's
    ``defaults``, overridden by the flags given, overridden by ``fixed`` (what the
    driver sets itself, such as the replay's queue policy of each run); by option
    name.  EngineError names a bad value."""
    values: dict[str, Any] = dict(defaults or {})
    for o in OPTIONS:
        text = None if o.module_only else getattr(args, o.dest)
        if text is not None:
            values[o.name] = text
    values.update(fixed or {})
    return EngineOptions.parse(values)
