"""``optim.head_lr_scale`` (``--head-lr-scale``), one setting of both workflows: what sits on top of the
encoder (the pretraining heads, a task head, the pooler) trains at a multiple of the lr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.finetune.config import FinetuneConfig
from albert_lm.model import (
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForSquadV2,
)
from albert_lm.optim import build_training, head_prefixes
from albert_lm.pretrain.init import HEAD_PARTS
from albert_lm.train.settings import OptimSettings, ScheduleSettings

TINY = AlbertConfig(
    vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32,
)  # fmt: skip


def test_head_prefixes_name_what_sits_on_top_of_the_encoder() -> None:
    assert head_prefixes(AlbertForPreTraining(TINY)) == list(HEAD_PARTS.values())  # mlm., sop., pooler
    assert head_prefixes(AlbertForSequenceClassification(TINY, 3)) == ["classifier.", "albert.pooler."]
    assert head_prefixes(AlbertForMultipleChoice(TINY)) == ["classifier.", "albert.pooler."]
    assert head_prefixes(AlbertForQuestionAnswering(TINY)) == ["qa."]
    assert head_prefixes(AlbertForSquadV2(TINY)) == ["squad."]
    assert head_prefixes(nn.Linear(2, 2)) == []  # no albert.* encoder: nothing to tell a head from


def _first_step_sizes(scale: float) -> dict[str, float]:
    """The mean |update| of the first AdamW step (bias-corrected: each element moves by ~lr) of the encoder,
    the pooler and the classifier of a tiny classification model at head_lr_scale ``scale``."""
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(TINY, 2)
    optim = OptimSettings(optimizer="adamw", learning_rate=1e-3, weight_decay=0.0, head_lr_scale=scale)
    opt, _ = build_training(model, optim, ScheduleSettings(), total_steps=10, warmup_steps=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(5, 50, (4, 12))
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 1, 0, 1]))
    out["loss"].backward()
    opt.step()
    sizes: dict[str, list[float]] = {"encoder": [], "pooler": [], "classifier": []}
    for n, p in model.named_parameters():
        part = (
            "pooler"
            if n.startswith("albert.pooler.")
            else "classifier"
            if n.startswith("classifier.")
            else "encoder"
        )
        sizes[part].append((p.detach() - before[n]).abs().mean().item())
    return {k: sum(v) / len(v) for k, v in sizes.items()}


def test_fine_tuning_trains_the_task_head_and_pooler_at_the_scaled_lr() -> None:
    one, ten = _first_step_sizes(1.0), _first_step_sizes(10.0)
    assert one["classifier"] == pytest.approx(1e-3, rel=0.05) and one["pooler"] == pytest.approx(
        1e-3, rel=0.1
    )
    assert ten["classifier"] == pytest.approx(1e-2, rel=0.05) and ten["pooler"] == pytest.approx(
        1e-2, rel=0.1
    )
    assert ten["encoder"] == pytest.approx(one["encoder"], rel=1e-4)  # the encoder's rate is untouched


def test_a_model_without_an_encoder_refuses_a_head_lr_scale() -> None:
    optim = OptimSettings(optimizer="adamw", learning_rate=1e-3, head_lr_scale=10.0)
    with pytest.raises(ValueError, match="optim.head_lr_scale 10: Linear has no albert.. encoder"):
        build_training(nn.Linear(2, 2), optim, ScheduleSettings(), total_steps=2, warmup_steps=0)


def test_the_record_holds_head_lr_scale_only_where_it_is_set() -> None:
    assert "head_lr_scale" not in FinetuneConfig().to_dict()  # records of earlier runs stay comparable
    cfg = FinetuneConfig(head_lr_scale=10.0)
    assert cfg.optim.head_lr_scale == 10.0 and cfg.to_dict()["head_lr_scale"] == 10.0


def test_finetune_custom_takes_the_flag_and_records_it(tmp_path: Path, caplog) -> None:
    from standin_tokenizer import make_tiny_model_dir

    from albert_lm.cli.main import main

    rows = [("a good film", "pos"), ("a bad film", "neg"), ("good acting", "pos"), ("bad acting", "neg")]
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
    init = make_tiny_model_dir(tmp_path / "init", [t for t, _ in rows])
    run = tmp_path / "run"
    argv = ["finetune", "custom", "--train", str(data), "--dev", str(data), "--init", str(init), "--output",
            str(run), "--train-steps", "2", "--batch-size", "2", "--max-seq-length", "16", "--no-progress",
            "--precision", "fp32", "--head-lr-scale", "10", "--learning-rate", "1e-4"]  # fmt: skip
    with caplog.at_level("INFO"):
        assert main(argv) == 0
    assert "optim.head_lr_scale 10: classifier.*, albert.pooler.* train at lr 0.001" in caplog.text
    assert json.loads((run / "report.json").read_text())["config"]["head_lr_scale"] == 10.0
