"""Issue 15, the fine-tuning side: bad input fails loudly, with one line naming the file, line, flag or
directory, and exit status 1, instead of a wrong result with exit 0.

* item 3: an empty label cell is an error (or a counted skip with --skip-bad-rows), never a class '';
* item 5: predict / evaluate refuse a model whose weights lack the task head;
* item 6: a non-empty --output needs --resume or --overwrite; --overwrite never mixes old and new;
* item 8: hyperparameter limits checked up front (`FinetuneConfig.validate`), one line each;
* item 9: binary input to `albert predict` is one line naming the input line;
* item 10: `albert predict` writes one line per input line, blank ones included.
* and: unknown task / split / metric names are one line too, and metrics are checked before any data.
"""

from __future__ import annotations

import io
import json
import logging
import math
import re
import shutil
from pathlib import Path

import pytest
from standin_tokenizer import make_tiny_model_dir

from albert_lm._locks import OutputOverlapError
from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.finetune.config import FinetuneConfig, FinetuneConfigError
from albert_lm.finetune.rundir import RunDirError, check_output_dir, replacing, write_task_info
from albert_lm.tasks.base import TaskDataError, UnknownNameError
from albert_lm.tasks.classification import ClassificationTask
from albert_lm.tasks.custom import CustomData, CustomTask
from conftest import FIXTURES

GLUE_DIR = FIXTURES / "glue"


def _glue_texts() -> list[str]:
    return [f.read_text(encoding="utf-8") for f in sorted(GLUE_DIR.rglob("*.tsv"))]


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An encoder-only model directory (random albert-tiny, max_position_embeddings 128) whose WordPiece
    vocab holds every word of the GLUE fixtures."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("init"), _glue_texts())


def _sst2_task() -> ClassificationTask:
    return ClassificationTask("sst2", lambda split: [], ["0", "1"], ["accuracy"])


def _finetuned_looking(init: Path, out: Path, *, with_head: bool) -> Path:
    """A model directory with an SST-2 task.json, as `albert finetune` writes one: with the classifier
    (the head of a fine-tuned model) or with the encoder's weights only."""
    from albert_lm.model import AlbertForSequenceClassification

    shutil.copytree(init, out)
    if with_head:
        _sst2_task().build_model(init).save_pretrained(out)
    write_task_info(_sst2_task(), out, {"max_seq_length": 32})
    assert isinstance(_sst2_task().build_model(out), AlbertForSequenceClassification)
    return out


