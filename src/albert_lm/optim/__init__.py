"""Optimizers and learning-rate schedules of the original ALBERT recipe.

`build_training` is the one builder of a run's optimizer and schedule, from the settings both workflows
share (`albert_lm.train.settings.OptimSettings` / `ScheduleSettings`, read here by their attributes: this
layer is below ``train``); pretraining (`albert_lm.pretrain.run`) and fine-tuning
(`albert_lm.train.Trainer.for_finetuning`) both call it. Its parts are public too::

    optimizer = build_optimizer(model, "lamb", lr=0.00176)       # pretraining (run_pretraining.py)
    scheduler = build_scheduler(optimizer, total_steps=125_000, warmup_steps=3125)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from albert_lm.optim._checks import check_finite
from albert_lm.optim.lamb import DEFAULT_BETAS, DEFAULT_EPS, DEFAULT_WEIGHT_DECAY, Lamb
from albert_lm.optim.param_groups import (
    ORIGINAL_EXCLUDE_PATTERNS,
    excluded_parameter_names,
    head_prefixes,
    layer_decay_scales,
    param_groups,
)
from albert_lm.optim.schedules import WarmupPolyDecay, build_scheduler, build_time_scheduler

logger = logging.getLogger(__name__)

OPTIMIZERS: tuple[str, ...] = ("lamb", "adamw", "adamw_original")

__all__ = [
    "OPTIMIZERS",
    "Lamb",
    "WarmupPolyDecay",
    "build_optimizer",
    "build_scheduler",
    "build_training",
    "excluded_parameter_names",
    "head_prefixes",
    "layer_decay_scales",
    "param_groups",
]


def build_optimizer(
    model: nn.Module,
    name: str,
    lr: float,
    *,
    weight_decay: float = DEFAULT_WEIGHT_DECAY,
    betas: tuple[float, float] = DEFAULT_BETAS,
    eps: float = DEFAULT_EPS,
    exclude_patterns: Sequence[str] = ORIGINAL_EXCLUDE_PATTERNS,
    fused: bool | None = None,
    lr_scales: Mapping[str, float] | None = None,
) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``model``'s trainable parameters, with the original's exclusions.

    Args:
        model: the module to train.
        name: ``"lamb"`` (original lamb_optimizer.py), ``"adamw"`` (`torch.optim.AdamW`: Adam *with* bias
            correction, decoupled weight decay ``w *= 1 - lr * wd``), or ``"adamw_original"`` (the original
            optimization.py AdamWeightDecayOptimizer: no bias correction, ``w -= lr * (m / (sqrt(v) + eps)
            + wd * w)``).
        lr: peak learning rate (the schedule multiplies it).
        weight_decay: rate for the parameters not excluded (original: 0.01 for both optimizers).
        betas, eps: Adam moments and epsilon (original: 0.9, 0.999, 1e-6).
        exclude_patterns: name patterns excluded from weight decay (and from LAMB's trust ratio).
        fused: for ``adamw``, use torch's fused kernel (default: where torch has one for the parameters'
            device, see `_fused_adamw_applies`). It computes the same update as the per-tensor loop.
        lr_scales: parameter-name prefix -> multiplier of ``lr`` (and so of every scheduled rate) for the
            parameters under it, e.g. ``{"mlm.": 10, "sop.": 10}`` for heads that start from random on a
            pretrained encoder; the rest train at ``lr``.

    Raises:
        ValueError: an unknown ``name``, or a hyperparameter that is NaN or infinite.
    """
    check_finite(name, lr=lr, weight_decay=weight_decay, beta1=betas[0], beta2=betas[1], eps=eps)
    for prefix, scale in (lr_scales or {}).items():
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(
                f"build_optimizer: the lr scale of {prefix!r} must be a finite number > 0 (got {scale})"
            )
    groups = param_groups(model, weight_decay, exclude_patterns, lr_scales=lr_scales)
    if not groups:
        raise ValueError("build_optimizer: the model has no trainable parameters")
    for g in groups:
        g["lr"] = lr * g.get("lr_scale", 1.0)
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "adamw_original":
        for g in groups:
            g["adapt"] = False
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=False)
    if name == "adamw":
        if fused is None:
            fused = _fused_adamw_applies([p for g in groups for p in g["params"]])
        return torch.optim.AdamW(
            groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused or None
        )
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


# torch.optim.AdamW(fused=True) runs on CPU from torch 2.4 (before: CUDA only).
FUSED_ADAMW_CPU_TORCH = (2, 4)


