"""Pretraining, the task: a `PretrainConfig` -> AlbertForPreTraining + PretrainingDataset + LAMB -> the one
trainer (`albert_lm.train`, which knows nothing of models or data).

`pretrain(cfg)` is what ``albert pretrain`` runs; `PretrainingEvaluator` measures held-out masked-LM and
sentence-order accuracy (pooled over tokens / sequences, as the original run_pretraining.py `metric_fn`:
``tf.metrics.accuracy`` weighted by ``masked_lm_weights``).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from albert_lm._io import IGNORE_INDEX, atomic_write_dir
from albert_lm._locks import lock_dir
from albert_lm.config import ConfigError
from albert_lm.convert.card import write_pretrain_card
from albert_lm.model import AlbertForPreTraining
from albert_lm.pretrain.config import PretrainConfig
from albert_lm.pretrain.resume import clear_early_logs, resume_plan, write_run_config
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.distributed import DistInfo
from albert_lm.train.trainer import Trainer, TrainResult

logger = logging.getLogger(__name__)


def count_mlm(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(correct, count, summed cross-entropy) of masked-LM predictions.

    ``logits`` are (N, V) at the N masked positions (what AlbertForPreTraining returns with labels), or
    (B, T, V) at every position; ``labels`` (B, T) with -100 at unmasked positions."""
    if logits.dim() == 3:
        logits = logits[labels != IGNORE_INDEX]
    targets = labels[labels != IGNORE_INDEX]
    if targets.numel() == 0:
        zero = torch.zeros((), device=labels.device)
        return zero, zero, zero
    correct = (logits.argmax(-1) == targets).sum().float()
    loss = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum")
    return correct, torch.tensor(float(targets.numel()), device=labels.device), loss


def pretraining_metrics(batch: Mapping[str, Any], out: Mapping[str, Any]) -> dict[str, Any]:
    """Training MLM / SOP accuracies pooled over a logging window as (correct, count), rather than averaged
    over micro-batches. Uses the model's per-batch ``mlm_accuracy`` / ``sop_accuracy`` when it returns them
    (accuracy x count = correct), so the vocabulary argmax is not computed twice."""
    metrics: dict[str, Any] = {}
    labels = batch.get("mlm_labels")
    if labels is not None and out.get("mlm_logits") is not None:
        count = (labels != IGNORE_INDEX).sum()
        if isinstance(out.get("mlm_accuracy"), torch.Tensor):
            correct = out["mlm_accuracy"].detach().float() * count
        else:
            logits = out["mlm_logits"].detach()
            if logits.dim() == 3:
                logits = logits[labels != IGNORE_INDEX]
            correct = (logits.argmax(-1) == labels[labels != IGNORE_INDEX]).sum()
        metrics["mlm_accuracy"] = (correct, count)
    sop = batch.get("sop_labels")
    if sop is not None and out.get("sop_logits") is not None:
        if isinstance(out.get("sop_accuracy"), torch.Tensor):
            correct = out["sop_accuracy"].detach().float() * sop.numel()
        else:
            correct = (out["sop_logits"].detach().argmax(-1) == sop).sum()
        metrics["sop_accuracy"] = (correct, sop.new_tensor(sop.numel()))
    return metrics


