"""Every parser of the `albert` command, for the tests that check the CLI as a whole (help texts, one
convention): each command's arguments are built as `albert_lm.cli.main.build_parser` builds them."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Parser:
    path: tuple[str, ...]  # ("finetune", "glue")
    parser: argparse.ArgumentParser
    help: str | None  # the one line its parent's --help shows

    @property
    def name(self) -> str:
        return "albert " + " ".join(self.path)

    def options(self) -> dict[str, argparse.Action]:
        """``{option string: action}`` of this parser's own flags (not -h)."""
        return {
            s: a
            for a in self.parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            for s in a.option_strings
        }

    def is_leaf(self) -> bool:
        return not any(isinstance(a, argparse._SubParsersAction) for a in self.parser._actions)


def _children(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str | None]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name)


def all_parsers() -> list[Parser]:
    """Each command and nested subcommand (``albert finetune glue``, ``albert export onnx``), parents first."""
    from albert_lm.cli.main import COMMANDS, build_parser

    out: list[Parser] = []

    def walk(path: tuple[str, ...], parser: argparse.ArgumentParser, help_: str | None) -> None:
        out.append(Parser(path, parser, help_))
        for name, sub, h in _children(parser):
            walk((*path, name), sub, h)

    for command in COMMANDS:
        top = {name: (sub, h) for name, sub, h in _children(build_parser(command))}
        walk((command,), *top[command])
    return out
