"""Engine options are declared once (issue 21): every driver spells them from ``OPTIONS``.

Each option of :data:`~fluxsched_py.engine.options.OPTIONS` is set here
through every driver's own door, and what the driver ends up with is checked
against a hand-written expectation: the replay's flag (its ``--json`` row),
the Batsim driver's flag (its parser, as its ``main`` reads it), the Flux
module's ``key=value`` argument (``flux module stats``' options) and the
``[sched-py]`` key.  And no driver declares an engine option by hand: the
parsers are read back, and the drivers' sources searched for a flag literal.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.batsim import cli as batsim_cli
from fluxsched_py.engine import EngineError, EngineOptions
from fluxsched_py.engine.options import OPTIONS, add_flags, from_flags
from fluxsched_py.flux.siteconf import config_options
from fluxsched_py.flux.wire import BindingArgs
from fluxsched_py.replay import cli as replay_cli

from .shared import CONFORMANCE
from .test_flux_driver import make

ENERGY_PLATFORM = CONFORMANCE / "batsim" / "platforms" / "energy_platform_homogeneous_no_net_128.xml"

PKG = Path(__file__).resolve().parents[1] / "fluxsched_py"
#: The drivers whose flags are engine options (the Flux module takes key=value arguments).
PARSERS = {"replay": replay_cli.build_parser, "batsim": batsim_cli.build_parser}

#: option -> (a value that is not the default, as text; the name ``flux module stats``
#: reports it under; the value reported).  A new option must be added here.
SAMPLES = {
    "queue-policy": ("conservative", "queue-policy", "conservative"),
    "queue-policy-per-queue": ("debug:easy", "queue-policy-per-queue", {"debug": "easy"}),
    "policy": ("high", "policy", "high"),
    "queue-depth": ("7", "queue-depth", 7),
    "mode": ("limited=4", "queue-depth", 4),
    "reserve-depth": ("3", "reserve-depth", 3),
    "annotate-depth": ("5", "annotate-depth", 5),
    "log-level": ("debug", "log-level", "debug"),
    "preempt-victims": ("fewest", "preempt-victims", "fewest"),
    "predict-runtimes": ("true", "predict-runtimes", True),
    "predict-history": ("2", "predict-history", 2),
    "predict-correction": ("walltime", "predict-correction", "walltime"),
    "backfill-order": ("sjbf", "backfill-order", "sjbf"),
    "reservation-nodes": ("counted", "reservation-nodes", "counted"),
    "affinity": ("alice:lyon", "affinity", {"alice": "lyon"}),
    "campaign-half-life": ("60", "campaign-half-life", 60.0),
    "campaign-predictor": ("false", "campaign-predictor", False),
    "sink-jobs": ("0", "sink-jobs", 0),
    "queue-parent": ("express:batch", "queue-parent", {"express": "batch"}),
    "duplicates": ("2", "duplicates", 2),
    "duplicates-running": ("8", "duplicates-running", 8),
    "campaign-max-running": ("*@lyon:100", "campaign-max-running", {"*@lyon": 100}),
    "preempt-grace": ("90s", "preempt-grace", 90.0),
    "preempt-signal": ("SIGTERM", "preempt-signal", 15),
    "checkpoint-campaigns": ("c1,c2", "checkpoint-campaigns", ["c1", "c2"]),
    "besteffort-fit": ("prefer", "besteffort-fit", "prefer"),
    "preempt-wait": ("checkpoint", "preempt-wait", "checkpoint"),
    "power-save": ("planned", "power-save", "planned"),
    "power-idle-time": ("5m", "power-idle-time", 300.0),
    "power-keep-on": ("4", "power-keep-on", 4),
    "power-exclude": ("0-3,7", "power-exclude", "0-3,7"),
    "power-rate": ("10", "power-rate", 10),
    "power-cap": ("20000", "power-cap", 20000.0),
    "power-cap-window": ("3600-7200", "power-cap-window", "3600-7200"),
}
#: Flux module arguments only, by design (the table says why).
MODULE_ONLY = {"mode", "log-level"}
#: ``flux module stats``' options before the table generated them (commit 175c917's hand-written list).
REPORTED_DEFAULTS = {
    "queue-policy": "fcfs",
    "queue-policy-per-queue": {},
    "policy": "first",
    "queue-depth": None,
    "reserve-depth": None,
    "annotate-depth": 64,
    "log-level": "info",
    "preempt-victims": "plan",
    "predict-runtimes": False,
    "predict-history": 1,
    "predict-correction": "increment",
    "backfill-order": "queue",
    "reservation-nodes": "pinned",
    "affinity": {},
    "campaign-half-life": 86400.0,
    "campaign-predictor": True,
    "sink-jobs": 5,
    "queue-parent": {},
    "duplicates": 0,
    "duplicates-running": None,
    "campaign-max-running": {},
    "preempt-grace": 0.0,
    "preempt-signal": 10,
    "checkpoint-campaigns": [],
    "besteffort-fit": "require",
    "preempt-wait": "grace",
    # power saving (issue 36), added after the table made the list
    "power-save": "off",
    "power-idle-time": 60.0,
    "power-keep-on": 0,
    "power-exclude": "",
    "power-rate": None,
    # the power cap (issue 36)
    "power-cap": None,
    "power-cap-window": None,
}


def flag_args(name: str) -> list[str]:
    """The command-line words that give option ``name`` its sample value."""
    text = SAMPLES[name][0]
    if text in ("true", "false"):
        return [f"--{name}" if text == "true" else f"--no-{name}"]
    return [f"--{name}", text]


def test_every_option_has_a_sample_and_the_table_says_which_are_module_only():
    assert set(SAMPLES) == {o.name for o in OPTIONS}
    assert {o.name for o in OPTIONS if o.module_only} == MODULE_ONLY
    assert {f.name for f in dataclasses.fields(EngineOptions)} == {o.field for o in OPTIONS}


def test_stats_report_the_same_options_as_before_the_table_made_them():
    got = EngineOptions().as_dict()
    assert got == REPORTED_DEFAULTS and list(got) == list(REPORTED_DEFAULTS)
    assert EngineOptions.parse(["reserve-depth=unlimited"]).as_dict()["reserve-depth"] == "unlimited"


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - MODULE_ONLY))
def test_each_option_is_a_replay_flag(name, capsys):
    text, reported, value = SAMPLES[name]
    fixed = [] if name == "queue-policy" else ["--queue-policy", "easy"]
    others = {"jobs": 20}
    if name in ("power-save", "power-cap"):  # it needs a power model per node: an energy platform
        if not ENERGY_PLATFORM.exists():
            pytest.skip("needs ../shared/conformance (an energy platform)")
        fixed += ["--platform", str(ENERGY_PLATFORM)]
        others["platform"] = str(ENERGY_PLATFORM)
    assert replay_cli.main(["--jobs", "20", "--json", "--no-progress", *fixed, *flag_args(name)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    if name == "queue-policy":
        assert row["queue_policy"] == value
    elif name == "policy":
        assert row["placement_policy"] == value
    else:
        assert row["options"] == {reported: value, **others}


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - MODULE_ONLY))
def test_each_option_is_a_batsim_flag(name):
    _, reported, value = SAMPLES[name]
    args = batsim_cli.build_parser().parse_args(flag_args(name))
    got = from_flags(args, batsim_cli.ENGINE_DEFAULTS).as_dict()
    want = EngineOptions.parse({"queue-policy": "easy"}).as_dict() | {reported: value}
    assert got == want


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_option_is_a_module_argument_and_a_site_config_key(name):
    text, reported, value = SAMPLES[name]
    if name in ("power-save", "power-cap"):
        # no power model per node without [sched-py.power]: refused, saying so
        with pytest.raises(EngineError, match=f"{name}={text}: no power model for rank 0"):
            make([f"{name}={text}"])
    else:
        d, _ = make([f"{name}={text}"])
        assert d.stats_get()["options"][reported] == value
    o = config_options({"sched-py": {name: text}}, "sched-py")
    assert o.as_dict()[reported] == value


@pytest.mark.parametrize(
    "name, toml",
    [
        ("predict-runtimes", True),
        ("campaign-predictor", False),
        ("campaign-half-life", 60.0),
        ("affinity", {"alice": "lyon"}),
        ("queue-policy-per-queue", {"debug": "easy"}),
        ("reserve-depth", 3),
        ("predict-history", 2),
    ],
)
def test_site_config_keys_take_the_toml_type_of_their_value(name, toml):
    _, reported, value = SAMPLES[name]
    assert config_options({"sched-py": {name: toml}}, "sched-py").as_dict()[reported] == value


@pytest.mark.parametrize(
    "name, toml, words",
    [
        ("reserve-depth", True, "expected a string or an integer, not a boolean"),
        ("sink-jobs", 2.5, "expected a string or an integer, not a float"),
        ("predict-runtimes", 1.0, "expected a string, a boolean or an integer, not a float"),
        ("affinity", ["alice:lyon"], "expected a string, an integer or a table, not an array"),
    ],
)
def test_other_toml_types_are_refused_naming_the_key(name, toml, words):
    with pytest.raises(ValueError) as e:
        config_options({"sched-py": {name: toml}}, "sched-py")
    assert str(e.value) == f"bad config: [sched-py] {name}: {words}"


# -- no engine option declared by hand -------------------------------------------------


def engine_words() -> dict[str, str]:
    """Every command-line word an engine option could be spelled with -> the option's dest."""
    words = {}
    for o in OPTIONS:
        words[f"--{o.name}"] = words[f"--no-{o.name}"] = o.dest
    return words


