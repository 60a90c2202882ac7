"""ONE training loop for pretraining and fine-tuning (what `albert pretrain` and the task helpers call).

The loop knows two things: a module whose ``forward(**batch)`` returns a dict (e.g. `albert_lm.model.Output`)
with a scalar ``loss`` (and optionally more 0-d tensors, e.g. ``mlm_accuracy``, which are logged), and an
iterable of batches (dicts of tensors, already collated; the loop moves them to the device). Fine-tuning::

    from albert_lm.train import OptimSettings, Trainer, TrainerConfig

    def evaluate(model) -> dict[str, float]:        # called in eval mode under torch.no_grad()
        return {"eval_accuracy": ...}

    trainer = Trainer.for_finetuning(
        model,                                      # e.g. AlbertForSequenceClassification.from_pretrained(dir)
        optim=OptimSettings(optimizer="adamw", learning_rate=2e-5), total_steps=5336, warmup_steps=320,  # warmup, linear decay
        config=TrainerConfig(max_steps=5336, grad_accum_steps=1, eval_every=500,
                             best_metric="eval_accuracy", best_mode="max", save_every=500, keep_last=1),
        run_dir="runs/sst2", eval_fn=evaluate, on_save=lambda d: tokenizer.save_pretrained(d))
    result = trainer.fit(train_loader)             # re-iterated as epochs until max_steps
    result.best_metric, result.best_step, result.best_checkpoint   # RUN_DIR/checkpoints/best (model dir)
    result.last_checkpoint                                          # RUN_DIR/checkpoints/step-...
    result.eval_history                                             # [{"step": 500, "eval_accuracy": ...}]

* `Trainer(model, optimizer, scheduler, config, run_dir=..., eval_fn=..., metrics_fn=..., data_state=...,
  on_save=..., dist=..., save_every_s=...)` is the general form; `albert_lm.optim.build_optimizer` /
  `build_scheduler` make the optimizer and schedule (LAMB for pretraining).
* ``config.grad_accum_steps`` micro-batches (per rank) make one optimizer step: global batch = micro batch
  x grad_accum_steps x world size. The loss of each micro-batch is divided by ``grad_accum_steps``.
* ``eval_fn(model) -> dict[str, float]`` runs every ``eval_every`` steps and at the end, on every rank
  (return the same numbers on every rank), with the unwrapped model in eval mode, under ``no_grad`` and
  the run's autocast. Keys without an ``eval_`` prefix get one. With ``best_metric`` the best model is kept
  in ``RUN_DIR/checkpoints/best`` (model directory only).
* ``config.early_stopping_patience``: stop when ``best_metric`` stops improving (`.early_stopping`).
* ``metrics_fn(batch, output) -> {name: tensor | (numerator, denominator)}`` adds training metrics (ratios
  are summed separately and divided at log time, e.g. exact accuracies over a logging window).
* ``data_state``: an object with ``state_dict()`` / ``load_state_dict()`` giving the data position (the
  pretraining dataset); by default the batch iterable itself if it has them. Without one, resuming skips the
  batches already consumed in the current epoch (exact when the order per epoch is deterministic:
  ``set_epoch(epoch)`` is called on the iterable, or on its ``sampler``, when it has one).
* ``save_every_s``: a step checkpoint also whenever that much training time (the clock ``max_time_s``
  counts) has passed since the last one; with ``config.save_every`` (steps) whichever comes first.
* ``fit(batches, resume=None | True | path)`` returns a `TrainResult`; ``resume=True`` continues from the
  newest checkpoint of ``run_dir``. On CPU a resumed run reproduces the uninterrupted one bit for bit.
* Files: ``RUN_DIR/metrics.jsonl`` (one JSON object per logged step: step, loss, every metric, lr,
  grad_norm, tokens_per_s, tokens, elapsed_s; and per evaluation: step + eval metrics),
  the trackers of ``config.report_to`` (`albert_lm.train.trackers`), ``RUN_DIR/checkpoints/``, ``result.json``.
* Non-finite loss: the step is skipped with a warning (the model is not updated); after
  ``max_bad_steps`` in a row the current (last good) state is saved and `TrainingDiverged` is raised (if an
  earlier update left NaN / inf weights, nothing is written and the error names the last good checkpoint).
  With fp16 a gradient overflow only lowers the loss scale (as `torch.amp.GradScaler` intends).
* ``config.spike_rollback``: a spike or non-finite step goes back to the last good checkpoint (`.rollback`).
* SIGINT / SIGTERM: the current step finishes, a checkpoint is written, ``fit`` returns with
  ``stop_reason`` ``"signal"`` (a second Ctrl-C interrupts at once). ``max_time_s`` does the same on a
  wall-clock budget (``"time_limit"``); an `albert_lm.optim.schedules.ElapsedTimeLR` lays the lr over it.
* Distributed: launch with ``torchrun``; `albert_lm.train.distributed.init_distributed` joins the group and
  the trainer wraps the model in DDP (gradient sync only on the last micro-batch). Rank 0 writes files.

This file is the loop; its parts live next to it: `TrainerConfig` in ``config.py`` (the shared settings
in ``settings.py``), metric sums and files in ``metrics.py``, the epoch-wise data position in ``batches.py``,
DDP / compile / autocast in ``parallelize.py``, what a checkpoint holds in ``checkpoint.py``, processes and
signals in ``distributed.py``, what ``fit`` returns in ``result.py``, divergence and rollback in ``rollback.py``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from albert_lm._io import atomic_write_json
from albert_lm.optim.schedules import ElapsedTimeLR
from albert_lm.runtime.device import pick_device
from albert_lm.runtime.precision import resolve_precision
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.batches import Batch, Epochs, batch_tokens, to_device
from albert_lm.train.config import TrainerConfig
from albert_lm.train.distributed import DistInfo, all_reduce_sum, stop_on_signals
from albert_lm.train.early_stopping import early_stop, stop_message
from albert_lm.train.metrics import (
    METRICS_FILE,
    BestMetric,
    Meter,
    MetricsLog,
    advance_bar,
    bar_postfix,
    format_metrics,
    load_metrics,
    progress_bar,
    scalar_metrics,
    step_of,
    train_record,
)
from albert_lm.train.parallelize import PRECISION_DTYPES, autocast, step_backends, wrap_model
from albert_lm.train.result import TrainResult
from albert_lm.train.rollback import SpikeRollback, TrainingDiverged, stop_diverged
from albert_lm.train.settings import OptimSettings, ScheduleSettings
from albert_lm.train.threads import thread_tuner
from albert_lm.train.trainer_checkpoints import TrainerCheckpoints

__all__ = [
    "Trainer",
    "TrainerConfig",
    "TrainResult",
    "TrainingDiverged",
    "load_metrics",
]

logger = logging.getLogger(__name__)

MetricsFn = Callable[[Batch, Mapping[str, Any]], Mapping[str, Any]]  # values: Tensor | (Tensor, Tensor)
EvalFn = Callable[[nn.Module], Mapping[str, float]]


@dataclass
class _Accumulated:
    """What the micro-batches of one optimizer step left besides their gradients."""

    meter: Meter
    loss_bad: Tensor
    """0-d bool on the device: some micro-batch had a non-finite loss."""
    tokens: int = 0


def _loss_of(out: Any, model: nn.Module) -> Tensor:
    if not isinstance(out, Mapping) or "loss" not in out:
        keys = f" with keys {list(out)}" if isinstance(out, Mapping) else ""
        raise TypeError(
            f"{type(model).__name__}.forward must return a dict with 'loss' (got {type(out).__name__}{keys})"
        )
    loss: Tensor = out["loss"]
    return loss


class Trainer(TrainerCheckpoints):
    """The training loop; see the module docstring for the contract."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        config: TrainerConfig | None = None,
        *,
        run_dir: str | Path | None = None,
        eval_fn: EvalFn | None = None,
        metrics_fn: MetricsFn | None = None,
        data_state: Any = None,
        on_save: Callable[[Path], None] | None = None,
        dist: DistInfo | None = None,
        save_every_s: float | None = None,
        on_log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if config is None:
            raise ValueError("Trainer: config (TrainerConfig) is required")
        if save_every_s is not None and not (math.isfinite(save_every_s) and save_every_s > 0):
            raise ValueError(f"Trainer: save_every_s must be finite and > 0, or None; got {save_every_s}")
        self.save_every_s = save_every_s
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        # what the lr is laid over, and the progress bar counts: "time" (`ElapsedTimeLR`) or "steps"
        self._by = "time" if isinstance(scheduler, ElapsedTimeLR) else "steps"
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.eval_fn = eval_fn
        self.metrics_fn = metrics_fn
        self.data = Epochs(data_state)
        self.on_save = on_save
        self.on_log = on_log  # called with each training metrics record, on the main rank
        self.dist = dist or DistInfo()
        self.device = self.dist.device if self.dist.enabled else pick_device(config.device)
        self.precision = resolve_precision(config.precision, self.device)  # "auto" -> bf16 | fp32
        self.dtype = PRECISION_DTYPES[self.precision]
        self.fp32_linear, self.cpu_attention = step_backends(self.device, self.dtype, config)
        self.threads = thread_tuner(config.adaptive_threads_minutes, self.device)  # re-decided while running
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.metrics_log = MetricsLog(
            self.run_dir / METRICS_FILE if self.run_dir is not None and self.dist.is_main else None,
            config.tensorboard, config.report_to, config.tracking_params,
        )  # fmt: skip

        # loop state (saved in checkpoints: LOOP_STATE, the best metric, eval_history, the data position)
        self.step = 0
        self.tokens = 0
        self.elapsed_s = 0.0
        self.bad_steps = 0
        self.best = BestMetric(config.best_metric, config.best_mode)
        self.eval_history: list[dict[str, float]] = []
        self.last_checkpoint: Path | None = None
        self.rollback = SpikeRollback(self) if config.spike_rollback else None

        self._stop_signal: int | None = None
        self._train_window = Meter()
        self._last_train: dict[str, float] = {}
        self._last_eval: dict[str, float] = {}
        self._last_lr = float("nan")
        self._wrapped: nn.Module | None = None
        self._bar: Any = None
        # clocks of the running fit: training time since t_last; tokens/s over the logging window
        self._t_last = self._window_start = 0.0
        self._window_tokens = 0
        # training time (the ranks' mean) after the last step, and at the last checkpoint (save_every_s)
        self._training_s = self._saved_at_s = 0.0

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def for_finetuning(
        cls,
        model: nn.Module,
        *,
        optim: OptimSettings,
        total_steps: int,
        warmup_steps: int = 0,
        schedule: ScheduleSettings | None = None,
        config: TrainerConfig | None = None,
        **kwargs: Any,
    ) -> Trainer:
        """A trainer with the one builder's optimizer and schedule (`albert_lm.optim.build_training`): ``optim``,
        warmup of ``warmup_steps`` + decay to 0 at ``total_steps`` (as run_classifier.py / run_squad /
        run_race's create_optimizer), on the run's device. Keyword arguments go to `Trainer`."""
        from albert_lm.optim import build_training

        config = config or TrainerConfig(max_steps=total_steps)
        schedule = schedule or ScheduleSettings()
        device = kwargs["dist"].device if kwargs.get("dist") is not None else None
        if device is None:
            device = pick_device(config.device)
        model.to(device)
        budget_s = config.max_time_s if schedule.by == "time" else None
        opt, sched = build_training(
            model, optim, schedule, total_steps=total_steps, warmup_steps=warmup_steps, budget_s=budget_s
        )
        return cls(model, opt, sched, config, **kwargs)

    def _wrap(self) -> nn.Module:
        if self._wrapped is None:
            cfg = self.config
            self._wrapped = wrap_model(
                self.model,
                self.device,
                self.dist,
                compile=cfg.compile,
                activation_checkpointing=cfg.activation_checkpointing,
                find_unused_parameters=cfg.find_unused_parameters,
            )
        return self._wrapped

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.dtype, self.fp32_linear, self.cpu_attention)

    # ------------------------------------------------------------------------------------------ the loop
    def fit(self, batches: Iterable[Batch], resume: bool | str | Path | None = None) -> TrainResult:
        """Train until ``config.max_steps`` (or a signal / the time budget); see the module docstring."""
        model = self._wrap()
        self.data.read(batches)
        if resume:
            self._resume(self._require_run_dir("resume") if isinstance(resume, bool) else Path(resume))
        self.metrics_log.open()
        stop = early_stop(self.eval_history, self.config)  # a resumed run that had stopped early stays so
        with contextlib.ExitStack() as stack:
            stack.push(self.metrics_log.close_on_exit)
            cfg, show_bar = self.config, self.config.progress and self.dist.is_main
            bar = progress_bar(cfg.max_steps, self.step, show_bar, cfg.max_time_s, self.elapsed_s, self._by)
            self._bar = stack.enter_context(bar)
            stack.enter_context(stop_on_signals(self._request_stop))
            self._t_last = self._window_start = time.perf_counter()
            self._window_tokens = 0
            model.train()
            while stop is None and self.step < self.config.max_steps:
                did_step, stop = self._apply_update(self._accumulate(model))
                stop = self._after_step(did_step, stop)
                self.threads.after_step()
            self._finish(stop or "max_steps")
        result = self._result(stop or "max_steps")
        if self.run_dir is not None and self.dist.is_main:
            atomic_write_json(self.run_dir / "result.json", result.to_dict(), indent=2)
        return result

    def _accumulate(self, model: nn.Module) -> _Accumulated:
        """Forward and backward over ``grad_accum_steps`` micro-batches; DDP syncs gradients on the last."""
        n = self.config.grad_accum_steps
        acc = _Accumulated(Meter(), torch.zeros((), dtype=torch.bool, device=self.device))
        for i in range(n):
            batch = to_device(self.data.next(), self.device)
            acc.tokens += batch_tokens(batch)
            no_sync = getattr(model, "no_sync", None)
            with no_sync() if no_sync is not None and i < n - 1 else contextlib.nullcontext():
                with self._autocast():
                    out = model(**batch)
                loss = _loss_of(out, self.model)
                self.scaler.scale(loss / n).backward()
            acc.loss_bad |= ~torch.isfinite(loss.detach())
            acc.meter.add("loss", loss)
            acc.meter.add_all(scalar_metrics(out))
            if self.metrics_fn is not None:
                acc.meter.add_all(self.metrics_fn(batch, out))
        return acc

    def _apply_update(self, acc: _Accumulated) -> tuple[bool, str | None]:
        """Unscale, clip, then step, or skip a non-finite step. Returns (stepped, stop reason or None)."""
        cfg = self.config
        self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        training_s = self.elapsed_s + (time.perf_counter() - self._t_last)
        (loss_bad, grad_bad, signalled), training_s = self._sync_flags(acc.loss_bad, grad_norm, training_s)
        self._training_s = training_s
        out_of_time = cfg.max_time_s is not None and training_s >= cfg.max_time_s
        lr = float(self.optimizer.param_groups[0]["lr"])
        self.tokens += acc.tokens * self.dist.world_size
        self._window_tokens += acc.tokens * self.dist.world_size
        if loss_bad or (grad_bad and self.dtype != torch.float16):
            self._skip_step("loss" if loss_bad else "gradient norm")
        elif grad_bad:  # fp16 overflow: GradScaler lowers the scale and skips
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.update()
            logger.debug("fp16 gradient overflow: loss scale now %g", self.scaler.get_scale())
        else:
            self._step(acc.meter, grad_norm, lr, training_s)
        now = time.perf_counter()
        self.elapsed_s += now - self._t_last
        self._t_last = now
        stop = "signal" if signalled else "time_limit" if out_of_time else None
        return not (loss_bad or grad_bad), stop

    def _sync_flags(self, loss_bad: Tensor, grad_norm: Tensor, training_s: float) -> tuple[list[bool], float]:
        """One host sync per optimizer step: [non-finite loss, non-finite gradient norm, signal], each true
        when it is true on any rank, and the training time (the ranks' mean: one time, one lr on all ranks)."""
        flags = torch.stack([loss_bad, ~torch.isfinite(grad_norm)]).double()
        signalled = self._stop_signal is not None
        if self.dist.enabled:
            host = torch.tensor([float(signalled), training_s], dtype=torch.float64, device=self.device)
            synced = all_reduce_sum(torch.cat([flags, host]), self.dist).tolist()
            return [x > 0 for x in synced[:3]], synced[3] / self.dist.world_size
        return [x > 0 for x in flags.tolist()] + [signalled], training_s

    def _step(self, meter: Meter, grad_norm: Tensor, lr: float, training_s: float) -> None:
        self.bad_steps = 0
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if isinstance(self.scheduler, ElapsedTimeLR):  # the lr laid over training time, not steps
            self.scheduler.set_elapsed(training_s)
        if self.scheduler is not None:
            self.scheduler.step()
        self.step += 1
        meter.add("grad_norm", grad_norm)
        self._last_lr = lr
        self._train_window.merge(meter)
        if self._bar is not None:
            advance_bar(self._bar, self.step, training_s)

    def _skip_step(self, what: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.update()
        if self.rollback is not None and self.rollback.on_non_finite(self, what):
            return
        self.bad_steps += 1
        logger.warning(
            "non-finite %s at step %d: update skipped (%d in a row, limit %d)",
            what,
            self.step + 1,
            self.bad_steps,
            self.config.max_bad_steps,
        )
        if self.bad_steps > self.config.max_bad_steps:
            stop_diverged(self)

    def _due(self, every: int | None) -> bool:
        """Whether what runs every ``every`` steps (None: never) runs after this step."""
        return every is not None and self.step % every == 0

    def _save_time_due(self) -> bool:
        """Whether ``save_every_s`` of training time have passed since the last checkpoint (the same
        answer on every rank: the times compared are the ranks' mean)."""
        return self.save_every_s is not None and self._training_s - self._saved_at_s >= self.save_every_s

    def _after_step(self, stepped: bool, stop: str | None) -> str | None:
        """Log, evaluate and checkpoint when due (the last step's evaluation and checkpoint are `_finish`'s);
        returns ``stop``."""
        cfg = self.config
        mid_run = self.step < cfg.max_steps
        if stepped and (self._due(cfg.log_every) or not mid_run):
            record = self._log_train()
            if self.rollback is not None and self.rollback.after_log(self, record):
                return stop  # rolled back: this step's evaluation and checkpoint are gone with it
        if stepped and mid_run and self._due(cfg.eval_every):
            self._evaluate_and_track()
            self._t_last = self._window_start = time.perf_counter()  # evaluation is not training time
            stop = stop or early_stop(self.eval_history, cfg)
        if stop is not None:
            why = stop_message(stop, cfg)
            logger.warning("%s: saving a checkpoint at step %d and stopping", why, self.step)
            return stop
        if stepped and mid_run and (self._due(cfg.save_every) or self._save_time_due()):
            self.save()
            self._t_last = time.perf_counter()
        return None

    def _finish(self, stop_reason: str) -> None:
        """The final evaluation (unless the last step had one) and checkpoint (unless just written)."""
        cfg = self.config
        evaluated_now = bool(self.eval_history) and self.eval_history[-1]["step"] == self.step
        # a run that ends on its time budget is as finished as one that ends on its step count: evaluate it
        # (a signal stops at once: the resumed run evaluates at its end)
        ended = stop_reason in ("max_steps", "time_limit")
        if ended and self.eval_fn is not None and cfg.eval_at_end and not evaluated_now:
            self._evaluate_and_track()
        last = self.last_checkpoint
        saved_now = last is not None and last.name == ckpt_io.step_dir_name(self.step)
        if self.run_dir is not None and (cfg.save_at_end or stop_reason != "max_steps") and not saved_now:
            self.save()

    def _require_run_dir(self, what: str) -> Path:
        if self.run_dir is None:
            raise ValueError(f"Trainer: {what} needs a run_dir")
        return self.run_dir

    # ------------------------------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, float]:
        """Run ``eval_fn`` on the (unwrapped) model in eval mode; returns metrics prefixed ``eval_``."""
        if self.eval_fn is None:
            return {}
        self.model.eval()
        try:
            with torch.no_grad(), self._autocast():
                raw = self.eval_fn(self.model)
        finally:
            self.model.train()
        return {(k if k.startswith("eval_") else f"eval_{k}"): float(v) for k, v in raw.items()}

    def _evaluate_and_track(self) -> None:
        metrics = self.evaluate()
        self._last_eval = metrics
        record = {"step": self.step, **metrics}
        self.eval_history.append(record)
        self.metrics_log.write(record)
        logger.info("eval step %d: %s", self.step, format_metrics(metrics))
        if self.best.update(metrics, self.step) and self.run_dir is not None:
            self._save_best(metrics)

    # ------------------------------------------------------------------------------------------ logging
    def _log_train(self) -> dict[str, Any]:
        now = time.perf_counter()
        dt = now - self._window_start
        tokens_per_s = self._window_tokens / dt if dt > 0 else 0.0
        values = self._train_window.values(self.dist)
        self._train_window.clear()
        tail: dict[str, Any] = {
            "lr": self._last_lr,
            "grad_norm": values.get("grad_norm", float("nan")),
            "tokens_per_s": tokens_per_s,
            "tokens": self.tokens,
            "elapsed_s": self.elapsed_s,
        }
        if self.dtype == torch.float16:
            tail["loss_scale"] = self.scaler.get_scale()
        record = train_record(self.step, values, tail)
        self._last_train = {k: float(v) for k, v in record.items()}
        self.metrics_log.write(record)
        if self.on_log is not None and self.dist.is_main:
            self.on_log(record)
        if self._bar is not None:
            self._bar.set_postfix(bar_postfix(record), refresh=False)
        elif self.dist.is_main:
            of = step_of(self.step, self.config.max_steps, self.elapsed_s, self.config.max_time_s, self._by)
            logger.info("%s %s", of, format_metrics(record, ("step",)))
        self._window_start, self._window_tokens = time.perf_counter(), 0
        return record

    # ------------------------------------------------------------------------------------------ signals
    def _request_stop(self, signum: int) -> None:
        self._stop_signal = signum

    @property
    def stop_signal(self) -> int | None:
        """The signal that stopped the last `fit`, if any."""
        return self._stop_signal

    # ------------------------------------------------------------------------------------------ checkpoints
    def _result(self, stop_reason: str) -> TrainResult:
        best_path = None
        if self.run_dir is not None and (self.run_dir / "checkpoints" / ckpt_io.BEST_NAME).exists():
            best_path = str(self.run_dir / "checkpoints" / ckpt_io.BEST_NAME)
        return TrainResult(
            steps=self.step,
            tokens=self.tokens,
            elapsed_s=self.elapsed_s,
            stop_reason=stop_reason,
            train_metrics=dict(self._last_train),
            eval_metrics=dict(self._last_eval),
            eval_history=list(self.eval_history),
            best_metric=self.best.value,
            best_step=self.best.step,
            best_checkpoint=best_path,
            last_checkpoint=str(self.last_checkpoint) if self.last_checkpoint is not None else None,
            stop_signal=self._stop_signal if stop_reason == "signal" else None,
        )
