"""What the loop does when training goes bad: stop after too many non-finite steps in a row
(`stop_diverged`), or, with ``TrainerConfig.spike_rollback``, go back to a good checkpoint (`SpikeRollback`).

PaLM met loss spikes that the usual remedies did not prevent, and "restart[ed] training from a checkpoint
roughly 100 steps before the spike started, and skip[ped] roughly 200-500 data batches that were seen before
and during the spike" (Chowdhery et al. 2022, Sec. 5.1); OPT's logbook did the same by hand. Here:

* a spike is `albert_lm.train.spikes.LossSpikes`' (a logged loss above 1.5x the median of the last 10 logged
  losses, the rule the health watch logs by), or a non-finite loss or gradient, which then rolls back instead
  of being skipped (`TrainerConfig.max_bad_steps`);
* the checkpoint gone back to is the newest one written at or before the last logged step whose loss was no
  spike, so nothing of the flagged stretch is in it (``keep_last`` checkpoints must reach back that far);
  the step checkpoints after it belong to the abandoned stretch and are deleted;
* model, optimizer, schedule, loss scaler, RNG states and the loop's counters come from it, as on a resume,
  but not the data position or the clock: the batches read since that checkpoint are skipped, not replayed,
  and ``spike_skip_batches`` global batches more; the time spent stays spent (``max_time_s``);
* one WARNING line; ``metrics.jsonl`` loses its lines after the checkpoint (as on a resume) and gets a
  record of the rollback (``step``: where to, ``rollback_from_step``, ``rollback_skipped_batches``,
  ``rollback_reason``), also passed to ``on_log`` (the `HealthMonitor` keeps it in health.json) and saved
  with the next checkpoints (``rollbacks`` in trainer_state.json), so a resumed run counts on;
* after ``spike_max_rollbacks`` rollbacks the next spike raises `TrainingDiverged`, naming them.

Every rank takes the same decision (the logged loss is all-reduced, the verdict too) and loads the same
checkpoint, which, as for a resume, every rank must be able to read. Without a good checkpoint yet, a spike
is only logged and a non-finite step skipped, as without the flag.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from albert_lm.config import ConfigError
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.distributed import all_reduce_sum, barrier
from albert_lm.train.spikes import SPIKE_WINDOW, LossSpikes

if TYPE_CHECKING:
    from albert_lm.train.trainer import Trainer

__all__ = ["SpikeRollback", "TrainingDiverged", "stop_diverged"]

logger = logging.getLogger(__name__)

ADVICE = "Lower the learning rate, check the data, or use bf16 instead of fp16."


class TrainingDiverged(RuntimeError):
    """Too many consecutive steps with a non-finite loss or gradient, or too many loss spikes."""


def stop_diverged(trainer: Trainer) -> NoReturn:
    """After ``max_bad_steps`` non-finite steps in a row: save the current state when it is finite (the
    skipped steps did not change it) and raise `TrainingDiverged` saying where the last good state is."""
    msg = (
        f"training stopped: {trainer.bad_steps} consecutive steps with a non-finite loss or gradient "
        f"(max_bad_steps={trainer.config.max_bad_steps}) at step {trainer.step}. The model was not updated by "
        "those steps"
    )
    bad = ckpt_io.first_non_finite(trainer.model, trainer.optimizer)
    if trainer.run_dir is None:
        msg += "; no run_dir, so nothing was saved"
    elif bad is None:
        path = trainer.save()
        msg += f"; the last good state is saved in {path}"
    else:  # an earlier update made the weights non-finite: this state is not good, keep the last one
        last = trainer.last_checkpoint or "none (no checkpoint yet)"
        msg += (
            f". {bad} holds NaN or infinite values, so no checkpoint was written; the last good one is {last}"
        )
    raise TrainingDiverged(f"{msg}. {ADVICE}")


class SpikeRollback:
    """Rolls a trainer back on a loss spike or a non-finite step; see the module docstring."""

    def __init__(self, trainer: Trainer) -> None:
        cfg = trainer.config
        if trainer.run_dir is None:
            raise ConfigError("TrainerConfig.spike_rollback: needs a run_dir (checkpoints to go back to)")
        if not (cfg.save_every or trainer.save_every_s):
            raise ConfigError(
                "TrainerConfig.spike_rollback: needs checkpoints to go back to: save_every (steps) or "
                "save_every_s (run.save_every / run.save_every_minutes)"
            )
        self.root = trainer.run_dir / "checkpoints"
        self.skip_batches = cfg.spike_skip_batches
        self.max_rollbacks = cfg.spike_max_rollbacks
        self.spikes = LossSpikes()
        self.good_step = 0
        """The last logged step whose loss was no spike (or the step resumed or rolled back to)."""
        self.events: list[dict[str, Any]] = []

    def resumed(self, step: int, trainer_state: dict[str, Any]) -> None:
        """The run continues from a checkpoint at ``step``: it is good, and its rollbacks count."""
        self.good_step = step
        self.events = list(trainer_state.get("rollbacks", []))

    # -------------------------------------------------------------------------------- the hooks
    def after_log(self, trainer: Trainer, record: dict[str, Any]) -> bool:
        """After a training record is logged: roll back if its loss is a spike (on any rank). Returns
        whether the trainer was rolled back."""
        loss = float(record.get("loss", math.nan))
        median = self.spikes.check(loss)
        flag = torch.tensor(float(median is not None or not math.isfinite(loss)), dtype=torch.float64)
        if not all_reduce_sum(flag.to(trainer.device), trainer.dist).item():
            self.good_step = trainer.step
            return False
        what = f"training loss {loss:.4g} at step {trainer.step}"
        if median is not None:
            what += f", {loss / median:.1f}x the median of the last {SPIKE_WINDOW} logged ({median:.4g})"
        return self.roll_back(trainer, trainer.step, "loss spike", what)

    def on_non_finite(self, trainer: Trainer, what: str) -> bool:
        """A step with a non-finite ``what`` (loss, gradient norm): roll back instead of skipping it.
        Returns whether the trainer was rolled back."""
        step = trainer.step + 1  # the step that failed
        return self.roll_back(trainer, step, f"non-finite {what}", f"non-finite {what} at step {step}")

    # -------------------------------------------------------------------------------- the rollback
    def target(self) -> Path | None:
        """The newest step checkpoint written at or before `good_step`, or None."""
        good = [p for p in ckpt_io.list_checkpoints(self.root) if ckpt_io.step_of_dir(p) <= self.good_step]
        return good[-1] if good else None

    def roll_back(self, trainer: Trainer, from_step: int, reason: str, what: str) -> bool:
        """Go back from ``from_step`` (where ``what`` happened) to `target` and skip the batches read since it
        and ``skip_batches`` more (False: no checkpoint to go back to).

        Raises:
            TrainingDiverged: the run has rolled back ``max_rollbacks`` times already.
        """
        target = self.target()
        if len(self.events) >= self.max_rollbacks:
            done = "; ".join(f"step {e['rollback_from_step']} to {e['step']}" for e in self.events) or "none"
            raise TrainingDiverged(
                f"training stopped: {what}, after {len(self.events)} rollback(s) (spike_max_rollbacks="
                f"{self.max_rollbacks}; rolled back from {done}). Nothing was saved of this state; the last good "
                f"checkpoint is {target or 'none'}. {ADVICE}"
            )
        if target is None:
            logger.warning(
                "%s: no checkpoint written at or before step %d, the last logged step without a spike, to roll "
                "back to; going on without a rollback (spike_rollback)",
                what,
                self.good_step,
            )
            return False
        read = trainer.data.consumed
        state = trainer.restore(target, rollback=True)
        accum = trainer.config.grad_accum_steps
        for _ in range(self.skip_batches * accum):  # micro-batches per rank
            trainer.data.next()
        since = (read - state.get("batches_read", state["step"] * accum)) // accum
        if trainer.dist.is_main:
            ckpt_io.drop_checkpoints_after(self.root, trainer.step)
        barrier(trainer.dist)
        self.good_step = trainer.step
        event = {
            "step": trainer.step,
            "rollback_from_step": from_step,
            "rollback_skipped_batches": since + self.skip_batches,
            "rollback_reason": reason,
        }
        self.events.append(event)
        trainer.metrics_log.write(event)
        if trainer.on_log is not None and trainer.dist.is_main:
            trainer.on_log(event)
        logger.warning(
            "%s: rolled back from step %d to step %d (%s) and skipped %d global batches (the %d read since it "
            "and %d more); rollback %d of at most %d (spike_rollback: PaLM, Chowdhery et al. 2022, Sec. 5.1)",
            what,
            from_step,
            trainer.step,
            target,
            since + self.skip_batches,
            since,
            self.skip_batches,
            len(self.events),
            self.max_rollbacks,
        )
        return True
