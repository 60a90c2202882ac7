"""`Predictor`: one tokenizer call per batch, rows in input order, and the same predictions from torch fp32,
torch int8 and ONNX Runtime (fp32 / int8) for classification, multiple choice and SQuAD 2.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inference_support import TEXTS, make_model_dir

from albert_lm.export.pipeline import export_model_dir
from albert_lm.finetune.rundir import load_finetuned
from albert_lm.infer.predictor import Predictor
from albert_lm.infer.runners import featurize
from albert_lm.tasks.base import Example, ModelDirError
from albert_lm.tasks.inputs import encode_text_pair


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("cls") / "model")


@pytest.fixture(scope="module")
def onnx_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("onnx") / "export"
    export_model_dir(model_dir, out, int8=True)
    return out


def _records(texts: list[str]) -> list[dict[str, Any]]:
    return [{"_texts": [t]} for t in texts]


def _probs(rows: list[dict[str, Any]]) -> list[float]:
    return [r["probabilities"][k] for r in rows for k in ("neg", "pos")]


class CountingTokenizer:
    """The model's tokenizer, counting its encode calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode_ids_batch(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.encode_ids_batch(*args, **kwargs)


@pytest.mark.parametrize("pairs", [False, True])
def test_featurize_is_one_tokenizer_call_with_the_task_ids(model_dir: Path, pairs: bool) -> None:
    ft = load_finetuned(model_dir)
    tokenizer = CountingTokenizer(ft.tokenizer)
    texts = [(t, TEXTS[-1 - i]) if pairs else (t,) for i, t in enumerate(TEXTS)]
    examples = [Example(str(i), t) for i, t in enumerate(texts)]
    for max_length in (12, 48):
        features = featurize(ft.task, examples, tokenizer, max_length)
        for ex, feat in zip(examples, features):
            ids, types = encode_text_pair(
                ft.tokenizer, ex.texts[0], ex.texts[1] if pairs else None, max_length
            )
            assert (feat["input_ids"], feat["token_type_ids"]) == (ids, types)
    assert tokenizer.calls == 2  # one per batch, not one per text
    assert max(len(f["input_ids"]) for f in featurize(ft.task, examples, tokenizer, 12)) == 12


def test_rows_keep_the_input_order_and_equal_one_by_one(model_dir: Path) -> None:
    predictor = Predictor.load(model_dir, batch_size=3)  # several length-sorted sub-batches
    rows = predictor.rows(predictor.examples(_records(TEXTS)))
    assert [r["text"] for r in rows] == TEXTS
    alone = [predictor.rows(predictor.examples(_records([t])))[0] for t in TEXTS]
    assert [r["label"] for r in rows] == [r["label"] for r in alone]
    assert _probs(rows) == pytest.approx(_probs(alone), abs=1e-6)
    assert predictor.describe()["labels"] == ["neg", "pos"] and predictor.max_seq_length == 48


def test_onnx_and_int8_backends_agree_with_torch(model_dir: Path, onnx_dir: Path) -> None:
    torch_rows = Predictor.load(model_dir).rows
    examples = Predictor.load(model_dir).examples(_records(TEXTS))
    want = _probs(torch_rows(examples))
    onnx = Predictor.load(onnx_dir, backend="onnx", threads=1)
    assert _probs(onnx.rows(examples)) == pytest.approx(want, abs=1e-5)
    for backend, path in (("onnx", onnx_dir), ("torch", model_dir)):
        int8 = Predictor.load(path, backend=backend, int8=True)
        got = _probs(int8.rows(examples))
        assert got == pytest.approx(want, abs=0.02) and got != pytest.approx(want, abs=1e-7)


@pytest.mark.parametrize("kind", ["multiple_choice", "squad_v2"])
def test_other_heads_through_an_onnx_export_made_at_load_time(kind: str, tmp_path: Path) -> None:
    model_dir = make_model_dir(tmp_path / kind, kind)
    if kind == "multiple_choice":
        records = [
            {"context": "the film is funny", "question": "is it ?", "options": ["good", "bad", "dull"]},
            {
                "context": "a long and slow story " * 4,
                "question": "what ?",
                "options": ["the cast", "the plot"],
            },
            {"context": "paris", "question": "where ?", "options": ["france", "city", "river", "a"]},
        ]
    else:
        records = [
            {"question": "what is the capital of france ?", "context": "paris is the capital of france ."},
            {"question": "who was funny ?", "context": "the cast was funny and the plot was good . " * 5},
        ]
    torch_pred = Predictor.load(model_dir)
    examples = torch_pred.examples(records)
    want = torch_pred.rows(examples)
    got = Predictor.load(model_dir, backend="onnx").rows(examples)
    assert len(got) == len(records)
    for g, w in zip(got, want):
        if kind == "multiple_choice":
            assert g["prediction"] == w["prediction"]
            assert g["probabilities"] == pytest.approx(w["probabilities"], abs=1e-5)
        else:
            assert (g["question"], g["answer"]) == (w["question"], w["answer"])
            assert g["null_odds"] == pytest.approx(w["null_odds"], abs=1e-4)


def test_load_errors_say_what_is_missing(model_dir: Path, tmp_path: Path) -> None:
    only_fp32 = tmp_path / "fp32"
    export_model_dir(model_dir, only_fp32)
    with pytest.raises(ModelDirError, match="no model.safetensors"):
        Predictor.load(only_fp32)
    with pytest.raises(ModelDirError, match="model.int8.onnx"):
        Predictor.load(only_fp32, backend="onnx", int8=True)
    with pytest.raises(ModelDirError, match="backend"):
        Predictor.load(model_dir, backend="tensorrt")
