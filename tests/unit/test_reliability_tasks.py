"""Issue 15, the fine-tuning side: bad input fails loudly, naming the file and line, instead of a wrong
result with exit 0.

* item 3: an empty label cell is an error (or a counted skip with --skip-bad-rows), never a class '';
* item 8: hyperparameter limits checked up front (`FinetuneConfig.validate`), one per bad field.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pytest

from albert.config import AlbertConfig
from albert.tasks.base import FinetuneConfig, FinetuneConfigError, TaskDataError
from albert.tasks.custom import CustomData, CustomTask


# ----------------------------------------------------------------------------------- item 3: empty labels
@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("train.csv", "text,label\na,pos\nb,\nc,neg\n", 3),
        ("train.tsv", "text\tlabel\na\tpos\nb\tneg\nc\t  \n", 4),
        ("train.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b", "label": null}\n', 2),
    ],
)
def test_an_empty_label_is_an_error_naming_file_and_line(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"{re.escape(name)}:{line}: empty 'label'"):
        CustomTask(CustomData(train=f, dev=f))


def test_skip_bad_rows_skips_and_counts_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "train.csv"
    f.write_text("text,label\na,pos\nb,\nc,neg\nd,\ne,pos\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        task = CustomTask(CustomData(train=f, dev=f, skip_bad_rows=True))
    assert task.labels == ["neg", "pos"]  # no class ''
    assert [e.texts[0] for e in task.read("train")] == ["a", "c", "e"]
    assert task.info()["skipped_rows"] == {str(f): 2}
    assert f"skipped 2 bad row(s) of 5 (--skip-bad-rows); the first: {f}:3: empty 'label'" in caplog.text


def test_an_empty_label_in_a_test_file_means_unlabelled(tmp_path: Path) -> None:
    train = tmp_path / "train.csv"
    train.write_text("text,label\na,pos\nb,neg\n", encoding="utf-8")
    test = tmp_path / "test.csv"
    test.write_text("text,label\nc,\nd,pos\n", encoding="utf-8")
    task = CustomTask(CustomData(train=train, dev=train, test=test))
    assert [e.label for e in task.read("test")] == [None, "pos"]


def test_a_holdout_that_leaves_no_dev_example_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "train.csv"
    f.write_text("text,label\na,pos\nb,neg\nc,neg\n", encoding="utf-8")
    with pytest.raises(
        TaskDataError, match=r"holding out 0.1 of 3 examples leaves 3 to train on and 0 for dev"
    ):
        CustomTask(CustomData(train=f)).read("train")


# ---------------------------------------------------------------------------------------- item 8: limits
def test_validate_names_every_bad_field() -> None:
    model = AlbertConfig.from_preset("albert-tiny")
    FinetuneConfig(max_seq_length=128).validate(model)  # fits
    bad = FinetuneConfig(
        batch_size=0, train_steps=0, learning_rate=math.nan, max_seq_length=100000, warmup_fraction=-0.5,
        eval_every=0, optimizer="sgd", adam_epsilon=0.0, classifier_dropout=1.0, epochs=math.inf,
    )  # fmt: skip
    with pytest.raises(FinetuneConfigError) as e:
        bad.validate(model)
    reasons = dict(e.value.problems)
    assert set(reasons) == {
        "batch_size", "train_steps", "learning_rate", "max_seq_length", "warmup_fraction", "eval_every",
        "optimizer", "adam_epsilon", "classifier_dropout", "epochs",
    }  # fmt: skip
    assert reasons["max_seq_length"] == "must be at most 128, the model's max_position_embeddings, got 100000"
    assert reasons["learning_rate"] == "must be a finite number, got nan"
    assert reasons["batch_size"] == "must be at least 1, got 0"
    assert "one of lamb, adamw, adamw_original" in reasons["optimizer"]
    with pytest.raises(FinetuneConfigError, match="batch_size: expected an integer, got 3.5"):
        FinetuneConfig(batch_size=3.5).validate()  # type: ignore[arg-type]
