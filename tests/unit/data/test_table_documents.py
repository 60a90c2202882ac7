"""`albert prepare` reads documents from Parquet / Arrow / datasets rows as from JSONL (``--text-field``),
and refuses a ``lines`` / ``text`` file whose lines are JSON objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, train_spm
from table_support import every_format, write_jsonl

from albert_lm.cli.main import main
from albert_lm.data.documents import DataError, ReadReport, read_documents


def _docs(path: Path, fmt: str = "auto", key: str = "text") -> list[tuple[list[str], int]]:
    report = ReadReport()
    docs = [(d.units, d.line) for d in read_documents([path], report, fmt, jsonl_key=key)]
    assert not report.skipped, report.skipped
    return docs


@pytest.fixture(scope="module")
def articles() -> list[str]:
    paragraphs = [p.strip() for p in WIKI_SAMPLE.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    assert len(paragraphs) > 5
    return paragraphs


def test_the_same_documents_from_jsonl_parquet_arrow_and_datasets(
    articles: list[str], tmp_path: Path
) -> None:
    rows = [{"title": f"t{i}", "body": a} for i, a in enumerate(articles)]
    files = every_format(tmp_path, "corpus", rows, csv_too=False)
    reference = _docs(files.pop("jsonl"), key="body")
    assert [p for p, _ in reference] == [
        [ln.strip() for ln in a.splitlines() if ln.strip()] for a in articles
    ]
    for fmt, path in files.items():
        assert _docs(path, key="body") == reference, fmt
    named = {"parquet": files["parquet"], "arrow": files["arrow"], "datasets": files["datasets"]}
    for fmt, path in named.items():
        assert _docs(path, fmt, key="body") == reference, fmt


def test_prepare_cli_builds_the_same_shards_from_parquet_as_from_jsonl(
    articles: list[str], tmp_path: Path
) -> None:
    spm = train_spm(tmp_path / "spm")
    rows = [{"body": a} for a in articles]
    files = every_format(tmp_path / "in", "corpus", rows, csv_too=False)
    shards = {}
    for fmt in ("jsonl", "parquet", "datasets"):
        out = tmp_path / fmt
        argv = ["prepare", "--input", str(files[fmt]), "--tokenizer", str(spm), "--output", str(out)]
        assert main([*argv, "--max-seq-length", "64", "--text-field", "body"]) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["counts"]["documents"] == len(articles) and not manifest["skipped"], fmt
        shards[fmt] = sorted((p.name, p.read_bytes()) for p in out.glob("shard-*.bin"))
    assert shards["jsonl"] and shards["parquet"] == shards["jsonl"] and shards["datasets"] == shards["jsonl"]


def test_a_lines_file_of_json_objects_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text('{"text": "A sentence."}\n{"text": "Another one."}\n', encoding="utf-8")
    for fmt in ("auto", "lines", "text"):
        with pytest.raises(
            DataError,
            match=rf"corpus\.txt:1: the line is a JSON object, but the file is read as --format {'lines' if fmt == 'auto' else fmt}",
        ):
            _docs(path, fmt)
    as_jsonl = write_jsonl(tmp_path / "corpus.jsonl", [{"text": "A sentence."}, {"text": "Another one."}])
    assert _docs(as_jsonl) == [(["A sentence."], 1), (["Another one."], 2)]
