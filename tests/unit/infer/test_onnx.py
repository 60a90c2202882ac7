"""ONNX export of every task head (parity with PyTorch on padded batches, named dynamic axes, shared layers
stored once), int8 coverage in ONNX Runtime and torch.ao, and `albert export onnx` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from inference_support import VOCAB, make_model_dir, write_polarity_like

from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig
from albert_lm.infer import onnx as X
from albert_lm.infer.graph import example_inputs
from albert_lm.infer.quantize import (
    MatmulCoverage,
    int8_linear_count,
    quantize_onnx_int8,
    quantize_torch_int8,
    weight_matmul_coverage,
)
from albert_lm.model import HEADS

pytest.importorskip("onnxruntime")

TASK_HEADS = [
    "classification",
    "multiple_choice",
    "question_answering",
    "squad_v2",
    "token_classification",
    "mlm",
    "pretraining",
]


def _model(head: str | None, **overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return HEADS[head](AlbertConfig.from_preset("albert-tiny", **overrides)).eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, tuple[torch.nn.Module, Path]]:
    """Each head exported once (trained-looking weights: zero biases would let the exporter merge them)."""
    out = {}
    for head in TASK_HEADS:
        model = _model(head)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
        path = tmp_path_factory.mktemp("onnx") / f"{head}.onnx"
        X.export_onnx(model, path)
        out[head] = (model, path)
    return out


@pytest.mark.parametrize("head", TASK_HEADS)
def test_onnx_matches_pytorch_on_a_padded_batch(head: str, exported: dict) -> None:
    import onnx

    model, path = exported[head]
    session = X.load_session(path)
    diffs = X.max_abs_diff(model, session)  # 3 x 37 (4 options), rows padded to 37 / 34 / 31
    assert max(diffs.values()) <= X.FP32_TOLERANCE, diffs
    # the mask is an input that matters: unmasked padding gives other outputs
    batch = example_inputs(model, batch=3, seq=37, choices=4, seed=1)
    unmasked = {**batch, "attention_mask": torch.ones_like(batch["attention_mask"])}
    first = session.get_outputs()[0].name
    assert not np.allclose(X.run_session(session, batch)[first], X.run_session(session, unmasked)[first])
    graph = onnx.load(str(path)).graph
    names = [i.name for i in graph.input]
    assert names[:3] == ["input_ids", "attention_mask", "token_type_ids"]
    assert names[3:] == (["p_mask"] if head == "squad_v2" else [])
    axes = [d.dim_param for d in graph.input[0].type.tensor_type.shape.dim]
    assert axes == (["batch", "choices", "sequence"] if head == "multiple_choice" else ["batch", "sequence"])


@pytest.mark.parametrize("head", ["classification", "pretraining"])
def test_shared_layers_are_stored_once(head: str, exported: dict) -> None:
    """albert-tiny: 4 layers in 2 groups. A copy per layer would double the encoder's weights."""
    model, path = exported[head]
    stats = X.initializer_stats(path, model)
    assert stats["stored_once"], stats
    assert stats["float_initializers"] == stats["model_parameters"]  # perturbed weights: none merge
    # the tied MLM decoder is the word embedding matrix, once
    assert stats["initializer_bytes"] <= stats["parameter_bytes"]


def test_onnx_int8_quantizes_every_weight_matmul(exported: dict, tmp_path: Path) -> None:
    model, path = exported["classification"]
    before = weight_matmul_coverage(path)
    # 4 layers in 2 groups: qkv, out, up, down per layer + embedding projection, pooler, classifier
    assert (before.quantized, before.float_weight) == (0, 4 * 4 + 3)
    coverage = quantize_onnx_int8(path, tmp_path / "int8.onnx")
    assert (coverage.quantized, coverage.float_weight, coverage.fraction) == (19, 0, 1.0)
    diffs = X.max_abs_diff(model, X.load_session(tmp_path / "int8.onnx"))
    assert 0 < diffs["logits"] < 0.05


