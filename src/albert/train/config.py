"""The options of the one training loop, `TrainerConfig`: what `albert.train.trainer.Trainer` needs, built
by each workflow from its settings (`albert.train.settings`: the sections pretraining and fine-tuning share).
"""

from __future__ import annotations

from dataclasses import dataclass

from albert.config import ConfigError
from albert.train.settings import FP32_LINEARS, PRECISIONS, Rule, above, at_least, one_of, section_problems

__all__ = ["FP32_LINEARS", "PRECISIONS", "ConfigError", "TrainerConfig"]


@dataclass
class TrainerConfig:
    """Options of the loop (the optimizer and schedule are built outside)."""

    max_steps: int
    """Optimizer steps to run (a resumed run counts the steps already done)."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step on each rank."""
    max_grad_norm: float | None = 1.0
    """Global-norm gradient clipping (original optimization.py: clip_by_global_norm 1.0); None: no clipping."""
    # The loop built in code computes in the precision it is given, fp32 unless told: tests and benchmarks
    # that build it compare numbers bit for bit. The commands' default, "auto", is `RunSettings.precision`.
    precision: str = "fp32"
    """auto | fp32 | bf16 | fp16, as `albert.train.settings.RunSettings.precision`."""
    device: str | None = None
    """cpu | cuda | cuda:N | None (GPU if available)."""
    fp32_linear: str = "auto"
    """as `albert.train.settings.RunSettings.fp32_linear`."""
    compile: bool = False
    """torch.compile the model."""
    activation_checkpointing: bool = False
    """Recompute each transformer layer in the backward pass (less memory, ~30% more compute)."""
    log_every: int = 10
    """Write a metrics line every N steps."""
    eval_every: int | None = None
    """Run eval_fn every N steps (None: only at the end)."""
    eval_at_end: bool = True
    save_every: int | None = None
    """Write a checkpoint every N steps (None: only at the end)."""
    save_at_end: bool = True
    keep_last: int = 3
    """Step checkpoints kept (older ones are deleted; `best` is separate). Original keep_checkpoint_max: 5."""
    best_metric: str | None = None
    """Keep RUN_DIR/checkpoints/best for this eval metric (e.g. eval_accuracy)."""
    best_mode: str = "max"
    """max | min."""
    max_bad_steps: int = 10
    """Consecutive non-finite steps tolerated before stopping."""
    spike_rollback: bool = False
    """On a loss spike or a non-finite step, go back to the last good checkpoint and skip the batches read
    since (`albert.train.rollback`); needs a run_dir and save_every or save_every_s."""
    spike_skip_batches: int = 0
    """Global batches (one optimizer step's data each) skipped beyond those read up to the spike."""
    spike_max_rollbacks: int = 3
    """Rollbacks in a run; the next spike raises `TrainingDiverged`."""
    max_time_s: float | None = None
    """Wall-clock budget of training time (summed over resumed runs; evaluation excluded); then checkpoint
    and stop."""
    progress_bar: bool = True
    tensorboard: bool = True
    """Also log to RUN_DIR/tb when the tensorboard package is installed."""
    find_unused_parameters: bool = False
    """DDP option, for models with parameters that some batches do not use."""

    def __post_init__(self) -> None:
        rules: list[Rule] = [
            ("max_steps", at_least(0), "at least 0"),
            ("grad_accum_steps", at_least(1), "at least 1"),
            ("precision", *one_of(PRECISIONS)),
            ("fp32_linear", *one_of(FP32_LINEARS)),
            ("log_every", at_least(1), "at least 1"),
            ("eval_every", at_least(1), "at least 1 or None"),
            ("save_every", at_least(1), "at least 1 or None"),
            ("keep_last", at_least(1), "at least 1"),
            ("best_mode", *one_of(("max", "min"))),
            ("max_bad_steps", at_least(0), "at least 0"),
            ("spike_skip_batches", at_least(0), "at least 0"),
            ("spike_max_rollbacks", at_least(0), "at least 0"),
            # finite too (coerce): NaN fails every comparison and inf passes "> 0"; None: no clipping / budget
            ("max_grad_norm", above(0), "finite and > 0, or None"),
            ("max_time_s", above(0), "finite and > 0, or None"),
        ]
        problems = section_problems(self, "TrainerConfig", rules)
        if problems:
            raise ConfigError(problems)
