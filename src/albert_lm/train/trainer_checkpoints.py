"""What a training run saves and how it comes back: the trainer's checkpoints (weights, optimizer, schedule,
scaler, RNG and data position: `albert_lm.train.checkpoint`), its best checkpoint, and an exact resume. A part
of `albert_lm.train.trainer.Trainer`, kept apart as the loop's one seam with the disk."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.distributed import barrier
from albert_lm.train.parallelize import resumed_run

logger = logging.getLogger(__name__)

# The loop counters a checkpoint saves and a resume restores (trainer_state.json, with the data position).
LOOP_STATE = ("step", "tokens", "elapsed_s", "bad_steps")


class TrainerCheckpoints:
    """The checkpointing methods of `albert_lm.train.trainer.Trainer` (which holds the state they read)."""

    _bar: Any
    _last_lr: Any
    _saved_at_s: Any
    _train_window: Any
    _training_s: Any
    best: Any
    config: Any
    data: Any
    device: Any
    dist: Any
    dtype: Any
    elapsed_s: Any
    eval_history: Any
    fp: Any
    last_checkpoint: Any
    metrics_log: Any
    model: Any
    on_save: Any
    optimizer: Any
    rollback: Any
    scaler: Any
    scheduler: Any
    step: Any
    tokens: Any
    fp32_linear: str
    _require_run_dir: Callable[[str], Path]

    def _trainer_state(self) -> dict[str, Any]:
        return {
            **{key: getattr(self, key) for key in LOOP_STATE},
            "best_value": self.best.value,
            "best_step": self.best.step,
            "epoch": self.data.epoch,
            "batch_in_epoch": self.data.batch_in_epoch,
            "batches_read": self.data.consumed,
            "rollbacks": self.rollback.events if self.rollback is not None else [],
            "best_metric": self.config.best_metric,
            "eval_history": self.eval_history,
            "world_size": self.dist.world_size,
            "grad_accum_steps": self.config.grad_accum_steps,
            "fp32_linear": self.fp32_linear,
        }

    def save(self) -> Path:
        """Write a step checkpoint now (collective: call on every rank); returns its path."""
        rank_state = {
            "rng": ckpt_io.rng_state(),
            "data": self.data.state_dict(),
            "window": self._train_window.state_dict(),
            "last_lr": self._last_lr,
        }
        self.last_checkpoint = ckpt_io.save_training(
            self._require_run_dir("save") / "checkpoints",
            self.step,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            scaler=self.scaler,
            trainer_state=self._trainer_state(),
            rank_state=rank_state,
            dist=self.dist,
            keep_last=self.config.keep_last,
            on_save=self.on_save,
        )
        self._saved_at_s = self._training_s
        return self.last_checkpoint

    def _save_best(self, metrics: dict[str, float]) -> None:
        root = self._require_run_dir("save") / "checkpoints"
        if self.dist.is_main:
            state = {"step": self.step, "metrics": metrics, "best_metric": self.config.best_metric}
            ckpt_io.write_checkpoint(
                root, ckpt_io.BEST_NAME, model=self.model, trainer_state=state, on_save=self.on_save
            )
            logger.info("new best %s = %.5g at step %d", self.best.name, self.best.value, self.step)
        barrier(self.dist)

    def _resume(self, where: Path) -> None:
        path = ckpt_io.latest_checkpoint(where)
        state = self.restore(path)
        self.fp32_linear = resumed_run(state, path, self.config, self.fp32_linear, self.device, self.dtype)
        if self.rollback is not None:
            self.rollback.resumed(self.step, state)
        logger.info(
            "resumed from %s at step %d (epoch %d, %d tokens)", path, self.step, self.data.epoch, self.tokens
        )

    def restore(self, path: Path, rollback: bool = False) -> dict[str, Any]:
        """Load the step checkpoint ``path``: model, optimizer, schedule, scaler, RNG and loop state (the
        lines of metrics.jsonl after it go); a ``rollback`` keeps the data position and the clock going
        (`albert_lm.train.rollback`). Returns its trainer state."""
        state, mine = ckpt_io.load_training(
            path,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            scaler=self.scaler,
            rank=self.dist.rank,
            world_size=self.dist.world_size,  # a different number of ranks is refused
        )
        clock = self.elapsed_s
        for key in LOOP_STATE:
            setattr(self, key, state[key])
        if rollback:
            self.elapsed_s = clock
        else:
            self.data.restore(state["epoch"], state["batch_in_epoch"], mine.get("data"))
            self.data.consumed = state.get("batches_read", self.step * self.config.grad_accum_steps)
        self._training_s = self._saved_at_s = self.elapsed_s
        self.best.value, self.best.step = state["best_value"], state["best_step"]
        self.eval_history = list(state.get("eval_history", []))
        self._train_window.load_state_dict(mine.get("window", {}), self.device)
        self._last_lr = mine.get("last_lr", float("nan"))
        ckpt_io.set_rng_state(mine["rng"])
        self.last_checkpoint = path
        self.metrics_log.truncate(self.step)  # lines written after this checkpoint (interrupted or abandoned)
        if self._bar is not None and self._bar.unit == "step":
            self._bar.n = self.step
        return state
