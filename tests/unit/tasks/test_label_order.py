"""A fine-tuned model directory whose task.json lists its labels in one order and whose config.json's
``id2label`` maps the class ids in another is refused when it is loaded (`load_finetuned`: predict,
evaluate, serve, export), naming both files and both orders: the predictions used to be flipped, exit 0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from inference_support import make_model_dir

from albert_lm.cli.main import main
from albert_lm.finetune.rundir import load_finetuned
from albert_lm.tasks.base import ModelDirError


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("m") / "m")  # labels neg, pos


def _edit(path: Path, change: dict) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw.update(change)
    path.write_text(json.dumps(raw), encoding="utf-8")


def test_the_labels_in_both_files_agree_when_written_by_finetune(model_dir: Path) -> None:
    assert json.loads((model_dir / "config.json").read_text())["id2label"] == {"0": "neg", "1": "pos"}
    assert load_finetuned(model_dir).task.labels == ["neg", "pos"]


def test_task_json_in_the_other_order_is_refused_naming_both_files(model_dir: Path, tmp_path: Path) -> None:
    flipped = tmp_path / "flipped"
    shutil.copytree(model_dir, flipped)
    _edit(flipped / "task.json", {"labels": ["pos", "neg"]})
    with pytest.raises(ModelDirError) as e:
        load_finetuned(flipped)
    msg = str(e.value)
    assert f"{flipped / 'task.json'} lists the labels as ['pos', 'neg']" in msg
    assert f"{flipped / 'config.json'} maps the class ids 0, 1, ... to ['neg', 'pos']" in msg


def test_predict_on_flipped_labels_is_one_line_and_no_output(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flipped = tmp_path / "flipped"
    shutil.copytree(model_dir, flipped)
    _edit(flipped / "config.json", {"id2label": {"0": "pos", "1": "neg"}, "label2id": {"pos": 0, "neg": 1}})
    text = tmp_path / "in.txt"
    text.write_text("hello\n", encoding="utf-8")
    assert main(["predict", "--model", str(flipped), "--input", str(text), "--backend", "torch"]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("albert predict: error: ") and "id2label" in line and captured.out == ""


def test_default_label_names_say_nothing_of_the_order(model_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(model_dir, plain)
    _edit(plain / "config.json", {"id2label": {"0": "LABEL_0", "1": "LABEL_1"}})
    assert load_finetuned(plain).task.labels == ["neg", "pos"]
