"""Sphinx directives that write the manual's option lists from the code.

An option is declared once: an engine option in
:data:`fluxsched_py.engine.options.OPTIONS`, a command's option in its
argparse parser.  These directives read those, so the manual, the man pages
and ``--help`` use the same words and cannot drift apart:

``{engine-options}``
    every engine option as the Flux module takes it (``NAME=VALUE``, the
    ``[sched-py]`` key): its values, its default under Flux, its meaning.
``{binding-options}``
    the Flux binding's own module arguments (``nice``, ``annotate-interval``).
``{argparse} MODULE:FUNCTION``
    the usage, description and options of the parser ``FUNCTION()``
    returns (``:call:`` gives its arguments as a Python tuple), each
    subcommand's after it.
``{command-list}``
    ``fluxsched-py --help``: every subcommand and its one line.
``{path-command} NAME``
    the usage and purpose of ``fluxsched-py NAME`` (``module-path`` ...).

Usages are wrapped at a fixed width, not the terminal's, so that a build
gives the same pages on every machine.
"""

from __future__ import annotations

import argparse
import ast
import importlib

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

#: Columns of a usage in the manual (argparse wraps ``--help`` at the terminal's).
WIDTH = 78


def _para(text: str) -> nodes.paragraph:
    return nodes.paragraph(text, text)


def _item(term: str, text: str) -> nodes.definition_list_item:
    return nodes.definition_list_item(
        "", nodes.term("", "", nodes.literal(term, term)), nodes.definition("", _para(text))
    )


def _option_list(table, module_defaults) -> nodes.definition_list:
    """One definition per row of an option table (``OPTIONS``, ``BINDING_OPTIONS``)."""
    from fluxsched_py.engine.options import shown_default

    items = nodes.definition_list()
    for o in table:
        if o.syntax.switch:
            values = "true|false"
        else:
            values = "|".join(o.syntax.choices) or o.syntax.metavar or "VALUE"
        default = module_defaults.get(o.name) or shown_default(o.default)
        if o.syntax.switch:
            default = str(o.default).lower()
        text = f"{o.meaning}. Default: {default}."
        if o.module_only:
            text += f" No command-line flag: {o.module_only}."
        items += _item(f"{o.name}={values}", text)
    return items


class EngineOptions(SphinxDirective):
    """The table of engine options, one definition per row of ``OPTIONS``."""

    def run(self) -> list[nodes.Node]:
        from fluxsched_py.engine.options import OPTIONS
        from fluxsched_py.flux.wire import FLUX_DEFAULT_POLICY

        # The module's own defaults, where they are not the engine's (wire.py).
        return [_option_list(OPTIONS, {"policy": FLUX_DEFAULT_POLICY})]


class BindingOptions(SphinxDirective):
    """The Flux binding's own module arguments, one definition per row of ``BINDING_OPTIONS``."""

    def run(self) -> list[nodes.Node]:
        from fluxsched_py.flux.wire import BINDING_OPTIONS

        return [_option_list(BINDING_OPTIONS, {})]


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return parser.formatter_class(prog=parser.prog, width=WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    f = _formatter(parser)
    f.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return f.format_help().strip()


def _parser_nodes(parser: argparse.ArgumentParser) -> list[nodes.Node]:
    """Usage, description, then each group of options as a definition list
    (the words of ``--help``), then each subcommand the same way."""
    usage = _usage(parser)
    out: list[nodes.Node] = [nodes.literal_block(usage, usage)]
    if parser.description:
        out.append(_para(parser.description))
    formatter = _formatter(parser)
    subparsers: list[argparse._SubParsersAction] = []
    for group in parser._action_groups:
        items = nodes.definition_list()
        for action in group._group_actions:
            if isinstance(action, argparse._SubParsersAction):
                subparsers.append(action)
                continue
            if action.help == argparse.SUPPRESS:
                continue
            words = formatter._expand_help(action) if action.help else ""
            items += _item(formatter._format_action_invocation(action), words)
        if len(items):
            out.append(nodes.rubric(group.title, group.title))
            if group.description:
                out.append(_para(group.description))
            out.append(items)
    for action in subparsers:
        helps = {c.dest: c.help for c in action._choices_actions}
        for name, sub in action.choices.items():
            title = sub.prog
            out.append(nodes.rubric(title, title))
            if helps.get(name):
                out.append(_para(helps[name]))
            out.extend(_parser_nodes(sub))
    return out


class Argparse(SphinxDirective):
    """A command's options, from the parser its code parses the command line with."""

    required_arguments = 1
    option_spec = {"call": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        module, _, func = self.arguments[0].partition(":")
        build = getattr(importlib.import_module(module), func)
        args = ast.literal_eval(self.options["call"]) if "call" in self.options else ()
        return _parser_nodes(build(*args))


class CommandList(SphinxDirective):
    """``fluxsched-py --help``, as the command prints it."""

    def run(self) -> list[nodes.Node]:
        from fluxsched_py.cli import usage

        text = usage()
        return [nodes.literal_block(text, text)]


class PathCommand(SphinxDirective):
    """A ``fluxsched-py *-path`` command: it takes no options and prints one folder."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from fluxsched_py.flux.paths import purpose

        name = self.arguments[0]
        usage = f"usage: fluxsched-py {name}"
        return [nodes.literal_block(usage, usage), _para(purpose(name))]


def setup(app):
    app.add_directive("engine-options", EngineOptions)
    app.add_directive("binding-options", BindingOptions)
    app.add_directive("argparse", Argparse)
    app.add_directive("command-list", CommandList)
    app.add_directive("path-command", PathCommand)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