def hand_declared(parser: argparse.ArgumentParser) -> list[str]:
    """The flags of ``parser`` that spell an engine option (by word or by dest) and
    were not made by :func:`add_flags` (outside its group, or with other help)."""
    generated = {
        a.dest: a
        for g in parser._action_groups  # argparse keeps its groups there and nowhere public
        if g.title == "engine options"
        for a in g._group_actions
    }
    dests = set(engine_words().values())
    bad = []
    for a in parser._actions:
        words = [w for w in a.option_strings if w in engine_words()]
        if not words and a.dest not in dests:
            continue
        o = next((o for o in OPTIONS if o.dest == a.dest), None)
        made = generated.get(a.dest) is a and o is not None and o.meaning in (a.help or "").replace("%%", "%")
        if not made:
            bad.append("/".join(a.option_strings) or a.dest)
    return bad


@pytest.mark.parametrize("driver", sorted(PARSERS))
def test_no_driver_declares_an_engine_option_by_hand(driver):
    parser = PARSERS[driver]()
    assert hand_declared(parser) == []
    flags = {w for a in parser._actions for w in a.option_strings}
    for o in OPTIONS:
        spelled = {f"--{o.name}", f"--no-{o.name}"} & flags
        assert len(spelled) == (0 if o.module_only else 1), (o.name, spelled)


