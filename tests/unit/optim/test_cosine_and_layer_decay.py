"""The cosine schedule (``--lr-scheduler-type cosine``, ``--min-lr-rate``) and layer-wise lr decay
(``--layer-lr-decay``), checked per optimizer parameter group against hand-computed rates."""

from __future__ import annotations

import pytest
import torch

from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.finetune.config import FinetuneConfig
from albert_lm.model import AlbertForPreTraining, AlbertForSequenceClassification
from albert_lm.optim import build_training, layer_decay_scales
from albert_lm.optim.schedules import TimeWarmupPolyDecay, WarmupPolyDecay
from albert_lm.train.settings import OptimSettings, ScheduleSettings


def _model(sharing: str = "all", groups: int = 1, layers: int = 4) -> AlbertForSequenceClassification:
    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset(
        "albert-tiny", sharing=sharing, num_hidden_groups=groups, num_hidden_layers=layers
    )
    return AlbertForSequenceClassification(cfg, 2)


def _lr_by_name(opt: torch.optim.Optimizer) -> dict[str, float]:
    return {n: float(g["lr"]) for g in opt.param_groups for n in g["names"]}


def _rate_of(lrs: dict[str, float], prefix: str) -> float:
    rates = {lr for n, lr in lrs.items() if n.startswith(prefix)}
    assert len(rates) == 1, (prefix, rates)  # every parameter under a prefix trains at one rate
    return rates.pop()


# lr 0.1, 10 steps, warmup 2, floor 0.1: the warmup 0, 0.05; then 0.1 * (0.1 + 0.9 * 0.5 * (1 + cos(pi p)))
# with p = (step - 2) / 8: p=0 -> 0.1; p=1/4 -> 0.5 * (1 + 0.7071068) = 0.8535534 -> 0.0868198;
# p=1/2 -> 0.055; p=3/4 -> 0.5 * (1 - 0.7071068) = 0.1464466 -> 0.0231802; p=1 and after -> the floor, 0.01
COSINE_LRS = {0: 0.0, 1: 0.05, 2: 0.1, 4: 0.0868198, 6: 0.055, 8: 0.0231802, 10: 0.01, 12: 0.01}


def test_cosine_lr_per_step_matches_the_hand_computed_rates() -> None:
    model = _model()
    optim = OptimSettings(optimizer="adamw", learning_rate=0.1, weight_decay=0.0)
    schedule = ScheduleSettings(lr_scheduler_type="cosine", min_lr_rate=0.1)
    opt, sched = build_training(model, optim, schedule, total_steps=10, warmup_steps=2)
    seen = {}
    for step in range(13):
        seen[step] = [float(g["lr"]) for g in opt.param_groups]
        opt.step()
        sched.step()
    for step, lr in COSINE_LRS.items():
        assert seen[step] == pytest.approx([lr] * len(opt.param_groups), abs=1e-7), step


