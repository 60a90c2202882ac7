"""ONE training loop for pretraining and fine-tuning.

Public API (what `albert pretrain` and the GLUE / SQuAD / RACE helpers call)
----------------------------------------------------------------------------

The loop knows two things: a module whose ``forward(**batch)`` returns a dict (e.g. `albert.model.Output`)
with a scalar ``loss`` (and optionally more 0-d tensors, e.g. ``mlm_accuracy``, which are logged), and an
iterable of batches (dicts of tensors, already collated; the loop moves them to the device). Fine-tuning::

    from albert.train import Trainer, TrainerConfig

    def evaluate(model) -> dict[str, float]:        # called in eval mode under torch.no_grad()
        return {"eval_accuracy": ...}

    trainer = Trainer.for_finetuning(
        model,                                      # e.g. AlbertForSequenceClassification.from_pretrained(dir)
        lr=2e-5, total_steps=5336, warmup_steps=320, optimizer="adamw",   # AdamW + warmup, linear decay
        config=TrainerConfig(max_steps=5336, grad_accum_steps=1, eval_every=500,
                             best_metric="eval_accuracy", best_mode="max", save_every=500, keep_last=1),
        run_dir="runs/sst2", eval_fn=evaluate, on_save=lambda d: tokenizer.save_pretrained(d))
    result = trainer.fit(train_loader)             # re-iterated as epochs until max_steps
    result.best_metric, result.best_step, result.best_checkpoint   # RUN_DIR/checkpoints/best (model dir)
    result.last_checkpoint                                          # RUN_DIR/checkpoints/step-...
    result.eval_history                                             # [{"step": 500, "eval_accuracy": ...}]

* `Trainer(model, optimizer, scheduler, config, run_dir=..., eval_fn=..., metrics_fn=..., data_state=...,
  on_save=..., dist=...)` is the general form; `albert.optim.build_optimizer` / `build_scheduler` make the
  optimizer and schedule (LAMB for pretraining).
* ``config.grad_accum_steps`` micro-batches (per rank) make one optimizer step: global batch = micro batch
  x grad_accum_steps x world size. The loss of each micro-batch is divided by ``grad_accum_steps``.
* ``eval_fn(model) -> dict[str, float]`` runs every ``eval_every`` steps and at the end, on every rank
  (return the same numbers on every rank), with the unwrapped model in eval mode, under ``no_grad`` and
  the run's autocast. Keys without an ``eval_`` prefix get one. With ``best_metric`` the best model is kept
  in ``RUN_DIR/checkpoints/best`` (model directory only).
* ``metrics_fn(batch, output) -> {name: tensor | (numerator, denominator)}`` adds training metrics (ratios
  are summed separately and divided at log time, e.g. exact accuracies over a logging window).
* ``data_state``: an object with ``state_dict()`` / ``load_state_dict()`` giving the data position (the
  pretraining dataset); by default the batch iterable itself if it has them. Without one, resuming skips the
  batches already consumed in the current epoch (exact when the order per epoch is deterministic:
  ``set_epoch(epoch)`` is called on the iterable, or on its ``sampler``, when it has one).
* ``fit(batches, resume=None | True | path)`` returns a `TrainResult`; ``resume=True`` continues from the
  newest checkpoint of ``run_dir``. On CPU a resumed run reproduces the uninterrupted one bit for bit.
* Files: ``RUN_DIR/metrics.jsonl`` (one JSON object per logged step: step, loss, every metric, lr,
  grad_norm, tokens_per_s, tokens, elapsed_s; and per evaluation: step + eval metrics),
  ``RUN_DIR/tb/`` (TensorBoard, when installed), ``RUN_DIR/checkpoints/``, ``RUN_DIR/result.json``.
* Non-finite loss: the step is skipped with a warning (the model is not updated); after
  ``max_bad_steps`` in a row the current (last good) state is saved and `TrainingDiverged` is raised.
  With fp16 a gradient overflow only lowers the loss scale (as `torch.amp.GradScaler` intends).
* SIGINT / SIGTERM: the current step finishes, a checkpoint is written, ``fit`` returns with
  ``stop_reason`` ``"signal"`` (a second Ctrl-C interrupts at once). ``max_time_s`` does the same on a
  wall-clock budget (``"time_limit"``).
* Distributed: launch with ``torchrun``; `albert.train.distributed.init_distributed` joins the group and
  the trainer wraps the model in DDP (gradient sync only on the last micro-batch). Rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from albert.train import checkpoint as ckpt_io
from albert.train.distributed import DistInfo, all_reduce_sum, barrier, gather_objects

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "fp16")
Batch = Mapping[str, Any]
MetricValue = Tensor | tuple[Tensor, Tensor]
MetricsFn = Callable[[Batch, Mapping[str, Any]], Mapping[str, Any]]  # values: Tensor | (Tensor, Tensor)
EvalFn = Callable[[nn.Module], Mapping[str, float]]


class TrainingDiverged(RuntimeError):
    """Too many consecutive steps with a non-finite loss or gradient."""


@dataclass
class TrainerConfig:
    """Options of the loop (the optimizer and schedule are built outside)."""

    max_steps: int
    """Optimizer steps to run (a resumed run counts the steps already done)."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step on each rank."""
    max_grad_norm: float | None = 1.0
    """Global-norm gradient clipping (original optimization.py: clip_by_global_norm 1.0); None: no clipping."""
    precision: str = "fp32"
    """fp32 | bf16 | fp16 (autocast; fp16 with dynamic loss scaling). Parameters stay fp32."""
    device: str | None = None
    """cpu | cuda | cuda:N | None (GPU if available)."""
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
    max_time_s: float | None = None
    """Wall-clock budget of training time (summed over resumed runs; evaluation excluded); then checkpoint
    and stop."""
    progress_bar: bool = True
    tensorboard: bool = True
    """Also log to RUN_DIR/tb when the tensorboard package is installed."""
    find_unused_parameters: bool = False
    """DDP option, for models with parameters that some batches do not use."""

    def __post_init__(self) -> None:
        def need(cond: bool, name: str, msg: str) -> None:
            if not cond:
                raise ValueError(f"TrainerConfig.{name}: {msg} (got {getattr(self, name)!r})")

        need(self.max_steps >= 0, "max_steps", "must be >= 0")
        need(self.grad_accum_steps >= 1, "grad_accum_steps", "must be >= 1")
        need(self.precision in PRECISIONS, "precision", f"must be one of {PRECISIONS}")
        need(self.log_every >= 1, "log_every", "must be >= 1")
        need(self.eval_every is None or self.eval_every >= 1, "eval_every", "must be >= 1 or None")
        need(self.save_every is None or self.save_every >= 1, "save_every", "must be >= 1 or None")
        need(self.keep_last >= 1, "keep_last", "must be >= 1")
        need(self.best_mode in ("max", "min"), "best_mode", "must be 'max' or 'min'")
        need(self.max_bad_steps >= 0, "max_bad_steps", "must be >= 0")
        need(self.max_grad_norm is None or self.max_grad_norm > 0, "max_grad_norm", "must be > 0 or None")


