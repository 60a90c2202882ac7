"""The README.md model card of every model directory that `albert finetune`, `albert pretrain` and
`albert export onnx` write: Hub metadata that huggingface_hub's own parser reads (library, pipeline tag,
datasets, base model, a model-index equal to the run's report.json metrics) and a human part that says how
to load the model, and whether transformers can."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: its helper modules

from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GLUE_DIR = FIXTURES / "glue"
SQUAD = FIXTURES / "squad" / "tiny-v1.1.json"


def _tiny_init(root: Path, words_from: list[Path]) -> Path:
    import torch

    from albert_lm.model import AlbertModel

    torch.manual_seed(0)
    words: set[str] = set()
    for f in words_from:
        words.update(re.findall(r"\w+|[^\w\s]", f.read_text(encoding="utf-8").lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    root.mkdir(parents=True)
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    AlbertModel(AlbertConfig.from_preset("albert-tiny", vocab_size=len(vocab))).save_pretrained(root)
    return root


def _card_metrics(card) -> dict[tuple[str, str], float]:  # type: ignore[no-untyped-def]
    return {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results or []}


def _report_metrics(record: dict, splits: list[str]) -> dict[tuple[str, str], float]:  # type: ignore[type-arg]
    out = {}
    for key, value in record.items():
        if key in ("dir", "step", "selected_by") or not isinstance(value, (int, float)):
            continue
        split = next((s for s in splits[1:] if key.startswith(f"{s}_")), splits[0])
        out[(split, key if split == splits[0] else key.removeprefix(f"{split}_"))] = float(value)
    return out


def test_glue_run_cards_carry_report_metrics_and_load_in_transformers(tmp_path: Path) -> None:
    from huggingface_hub import ModelCard

    transformers = pytest.importorskip("transformers")
    init = _tiny_init(tmp_path / "init", sorted(GLUE_DIR.rglob("*.tsv")))
    run = tmp_path / "run"
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--model", str(init)]
    argv += ["--output", str(run), "--train-steps", "4", "--eval-every", "2", "--batch-size", "3"]
    argv += ["--learning-rate", "1e-3", "--max-seq-length", "32", "--no-progress", "--precision", "fp32"]
    assert main(argv) == 0
    report = json.loads((run / "report.json").read_text())
    splits = list(report["num_dev_examples"])
    for role in ("best", "last"):
        record = report["checkpoints"][role]
        model_dir = run / record["dir"]
        card = ModelCard.load(model_dir / "README.md")
        assert card.data.library_name == "albert-lm" and card.data.pipeline_tag == "text-classification"
        assert card.data.datasets == ["nyu-mll/glue"] and "albert" in card.data.tags
        assert card.data.license == "unknown" and card.data.base_model is None  # a local random init
        metrics = _card_metrics(card)
        assert metrics == _report_metrics(record, splits) and ("dev", "accuracy") in metrics
        assert {r.dataset_config for r in card.data.eval_results} == {"sst2"}
        assert "from transformers import AutoTokenizer, AlbertForSequenceClassification" in card.text
        assert f"learning_rate: {1e-3:g}" in card.text and "transformers cannot load" not in card.text
        # what the card promises: transformers loads it whole
        _, info = transformers.AlbertForSequenceClassification.from_pretrained(
            str(model_dir), output_loading_info=True
        )
        assert info["missing_keys"] == []


def test_squad2_verifier_run_card_says_transformers_cannot_load_it(tmp_path: Path) -> None:
    from huggingface_hub import ModelCard

    from albert_lm.tasks.squad_data import make_unanswerable

    init = _tiny_init(tmp_path / "init", [SQUAD])
    data = json.loads(SQUAD.read_text(encoding="utf-8"))["data"]
    v2 = tmp_path / "tiny-v2.0.json"
    v2.write_text(json.dumps({"version": "v2.0", "data": make_unanswerable(data, 0.4, seed=1)}))
    run = tmp_path / "run"
    argv = ["finetune", "squad", "--version", "2.0", "--train-file", str(v2), "--dev-file", str(v2)]
    argv += ["--model", str(init), "--output", str(run), "--no-progress", "--train-steps", "4"]
    argv += ["--eval-every", "2", "--batch-size", "4", "--max-seq-length", "48", "--doc-stride", "16"]
    argv += ["--max-query-length", "16", "--precision", "fp32"]
    assert main(argv) == 0
    report = json.loads((run / "report.json").read_text())
    best = report["checkpoints"]["best"]
    card = ModelCard.load(run / best["dir"] / "README.md")
    assert card.data.pipeline_tag == "question-answering" and card.data.datasets == ["rajpurkar/squad_v2"]
    assert _card_metrics(card) == _report_metrics(best, list(report["num_dev_examples"]))
    assert "transformers cannot load this model" in card.text and "squad_v2 head" in card.text
    assert json.loads((run / best["dir"] / "config.json").read_text())["model_type"] == "albert-lm"


def test_pretrained_model_card(tmp_path: Path) -> None:
    from data_support import WIKI_SAMPLE, make_tokenizer, train_spm
    from huggingface_hub import ModelCard

    from albert_lm.data import PrepareConfig, prepare

    tok = make_tokenizer(train_spm(tmp_path / "spiece.model", vocab_size=400))
    prepare(
        [WIKI_SAMPLE],
        tok,
        tmp_path / "data",
        PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"),
    )
    run = tmp_path / "run"
    argv = ["pretrain", "--recipe", "smoke", "--data-dir", str(tmp_path / "data"), "--output", str(run),
            "--set", "schedule.train_steps=4", "--set", "run.max_steps=2", "--set", "run.eval_every=null",
            "--set", "run.threads=1", "--set", "run.precision=fp32"]  # fmt: skip
    assert main(argv) == 0
    card = ModelCard.load(run / "model" / "README.md")
    assert card.data.library_name == "albert-lm" and card.data.pipeline_tag == "fill-mask"
    assert "- steps: 2" in card.text and "AlbertForPreTraining" in card.text
    assert "from transformers import AutoTokenizer, AlbertForPreTraining" in card.text


def test_export_card(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from huggingface_hub import ModelCard
    from inference_support import make_model_dir

    from albert_lm.export.pipeline import export_model_dir

    model_dir = make_model_dir(tmp_path / "model")
    export_model_dir(model_dir, tmp_path / "onnx")
    card = ModelCard.load(tmp_path / "onnx" / "README.md")
    assert card.data.library_name == "albert-lm" and "onnx" in card.data.tags
    assert card.data.pipeline_tag == "text-classification"
    assert "albert predict --model onnx --backend onnx" in card.text