def _fused_adamw_applies(params: Sequence[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW kernel runs for ``params``: all floating point, all on CUDA, or all on
    the CPU with torch >= 2.4.

    On the CPU the unfused default is torch's per-tensor loop, seven elementwise passes per tensor;
    the fused kernel makes one. For the demo's albert-small step that took the optimizer from 4-5% of the
    step to under 1% (benchmarks/profile_step.py).
    """
    if not params or not all(p.is_floating_point() for p in params):
        return False
    if all(p.is_cuda for p in params):
        return True
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    return version >= FUSED_ADAMW_CPU_TORCH and all(p.device.type == "cpu" for p in params)


class OptimizerSettings(Protocol):
    """What `build_training` reads of `albert_lm.train.settings.OptimSettings`."""

    optimizer: str
    learning_rate: float
    weight_decay: float
    beta1: float
    beta2: float
    adam_epsilon: float
    head_lr_scale: float
    layer_lr_decay: float


class ScheduleShape(Protocol):
    """What `build_training` reads of `albert_lm.train.settings.ScheduleSettings`."""

    by: str
    power: float
    start_warmup_step: int
    warmup_fraction: float
    lr_scheduler_type: str
    min_lr_rate: float


def build_training(
    model: nn.Module,
    optim: OptimizerSettings,
    schedule: ScheduleShape,
    *,
    total_steps: int,
    warmup_steps: int,
    budget_s: float | None = None,
    lr_scales: Mapping[str, float] | None = None,
) -> tuple[torch.optim.Optimizer, Any]:
    """The optimizer and learning-rate schedule of a training run: `build_optimizer` with ``optim``'s
    name, lr, weight decay, betas and epsilon, then warmup + polynomial decay over ``total_steps`` (warmup
    ``warmup_steps``) or, with ``schedule.by == "time"``, over ``budget_s`` seconds of training
    (`build_time_scheduler`, warmup ``schedule.warmup_fraction`` of it). ``optim.head_lr_scale`` other
    than 1 scales the lr of the parts `head_prefixes` names (logged once), ``optim.layer_lr_decay`` below 1
    the encoder's (`layer_decay_scales`), beside any ``lr_scales``; ``schedule.lr_scheduler_type`` and
    ``min_lr_rate`` shape the decay (`albert_lm.optim.schedules`).

    Raises:
        ValueError: ``by == "time"`` without a budget, and what `build_optimizer` raises.
    """
    scale = optim.head_lr_scale
    if scale != 1:
        heads = head_prefixes(model)
        if not heads:
            raise ValueError(
                f"optim.head_lr_scale {scale:g}: {type(model).__name__} has no albert.* encoder with a head or "
                "pooler on top to scale"
            )
        logger.info("optim.head_lr_scale %g: %s train at lr %g", scale, ", ".join(f"{p}*" for p in heads),
                    optim.learning_rate * scale)  # fmt: skip
        lr_scales = {**dict.fromkeys(heads, scale), **(lr_scales or {})}
    if optim.layer_lr_decay != 1:
        layers = layer_decay_scales(model, optim.layer_lr_decay)
        logger.info("optim.layer_lr_decay %g: the encoder's %d weight groups and embeddings at lr x %s",
                    optim.layer_lr_decay, len({*layers.values()}) - 1,
                    ", ".join(f"{s:.3g}" for s in sorted({*layers.values()})))  # fmt: skip
        lr_scales = {**(lr_scales or {}), **layers}
    optimizer = build_optimizer(
        model,
        optim.optimizer,
        optim.learning_rate,
        weight_decay=optim.weight_decay,
        betas=(optim.beta1, optim.beta2),
        eps=optim.adam_epsilon,
        lr_scales=lr_scales,
    )
    if schedule.by == "time":
        if not budget_s:
            raise ValueError("schedule.by=time needs a time budget (run.max_time_minutes)")
        warmup_s = schedule.warmup_fraction * budget_s
        return optimizer, build_time_scheduler(
            optimizer, budget_s=budget_s, warmup_s=warmup_s, power=schedule.power,
            shape=schedule.lr_scheduler_type, floor=schedule.min_lr_rate,
        )  # fmt: skip
    scheduler = build_scheduler(
        optimizer,
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        power=schedule.power,
        start_warmup_step=schedule.start_warmup_step,
        shape=schedule.lr_scheduler_type,
        floor=schedule.min_lr_rate,
    )
    return optimizer, scheduler
