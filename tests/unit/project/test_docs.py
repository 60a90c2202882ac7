"""The documentation's commands run from a reader's checkout: no absolute paths of the machine they were
run on (docs/sop_vs_nsp.md gave ``--tokenizer /work/main/data/minilm``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]

# a path under a machine's own folders, as a word of its own (not the end of a URL or a relative path)
MACHINE_PATH = re.compile(r"(?<![\w./:-])/(?:work|tmp|home|root|Users|mnt|scratch|data|opt|var)/[^\s`'\"]*")
FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`([^`]+)`")


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, path) for each absolute machine path in a code block or an inline code span."""
    found, in_block = [], False
    for lineno, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            in_block = not in_block
            continue
        code = [line] if in_block else INLINE_CODE.findall(line)
        found += [(lineno, m.group()) for span in code for m in MACHINE_PATH.finditer(span)]
    return found


def test_the_scan_finds_what_it_is_for() -> None:
    text = (
        "prose about /tmp/x is not a command\n```\nalbert prepare --tokenizer /work/main/data/minilm "
        "--output runs/x\n```\nrun `albert plot /tmp/run` or see https://example.org/work/x and `runs/tmp/a`\n"
    )
    assert machine_paths(text) == [(3, "/work/main/data/minilm"), (5, "/tmp/run")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_doc_commands_use_relative_paths(doc: Path) -> None:
    bad = [
        f"{doc.relative_to(REPO)}:{n}: {path}" for n, path in machine_paths(doc.read_text(encoding="utf-8"))
    ]
    assert not bad, "absolute machine paths in commands:\n" + "\n".join(bad)