class PretrainingEvaluator:
    """Held-out MLM / SOP accuracy and loss over the first ``max_batches`` batches of a DATA_DIR.

    The held-out set is read in stored order (no shuffle) with the DATA_DIR's static masks, or dynamic
    masks of epoch 0, so every evaluation sees the same examples and masks. Under torch.distributed each rank
    evaluates its share and the counts are summed.
    """

    def __init__(
        self,
        data_dir: str | Path,
        batch_size: int = 64,
        max_batches: int = 100,
        max_seq_length: int | None = None,
    ) -> None:
        from albert_lm.data import PretrainingDataset

        self.dataset = PretrainingDataset(
            data_dir, shuffle=False, batch_size=batch_size, max_seq_length=max_seq_length, drop_last=False
        )
        self.max_batches = max_batches

    def batches(self) -> Iterable[dict[str, torch.Tensor]]:
        self.dataset.set_epoch(0)
        for i, batch in enumerate(self.dataset):
            if i >= self.max_batches:
                break
            yield batch

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        sums = torch.zeros(6, dtype=torch.float64, device=device)  # mlm correct, count, loss; sop ...
        for batch in self.batches():
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model(**batch)
            c, n, loss = count_mlm(out["mlm_logits"], batch["mlm_labels"])
            sop = out["sop_logits"].float()
            labels = batch["sop_labels"]
            sop_correct = (sop.argmax(-1) == labels).sum()
            sop_loss = torch.nn.functional.cross_entropy(sop, labels, reduction="sum")
            sums += torch.stack(
                [
                    c,
                    n,
                    loss,
                    sop_correct.float(),
                    torch.tensor(float(labels.numel()), device=device),
                    sop_loss,
                ]
            ).double()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums)
        mc, mn, ml, sc, sn, sl = sums.tolist()
        return {
            "eval_mlm_accuracy": mc / mn if mn else float("nan"),
            "eval_mlm_loss": ml / mn if mn else float("nan"),
            "eval_sop_accuracy": sc / sn if sn else float("nan"),
            "eval_sop_loss": sl / sn if sn else float("nan"),
            "eval_masked_tokens": mn,
            "eval_sequences": sn,
        }


def baselines(
    train_dir: str | Path, eval_dir: str | Path, max_batches: int = 100, batch_size: int = 64
) -> dict[str, float]:
    """Trivial held-out accuracies: MLM always predicting the most frequent masked token of the training
    data; SOP always predicting the majority class of the training data (about 50%)."""
    tokens, sop = _label_counts(train_dir, max_batches, batch_size)
    top = int(tokens.argmax())
    majority = int(sop[1] > sop[0])
    ev = PretrainingEvaluator(eval_dir, batch_size=batch_size, max_batches=max_batches)
    hit = n = s_hit = s_n = 0
    for b in ev.batches():
        labels = b["mlm_labels"][b["mlm_labels"] != IGNORE_INDEX]
        hit += int((labels == top).sum())
        n += labels.numel()
        s_hit += int((b["sop_labels"] == majority).sum())
        s_n += b["sop_labels"].numel()
    return {
        "mlm_most_frequent_token": top,
        "mlm_most_frequent_accuracy": hit / max(n, 1),
        "sop_majority_accuracy": s_hit / max(s_n, 1),
    }


def init_mlm_bias_to_unigram(
    model: AlbertForPreTraining, data_dir: str | Path, max_batches: int = 200
) -> None:
    """Set the masked-LM output bias to the log frequency of each token as a label in the first
    ``max_batches`` batches of ``data_dir`` (add-half smoothing): at step 0 the model already predicts the
    unigram distribution (the "init well" advice: a final layer's bias at the log prior of its classes).
    With a zero bias the first steps reach that distribution through the encoder, whose output then stops
    depending on the input -- the collapse that kept demo-zh on the plateau (docs/transfer.md)."""
    counts = _label_counts(data_dir, max_batches)[0].double()
    logp = torch.log((counts + 0.5) / (counts.sum() + 0.5 * counts.numel()))
    with torch.no_grad():
        model.mlm.bias.copy_((logp - logp.mean()).to(model.mlm.bias.dtype))
    logger.info("masked-LM bias initialized to the unigram log frequencies of %s", data_dir)


def masking_overrides(cfg: PretrainConfig) -> dict[str, Any]:
    """The dynamic-masking settings that ``cfg.data`` changes from the DATA_DIR's."""
    names = ("masked_lm_prob", "max_predictions_per_seq")
    return {n: getattr(cfg.data, n) for n in names if getattr(cfg.data, n) is not None}


