"""`albert tokenizer train` with a vocabulary SentencePiece refuses: "too small" when it cannot even hold
the corpus's characters, "too large" when the corpus has fewer pieces; each with the number that fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_lm.cli.main import main

CORPUS = [f"the quick brown fox number {i} jumps over the lazy dog, said Zoë." for i in range(400)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def _train(corpus: Path, out: Path, vocab_size: int, capsys) -> str:  # type: ignore[no-untyped-def]
    argv = [
        "tokenizer",
        "train",
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--vocab-size",
        str(vocab_size),
    ]
    assert main(argv) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("albert tokenizer: error: ")
    return errors[0]


def test_too_small_a_vocabulary_is_called_too_small(corpus: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    err = _train(corpus, tmp_path / "o", 20, capsys)
    assert "vocab_size=20 is too small for this corpus" in err and "too large" not in err
    assert "raise vocab_size or lower character_coverage" in err
    assert not (tmp_path / "o").exists()


def test_too_large_a_vocabulary_is_called_too_large(corpus: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    err = _train(corpus, tmp_path / "o", 20000, capsys)
    assert "vocab_size=20000 is too large for this corpus" in err and "at most" in err
