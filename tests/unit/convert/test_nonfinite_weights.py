"""Weights holding NaN or infinity are refused wherever a model directory is read or written, naming the
file and the first bad tensor: `albert predict`, `evaluate`, `serve` (the same loader), `export`, `convert
tf`, `finetune --init` and `pretrain --init` all go through `convert.hf.load_model_dir` / `save_model_dir`
(or the TF converter's reader). A NaN weight gives NaN probabilities and argmax class 0, with exit 0."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from standin_tokenizer import make_tiny_model_dir

from albert_lm.cli.main import main
from albert_lm.convert.hf import CheckpointError, load_model
from albert_lm.convert.tf_checkpoint import TFCheckpoint, write_checkpoint
from albert_lm.finetune.rundir import write_task_info
from albert_lm.model import AlbertForSequenceClassification
from albert_lm.tasks.classification import ClassificationTask

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GLUE_DIR = FIXTURES / "glue"
TF_GOOGLE = FIXTURES / "tf" / "google"
BAD = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"


def _sst2_task() -> ClassificationTask:
    return ClassificationTask("sst2", lambda split: [], ["0", "1"], ["accuracy"])


def _poison(model_dir: Path, name: str = BAD, value: float = float("nan")) -> None:
    """Put ``value`` into one element of the tensor ``name`` of ``model_dir``'s weights."""
    path = model_dir / "model.safetensors"
    state = load_file(str(path))
    assert name in state, sorted(state)
    state[name] = state[name].clone()
    state[name].view(-1)[3] = value
    save_file(state, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def tuned_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SST-2 fine-tuned-looking model directory (random tiny ALBERT with its classifier), NaN in one
    encoder weight."""
    texts = [f.read_text(encoding="utf-8") for f in sorted(GLUE_DIR.rglob("*.tsv"))]
    out = make_tiny_model_dir(tmp_path_factory.mktemp("m") / "m", texts)
    _sst2_task().build_model(out).save_pretrained(out)
    write_task_info(_sst2_task(), out, {"max_seq_length": 32})
    _poison(out)
    return out


def _one_error_line(capsys: pytest.CaptureFixture[str], command: str, path: Path) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"albert {command}: error: {path / 'model.safetensors'}: tensor {BAD!r} holds NaN")
    return line


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_load_model_names_the_file_and_the_first_bad_tensor(tmp_path: Path, value: float) -> None:
    model_dir = make_tiny_model_dir(tmp_path / "m", ["a b c"])
    _sst2_task().build_model(model_dir).save_pretrained(model_dir)
    load_model(model_dir)  # finite: loads
    _poison(model_dir, value=value)
    with pytest.raises(CheckpointError, match=rf"model\.safetensors: tensor '{BAD}' holds NaN or infinite"):
        load_model(model_dir)
    with pytest.raises(CheckpointError, match="holds NaN"):
        AlbertForSequenceClassification.from_pretrained(model_dir)


def test_predict_and_evaluate_refuse_nan_weights(
    tuned_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "in.txt"
    text.write_text("a sharp , smart film .\n", encoding="utf-8")
    assert main(["predict", "--model", str(tuned_dir), "--input", str(text), "--backend", "torch"]) == 1
    _one_error_line(capsys, "predict", tuned_dir)
    assert capsys.readouterr().out == ""
    argv = ["evaluate", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--model", str(tuned_dir)]
    assert main(argv) == 1
    _one_error_line(capsys, "evaluate", tuned_dir)


def test_serve_and_export_refuse_nan_weights(tuned_dir: Path, tmp_path: Path) -> None:
    from albert_lm.export.pipeline import ExportError, export_model_dir
    from albert_lm.infer.predictor import Predictor

    with pytest.raises(CheckpointError, match=f"tensor '{BAD}' holds NaN"):
        Predictor.load(tuned_dir)
    with pytest.raises(ExportError, match=rf"model\.safetensors: tensor '{BAD}' holds NaN"):
        export_model_dir(tuned_dir, tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()


def test_finetune_from_nan_weights_is_refused(
    tuned_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--init", str(tuned_dir)]
    argv += ["--output", str(tmp_path / "run"), "--train-steps", "1", "--no-progress", "--no-test"]
    argv += ["--max-seq-length", "32"]
    assert main(argv) == 1
    _one_error_line(capsys, "finetune", tuned_dir)


def test_writing_a_model_with_nan_weights_is_refused(tmp_path: Path) -> None:
    model_dir = make_tiny_model_dir(tmp_path / "m", ["a b c"])
    model = load_model(model_dir)
    with torch.no_grad():
        model.embeddings.word.weight[2, 0] = float("nan")
    with pytest.raises(CheckpointError, match=r"not writing .*model\.safetensors: tensor '.*word_embeddings"):
        model.save_pretrained(tmp_path / "out")
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_convert_tf_refuses_a_nan_checkpoint_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "tf"
    src.mkdir()
    for name in ("albert_config.json", "30k-clean.model"):
        shutil.copy(TF_GOOGLE / name, src / name)
    with TFCheckpoint(TF_GOOGLE) as ckpt:
        tensors = dict(ckpt.items())
    name = "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"
    assert name in tensors, sorted(tensors)
    tensors[name] = tensors[name].copy()
    tensors[name].reshape(-1)[5] = np.nan
    write_checkpoint(src / "model.ckpt-best", tensors)
    out = tmp_path / "out"
    assert main(["convert", "tf", str(src), "--output", str(out)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"albert convert: error: {src / 'model.ckpt-best'}:") and "NaN" in line
    assert not out.exists()


def test_the_trainer_check_and_the_loader_check_are_one_function() -> None:
    """The check that keeps the trainer from writing non-finite checkpoints is the loader's: both name
    the first bad tensor of the same list."""
    from albert_lm.optim._checks import first_non_finite_tensor
    from albert_lm.train.checkpoint import first_non_finite

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    assert first_non_finite(model) is None
    with torch.no_grad():
        model[1].bias[0] = float("inf")
    assert first_non_finite(model) == "1.bias" == first_non_finite_tensor(model.state_dict().items())