@pytest.fixture(scope="module")
def tuned_dir(init_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _finetuned_looking(init_dir, tmp_path_factory.mktemp("tuned") / "m", with_head=True)


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """stdin as the shell gives it: bytes underneath (``.buffer``), decoded as UTF-8 on top."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _sst2_argv(init: Path, output: Path, *extra: str) -> list[str]:
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--init", str(init)]
    argv += ["--output", str(output), "--train-steps", "2", "--eval-every", "1", "--batch-size", "3"]
    argv += ["--max-seq-length", "32", "--no-progress", "--no-test", "--precision", "fp32"]
    return [*argv, *extra]


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


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


def test_finetune_custom_with_an_empty_label_exits_1_naming_the_line(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "train.csv"
    data.write_text("text,label\ngood film,1\nbad film,\nfine film,0\nawful film,0\n", encoding="utf-8")
    argv = [
        "finetune",
        "custom",
        "--train",
        str(data),
        "--init",
        str(init_dir),
        "--output",
        str(tmp_path / "r"),
    ]
    argv += ["--train-steps", "1", "--batch-size", "2", "--max-seq-length", "16", "--no-progress"]
    assert main(argv) == 1
    assert _err_lines(capsys) == [
        f"albert finetune: error: {data}:3: empty 'label' (a labelled row needs a label)"
    ]
    assert not (tmp_path / "r").exists()
    assert main([*argv, "--skip-bad-rows", "--precision", "fp32", "--dev", str(data)]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["task"]["labels"] == ["0", "1"] and report["task"]["skipped_rows"] == {str(data): 1}


# ------------------------------------------------------------------------------- item 5: missing task head
def test_predict_and_evaluate_refuse_a_model_without_its_head(
    init_dir: Path, tuned_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    headless = _finetuned_looking(init_dir, tmp_path / "headless", with_head=False)
    _stdin(monkeypatch, b"a sharp , smart film .\n")
    assert main(["predict", "--model", str(headless)]) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"albert predict: error: {headless}") and "classifier.weight" in line
    argv = ["evaluate", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--model"]
    assert main([*argv, str(headless)]) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"albert evaluate: error: {headless}") and "classifier.weight" in line
    # the same directory with the classifier's weights predicts, the same probabilities every time
    outs = []
    for _ in range(2):
        _stdin(monkeypatch, b"a sharp , smart film .\n")
        assert main(["predict", "--model", str(tuned_dir)]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] and set(outs[0]["probabilities"]) == {"0", "1"}


# ------------------------------------------------------------------------------------ item 6: output dirs
def test_a_non_empty_output_is_refused_without_resume_or_overwrite(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 99, "loss": 1.0}\n')
    assert main(_sst2_argv(init_dir, run)) == 1
    (line,) = _err_lines(capsys)
    assert line == (
        f"albert finetune: error: {run}: exists and is not empty (an earlier run?); --resume continues it, "
        "--overwrite replaces it"
    )
    assert [p.name for p in run.iterdir()] == ["metrics.jsonl"]
    assert (run / "metrics.jsonl").read_text() == '{"step": 99, "loss": 1.0}\n'
    with pytest.raises(SystemExit):  # argparse: not allowed with --resume
        main([*_sst2_argv(init_dir, run), "--resume", "--overwrite"])
    with pytest.raises(RunDirError, match="give one"):
        check_output_dir(run, resume=True, overwrite=True)
    with pytest.raises(OutputOverlapError, match="contains --init .* replacing it would delete"):
        check_output_dir(tmp_path, overwrite=True, init=run)  # the one check, albert_lm._io


def test_overwrite_replaces_the_old_run_whole(init_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints" / "step-00000099").mkdir(parents=True)
    (run / "old-marker").write_text("old")
    (run / "metrics.jsonl").write_text('{"step": 99, "loss": 1.0}\n')
    assert main(_sst2_argv(init_dir, run, "--overwrite")) == 0
    assert not (run / "old-marker").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-00000002"]
    steps = {json.loads(x).get("step") for x in (run / "metrics.jsonl").read_text().splitlines()}
    assert steps <= {1, 2}  # nothing of the old run appended to
    assert json.loads((run / "report.json").read_text())["checkpoints"]["last"]["step"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # the old content deleted, not left aside


def test_a_failed_overwrite_puts_the_old_run_back(
    init_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "old-marker").write_text("old")

    def fail_after_training(*args, **kwargs):
        assert (run / "checkpoints").is_dir() and not (run / "old-marker").exists()  # the new run, alone
        raise OSError("No space left on device")

    monkeypatch.setattr("albert_lm.finetune.run._conclude", fail_after_training)
    assert main(_sst2_argv(init_dir, run, "--overwrite")) == 1
    assert _err_lines(capsys) == ["albert finetune: error: No space left on device"]
    assert [p.name for p in run.iterdir()] == ["old-marker"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_replacing_without_old_content_writes_in_place(tmp_path: Path) -> None:
    with replacing(tmp_path / "new") as p:
        p.mkdir()
        (p / "f").write_text("x")
    assert (tmp_path / "new" / "f").read_text() == "x"
    with pytest.raises(RuntimeError), replacing(tmp_path / "new") as p:
        (p / "g").parent.mkdir(parents=True)  # the old content is aside: p is free
        raise RuntimeError
    assert [q.name for q in (tmp_path / "new").iterdir()] == ["f"]


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
    reasons = dict(e.value.problems)  # each by the field it names, section.field, in the record's order
    assert list(reasons) == [
        "optim.learning_rate", "finetune.batch_size", "schedule.train_steps", "finetune.epochs", "schedule.warmup_fraction",
        "finetune.max_seq_length", "run.eval_every", "finetune.classifier_dropout", "optim.optimizer", "optim.adam_epsilon",
    ]  # fmt: skip
    assert reasons["finetune.max_seq_length"] == (
        "must be at most 128, the model's max_position_embeddings, got 100000"
    )
    assert reasons["optim.learning_rate"] == "must be a finite number, got nan"
    assert reasons["finetune.batch_size"] == "must be at least 1, got 0"
    assert "one of lamb, adamw, adamw_original" in reasons["optim.optimizer"]
    assert isinstance(e.value, ConfigError)  # the one configuration error (FinetuneConfigError is its alias)
    with pytest.raises(FinetuneConfigError, match="finetune.batch_size: expected an integer, got 3.5"):
        FinetuneConfig(batch_size=3.5).validate()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--max-seq-length", "100000"],
         "--max-seq-length: must be at most 128, the model's max_position_embeddings, got 100000"),
        (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
        (["--train-steps", "0"], "--train-steps: must be at least 1 (or null: use epochs), got 0"),
        (["--learning-rate", "-1"], "--learning-rate: must be at least 0, got -1.0"),
        (["--train-limit", "-3"], "--train-limit: must be at least 1, got -3"),
    ],
)  # fmt: skip
def test_finetune_limits_are_one_line_each_before_anything_is_written(
    init_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], line: str
) -> None:
    assert main(_sst2_argv(init_dir, tmp_path / "run", *flags)) == 1
    assert _err_lines(capsys) == [f"albert finetune: error: {line}"]
    assert not (tmp_path / "run").exists()


def test_predict_max_seq_length_beyond_the_model(
    tuned_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"a sharp , smart film .\n")
    assert main(["predict", "--model", str(tuned_dir), "--max-seq-length", "100000"]) == 1
    assert _err_lines(capsys) == [
        "albert predict: error: --max-seq-length 100000: must be between 3 and 128, the model's "
        "max_position_embeddings"
    ]


# ---------------------------------------------------------------------------- items 9 and 10: predict input
def test_binary_input_is_one_line_naming_the_line(
    tuned_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"a sharp , smart film .\n\x89PNG\r\n\x1a\n")
    assert main(["predict", "--model", str(tuned_dir)]) == 1
    assert _err_lines(capsys) == [
        "albert predict: error: <stdin>:2: not UTF-8 text (byte 0x89 at byte 1 of the line); is the input a "
        "binary file?"
    ]
    f = tmp_path / "in.txt"
    f.write_bytes(b"fine\nfine\nfi\x00ne\n")
    assert main(["predict", "--model", str(tuned_dir), "--input", str(f)]) == 1
    assert _err_lines(capsys) == [
        f"albert predict: error: {f}:3: a NUL byte at column 3; is the input a binary file?"
    ]


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        (b"a sharp , smart film .\n\nuneasy mishmash\n   \n", "text"),
        (b'{"text": "a sharp , smart film ."}\n\n{"text": "uneasy mishmash", "id": 7}\n \n', "jsonl"),
    ],
)
def test_predict_writes_one_line_per_input_line_in_order(
    tuned_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    fmt: str,
) -> None:
    _stdin(monkeypatch, data)
    assert main(["predict", "--model", str(tuned_dir), "--format", fmt]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(out) == 4
    assert out[0]["text"] == "a sharp , smart film ." and out[2]["text"] == "uneasy mishmash"
    assert out[1] == {"line": 2, "error": "empty input"} and out[3] == {"line": 4, "error": "empty input"}
    assert out[2].get("id") == (7 if fmt == "jsonl" else None)


# ------------------------------------------------------------------------------------ names and one line
def test_unknown_names_are_one_line_and_bad_metrics_are_refused_before_reading(
    tuned_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["evaluate", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--model", str(tuned_dir)]
    assert main([*argv, "--split", "validation"]) == 1
    assert _err_lines(capsys) == [
        "albert evaluate: error: GLUE sst2 has no split 'validation'; it has train, dev, test"
    ]
    missing = tmp_path / "never-read.csv"
    with pytest.raises(UnknownNameError, match="unknown metric\\(s\\) bleu; known: accuracy"):
        CustomTask(CustomData(train=missing, labels=("a", "b")), metrics=("accuracy", "bleu"))


def test_adam_epsilon_and_the_optimizer_reach_the_optimizer(
    init_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import albert_lm.optim

    built = []
    real = albert_lm.optim.build_optimizer

    def spy(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(albert_lm.optim, "build_optimizer", spy)
    argv = _sst2_argv(init_dir, tmp_path / "run", "--adam-epsilon", "1e-3", "--weight-decay", "0.05")
    assert main(argv) == 0
    (opt,) = built
    assert type(opt).__name__ == "Lamb"  # adamw_original: the original's AdamWeightDecayOptimizer
    assert {g["eps"] for g in opt.param_groups} == {1e-3}
    assert {g["weight_decay"] for g in opt.param_groups} == {0.0, 0.05}  # LayerNorm and biases excluded
