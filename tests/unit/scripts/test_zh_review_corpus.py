"""scripts/zh_review_corpus.py: the training reviews' text as pretraining documents -- grouped, labels dropped,
and no text of the excluded (dev) file in the output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from script_support import script_module


@pytest.fixture(scope="module")
def script():
    with script_module("zh_review_corpus.py", "zh_review_corpus_script") as module:
        yield module


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    return path


def test_groups_rows_drops_labels_and_excluded_texts(script, tmp_path: Path) -> None:
    train = write_csv(
        tmp_path / "train.csv", [(f"评论{i}很好。", "pos" if i % 2 else "neg") for i in range(7)]
    )
    dev = write_csv(tmp_path / "dev.csv", [("评论3很好。", "pos"), ("没见过的。", "neg")])
    out = tmp_path / "corpus" / "reviews.jsonl"
    assert (
        script.main(["--train", str(train), "--exclude", str(dev), "--group", "4", "--output", str(out)]) == 0
    )
    docs = [json.loads(line)["text"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert docs == ["评论0很好。\n评论1很好。\n评论2很好。\n评论4很好。", "评论5很好。\n评论6很好。"]
    assert not any("pos" in d or "neg" in d for d in docs)
    assert not out.with_name("reviews.jsonl.tmp").exists()


def test_bad_column_and_group_are_errors(script, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", [("好。", "pos")])
    with pytest.raises(SystemExit, match="no column 'review'"):
        script.main(
            ["--train", str(train), "--exclude", "--column", "review", "--output", str(tmp_path / "o")]
        )
    with pytest.raises(SystemExit):
        script.main(["--train", str(train), "--exclude", "--group", "0", "--output", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