@dataclass
class TrainResult:
    """What `Trainer.fit` returns (also written to RUN_DIR/result.json)."""

    steps: int
    tokens: int
    elapsed_s: float
    stop_reason: str
    """max_steps | signal | time_limit"""
    train_metrics: dict[str, float] = field(default_factory=dict)
    """The last logged training window."""
    eval_metrics: dict[str, float] = field(default_factory=dict)
    """The last evaluation."""
    eval_history: list[dict[str, float]] = field(default_factory=list)
    best_metric: float | None = None
    best_step: int | None = None
    best_checkpoint: str | None = None
    last_checkpoint: str | None = None
    stop_signal: int | None = None
    """The signal number when stop_reason is "signal"."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Meter:
    """Sums of metrics on the device (no host sync until `values`)."""

    def __init__(self) -> None:
        self.num: dict[str, Tensor] = {}
        self.den: dict[str, Tensor | float] = {}

    def add(self, name: str, num: Tensor, den: Tensor | float = 1.0) -> None:
        num = num.detach().float()
        if isinstance(den, Tensor):
            den = den.detach().float()
        if name in self.num:
            self.num[name] = self.num[name] + num
            self.den[name] = self.den[name] + den
        else:
            self.num[name], self.den[name] = num, den

    def merge(self, other: _Meter) -> None:
        for k in other.num:
            self.add(k, other.num[k], other.den[k])

    def values(self, dist: DistInfo) -> dict[str, float]:
        if not self.num:
            return {}
        names = sorted(self.num)
        device = self.num[names[0]].device
        dens = [
            d if isinstance(d, Tensor) else torch.tensor(d, device=device)
            for d in (self.den[k] for k in names)
        ]
        sums: list[float] = all_reduce_sum(torch.stack([self.num[k] for k in names] + dens), dist).tolist()
        n = len(names)
        return {k: (sums[i] / sums[n + i] if sums[n + i] else float("nan")) for i, k in enumerate(names)}

    def clear(self) -> None:
        self.num.clear()
        self.den.clear()

    def state_dict(self) -> dict[str, tuple[Tensor, Tensor | float]]:
        out: dict[str, tuple[Tensor, Tensor | float]] = {}
        for k, num in self.num.items():
            den = self.den[k]
            out[k] = (num.cpu(), den.cpu() if isinstance(den, Tensor) else den)
        return out

    def load_state_dict(self, state: dict[str, tuple[Tensor, Tensor | float]], device: torch.device) -> None:
        self.clear()
        for k, (num, den) in state.items():
            self.num[k] = num.to(device)
            self.den[k] = den.to(device) if isinstance(den, Tensor) else den


def _default_metrics(output: Mapping[str, Any]) -> dict[str, MetricValue]:
    """Every 0-d floating tensor of the output except ``loss`` (e.g. mlm_loss, sop_accuracy)."""
    return {
        k: v
        for k, v in output.items()
        if k != "loss" and isinstance(v, Tensor) and v.ndim == 0 and v.is_floating_point()
    }


def _batch_tokens(batch: Batch) -> int:
    """Tokens in a batch: numel of input_ids (padding included, as the reference counts), else of the first
    tensor."""
    t = batch.get("input_ids")
    if isinstance(t, Tensor):
        return t.numel()
    for v in batch.values():
        if isinstance(v, Tensor):
            return v.numel()
    return 0


def enable_activation_checkpointing(model: nn.Module) -> int:
    """Turn on per-layer recomputation: sets ``gradient_checkpointing = True`` on every submodule that has the
    attribute (our Encoder; Hugging Face encoders), or calls ``gradient_checkpointing_enable()``. Returns the
    number of modules switched; raises if the model has no such hook."""
    n = 0
    for m in model.modules():
        if hasattr(m, "gradient_checkpointing") and isinstance(m.gradient_checkpointing, bool):
            m.gradient_checkpointing = True
            n += 1
    if n == 0 and hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable()  # type: ignore[operator]
        n = 1
    if n == 0:
        raise ValueError(
            f"{type(model).__name__} has no activation checkpointing hook (no submodule with a "
            "`gradient_checkpointing` flag and no gradient_checkpointing_enable())"
        )
    return n


class Trainer:
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
    ) -> None:
        if config is None:
            raise ValueError("Trainer: config (TrainerConfig) is required")
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.eval_fn = eval_fn
        self.metrics_fn = metrics_fn
        self.data_state = data_state
        self.on_save = on_save
        self.dist = dist or DistInfo()
        if self.dist.enabled:
            self.device = self.dist.device
        else:
            from albert.train.distributed import pick_device

            self.device = pick_device(config.device)
        self.dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config.precision]
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=config.precision == "fp16")

        # loop state (saved in checkpoints)
        self.step = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.tokens = 0
        self.elapsed_s = 0.0
        self.bad_steps = 0
        self.best_value: float | None = None
        self.best_step: int | None = None
        self.eval_history: list[dict[str, float]] = []
        self.last_checkpoint: Path | None = None

        self._iter: Iterator[Batch] | None = None
        self._skip = 0
        self._stop_signal: int | None = None
        self._train_window = _Meter()
        self._last_train: dict[str, float] = {}
        self._last_eval: dict[str, float] = {}
        self._last_lr = float("nan")
        self._batches_for_state: Any = None
        self._tb: Any = None
        self._wrapped: nn.Module | None = None

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def for_finetuning(
        cls,
        model: nn.Module,
        *,
        lr: float,
        total_steps: int,
        warmup_steps: int = 0,
        optimizer: str = "adamw",
        weight_decay: float = 0.01,
        power: float = 1.0,
        config: TrainerConfig | None = None,
        **kwargs: Any,
    ) -> Trainer:
        """A trainer with ``optimizer`` (AdamW by default) and linear warmup + linear decay to 0 at
        ``total_steps`` (original run_classifier.py / run_squad / run_race use create_optimizer this way).
        Keyword arguments go to `Trainer` (run_dir, eval_fn, on_save, ...)."""
        from albert.optim import build_optimizer, build_scheduler

        config = config or TrainerConfig(max_steps=total_steps)
        device = kwargs["dist"].device if kwargs.get("dist") is not None else None
        if device is None:
            from albert.train.distributed import pick_device

            device = pick_device(config.device)
        model.to(device)
        opt = build_optimizer(model, optimizer, lr, weight_decay=weight_decay)
        sched = build_scheduler(opt, total_steps=total_steps, warmup_steps=warmup_steps, power=power)
        return cls(model, opt, sched, config, **kwargs)

    def _wrap(self) -> nn.Module:
        if self._wrapped is not None:
            return self._wrapped
        model = self.model
        if self.config.activation_checkpointing:
            n = enable_activation_checkpointing(model)
            logger.info("activation checkpointing on (%d module(s))", n)
        model.to(self.device)
        wrapped: nn.Module = model
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            wrapped = DistributedDataParallel(
                model,
                device_ids=[self.device] if self.device.type == "cuda" else None,
                find_unused_parameters=self.config.find_unused_parameters,
            )
        if self.config.compile:
            wrapped = torch.compile(wrapped)  # type: ignore[assignment]
        self._wrapped = wrapped
        return wrapped

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    # ------------------------------------------------------------------------------------------ data
    def _data_state_obj(self, batches: Iterable[Batch]) -> Any:
        if self.data_state is not None:
            return self.data_state
        if hasattr(batches, "state_dict") and hasattr(batches, "load_state_dict"):
            return batches
        return None

    def _next_batch(self, batches: Iterable[Batch]) -> Batch:
        fresh_epoch = False
        while True:
            if self._iter is None:
                # A stateful iterable (the pretraining dataset) keeps its own epoch and position (set_epoch
                # would rewind a restored position); a plain one gets the epoch for its shuffle.
                stateless = self._data_state_obj(batches) is None
                for obj in (
                    batches,
                    getattr(batches, "sampler", None),
                    getattr(batches, "batch_sampler", None),
                ):
                    if stateless and obj is not None and hasattr(obj, "set_epoch"):
                        obj.set_epoch(self.epoch)
                        break
                self._iter = iter(batches)
                fresh_epoch = True
                while self._skip > 0:  # resume without a data state: skip what the epoch already gave
                    next(self._iter)
                    self._skip -= 1
            try:
                batch = next(self._iter)
            except StopIteration:
                if fresh_epoch and self.batch_in_epoch == 0:
                    raise ValueError("the batch iterable yielded no batch") from None
                self.epoch += 1
                self.batch_in_epoch = 0
                self._iter = None
                continue
            self.batch_in_epoch += 1
            return batch

    def _to_device(self, batch: Batch) -> dict[str, Any]:
        nb = self.device.type == "cuda"
        return {
            k: (v.to(self.device, non_blocking=nb) if isinstance(v, Tensor) else v) for k, v in batch.items()
        }

    # ------------------------------------------------------------------------------------------ the loop
    def fit(self, batches: Iterable[Batch], resume: bool | str | Path | None = None) -> TrainResult:
        """Train until ``config.max_steps`` (or a signal / the time budget); see the module docstring."""
        cfg = self.config
        model = self._wrap()
        self._batches_for_state = batches
        if resume:
            self._resume(
                Path(resume) if not isinstance(resume, bool) else self._require_run_dir("resume"), batches
            )
        self._open_logs()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        bar = self._progress_bar()
        log_redirect: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        if bar is not None:
            from tqdm.contrib.logging import logging_redirect_tqdm

            log_redirect = logging_redirect_tqdm()  # log lines above the bar, not through it
        log_redirect.__enter__()
        old_handlers = self._install_signal_handlers()
        stop_reason = "max_steps"
        window_start = time.perf_counter()
        window_tokens = 0
        t_last = time.perf_counter()
        model.train()
        try:
            while self.step < cfg.max_steps:
                step_meter = _Meter()
                loss_bad = torch.zeros((), dtype=torch.bool, device=self.device)
                step_tokens = 0
                for i in range(cfg.grad_accum_steps):
                    batch = self._to_device(self._next_batch(batches))
                    step_tokens += _batch_tokens(batch)
                    sync = i == cfg.grad_accum_steps - 1
                    no_sync = getattr(model, "no_sync", None)
                    ctx = no_sync() if (no_sync is not None and not sync) else contextlib.nullcontext()
                    with ctx:
                        with self._autocast():
                            out = model(**batch)
                        if not isinstance(out, Mapping) or "loss" not in out:
                            raise TypeError(
                                f"{type(self.model).__name__}.forward must return a dict with 'loss' "
                                f"(got {type(out).__name__}{' with keys ' + str(list(out)) if isinstance(out, Mapping) else ''})"
                            )
                        loss = out["loss"]
                        self.scaler.scale(loss / cfg.grad_accum_steps).backward()
                    loss_bad |= ~torch.isfinite(loss.detach())
                    step_meter.add("loss", loss)
                    metrics = dict(_default_metrics(out))
                    if self.metrics_fn is not None:
                        metrics.update(self.metrics_fn(batch, out))
                    for name, value in metrics.items():
                        if isinstance(value, tuple):
                            step_meter.add(name, value[0], value[1])
                        else:
                            step_meter.add(name, value)

                self.scaler.unscale_(self.optimizer)
                max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
                grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
                now = time.perf_counter()
                time_up = cfg.max_time_s is not None and self.elapsed_s + (now - t_last) >= cfg.max_time_s
                # one host sync per optimizer step: finiteness here, stop requests on any rank
                flags = torch.stack([loss_bad, ~torch.isfinite(grad_norm)]).float()
                if self.dist.enabled:
                    host = torch.tensor(
                        [float(self._stop_signal is not None), float(time_up)], device=self.device
                    )
                    flags = all_reduce_sum(torch.cat([flags, host]), self.dist)
                else:
                    flags = torch.cat(
                        [flags.cpu(), torch.tensor([float(self._stop_signal is not None), float(time_up)])]
                    )
                loss_bad_any, grad_bad_any, stop_any, time_any = (x > 0 for x in flags.tolist())
                lr = float(self.optimizer.param_groups[0]["lr"])
                self.tokens += step_tokens * self.dist.world_size
                window_tokens += step_tokens * self.dist.world_size

                if loss_bad_any or (grad_bad_any and self.dtype != torch.float16):
                    self.bad_steps += 1
                    what = "loss" if loss_bad_any else "gradient norm"
                    logger.warning(
                        "non-finite %s at step %d: update skipped (%d in a row, limit %d)",
                        what,
                        self.step + 1,
                        self.bad_steps,
                        cfg.max_bad_steps,
                    )
                    self.optimizer.zero_grad(set_to_none=True)
                    self.scaler.update()
                    if self.bad_steps > cfg.max_bad_steps:
                        self._diverged()
                elif grad_bad_any:  # fp16 overflow: GradScaler lowers the scale and skips
                    self.optimizer.zero_grad(set_to_none=True)
                    self.scaler.update()
                    logger.debug("fp16 gradient overflow: loss scale now %g", self.scaler.get_scale())
                else:
                    self.bad_steps = 0
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad(set_to_none=True)
                    if self.scheduler is not None:
                        self.scheduler.step()
                    self.step += 1
                    step_meter.add("grad_norm", grad_norm)
                    self._last_lr = lr
                    self._train_window.merge(step_meter)
                    if bar is not None:
                        bar.update(1)

                now = time.perf_counter()
                self.elapsed_s += now - t_last
                t_last = now

                did_step = not (loss_bad_any or grad_bad_any)
                if did_step and (self.step % cfg.log_every == 0 or self.step == cfg.max_steps):
                    dt = time.perf_counter() - window_start
                    self._log_train(window_tokens / dt if dt > 0 else 0.0, bar)
                    window_start, window_tokens = time.perf_counter(), 0
                if (
                    did_step
                    and cfg.eval_every
                    and self.step % cfg.eval_every == 0
                    and self.step < cfg.max_steps
                ):
                    self._evaluate_and_track()
                    t_last = time.perf_counter()  # evaluation time is not training time
                    window_start = t_last
                if stop_any or time_any:
                    stop_reason = "signal" if stop_any else "time_limit"
                    logger.warning(
                        "%s: saving a checkpoint at step %d and stopping",
                        "signal received" if stop_any else f"time budget of {cfg.max_time_s:g}s reached",
                        self.step,
                    )
                    break
                if (
                    did_step
                    and cfg.save_every
                    and self.step % cfg.save_every == 0
                    and self.step < cfg.max_steps
                ):
                    self.save()
                    t_last = time.perf_counter()

            evaluated_now = bool(self.eval_history) and self.eval_history[-1]["step"] == self.step
            if (
                stop_reason == "max_steps"
                and self.eval_fn is not None
                and cfg.eval_at_end
                and not evaluated_now
            ):
                self._evaluate_and_track()
            saved_now = (
                self.last_checkpoint is not None
                and self.last_checkpoint.name == ckpt_io.step_dir_name(self.step)
            )
            if self.run_dir is not None and (cfg.save_at_end or stop_reason != "max_steps") and not saved_now:
                self.save()
        finally:
            self._restore_signal_handlers(old_handlers)
            if bar is not None:
                bar.close()
            log_redirect.__exit__(None, None, None)
            if self._tb is not None:
                self._tb.flush()
        result = self._result(stop_reason)
        if self.run_dir is not None and self.dist.is_main:
            (self.run_dir / "result.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        return result

    def _require_run_dir(self, what: str) -> Path:
        if self.run_dir is None:
            raise ValueError(f"Trainer: {what} needs a run_dir")
        return self.run_dir

    def _diverged(self) -> None:
        cfg = self.config
        msg = (
            f"training stopped: {self.bad_steps} consecutive steps with a non-finite loss or gradient "
            f"(max_bad_steps={cfg.max_bad_steps}) at step {self.step}. The model was not updated by those steps"
        )
        if self.run_dir is not None:
            path = self.save()
            msg += f"; the last good state is saved in {path}"
        else:
            msg += "; no run_dir, so nothing was saved"
        msg += ". Lower the learning rate, check the data, or use bf16 instead of fp16."
        raise TrainingDiverged(msg)

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
        self._write_metrics(record)
        logger.info("eval step %d: %s", self.step, _fmt(metrics))
        name = self.config.best_metric
        if name is None:
            return
        key = name if name.startswith("eval_") else f"eval_{name}"
        if key not in metrics:
            raise KeyError(
                f"TrainerConfig.best_metric {name!r} is not among the eval metrics {sorted(metrics)}"
            )
        value = metrics[key]
        better = (
            self.best_value is None
            or (self.config.best_mode == "max" and value > self.best_value)
            or (self.config.best_mode == "min" and value < self.best_value)
        )
        if better and not math.isnan(value):
            self.best_value, self.best_step = value, self.step
            if self.run_dir is not None:
                self._save_best(metrics)

    # ------------------------------------------------------------------------------------------ logging
    def _open_logs(self) -> None:
        if self.run_dir is None or not self.dist.is_main:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.config.tensorboard and self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run_dir / "tb"))
            except ImportError:
                logger.debug("tensorboard not installed: metrics go to metrics.jsonl only")

    def _write_metrics(self, record: dict[str, Any]) -> None:
        if self.run_dir is None or not self.dist.is_main:
            return
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for k, v in record.items():
                if k != "step" and isinstance(v, (int, float)):
                    self._tb.add_scalar(k, v, record["step"])

    def _log_train(self, tokens_per_s: float, bar: Any) -> None:
        values = self._train_window.values(self.dist)
        self._train_window.clear()
        record: dict[str, Any] = {"step": self.step}
        record.update({k: values[k] for k in ("loss", "mlm_loss", "sop_loss") if k in values})
        record.update({k: v for k, v in values.items() if k not in record and k not in ("lr", "grad_norm")})
        record["lr"] = self._last_lr
        record["grad_norm"] = values.get("grad_norm", float("nan"))
        record["tokens_per_s"] = tokens_per_s
        record["tokens"] = self.tokens
        record["elapsed_s"] = self.elapsed_s
        if self.dtype == torch.float16:
            record["loss_scale"] = self.scaler.get_scale()
        self._last_train = {k: float(v) for k, v in record.items()}
        self._write_metrics(record)
        if bar is not None:
            post = {"loss": f"{record['loss']:.3f}"}
            for k, v in record.items():
                if k.endswith("accuracy"):
                    post[k.replace("_accuracy", "_acc")] = f"{v:.3f}"
            post["lr"] = f"{record['lr']:.2e}"
            post["tok/s"] = f"{tokens_per_s:,.0f}"
            bar.set_postfix(post, refresh=False)
        elif self.dist.is_main:
            logger.info("step %d/%d %s", self.step, self.config.max_steps, _fmt(record, skip=("step",)))

    def _progress_bar(self) -> Any:
        if not self.config.progress_bar or not self.dist.is_main:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.config.max_steps, initial=self.step, unit="step", dynamic_ncols=True)

    # ------------------------------------------------------------------------------------------ signals
    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        old: dict[int, Any] = {}

        def handler(signum: int, frame: Any) -> None:
            self._stop_signal = signum
            logger.warning("%s received: stopping after this step", signal.Signals(signum).name)
            # a second Ctrl-C / SIGTERM acts at once
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, handler)
        return old

    @staticmethod
    def _restore_signal_handlers(old: dict[int, Any]) -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    @property
    def stop_signal(self) -> int | None:
        """The signal that stopped the last `fit`, if any."""
        return self._stop_signal

    # ------------------------------------------------------------------------------------------ checkpoints
    def _trainer_state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "tokens": self.tokens,
            "elapsed_s": self.elapsed_s,
            "bad_steps": self.bad_steps,
            "best_value": self.best_value,
            "best_step": self.best_step,
            "best_metric": self.config.best_metric,
            "eval_history": self.eval_history,
            "world_size": self.dist.world_size,
            "grad_accum_steps": self.config.grad_accum_steps,
        }

    def save(self) -> Path:
        """Write a step checkpoint now (collective: call on every rank); returns its path."""
        root = self._require_run_dir("save") / "checkpoints"
        data = self._data_state_obj(self._batches_for_state)
        rank_state = {
            "rng": ckpt_io.rng_state(),
            "data": data.state_dict() if data is not None else None,
            "window": self._train_window.state_dict(),
            "last_lr": self._last_lr,
        }
        states = gather_objects(rank_state, self.dist)
        path = root / ckpt_io.step_dir_name(self.step)
        if self.dist.is_main:
            extra = {
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler": self.scaler.state_dict(),
            }
            path = ckpt_io.write_checkpoint(
                root,
                path.name,
                model=self.model,
                trainer_state=self._trainer_state(),
                optimizer=self.optimizer,
                extra_state=extra,
                rank_states=states,
                on_save=self.on_save,
            )
            ckpt_io.prune_checkpoints(root, self.config.keep_last)
            logger.info("checkpoint %s", path)
        barrier(self.dist)
        self.last_checkpoint = path
        return path

    def _save_best(self, metrics: dict[str, float]) -> None:
        root = self._require_run_dir("save") / "checkpoints"
        if self.dist.is_main:
            state = {"step": self.step, "metrics": metrics, "best_metric": self.config.best_metric}
            ckpt_io.write_checkpoint(
                root, ckpt_io.BEST_NAME, model=self.model, trainer_state=state, on_save=self.on_save
            )
            logger.info("new best %s = %.5g at step %d", self.config.best_metric, self.best_value, self.step)
        barrier(self.dist)

    def _resume(self, where: Path, batches: Iterable[Batch]) -> None:
        path = ckpt_io.latest_checkpoint(where)
        state = ckpt_io.read_trainer_state(path)
        if (
            state.get("world_size", 1) != self.dist.world_size
            or state.get("grad_accum_steps", 1) != self.config.grad_accum_steps
        ):
            logger.warning(
                "%s was written with world_size=%s, grad_accum_steps=%s; now %d, %d: the data order will differ",
                path,
                state.get("world_size"),
                state.get("grad_accum_steps"),
                self.dist.world_size,
                self.config.grad_accum_steps,
            )
        ckpt_io.load_model_weights(self.model, path)
        self.optimizer.load_state_dict(ckpt_io.load_torch(path / ckpt_io.OPTIMIZER_FILE))
        extra = ckpt_io.load_torch(path / ckpt_io.TRAINER_FILE)
        if self.scheduler is not None and extra.get("scheduler") is not None:
            self.scheduler.load_state_dict(extra["scheduler"])
        if extra.get("scaler"):
            self.scaler.load_state_dict(extra["scaler"])
        for key in (
            "step",
            "epoch",
            "batch_in_epoch",
            "tokens",
            "elapsed_s",
            "bad_steps",
            "best_value",
            "best_step",
        ):
            setattr(self, key, state[key])
        self.eval_history = list(state.get("eval_history", []))
        ranks = ckpt_io.load_torch(path / ckpt_io.RANK_STATES_FILE)
        mine = ranks[self.dist.rank] if self.dist.rank < len(ranks) else ranks[0]
        data = self._data_state_obj(batches)
        if data is not None and mine.get("data") is not None:
            data.load_state_dict(mine["data"])
        else:
            self._skip = self.batch_in_epoch
            if self._skip:
                logger.info("resume: no data state; skipping %d batches of epoch %d", self._skip, self.epoch)
        self._train_window.load_state_dict(mine.get("window", {}), self.device)
        self._last_lr = mine.get("last_lr", float("nan"))
        ckpt_io.set_rng_state(mine["rng"])
        self.last_checkpoint = path
        if self.run_dir is not None and self.dist.is_main:
            _truncate_metrics(self.run_dir / "metrics.jsonl", self.step)
        logger.info(
            "resumed from %s at step %d (epoch %d, %d tokens)", path, self.step, self.epoch, self.tokens
        )

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
            best_metric=self.best_value,
            best_step=self.best_step,
            best_checkpoint=best_path,
            last_checkpoint=str(self.last_checkpoint) if self.last_checkpoint is not None else None,
            stop_signal=self._stop_signal if stop_reason == "signal" else None,
        )


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metrics lines after ``step`` (written by the interrupted run after its last checkpoint)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
    tmp.replace(path)


def _fmt(values: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str:
    parts = []
    for k, v in values.items():
        if k in skip:
            continue
        parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def load_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of RUN_DIR/metrics.jsonl (training and eval lines)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (is {run_dir} a run directory?)")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not valid JSON ({e.msg})") from None
    return out
