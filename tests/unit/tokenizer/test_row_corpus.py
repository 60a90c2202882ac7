"""`albert tokenizer train` reads the text field of JSONL / Parquet / datasets rows, and refuses a
plain-text file whose lines are JSON objects (read as text, its braces and keys became vocabulary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from table_support import every_format, write_jsonl

from albert_lm.cli.main import main
from albert_lm.tokenizer.corpus import iter_corpus_lines
from albert_lm.tokenizer.train import train_sentencepiece

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "data_wiki_sample.txt"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    out = [ln.strip() for ln in SAMPLE.read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert len(out) > 150
    return out[:150]


def _pieces(path: Path, out: Path, **kw) -> list[str]:
    tok, _ = train_sentencepiece([path], out, vocab_size=300, user_defined_symbols=(), **kw)
    return [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]


def test_the_same_vocabulary_from_text_jsonl_parquet_arrow_and_datasets(
    lines: list[str], tmp_path: Path
) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = [{"id": i, "text": ln} for i, ln in enumerate(lines)]
    reference = _pieces(text, tmp_path / "ref")
    for fmt, path in every_format(tmp_path / "rows", "corpus", rows, csv_too=False).items():
        assert list(iter_corpus_lines([path])) == lines, fmt
        assert _pieces(path, tmp_path / fmt) == reference, fmt
    body = write_jsonl(tmp_path / "body.jsonl", [{"body": ln} for ln in lines])
    assert _pieces(body, tmp_path / "body", text_field="body") == reference


def test_cli_reads_jsonl_by_text_field(lines: list[str], tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"body": ln, "meta": "x"} for ln in lines])
    argv = [
        "tokenizer",
        "train",
        "--input",
        str(path),
        "--vocab-size",
        "300",
        "--output",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--text-field", "body"]) == 0
    vocab = (tmp_path / "o" / "spiece.vocab").read_text(encoding="utf-8")
    assert '"body"' not in vocab and "▁{" not in vocab


def test_missing_text_field_names_file_and_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"text": "a line"}, {"txt": "another"}])
    argv = [
        "tokenizer",
        "train",
        "--input",
        str(path),
        "--vocab-size",
        "100",
        "--output",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"{path}:2: no field 'text' (fields: txt); name the text field with --text-field" in err[0]
    )


def test_a_text_file_of_json_objects_is_refused(
    lines: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.txt"
    path.write_text("\n" + "".join(json.dumps({"text": ln}) + "\n" for ln in lines), encoding="utf-8")
    argv = [
        "tokenizer",
        "train",
        "--input",
        str(path),
        "--vocab-size",
        "300",
        "--output",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"albert tokenizer: error: {path}:2: the line is a JSON object"
    )
    assert not (tmp_path / "o").exists()
    # a text file whose lines merely start with a brace is text
    prose = tmp_path / "prose.txt"
    prose.write_text("{braces} open this line\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert list(iter_corpus_lines([prose]))[0] == "{braces} open this line"