def _seed_all(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pretrain(cfg: PretrainConfig, resume: bool = False) -> TrainResult:
    """Run (or resume) the pretraining described by ``cfg``; returns the trainer's result.

    Writes ``RUN_DIR/run_config.json``, ``metrics.jsonl``, ``checkpoints/`` and, when the run completes or
    hits its time budget, the final model directory ``RUN_DIR/model`` (with the tokenizer when given).
    """
    from albert_lm.runtime.allocator import keep_freed_memory
    from albert_lm.train.distributed import destroy_distributed, init_distributed, rank_zero_logging

    cfg.validate()
    if not cfg.data.data_dir:
        raise ConfigError("data.data_dir is required (a DATA_DIR made by `albert prepare`; flag --data-dir)")
    if not cfg.run.output:
        raise ConfigError("run.output is required (the run directory; flag --output)")
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    keep_freed_memory()  # each step's large tensors reuse freed memory (albert_lm.runtime.allocator)
    info = init_distributed(cfg.run.device)
    rank_zero_logging(info)
    try:
        # one run at a time in a run directory (rank 0 writes it); released however the process ends
        with lock_dir(cfg.run.output) if info.is_main else contextlib.nullcontext():
            return _run(cfg, cfg.data.data_dir, info, resume)
    finally:
        destroy_distributed()


def _run(cfg: PretrainConfig, data_dir: str, info: DistInfo, resume: bool) -> TrainResult:
    from albert_lm.data import PretrainingDataset

    run_dir = Path(cfg.run.output or "")  # pretrain() refused an empty one
    identity, changes, restore = resume_plan(cfg, resume)  # refuses another run before anything is written
    micro, accum = cfg.grad_accum_steps(info.world_size)
    tokenizer = _load_tokenizer(cfg.data.tokenizer)
    model, seq = _build_model(cfg, data_dir, info.rank)
    dataset = PretrainingDataset(
        data_dir,
        masking=cfg.data.masking,  # type: ignore[arg-type]
        batch_size=micro,
        drop_last=True,
        max_seq_length=seq,
        tokenizer=tokenizer,
        rank=info.rank,
        world_size=info.world_size,
        **masking_overrides(cfg),
    )
    batches: Any = dataset.loader(micro, cfg.data.num_workers) if cfg.data.num_workers else dataset
    model.to(info.device)
    optimizer, scheduler = _optimizer(cfg, model)
    evaluator = None
    if cfg.data.eval_data_dir:
        evaluator = PretrainingEvaluator(
            cfg.data.eval_data_dir, cfg.run.eval_batch_size, cfg.run.eval_batches, max_seq_length=seq
        )
    tcfg = cfg.trainer_config(accum, str(info.device), evaluate=evaluator is not None)
    health = _health_monitor(cfg, data_dir, evaluator, tcfg, run_dir) if info.is_main else None

    def on_save(directory: Path) -> None:
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)

    def evaluate(m: nn.Module) -> dict[str, float]:
        assert evaluator is not None
        metrics = evaluator(m)
        if health is not None:
            metrics.update(health.on_eval(trainer.step, metrics, m))
        return metrics

    trainer = Trainer(
        model,
        optimizer,
        scheduler,
        tcfg,
        run_dir=run_dir,
        eval_fn=evaluate if evaluator is not None else None,
        metrics_fn=pretraining_metrics,
        data_state=dataset,
        on_save=on_save,
        dist=info,
        on_log=health.on_train_record if health is not None else None,
        save_every_s=cfg.run.save_every_minutes * 60 if cfg.run.save_every_minutes else None,
    )
    if health is not None:
        health.start(model)
    if info.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume and not restore:
            clear_early_logs(run_dir)
        write_run_config(cfg, identity, changes)
        _log_start(cfg, model, info, (micro, accum, seq), tcfg.max_steps)
    result = trainer.fit(batches, resume=restore)
    if info.is_main and result.last_checkpoint and result.stop_reason in ("max_steps", "time_limit"):
        # the final model directory, written next to its place and renamed over the previous one; never
        # with NaN / inf weights (the checkpoints refuse them too)
        ckpt_io.check_finite(model, run_dir / "model")
        final = atomic_write_dir(run_dir / "model", lambda d: model.save_pretrained(d, tokenizer=tokenizer))
        write_pretrain_card(final, cfg.to_dict(), result)  # README.md (albert_lm.convert.card)
        logger.info("model directory: %s", final)
        warn_if_on_the_unigram_plateau(result, data_dir)
    return result