def test_a_weight_behind_a_transpose_needs_the_pre_processing(tmp_path: Path) -> None:
    """What the exporter emits for large weights (albert-base): MatMul(x, Transpose(W)). Plain
    quantize_dynamic leaves it in float (and the counter says so); quant_pre_process folds the transpose."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import quantize_dynamic

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["W"], ["Wt"]), helper.make_node("MatMul", ["x", "Wt"], ["y"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "linear.onnx")
    quantize_dynamic(str(tmp_path / "linear.onnx"), str(tmp_path / "plain.onnx"))
    assert weight_matmul_coverage(tmp_path / "plain.onnx") == MatmulCoverage(quantized=0, float_weight=1)
    assert quantize_onnx_int8(tmp_path / "linear.onnx", tmp_path / "int8.onnx") == MatmulCoverage(1, 0)


def test_torch_int8_quantizes_each_shared_linear_once() -> None:
    model = _model("classification")
    linears = {id(m) for m in model.modules() if type(m) is torch.nn.Linear}
    assert len(linears) == 2 * 4 + 3  # 2 groups x (qkv, out, up, down) + projection, pooler, classifier
    batch = example_inputs(model, batch=3, seq=20)
    with torch.no_grad():
        want = model(**batch)["logits"]
        quantize_torch_int8(model)
        got = model(**batch)["logits"]
    assert int8_linear_count(model) == (len(linears), 0)
    # the four layers still use the two groups' blocks, each one module
    encoder = model.albert.encoder
    assert len(encoder.attention) == 2 and len(encoder.ffn) == 2
    assert float((got - want).abs().max()) < 0.05


def _export(argv: list[str]) -> int:
    """``albert export onnx --model MODEL_DIR ...`` (``argv``: the model directory first)."""
    return main(["export", "onnx", "--model", *argv])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model") / "sentiment")


def test_cli_export_with_int8_and_a_metric(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_lm.finetune.rundir import load_finetuned
    from albert_lm.infer.labelled import read_labelled, task_metrics
    from albert_lm.tasks.evaluate import model_predict_fn

    dev = write_polarity_like(tmp_path / "polarity.csv")
    out = tmp_path / "onnx"
    argv = [
        str(model_dir),
        "--output",
        str(out),
        "--int8",
        "--calibrate-on",
        str(dev),
        "--columns",
        "label,text",
    ]
    assert _export(argv) == 0
    printed = capsys.readouterr().out
    assert "19 of 19 weight MatMuls quantized" in printed and "stored once" in printed
    names = {p.name for p in out.iterdir()}
    assert {
        "model.onnx",
        "model.int8.onnx",
        "config.json",
        "task.json",
        "vocab.txt",
        "export_report.json",
    } <= names
    report = json.loads((out / "export_report.json").read_text())
    assert report["inputs"] == ["input_ids", "attention_mask", "token_type_ids"] and report["outputs"] == [
        "logits"
    ]
    assert report["parity"]["ok"] and max(report["parity"]["max_abs_diff"].values()) <= 1e-4
    assert report["int8"]["fraction_quantized"] == 1.0
    assert report["files"]["model.int8.onnx"] < report["files"]["model.onnx"]
    metrics = report["metrics"]
    assert metrics["examples"] == 12
    # the fp32 file scores what PyTorch scores on the same file
    ft = load_finetuned(model_dir)
    examples = read_labelled(ft.info, dev, ["label", "text"])
    model = ft.task.build_model(model_dir)
    expected = task_metrics(ft.task, examples, ft.tokenizer, ft.max_seq_length, model_predict_fn(model))
    assert metrics["fp32"]["accuracy"] == pytest.approx(expected["accuracy"])
    assert metrics["score_change"] == pytest.approx(metrics["int8"]["score"] - metrics["fp32"]["score"])


def test_cli_export_bad_inputs_fail_with_one_line(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def error(argv: list[str]) -> str:
        assert _export(argv) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("albert export: error: ") and "\n" not in err, err
        return err

    assert "no such directory" in error([str(tmp_path / "missing"), "--output", str(tmp_path / "o")])
    (tmp_path / "empty").mkdir()
    assert "config.json" in error([str(tmp_path / "empty"), "--output", str(tmp_path / "o")])
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    assert "--overwrite" in error([str(model_dir), "--output", str(busy)])
    assert (busy / "keep.txt").is_file()
    assert "no such file" in error(
        [str(model_dir), "--output", str(tmp_path / "o"), "--calibrate-on", "nope.csv"]
    )
    assert not (tmp_path / "o").exists()
    headless = tmp_path / "headless"  # task.json says classification, the weights have no classifier
    make_model_dir(headless)
    HEADS[None](AlbertConfig.from_preset("albert-tiny", vocab_size=len(VOCAB))).save_pretrained(headless)
    assert "classifier" in error([str(headless), "--output", str(tmp_path / "o")])
    assert _export([str(model_dir), "--output", str(busy), "--overwrite"]) == 0
    assert (busy / "model.onnx").is_file() and not (busy / "keep.txt").exists()
