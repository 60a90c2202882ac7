"""`albert --help` and `albert COMMAND --help` answer without importing torch (importing it costs seconds;
the help is wanted in well under half a second). Each check runs in a fresh interpreter: it builds the
parser of the command, prints the help and reports whether torch was imported.

The commands marked xfail still import torch for their help, through modules below the CLI whose fix is
not the CLI's: their options come from the library (strict: once they stop, the mark must go).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from albert_lm.cli.main import COMMANDS

SRC = Path(__file__).resolve().parents[3] / "src"

CHECK = """
import contextlib, io, sys
{preamble}
from albert_lm.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        assert e.code == 0, e.code
assert "usage: albert" in out.getvalue(), out.getvalue()
print("torch" in sys.modules)
"""

STILL_IMPORT_TORCH = {
    # `--head` choices from albert_lm.model.HEADS: the model package imports torch
    "convert": "convert's --head choices come from albert_lm.model.HEADS (the model package imports torch)",
    # the task table: albert_lm.tasks.registry -> tasks.base -> tasks.collate imports torch at its top
    "finetune": "the task registry: albert_lm.tasks.base imports tasks.collate, which imports torch",
    "evaluate": "the task registry: albert_lm.tasks.base imports tasks.collate, which imports torch",
}


def _imports_torch(argv: list[str], preamble: str = "") -> bool:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(preamble=preamble), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1] == "True"


def test_the_check_sees_torch() -> None:
    assert _imports_torch(["--help"], preamble="import torch")


def test_the_command_list_help_does_not_import_torch() -> None:
    assert not _imports_torch(["--help"])


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=STILL_IMPORT_TORCH[c]))
        if c in STILL_IMPORT_TORCH
        else c
        for c in COMMANDS
    ],
)
def test_command_help_does_not_import_torch(command: str) -> None:
    assert not _imports_torch([command, "--help"])