def _health_monitor(
    cfg: PretrainConfig, data_dir: str, evaluator: PretrainingEvaluator | None, tcfg: Any, run_dir: Path
) -> Any:
    """The run's `HealthMonitor` (albert_lm.pretrain.health): the plateau against the training data's most
    frequent masked token, collapse on the first held-out batch (none without held-out data)."""
    from albert_lm.pretrain.health import HealthMonitor

    counts = _label_counts(data_dir, max_batches=20)[0]
    rate = float(counts.max()) / float(counts.sum())
    probe = next(iter(evaluator.batches()), None) if evaluator is not None else None
    if probe is None:
        logger.info("health: no held-out data (data.eval_data_dir), so no representation-collapse check")

    def progress(record: dict[str, Any]) -> float:
        done = float(record.get("step", 0)) / max(tcfg.max_steps, 1)
        if tcfg.max_time_s:
            done = max(done, float(record.get("elapsed_s", 0.0)) / tcfg.max_time_s)
        return done

    unigram = cfg.model.mlm_bias_init == "unigram"
    return HealthMonitor(rate, PLATEAU_RATIO, probe, progress, run_dir, unigram_bias=unigram)


# A masked-LM accuracy below this multiple of the most-frequent-token rate: the model predicts token
# frequencies, not tokens in context. Measured: the English demo's 10 minutes, held-out 11.4% vs 5.1% (2.2x);
# demo-zh's 10 minutes, 4.5% vs 4.9%, whose encoder had collapsed (docs/chinese.md); MiniLM continued with
# SOP for 15 minutes, 27% vs 7.5%.
PLATEAU_RATIO = 1.5


def warn_if_on_the_unigram_plateau(result: TrainResult, data_dir: str | Path, max_batches: int = 20) -> bool:
    """Warn (and return True) when the run's last masked-LM accuracy -- held-out when it was evaluated, else
    training -- is below `PLATEAU_RATIO` times the rate of the most frequent masked token of ``data_dir``:
    the model has not left the unigram plateau of early masked-LM training, where its encoder output
    hardly depends on the input, and fine-tuning from it can do worse than random initialization."""
    acc = (result.eval_metrics or {}).get(
        "eval_mlm_accuracy", (result.train_metrics or {}).get("mlm_accuracy")
    )
    if acc is None or not math.isfinite(acc):
        return False
    counts = _label_counts(data_dir, max_batches)[0]
    rate = float(counts.max()) / float(counts.sum())
    if acc >= PLATEAU_RATIO * rate:
        return False
    logger.warning(
        "masked-LM accuracy %.1f%% is at the rate of the most frequent masked token (%.1f%%): the model has not "
        "left the unigram plateau of early training and its encoder barely depends on the input; fine-tuning "
        "from it can do worse than random initialization (a Chinese demo model stuck here probed 7 points below "
        "it). Train longer, or pretrain with model.mlm_bias_init=unigram, before using it.",
        100 * acc,
        100 * rate,
    )
    return True


