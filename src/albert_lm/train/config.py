"""The options of the one training loop, `TrainerConfig`: what `albert_lm.train.trainer.Trainer` needs, built
by each workflow from its settings (`albert_lm.train.settings`: the sections pretraining and fine-tuning share).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from albert_lm.config import ConfigError
from albert_lm.train.settings import (
    FP32_LINEARS,
    PRECISIONS,
    RULES,
    OptimSettings,
    Rule,
    RunSettings,
    above,
    at_least,
    one_of,
    section_problems,
)

__all__ = ["FP32_LINEARS", "PRECISIONS", "ConfigError", "TrainerConfig"]

# The loop's fields that are settings of the ``run`` section too: their defaults, help and rules are
# RunSettings' (declared there once); `TrainerConfig.from_settings` copies them. The loop built in code
# therefore runs at the commands' precision, "auto" (bf16 on a CPU or GPU with native bf16): code that
# compares numbers bit for bit passes ``precision="fp32"`` (and ``fp32_linear="torch"``).
_RUN = RunSettings()
_OPTIM = OptimSettings()


@dataclass
class TrainerConfig:
    """Options of the loop (the optimizer and schedule are built outside). The fields shared with the
    ``run`` / ``optim`` settings mean what `albert_lm.train.settings.RunSettings` says (``max_grad_norm``:
    `OptimSettings`), with the same defaults."""

    max_steps: int
    """Optimizer steps to run (a resumed run counts the steps already done)."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step on each rank."""
    max_grad_norm: float | None = _OPTIM.max_grad_norm
    precision: str = _RUN.precision
    device: str | None = _RUN.device
    fp32_linear: str = _RUN.fp32_linear
    cpu_attention: str = _RUN.cpu_attention
    compile: bool = _RUN.compile
    activation_checkpointing: bool = _RUN.activation_checkpointing
    log_every: int = _RUN.log_every  # type: ignore[assignment]  # an int there too; null only in fine-tuning's file
    eval_every: int | None = _RUN.eval_every
    """Run eval_fn every N steps (None: only at the end)."""
    eval_at_end: bool = True
    save_every: int | None = _RUN.save_every
    """Write a checkpoint every N steps (None: only at the end)."""
    save_at_end: bool = True
    keep_last: int = _RUN.keep_last
    best_metric: str | None = None
    """Keep RUN_DIR/checkpoints/best for this eval metric (e.g. eval_accuracy)."""
    best_mode: str = "max"
    """max | min."""
    max_bad_steps: int = _RUN.max_bad_steps
    spike_rollback: bool = _RUN.spike_rollback
    spike_skip_batches: int = _RUN.spike_skip_batches
    spike_max_rollbacks: int = _RUN.spike_max_rollbacks
    max_time_s: float | None = None
    """Wall-clock budget of training time (summed over resumed runs; evaluation excluded); then checkpoint
    and stop."""
    progress: bool = _RUN.progress
    adaptive_threads_minutes: float | None = _RUN.adaptive_threads_minutes
    """Re-decide the CPU thread count every N minutes (`albert_lm.train.threads`); None: never."""
    tensorboard: bool = True
    """Also log to RUN_DIR/tb when the tensorboard package is installed (the loop built in code; the
    commands set it false and name their trackers in ``report_to``)."""
    report_to: str = _RUN.report_to
    tracking_params: dict[str, Any] = field(default_factory=dict)
    """The run's settings, flat, as the trackers of ``report_to`` record them (MLflow params, W&B config)."""
    early_stopping_patience: int | None = _RUN.early_stopping_patience
    early_stopping_threshold: float = _RUN.early_stopping_threshold
    find_unused_parameters: bool = False
    """DDP option, for models with parameters that some batches do not use."""

    def __post_init__(self) -> None:
        own = {f.name for f in fields(self)}
        shared = [rule for rule in RULES[RunSettings] + RULES[OptimSettings] if rule[0] in own]
        rules: list[Rule] = [
            *shared,  # max_steps, precision, fp32_linear, log_every, ... and max_grad_norm
            ("grad_accum_steps", at_least(1), "at least 1"),
            ("best_mode", *one_of(("max", "min"))),
            # finite too (coerce): NaN fails every comparison and inf passes "> 0"; None: no budget
            ("max_time_s", above(0), "finite and > 0, or None"),
        ]
        problems = section_problems(self, "TrainerConfig", rules)
        if self.early_stopping_patience is not None and self.best_metric is None:
            problems.append(("TrainerConfig.early_stopping_patience", "needs a best_metric (held-out data)"))
        if problems:
            raise ConfigError(problems)

    @classmethod
    def from_settings(cls, run: RunSettings, optim: OptimSettings, **loop: Any) -> TrainerConfig:
        """The loop's options of a workflow: every field shared with ``run`` / ``optim`` copied from them,
        the time budget in seconds, and ``loop`` for what the workflow decides itself (``max_steps``,
        ``eval_every`` when it has no held-out data, ...)."""
        shared = {f.name: getattr(run, f.name) for f in fields(cls) if hasattr(run, f.name)}
        shared["max_grad_norm"] = optim.max_grad_norm
        shared["max_time_s"] = run.max_time_minutes * 60 if run.max_time_minutes else None
        shared["tensorboard"] = False  # the command's trackers are run.report_to's
        return cls(**{**shared, **loop})
