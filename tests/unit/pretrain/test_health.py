"""The run's health watch (albert_lm.pretrain.health): the plateau, collapse and loss spikes, each logged once
with advice and written to health.json; and a real pretraining run that writes its spread."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from albert_lm.config import AlbertConfig
from albert_lm.model import AlbertForPreTraining
from albert_lm.pretrain.health import HEALTH_FILE, HealthMonitor, representation_spread


def _batch(n: int = 8, t: int = 12, vocab: int = 50) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(5, vocab, (n, t), generator=g),
        "token_type_ids": torch.zeros(n, t, dtype=torch.long),
        "attention_mask": torch.ones(n, t, dtype=torch.long),
    }


def _model() -> AlbertForPreTraining:
    torch.manual_seed(0)
    return AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny", vocab_size=50))


def _monitor(tmp_path: Path, probe: dict[str, torch.Tensor] | None = None) -> HealthMonitor:
    return HealthMonitor(0.05, 1.5, probe, lambda r: r["step"] / 100, tmp_path)


def test_spread_is_zero_for_an_encoder_that_ignores_its_input() -> None:
    model, batch = _model(), _batch()
    assert representation_spread(model, batch) > 0.05
    with torch.no_grad():  # every token the same embedding: every sequence the same output
        model.albert.embeddings.word.weight.zero_()
    assert representation_spread(model, batch) < 1e-5
    assert model.training  # the model is handed back in the mode it came in


def test_collapse_is_reported_once_and_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model, batch = _model(), _batch()
    mon = _monitor(tmp_path, batch)
    mon.start(model)
    assert "eval_representation_spread" in mon.on_eval(10, {}, model)
    assert mon.events == []
    with torch.no_grad():
        model.albert.embeddings.word.weight.zero_()
    with caplog.at_level(logging.WARNING, logger="albert_lm.pretrain.health"):
        mon.on_eval(20, {}, model)
        mon.on_eval(30, {}, model)
    assert [e["kind"] for e in mon.events] == ["collapse"] and mon.events[0]["step"] == 20
    assert sum("representation spread" in r.message for r in caplog.records) == 1
    saved = json.loads((tmp_path / HEALTH_FILE).read_text())
    assert saved["events"][0]["kind"] == "collapse" and saved["reference_spread"] > 0.05


def test_plateau_only_after_a_quarter_of_the_budget(tmp_path: Path) -> None:
    mon = _monitor(tmp_path)
    mon.on_train_record({"step": 10, "loss": 7.0, "mlm_accuracy": 0.05})  # 10%: early plateaus are normal
    assert mon.events == []
    mon.on_train_record({"step": 30, "loss": 7.0, "mlm_accuracy": 0.20})  # 30%, 4x the rate: learning
    assert mon.events == []
    mon.on_train_record({"step": 40, "loss": 7.0, "mlm_accuracy": 0.06})  # 40%, 1.2x the rate
    mon.on_eval(40, {"eval_mlm_accuracy": 0.06}, _model())
    assert [e["kind"] for e in mon.events] == ["plateau"]
    assert "train longer" in mon.events[0]["advice"] and "mlm_bias_init=unigram" in mon.events[0]["advice"]


def test_plateau_advice_leaves_out_the_unigram_bias_a_run_already_has(tmp_path: Path) -> None:
    mon = HealthMonitor(0.05, 1.5, None, lambda r: r["step"] / 100, tmp_path, unigram_bias=True)
    mon.on_train_record({"step": 40, "loss": 7.0, "mlm_accuracy": 0.06})  # 40%, 1.2x the rate
    advice = mon.events[0]["advice"]
    assert (
        "mlm_bias_init" not in advice
        and advice.startswith("the model predicts")
        and "Try: train longer" in advice
    )


def test_spike_against_the_recent_median_and_divergence(tmp_path: Path) -> None:
    mon = _monitor(tmp_path)
    for step, loss in enumerate([8.0, 7.5, 7.2, 7.0, 6.9, 6.8, 6.7, 6.7, 6.6, 6.6, 6.5], 1):
        mon.on_train_record({"step": step, "loss": loss})
    assert mon.events == []  # a falling loss is no spike
    mon.on_train_record({"step": 12, "loss": 11.0})  # 1.6x the median of the last 10
    mon.on_train_record({"step": 13, "loss": float("nan")})
    mon.on_train_record({"step": 14, "loss": 12.0})  # once per kind
    assert [(e["kind"], e["step"]) for e in mon.events] == [("spike", 12), ("diverged", 13)]


def test_the_pretraining_run_logs_the_spread(tmp_path: Path) -> None:
    from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

    from albert_lm.data import PrepareConfig, prepare
    from albert_lm.pretrain.config import recipe
    from albert_lm.pretrain.run import pretrain

    tok = make_tokenizer(train_spm(tmp_path / "spiece.model", vocab_size=400))
    data = tmp_path / "data"
    prepare([WIKI_SAMPLE], tok, data, PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"))
    cfg = recipe("smoke")
    cfg.data.data_dir = cfg.data.eval_data_dir = str(data)
    cfg.run.output = str(tmp_path / "run")
    cfg.schedule.train_steps = 4
    cfg.run.eval_every = 2
    pretrain(cfg)
    evals = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    spreads = [r["eval_representation_spread"] for r in evals if "eval_representation_spread" in r]
    assert len(spreads) == 2 and all(s >= 0 for s in spreads)
