"""Help texts are written for users: every command and flag explains itself, the task list is complete
(SQuAD was missing), and no developer docstring (module paths, class names) shows up in ``--help``."""

from __future__ import annotations

import argparse
import re

import pytest
from cli_parsers import all_parsers

PARSERS = all_parsers()

# developer references: a module path (albert_lm.runtime.precision), a CamelCase class name in backticks
# (`SquadTask`), a docstring section. `python -m albert_lm.cli.main` in a command line is for users.
DEVELOPER = re.compile(
    r"(?<!-m )\balbert_lm\.[a-z_]+\.[\w.]+|`[A-Za-z_.]*[a-z][A-Z]\w*`|`[A-Z][a-z]+[A-Z]\w*`|\b(?:Args|Raises|Returns):"
)


def _texts(p) -> list[tuple[str, str]]:
    out = [("help", p.help or ""), ("description", p.parser.description or "")]
    for action in p.parser._actions:
        if action.help and action.help != argparse.SUPPRESS:
            out.append(("/".join(action.option_strings) or action.dest, action.help))
    return out


def test_the_developer_pattern_catches_what_it_is_for() -> None:
    caught = [
        "auto: bf16 else fp32 (albert_lm.runtime.precision).",
        "AlbertConfig preset (albert_lm.config.PRESETS)",
        "the presets, `SquadTask`, and its command-line",
        "one task class (`albert_lm.tasks.classification.ClassificationTask`).",
    ]
    fine = ["torchrun -m albert_lm.cli.main pretrain", "`albert params --preset NAME`", "`--init`"]
    assert all(DEVELOPER.search(t) for t in caught) and not any(DEVELOPER.search(t) for t in fine)


@pytest.mark.parametrize("p", PARSERS, ids=lambda p: p.name)
def test_help_is_for_users(p) -> None:
    assert (p.help or "").strip(), f"{p.name}: no one-line help"
    missing = [flag for flag in p.options() if flag.startswith("--") and not p.options()[flag].help]
    assert not missing, f"{p.name}: flags without help: {missing}"
    bad = [f"{where}: {m.group()}" for where, text in _texts(p) for m in DEVELOPER.finditer(text)]
    assert not bad, f"{p.name}: developer references in --help: {bad}"


@pytest.mark.parametrize("command", ["finetune", "evaluate"])
def test_every_task_is_listed(command: str) -> None:
    from albert_lm.cli.finetune import HELP
    from albert_lm.tasks.registry import TASKS

    listed = {p.path[1]: p.help for p in PARSERS if p.path[0] == command and len(p.path) == 2}
    assert listed == {name: cls.cli_help for name, cls in TASKS.items()}
    for shown in ("GLUE", "SQuAD", "RACE", "CSV"):
        assert shown in HELP
