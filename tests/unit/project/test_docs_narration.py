"""The docs and the code's comments speak of the project as it is: no issue numbers, commit hashes, work
sessions or "earlier / later run" (git log keeps the history). Scanned: README.md, docs/*.md, and the
comments and string literals (docstrings included) of src/**/*.py; in Python, ONNX Runtime's *sessions*
are a technical term and stay allowed where the same text names ONNX Runtime (or the name is code).
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SOURCES = sorted((REPO / "src").rglob("*.py"))

NARRATION = {
    "issue number": re.compile(r"\bissues?\s*#?\d+", re.I),
    "the issue (of a tracker)": re.compile(r"\bthe issue\b(?! (is|was) that)|\bissue's\b", re.I),
    # 7 to 40 hex digits with at least one letter and one digit; a sha256 pin (64) is not a word of 7-40
    "commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    "session": re.compile(r"\bsessions?\b", re.I),
    "earlier / later run": re.compile(r"\b(earlier|later|previous)\s+(runs?|sessions?|commits?)\b", re.I),
    "earlier / later run (src)": re.compile(r"\b(earlier|later|previous)\s+(sessions?|commits?)\b", re.I),
    "before / after": re.compile(r"\bbefore\s*/\s*after\b", re.I),
}
# where "session" is ONNX Runtime's object, not a work session
ORT_SESSION = re.compile(r"onnx|ort\b|runtime|``session``|`session`|session\.\w|_session", re.I)
# legitimate hex-looking words, each with why
ALLOWED_HEX: dict[str, str] = {}


def narration(text: str, python: bool = False) -> list[tuple[int, str, str]]:
    """(line number, kind, match) of each piece of narration in ``text`` (a line's own context decides
    whether a Python "session" is ONNX Runtime's)."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for kind, pattern in NARRATION.items():
            # in the code a user's "earlier run" (a run directory already there) is a fact, not history
            if kind == ("earlier / later run" if python else "earlier / later run (src)"):
                continue
            for m in pattern.finditer(line):
                if kind == "commit hash" and m.group() in ALLOWED_HEX:
                    continue
                if kind == "session" and python and ORT_SESSION.search(line):
                    continue
                found.append((lineno, kind, m.group()))
    return found


def comments_and_strings(source: str) -> str:
    """The comments and string literals of a Python source, each at its own line number (code blanked)."""
    lines = [""] * (source.count("\n") + 2)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            for k, part in enumerate(tok.string.splitlines()):
                lines[tok.start[0] - 1 + k] += " " + part
    return "\n".join(lines)


def test_the_scan_finds_what_it_is_for() -> None:
    text = (
        "Fixed in issue 22 (item 3), see issue #15.\nMeasured on 5538e68 in this session.\n"
        "An earlier run gave 3.1; before/after: 2 / 3.\nThe issue's bar.\n"
        "A sha256 pin 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 and 1000000000 are fine.\n"
        "The issue is that the pad id differs.\n"
    )
    kinds = [(n, k) for n, k, _ in narration(text)]
    assert kinds == [
        (1, "issue number"),
        (1, "issue number"),
        (2, "commit hash"),
        (2, "session"),
        (3, "earlier / later run"),
        (3, "before / after"),
        (4, "the issue (of a tracker)"),
    ]
    code = (
        'sessions = load(x)  # one ONNX Runtime session per file\ndef f():\n    """In a later session."""\n'
    )
    assert [(n, k) for n, k, _ in narration(comments_and_strings(code), python=True)] == [
        (3, "session"),
        (3, "earlier / later run (src)"),
    ]
    assert narration('"""Refused: a directory of an earlier run."""', python=True) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_do_not_narrate_history(doc: Path) -> None:
    bad = [
        f"{doc.relative_to(REPO)}:{n}: {k}: {m!r}" for n, k, m in narration(doc.read_text(encoding="utf-8"))
    ]
    assert not bad, "history in the docs (state the project as it is):\n" + "\n".join(bad)


def test_source_comments_do_not_narrate_history() -> None:
    bad = [
        f"{path.relative_to(REPO)}:{n}: {k}: {m!r}"
        for path in SOURCES
        for n, k, m in narration(comments_and_strings(path.read_text(encoding="utf-8")), python=True)
    ]
    assert not bad, "history in src comments and docstrings:\n" + "\n".join(bad)