def test_cosine_to_zero_and_the_polynomial_floor() -> None:
    cos = WarmupPolyDecay(total_steps=100, warmup_steps=0, shape="cosine")
    assert [cos(0), cos(50), cos(100)] == pytest.approx([1.0, 0.5, 0.0])
    # the original's linear decay counted from step 0, lifted onto a floor of 0.2: 0.2 + 0.8 * (1 - 30/100)
    poly = WarmupPolyDecay(total_steps=100, warmup_steps=10, floor=0.2)
    assert [poly(5), poly(30), poly(100)] == pytest.approx([0.5, 0.76, 0.2])
    # laid over training time: half the budget after a 10 s warmup of 110 s -> cos(pi/2)
    assert TimeWarmupPolyDecay(110.0, 10.0, shape="cosine")(60.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown decay 'step'"):
        WarmupPolyDecay(total_steps=10, shape="step")


@pytest.mark.parametrize(
    ("sharing", "groups", "expected"),
    [
        # full sharing, one group (every released ALBERT): the shared block is one level at the full lr;
        # only the embeddings are decayed, once
        ("all", 1, {"albert.embeddings.": 0.8, "albert.encoder.attention.0.": 1.0, "albert.encoder.ffn.0.": 1.0}),
        # two groups: two levels, the embeddings 0.8^2
        ("all", 2, {"albert.embeddings.": 0.64, "albert.encoder.attention.0.": 0.8,
                    "albert.encoder.attention.1.": 1.0, "albert.encoder.ffn.0.": 0.8, "albert.encoder.ffn.1.": 1.0}),
        # no sharing: one level per layer, as ELECTRA (layer 1 of 4 at 0.8^3, the embeddings 0.8^4)
        ("none", 1, {"albert.embeddings.": 0.4096, "albert.encoder.attention.0.": 0.512,
                     "albert.encoder.attention.1.": 0.64, "albert.encoder.attention.2.": 0.8,
                     "albert.encoder.attention.3.": 1.0, "albert.encoder.ffn.0.": 0.512,
                     "albert.encoder.ffn.3.": 1.0}),
        # attention shared per group, FFN per layer: each layer's FFN at its group's level
        ("attention", 2, {"albert.embeddings.": 0.64, "albert.encoder.attention.0.": 0.8,
                          "albert.encoder.attention.1.": 1.0, "albert.encoder.ffn.0.": 0.8,
                          "albert.encoder.ffn.1.": 0.8, "albert.encoder.ffn.2.": 1.0, "albert.encoder.ffn.3.": 1.0}),
    ],
)  # fmt: skip
def test_layer_decay_lrs_per_parameter_group(sharing: str, groups: int, expected: dict[str, float]) -> None:
    model = _model(sharing, groups)
    optim = OptimSettings(optimizer="adamw", learning_rate=1e-3, layer_lr_decay=0.8, head_lr_scale=10.0)
    opt, _ = build_training(model, optim, ScheduleSettings(), total_steps=10, warmup_steps=0)
    lrs = _lr_by_name(opt)
    assert set(lrs) == {n for n, _ in model.named_parameters()}  # every parameter in one group
    for prefix, scale in expected.items():
        assert _rate_of(lrs, prefix) == pytest.approx(1e-3 * scale, rel=1e-9), prefix
    # the head and the pooler: the full lr, times head_lr_scale (one mechanism, lr_scales)
    assert _rate_of(lrs, "classifier.") == pytest.approx(1e-2)
    assert _rate_of(lrs, "albert.pooler.") == pytest.approx(1e-2)
    # each group's lr is its "lr_scale" times the base: the schedule scales them all alike
    for g in opt.param_groups:
        assert g["lr"] == pytest.approx(1e-3 * g.get("lr_scale", 1.0))


def test_layer_decay_one_is_off_and_pretraining_heads_keep_the_full_lr() -> None:
    model = _model()
    opt, _ = build_training(model, OptimSettings(optimizer="adamw", learning_rate=1e-3), ScheduleSettings(),
                            total_steps=10, warmup_steps=0)  # fmt: skip
    assert set(_lr_by_name(opt).values()) == {1e-3}
    pre = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny"))
    scales = layer_decay_scales(pre, 0.5)
    # albert-tiny has two groups: the embeddings two levels down
    assert scales["albert.embeddings."] == 0.25 and not any(p.startswith(("mlm.", "sop.")) for p in scales)


def test_layer_decay_is_a_checked_setting() -> None:
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="optim.layer_lr_decay"):
            FinetuneConfig(layer_lr_decay=bad).validate()
    with pytest.raises(ConfigError, match="schedule.lr_scheduler_type"):
        FinetuneConfig(lr_scheduler_type="step").validate()
    with pytest.raises(ConfigError, match="schedule.min_lr_rate"):
        FinetuneConfig(min_lr_rate=1.0).validate()
    with pytest.raises(ValueError, match="has no ALBERT encoder"):
        build_training(torch.nn.Linear(2, 2), OptimSettings(layer_lr_decay=0.5), ScheduleSettings(),
                       total_steps=2, warmup_steps=0)  # fmt: skip