def test_the_hand_declared_check_can_fail():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reserve-depth", help="reservations per pass")
    parser.add_argument("--placement", dest="predict_history")
    assert hand_declared(parser) == ["--reserve-depth", "--placement"]
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert hand_declared(parser) == []


@pytest.mark.parametrize("path", ["replay/cli.py", "batsim/cli.py", "flux/module.py", "flux/driver.py"])
def test_no_driver_source_spells_an_engine_flag(path):
    """No string literal in a driver's source is an engine option's flag (``"--reserve-depth"``)."""
    tree = ast.parse((PKG / path).read_text())
    words = engine_words()
    found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in words]
    assert found == []


def test_the_flux_binding_arguments_are_not_engine_options():
    binding = {f.name.replace("_", "-") for f in dataclasses.fields(BindingArgs)}
    assert binding == {"nice", "annotate-interval"} and not binding & {o.name for o in OPTIONS}


# -- --help and errors --------------------------------------------------------------------


@pytest.mark.parametrize("driver", sorted(PARSERS))
def test_help_shows_each_flag_with_its_choices_and_default(driver):
    text = " ".join(PARSERS[driver]().format_help().split())
    assert "engine options:" in text
    assert "--queue-policy {fcfs,easy,conservative,hybrid}" in text
    assert "--predict-history {1,2}" in text and "--reserve-depth N" in text
    assert "(default: each queue policy's own: fcfs 8, easy 1, conservative unlimited, hybrid 64)" in text
    assert "(default: 86400)" in text and "(campaign-predictor=false)" in text
    policy = {"replay": "compare fcfs, easy, conservative; see --compare", "batsim": "easy"}[driver]
    assert f"queue-policy-per-queue (default: {policy})" in text


@pytest.mark.parametrize(
    "args, text",
    [
        (["--sink-jobs", "-1"], "sink-jobs='-1': expected a non-negative integer (0: off)"),
        (["--affinity", "alice"], "affinity='alice': bad entries 'alice'"),
        (["--policy", "bogus"], "argument --policy: invalid choice: 'bogus'"),
    ],
)
@pytest.mark.parametrize("driver", ["replay", "batsim"])
def test_a_bad_value_is_one_line_naming_the_option(driver, args, text, tmp_path):
    where = ["--socket", f"ipc://{tmp_path}/sock"] if driver == "batsim" else ["--jobs", "5"]
    proc = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", driver, *where, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"fluxsched-py {driver}: ")
    assert text in proc.stderr, proc.stderr
