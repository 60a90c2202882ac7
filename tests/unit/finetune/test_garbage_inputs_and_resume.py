"""Issue 22 items 3-6: fine-tuning on garbage, resuming with other settings, empty dev data and a full disk
during a safetensors write give one line and exit 1, never a wrong model with exit 0 or a traceback.

* item 3: duplicate header names, numbers or texts read as classes, spellings of one label, capped label
  lists; a tokenizer swapped for another of the same size is refused by predict, evaluate, serve and
  finetune --resume (its fingerprint is recorded in task.json);
* item 4: `finetune --resume` with other labels, learning rate, batch size or training file is refused
  naming each field (`albert_lm.finetune.resume`);
* item 5: an empty dev file is refused before training, `evaluate` on one too; hyperparameter flags are
  checked before the training file is read;
* item 6: safetensors' own error for a full disk becomes the one-line ``No space left on device``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from standin_tokenizer import make_tiny_model_dir

from albert_lm._io import TMP_PREFIX, atomic_write_dir
from albert_lm.cli.main import main
from albert_lm.tasks.base import ModelDirError, TaskDataError
from albert_lm.tasks.custom import CustomData, CustomTask

ROWS = [
    ("a sharp smart film", "pos"),
    ("an awful dull film", "neg"),
    ("a fine warm film", "pos"),
    ("a bad cold film", "neg"),
    ("a good bright film", "pos"),
    ("a poor flat film", "neg"),
]


def _csv(path: Path, rows: list[tuple[str, str]], header: str = "text,label") -> Path:
    path.write_text(header + "\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [t for t, _ in ROWS] + ["other words here"]
    return make_tiny_model_dir(tmp_path_factory.mktemp("init"), texts)


def _argv(init: Path, train: Path, out: Path, *extra: str) -> list[str]:
    argv = ["finetune", "custom", "--train", str(train), "--dev", str(train), "--init", str(init)]
    argv += ["--output", str(out), "--train-steps", "2", "--batch-size", "2", "--max-seq-length", "16"]
    return [*argv, "--save-every", "1", "--no-progress", "--no-test", "--precision", "fp32", *extra]


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


@pytest.fixture(scope="module")
def run_dir(init_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-step run (checkpoints at steps 1 and 2), to predict with and to resume."""
    tmp = tmp_path_factory.mktemp("run")
    train = _csv(tmp / "train.csv", ROWS)
    assert main(_argv(init_dir, train, tmp / "run")) == 0
    return tmp / "run"


