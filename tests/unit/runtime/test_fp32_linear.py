"""The fp32 linear backend: oneDNN's forward gives F.linear's values and gradients, applies only where it
should, and the start-up choice keeps torch unless oneDNN is clearly faster."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.model import AlbertForPreTraining
from albert_lm.runtime import fp32_linear as fl

pytestmark = pytest.mark.skipif(not fl.onednn_available(), reason="this torch has no oneDNN")


@pytest.fixture
def onednn_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    calls: list[tuple[int, ...]] = []
    real = fl._onednn_linear

    def counting(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return real(x, w, b)

    monkeypatch.setattr(fl, "_onednn_linear", counting)
    return calls


def _step(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch)["loss"]
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_onednn_training_step_matches_torch(onednn_calls: list[tuple[int, ...]]) -> None:
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny")).train()
    ids = torch.randint(5, model.config.vocab_size, (2, 16))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    batch = dict(input_ids=ids, mlm_labels=labels, sop_labels=torch.tensor([0, 1]))
    loss_ref, grads_ref = _step(model, batch)
    assert not onednn_calls
    with fl.fp32_linear("onednn"):
        loss, grads = _step(model, batch)
    # every nn.Linear of the step ran on oneDNN: embedding projection, qkv, out, up, down per layer, MLM
    # dense, pooler, SOP (the tied MLM decoder is an F.linear too)
    assert len(onednn_calls) >= 4 * model.config.num_hidden_layers
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-6)
    assert grads.keys() == grads_ref.keys()
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], rtol=1e-4, atol=1e-6, msg=name)


def test_onednn_leaves_autocast_and_other_dtypes_alone(onednn_calls: list[tuple[int, ...]]) -> None:
    layer = nn.Linear(8, 4)
    x = torch.randn(3, 8)
    with fl.fp32_linear("onednn"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert layer(x).dtype == torch.bfloat16
        layer.double()(x.double())
        assert not onednn_calls
        layer.float()(x)
    assert onednn_calls == [(3, 8)]


def test_unknown_backend_is_refused() -> None:
    with (
        pytest.raises(ValueError, match="fp32 linear backend must be one of torch, onednn"),
        fl.fp32_linear("openblas"),
    ):
        pass
    with pytest.raises(ValueError, match="got 'mkl'"):
        fl.choose_fp32_linear("mkl")


@pytest.mark.parametrize(
    "torch_s,onednn_s,want",
    [
        ([1.0, 1.0, 1.0, 1.0, 1.0], [0.95, 0.95, 0.95, 0.95, 0.95], "torch"),  # 5% faster: within the margin
        ([1.0, 1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5, 0.5], "onednn"),
        ([1.0, 1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 2.0, 2.0, 2.0], "torch"),  # loses most paired trials
        ([1.0, 1.0, 1.0, 1.0, 1.0], [1.5, 1.5, 1.5, 1.5, 1.5], "torch"),
    ],
)
def test_pick_needs_a_clear_paired_win(torch_s: list[float], onednn_s: list[float], want: str) -> None:
    assert fl.pick_backend({"torch": torch_s, "onednn": onednn_s}) == want


def test_auto_measures_once_and_logs_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fl, "_chosen", {})
    measured = []

    def fake_measure(*_: object, **__: object) -> dict[str, list[float]]:
        measured.append(1)
        return {"torch": [1.0, 1.0, 1.0], "onednn": [0.5, 0.5, 0.5]}

    monkeypatch.setattr(fl, "measure_fp32_linear", fake_measure)
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.fp32_linear"):
        assert fl.choose_fp32_linear() == "onednn"
        assert fl.choose_fp32_linear("auto") == "onednn"
    assert len(measured) == 1
    assert [r.getMessage() for r in caplog.records if "fp32 linear backend" in r.getMessage()] == [
        caplog.records[0].getMessage()
    ]
    assert "auto -> onednn" in caplog.records[0].getMessage()


def test_measure_times_both_backends_pairwise() -> None:
    times = fl.measure_fp32_linear(shapes=((16, 8, 4),), trials=3)
    assert set(times) == {"torch", "onednn"}
    assert all(len(v) == 3 and all(t > 0 for t in v) for v in times.values())


def test_model_predict_fn_runs_fp32_on_the_chosen_backend(
    monkeypatch: pytest.MonkeyPatch, onednn_calls: list[tuple[int, ...]]
) -> None:
    from albert_lm.model import AlbertForSequenceClassification
    from albert_lm.tasks.evaluate import model_predict_fn

    torch.manual_seed(0)
    model = AlbertForSequenceClassification(AlbertConfig.from_preset("albert-tiny"), num_labels=3)
    batch = {
        "input_ids": torch.randint(5, 100, (2, 12)),
        "attention_mask": torch.ones(2, 12, dtype=torch.long),
    }
    monkeypatch.setattr(fl, "_chosen", {"auto": "torch"})
    want = model_predict_fn(model, fp32_linear="auto")(batch)
    assert not onednn_calls
    monkeypatch.setattr(fl, "_chosen", {"auto": "onednn"})
    got = model_predict_fn(model, fp32_linear="auto")(batch)
    assert onednn_calls
    assert got.keys() == want.keys()
    for name in got:
        torch.testing.assert_close(
            torch.from_numpy(got[name]), torch.from_numpy(want[name]), rtol=1e-5, atol=1e-5
        )


def test_settings_name_every_backend_and_a_bad_one_is_refused_at_the_boundary() -> None:
    from albert_lm.pretrain.config import ConfigError, apply_dict, recipe
    from albert_lm.train.config import FP32_LINEARS, TrainerConfig

    assert ("auto", *fl.FP32_LINEAR_BACKENDS) == FP32_LINEARS
    with pytest.raises(ValueError, match="TrainerConfig.fp32_linear: must be one of"):
        TrainerConfig(precision="fp32", max_steps=1, fp32_linear="mkl")
    cfg = apply_dict(recipe("smoke"), {"run": {"fp32_linear": "mkl"}}, "test")
    with pytest.raises(ConfigError, match="run.fp32_linear: must be one of auto, torch, onednn"):
        cfg.validate()


def test_trainer_uses_the_configured_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from albert_lm.train.trainer import Trainer, TrainerConfig

    monkeypatch.setattr(fl, "_chosen", {"auto": "onednn"})
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fixed = Trainer(
        model, opt, None, TrainerConfig(precision="fp32", max_steps=1, device="cpu", fp32_linear="torch")
    )
    auto = Trainer(model, opt, None, TrainerConfig(precision="fp32", max_steps=1, device="cpu"))
    bf16 = Trainer(model, opt, None, TrainerConfig(max_steps=1, device="cpu", precision="bf16"))
    assert (fixed.fp32_linear, auto.fp32_linear, bf16.fp32_linear) == ("torch", "onednn", "torch")