def _label_counts(
    data_dir: str | Path, max_batches: int, batch_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """How often each token id is a masked-LM label, and each SOP class a label, in the first
    ``max_batches`` batches of ``data_dir``."""
    from albert_lm.data import PretrainingDataset

    data = PretrainingDataset(data_dir, shuffle=False, batch_size=batch_size)
    tokens = torch.zeros(data.vocab_size, dtype=torch.long)
    sop = torch.zeros(2, dtype=torch.long)
    for i, b in enumerate(data):
        if i >= max_batches:
            break
        tokens += torch.bincount(b["mlm_labels"][b["mlm_labels"] != IGNORE_INDEX], minlength=data.vocab_size)
        sop += torch.bincount(b["sop_labels"], minlength=2)
    if not tokens.any():
        raise ValueError(f"{data_dir}: no masked tokens in the first {max_batches} batches")
    return tokens, sop


def _load_tokenizer(path: str | None) -> Any:
    if not path:
        return None
    from albert_lm.tokenizer import load_tokenizer

    return load_tokenizer(path)


def data_seq_length(cfg: PretrainConfig, data_dir: str, manifest: dict[str, Any]) -> int:
    """The run's sequence length: DATA_DIR's. A ``data.max_seq_length`` that differs is refused: shorter
    would cut the prepared instances, longer pads every batch with positions no instance fills.

    Raises:
        ConfigError: naming the field, both lengths and the manifest.
    """
    prepared = int(manifest["config"]["max_seq_length"])
    asked = cfg.data.max_seq_length
    if asked is not None and asked != prepared:
        raise ConfigError(
            f"data.max_seq_length {asked} differs from the {prepared} that {Path(data_dir) / 'manifest.json'} "
            f"was prepared with; leave it unset to train at {prepared}, or prepare DATA_DIR with "
            f"`albert prepare --max-seq-length {asked}`"
        )
    logger.info("sequence length %d (DATA_DIR's)", prepared)
    return prepared


def _build_model(cfg: PretrainConfig, data_dir: str, rank: int) -> tuple[AlbertForPreTraining, int]:
    """The model (fresh, or ``model.init_from``) checked against the DATA_DIR, and the sequence length.
    The config checked is the one used: the preset with ``model.overrides``, or the init model's with them."""
    from albert_lm.config import AlbertConfig
    from albert_lm.data import load_manifest
    from albert_lm.pretrain import init as init_from

    manifest = load_manifest(data_dir)
    vocab = int(manifest["tokenizer"]["vocab_size"])
    seq = data_seq_length(cfg, data_dir, manifest)
    if cfg.model.init_from:
        logger.info("model.init_from %s: its architecture is used, not model.preset", cfg.model.init_from)
        model_config = init_from.init_config(cfg.model.init_from, cfg.model.overrides)
        init_from.check_vocabulary(cfg.model.init_from, model_config, data_dir, manifest["tokenizer"])
    else:
        model_config = AlbertConfig.from_preset(
            cfg.model.preset, **{"vocab_size": vocab, **cfg.model.overrides}
        )
    if model_config.vocab_size != vocab:
        raise ValueError(f"model vocab_size {model_config.vocab_size} != the DATA_DIR tokenizer's {vocab}")
    if seq > model_config.max_position_embeddings:
        raise ValueError(
            f"sequence length {seq} > max_position_embeddings {model_config.max_position_embeddings}"
        )
    _seed_all(cfg.run.seed)  # same initialization on every rank (DDP also broadcasts rank 0's)
    if cfg.model.init_from:
        model = init_from.load_init_model(
            cfg.model.init_from, model_config, cfg.run.seed, cfg.optim.head_lr_scale
        )
    else:
        model = AlbertForPreTraining(model_config)
        if cfg.model.mlm_bias_init == "unigram":
            init_mlm_bias_to_unigram(model, data_dir)
    _seed_all(cfg.run.seed + 1000 * rank)  # dropout differs across ranks
    model.sop_loss_weight = cfg.model.sop_loss_weight
    return model, seq


def _optimizer(cfg: PretrainConfig, model: nn.Module) -> tuple[torch.optim.Optimizer, Any]:
    """The one builder (`albert_lm.optim.build_training`) with the run's settings (``optim.head_lr_scale``
    scales the lr of mlm.*, sop.* and the pooler there)."""
    from albert_lm.optim import build_training

    o, s = cfg.optim, cfg.schedule
    assert s.train_steps is not None  # validate() refuses null in pretraining
    total, warmup = s.steps()
    budget_s = float(cfg.run.max_time_minutes or 0) * 60 or None
    return build_training(model, o, s, total_steps=total, warmup_steps=warmup, budget_s=budget_s)


def _log_start(
    cfg: PretrainConfig, model: nn.Module, info: DistInfo, shape: tuple[int, int, int], steps: int
) -> None:
    micro, accum, seq = shape
    logger.info(
        "pretraining %s (%.1fM parameters) on %s x%d: global batch %d = %d micro x %d accum x %d ranks, "
        "seq %d, %s lr %g, %d steps",
        cfg.model.init_from or cfg.model.preset,  # --init: the directory's architecture, not the preset's
        sum(p.numel() for p in model.parameters()) / 1e6,
        info.device,
        info.world_size,
        cfg.run.global_batch_size,
        micro,
        accum,
        info.world_size,
        seq,
        cfg.optim.optimizer,
        cfg.optim.learning_rate,
        steps,
    )
    if cfg.schedule.by == "time":
        logger.info(
            "lr laid over training time: warmup %.0f s, decay to 0 at %g minutes (the step cap: %d)",
            cfg.schedule.warmup_fraction * (cfg.run.max_time_minutes or 0) * 60,
            cfg.run.max_time_minutes,
            steps,
        )