def _swap_vocab(model_dir: Path) -> None:
    """Another vocabulary of the same size: the words in reverse order after the special tokens."""
    lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    specials = [x for x in lines if x.startswith("[")]
    words = [x for x in lines if not x.startswith("[")]
    (model_dir / "vocab.txt").write_text("\n".join(specials + words[::-1]) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------- item 3: the label set
@pytest.mark.parametrize(
    ("name", "text", "columns", "where"),
    [
        ("t.csv", "text,label,label\na,pos,x\nb,neg,y\n", None, "t.csv:1: the header"),
        ("t.tsv", "label\ttext\t label\na\tpos\tx\n", None, "t.tsv:1: the header"),
        ("t.csv", "a,pos,x\nb,neg,y\n", "text,label,label", "--columns"),
    ],
)
def test_a_duplicate_column_name_is_an_error_naming_it(
    tmp_path: Path, name: str, text: str, columns: str | None, where: str
) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    cols = tuple(columns.split(",")) if columns else None
    with pytest.raises(TaskDataError) as e:
        CustomTask(CustomData(train=f, dev=f, columns=cols))
    assert str(e.value).endswith(
        f"{where} names column 'label' twice (columns {2 if name.endswith('csv') else 1} and 3); rename one "
        "(or give --columns for a file without a header)"
    )


def test_a_numeric_target_without_regression_is_refused_suggesting_it(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _csv(tmp_path / "scores.csv", [(f"film {i}", f"{i / 7:.3f}") for i in range(600)])
    assert main(_argv(init_dir, train, tmp_path / "r")) == 1
    line = _err(capsys)
    assert line.startswith(
        f"albert finetune: error: {train}: column 'label' holds numbers, not classes (600 distinct values "
        "from 600 rows: '0.000', '0.143', "
    )
    assert "(and 590 more)); for a regression target pass --regression" in line and len(line) < 400
    assert not (tmp_path / "r").exists()
    # the same file as a regression target is accepted
    CustomTask(CustomData(train=train, regression=True)).read("train")


def test_swapped_columns_give_too_many_classes_and_a_hint_at_columns(tmp_path: Path) -> None:
    f = tmp_path / "noheader.csv"
    f.write_text(
        "".join(f"film number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(40)), encoding="utf-8"
    )
    with pytest.raises(TaskDataError) as e:
        CustomTask(CustomData(train=f, columns=("label", "text")))
    msg = str(e.value)
    assert msg.startswith(f"{f}: column 'label' gives 40 classes from 40 rows ('film number 0', ")
    assert "(and 30 more)); is it the label column? Check --label-column / --columns" in msg
    assert len(msg) - len(str(f)) < 400
    assert CustomTask(CustomData(train=f, columns=("text", "label"))).labels == ["neg", "pos"]


def test_spellings_of_one_label_are_an_error_naming_them(tmp_path: Path) -> None:
    f = _csv(tmp_path / "t.csv", [("a", "pos"), ("b", "Pos"), ("c", "neg"), ("d", "pos"), ("e", " POS ")])
    with pytest.raises(TaskDataError) as e:
        CustomTask(CustomData(train=f, dev=f))
    assert str(e.value) == (
        f"{f}: labels in column 'label' differ only in case, spacing or number format, so they would be "
        "separate classes: 'POS' (1 rows) / 'Pos' (1 rows) / 'pos' (2 rows); make them one spelling in the "
        "file, or give the label set with --labels"
    )
    g = _csv(tmp_path / "n.csv", [("a", "1"), ("b", "0"), ("c", "1.0"), ("d", "0")])
    with pytest.raises(TaskDataError, match=r"'1' \(1 rows\) / '1.0' \(1 rows\)"):
        CustomTask(CustomData(train=g, dev=g))
    # a label set given explicitly is the user's: both spellings are classes then
    assert CustomTask(CustomData(train=g, dev=g, labels=("0", "1", "1.0"))).num_labels == 3
    h = _csv(tmp_path / "a.csv", [("a", "pos"), ("b", "neg"), ("c", "positive"), ("d", "Negative")])
    with pytest.raises(TaskDataError, match=r"abbreviations of each other.*'neg' \(1 rows\) / 'Negative'"):
        CustomTask(CustomData(train=h, dev=h))
    k = _csv(tmp_path / "k.csv", [("a", "sci"), ("b", "sports"), ("c", "science")])  # "sci" begins "science"
    with pytest.raises(TaskDataError, match="'sci' .* / 'science'"):
        CustomTask(CustomData(train=k, dev=k))
    assert CustomTask(CustomData(train=k, dev=k, labels=("sci", "science", "sports"))).num_labels == 3


def test_a_label_list_in_an_error_is_capped(tmp_path: Path) -> None:
    from albert_lm.tasks.labels import short_list

    f = _csv(tmp_path / "t.csv", [("a", "zzz")])
    labels = tuple(f"label number {i} " + "x" * 200 for i in range(600))
    with pytest.raises(TaskDataError) as e:
        CustomTask(CustomData(train=f, dev=f, labels=labels))
    assert len(str(e.value)) < 800 and str(e.value).endswith("(and 590 more)")
    assert short_list(["abcdefg"] * 3, limit=2, width=5) == "'ab...', 'ab...' (and 1 more)"


def test_a_swapped_tokenizer_is_refused_by_predict_evaluate_and_serve(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_lm.finetune.rundir import resolve_model_dir
    from albert_lm.infer.predictor import Predictor

    best = resolve_model_dir(run_dir)  # report.json's paths are relative to the run
    model = tmp_path / "model"
    shutil.copytree(best, model)
    info = json.loads((model / "task.json").read_text())
    assert len(info["tokenizer"]["fingerprint"]) == 64 and info["tokenizer"]["kind"] == "wordpiece"
    inp = tmp_path / "in.txt"
    inp.write_text("a sharp smart film\n", encoding="utf-8")
    assert main(["predict", "--model", str(model), "--input", str(inp)]) == 0  # as fine-tuned: fine
    capsys.readouterr()
    _swap_vocab(model)
    assert main(["predict", "--model", str(model), "--input", str(inp)]) == 1
    line = _err(capsys)
    assert line.startswith(f"albert predict: error: {model}: its tokenizer (wordpiece, ")
    assert (
        f"is not the one the model was fine-tuned with (fingerprint {info['tokenizer']['fingerprint'][:12]}"
        in line
    )
    train = _csv(tmp_path / "dev.csv", ROWS)
    assert main(["evaluate", "custom", "--model", str(model), "--dev", str(train)]) == 1
    assert "is not the one the model was fine-tuned with" in _err(capsys)
    with pytest.raises(ModelDirError, match="is not the one the model was fine-tuned with"):
        Predictor.load(model)


# ------------------------------------------------------------------------- item 4: resume's settings
@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--labels", "pos,neg"], "labels: ['neg', 'pos'] then, ['pos', 'neg'] now"),
        (["--learning-rate", "0.001"], "--learning-rate: 2e-05 then, 0.001 now"),
        (["--batch-size", "3"], "--batch-size: 2 then, 3 now"),
        (["--max-seq-length", "12"], "--max-seq-length: 16 then, 12 now"),
    ],
)
def test_resume_with_other_settings_is_refused_naming_them(
    run_dir: Path, init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags, named
) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main([*_argv(init_dir, run_dir.parent / "train.csv", run, *flags), "--resume"]) == 1
    line = _err(capsys)
    assert line.startswith(
        f"albert finetune: error: {run}: cannot --resume with other settings than the run's"
    )
    assert named in line and line.endswith(
        "give the settings that started it, or start afresh with --overwrite"
    )
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_resume_with_another_training_file_or_tokenizer_is_refused(
    run_dir: Path, init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    other = _csv(tmp_path / "other.csv", [*ROWS[1:], ("other words here", "pos")])
    assert main([*_argv(init_dir, other, run), "--dev", str(run_dir.parent / "train.csv"), "--resume"]) == 1
    line = _err(capsys)
    assert "train_data: 6 features (sha256 " in line and "dev_data" not in line
    swapped = tmp_path / "init"
    shutil.copytree(init_dir, swapped)
    _swap_vocab(swapped)
    assert main([*_argv(swapped, run_dir.parent / "train.csv", run), "--resume"]) == 1
    line = _err(capsys)
    assert "tokenizer: " in line and "--learning-rate" not in line


def test_resume_with_the_same_settings_and_another_device_goes_on(
    run_dir: Path, init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    argv = _argv(init_dir, run_dir.parent / "train.csv", run, "--device", "cpu", "--eval-batch-size", "5")
    assert main([*argv, "--train-steps", "3", "--resume"]) == 1  # the step count is a setting too
    assert "--train-steps: 2 then, 3 now" in _err(capsys)
    assert main([*argv, "--resume"]) == 0
    assert json.loads((run / "report.json").read_text())["checkpoints"]["last"]["step"] == 2


# --------------------------------------------------------------------------- item 5: empty data first
def test_an_empty_dev_file_is_refused_before_training(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _csv(tmp_path / "train.csv", ROWS)
    dev = _csv(tmp_path / "dev.csv", [])
    assert main([*_argv(init_dir, train, tmp_path / "r"), "--dev", str(dev)]) == 1
    assert _err(capsys) == f"albert finetune: error: {dev}: no examples (an empty dev split)"
    assert not (tmp_path / "r").exists()


def test_a_training_file_of_one_class_is_refused_naming_the_label(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Built wrongly, a pair CSV once had 'pos' on every row: fine-tuning reported dev accuracy 1.0, exit 0."""
    train = _csv(tmp_path / "train.csv", [(t, "pos") for t, _ in ROWS])
    argv = [*_argv(init_dir, train, tmp_path / "r"), "--labels", "neg,pos"]
    assert main(argv) == 1
    assert _err(capsys) == (
        f"albert finetune: error: {train}: all 6 train examples have the label 'pos', one of the task's 2 "
        "(neg, pos); a classifier cannot learn from one class: check the label column"
    )
    assert not (tmp_path / "r").exists()
    # --train-limit that keeps one class is refused too; the same file's first rows with both classes train
    mixed = _csv(tmp_path / "mixed.csv", [ROWS[0], ROWS[2], *ROWS])
    assert main([*_argv(init_dir, mixed, tmp_path / "r2"), "--train-limit", "2"]) == 1
    assert "all 2 train examples have the label 'pos'" in _err(capsys)
    assert main([*_argv(init_dir, mixed, tmp_path / "r3"), "--train-limit", "4"]) == 0


def test_evaluate_on_an_empty_dev_file_is_an_error(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _csv(tmp_path / "dev.csv", [])
    assert main(["evaluate", "custom", "--model", str(run_dir), "--dev", str(dev)]) == 1
    assert _err(capsys) == f"albert evaluate: error: {dev}: no examples (an empty dev split)"


def test_hyperparameter_flags_are_checked_before_the_training_file_is_read(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "train.csv"
    garbage.write_bytes(b"text,label\n\xff\xfe,\x00\n")  # would fail reading, as would a missing file
    assert main(_argv(init_dir, garbage, tmp_path / "r", "--learning-rate", "-1", "--epochs", "0")) == 1
    assert _err(capsys) == (
        "albert finetune: error: --learning-rate: must be at least 0, got -1.0; --epochs: must be greater "
        "than 0, got 0.0"
    )


# --------------------------------------------------------------------- item 6: a full disk, safetensors
def _safetensors_enospc(*args: object, **kwargs: object) -> None:
    from safetensors import SafetensorError

    # what safetensors 0.8 raises when write(2) fails with ENOSPC (its Rust io::Error, no errno attribute)
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def test_a_safetensors_write_on_a_full_disk_is_enospc_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from safetensors import SafetensorError

    def write(tmp: Path) -> None:
        (tmp / "model.safetensors").write_bytes(b"partial")
        _safetensors_enospc()

    with pytest.raises(OSError, match=rf"No space left on device: '{tmp_path / 'ckpt'}'") as e:
        atomic_write_dir(tmp_path / "ckpt", write)
    assert isinstance(e.value.__cause__, SafetensorError)  # the original, for -v
    assert list(tmp_path.iterdir()) == []

    def other(tmp: Path) -> None:
        raise SafetensorError("Error while serializing: invalid tensor")  # not the disk: kept as it is

    with pytest.raises(SafetensorError, match="invalid tensor"):
        atomic_write_dir(tmp_path / "ckpt", other)


def test_finetune_on_a_full_disk_is_one_line_and_keeps_the_old_run(
    init_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import safetensors.torch

    run = tmp_path / "run"
    run.mkdir()
    (run / "old-marker").write_text("old")
    train = _csv(tmp_path / "train.csv", ROWS)
    monkeypatch.setattr(safetensors.torch, "save_file", _safetensors_enospc)
    assert main(_argv(init_dir, train, run, "--overwrite")) == 1
    line = _err(capsys)
    assert line.startswith(f"albert finetune: error: {run / 'checkpoints'}/") and line.endswith(
        ": No space left on device"
    )
    assert [p.name for p in run.iterdir()] == ["old-marker"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]
