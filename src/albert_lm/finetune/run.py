"""Fine-tuning through the one trainer: `finetune(task, init, output_dir, cfg)`.

The steps, each a function below: read and featurize the splits (`_featurize_splits`), build the model
with the task's head (`_build_model`), length-grouped training batches (`_train_batches`), the trainer
with a dev evaluation as its ``eval_fn`` (`_DevEvaluation`, `_make_trainer`), ``trainer.fit``, then the
files of the run directory (`albert_lm.finetune.rundir`): the dev predictions of the best and the last
evaluation, test-split predictions of the best checkpoint, and ``report.json``.

A run is checkpointed every ``run.save_every`` steps and every ``run.save_every_minutes`` of training
(fine-tuning's default: 10, `albert_lm.finetune.config.FINETUNE_DEFAULTS`), keeping only the newest step checkpoint (each holds the model and Adam's two moments:
three model sizes). ``resume=True`` continues from it exactly as `albert pretrain --resume` does: the
trainer restores the optimizer, schedule, RNG, data position, best-so-far and dev-evaluation history, so
on CPU the resumed run logs the losses of the uninterrupted one bit for bit (tests/e2e/test_finetune_resume.py).
Resume with the command line that started the run: each checkpoint's task.json records the run's task,
labels, hyperparameters, tokenizer and data digests (`albert_lm.finetune.resume`), and a resume with others is
refused naming them. An empty training or dev split is refused before training (`require_examples`), and so
is a classification training split whose examples all have one label (`require_label_variety`).

The best checkpoint is the trainer's (``TrainerConfig.best_metric="eval_score"``, ``best_mode="max"``),
and so are the dev predictions written as ``predictions/<split>_best.jsonl``: those of its
`TrainResult.best_step` (the last evaluation's records when that is the best step, else the best
checkpoint evaluated again), not a second copy of its rule.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_text, json_text, output_path
from albert_lm._locks import lock_dir
from albert_lm.convert.card import write_finetune_cards
from albert_lm.finetune.config import FinetuneConfig
from albert_lm.finetune.resume import RUN_KEY, check_resume, run_identity
from albert_lm.finetune.rundir import REPORT_FILE, check_output_dir, replacing, report_dir, write_task_info
from albert_lm.tasks.base import Example, Task, write_jsonl
from albert_lm.tasks.collate import Feature, LengthGroupedBatches
from albert_lm.tasks.evaluate import (
    EvalResult,
    evaluate,
    model_predict_fn,
    require_examples,
    require_label_variety,
)
from albert_lm.tasks.inputs import load_model_tokenizer, pad_id_of, read_model_config, tokenizer_record
from albert_lm.train.settings import accumulation

logger = logging.getLogger(__name__)

DevSets = dict[str, tuple[list[Example], list[Feature]]]


@dataclass
class FinetuneResult:
    """What `finetune` reports: where the two checkpoints are and their dev metrics."""

    output_dir: Path
    best: dict[str, Any]
    """``dir``, ``step`` and the dev metrics of the best-on-dev checkpoint."""
    last: dict[str, Any]
    """The same for the final weights."""
    history: list[dict[str, Any]]
    train_seconds: float
    report_path: Path
    breakdown: dict[str, Any] = field(default_factory=dict)
    """Per dev split, the task's metric breakdown of the best checkpoint (NER: ``per_type``), if it has one."""


def finetune(
    task: Task,
    init: str | Path,
    output_dir: str | Path,
    cfg: FinetuneConfig,
    *,
    train_limit: int | None = None,
    predict_test: bool = True,
    resume: bool = False,
    random_init: bool = False,
    overwrite: bool = False,
) -> FinetuneResult:
    """Fine-tune ``init`` (a model directory: ours, HF ALBERT, HF BERT) on ``task`` with the one trainer.

    Evaluates on the dev split(s) every ``cfg.run.eval_every`` steps (default: each epoch) and at the end.
    Keeps two checkpoints, both model directories with the tokenizer and task.json:
    ``OUTPUT/checkpoints/best`` (highest task score on the first dev split; the original reports only
    this one) and ``OUTPUT/checkpoints/step-N`` (the final weights). ``OUTPUT/report.json`` says which is
    which, with their dev metrics; dev predictions of both go to ``OUTPUT/predictions/``, test-split
    predictions of the best checkpoint (GLUE: leaderboard files) to ``OUTPUT/test/``. Step checkpoints
    every ``cfg.run.save_every`` steps / ``save_every_minutes`` of training let ``resume`` continue the run;
    ``cfg.run`` also holds the time budget, the progress bar and the device.

    ``random_init``: keep ``init``'s architecture and tokenizer but draw every weight afresh (seeded by
    ``cfg.run.seed``) -- the from-scratch baseline that shows what pretraining bought.

    Raises (before anything is read): `albert_lm.config.ConfigError` for a ``cfg`` that does not fit ``init``
    (`FinetuneConfig.validate`); `RunDirError` for a non-empty ``output_dir`` without ``resume`` (continue
    its run) or ``overwrite`` (replace it, never leaving old and new mixed: `rundir.replacing`);
    `albert_lm._locks.DirLockedError` while another process holds ``output_dir``'s lock. ``resume`` of a run
    stopped before its first checkpoint starts it over (`rundir.check_output_dir`).
    """
    from albert_lm.runtime.allocator import keep_freed_memory
    from albert_lm.train.distributed import init_distributed

    out = output_path(output_dir)  # a symlinked --output: its target is the run directory
    start_over = check_output_dir(out, resume=resume, overwrite=overwrite, init=init)
    cfg.validate(read_model_config(init))
    if cfg.run.threads:
        import torch

        torch.set_num_threads(cfg.run.threads)
    keep_freed_memory()  # each step's large tensors reuse freed memory (albert_lm.runtime.allocator)
    dist = init_distributed(cfg.run.device)
    # One run at a time in a directory: the lock, then the check again under it (another run may have
    # started in between). The kernel releases it however this process ends.
    with lock_dir(out) if dist.is_main else contextlib.nullcontext(out):
        if dist.is_main and check_output_dir(out, resume=resume, overwrite=overwrite, init=init):
            logger.warning(
                "--resume: %s holds no checkpoint yet (the run was stopped before its first one): "
                "starting it over", out,
            )  # fmt: skip
        return _finetune(
            task, init, out, cfg, dist,
            train_limit=train_limit, predict_test=predict_test, resume=resume and not start_over,
            random_init=random_init, overwrite=overwrite or start_over,
        )  # fmt: skip


def _finetune(
    task: Task,
    init: str | Path,
    out: Path,
    cfg: FinetuneConfig,
    dist: Any,
    *,
    train_limit: int | None,
    predict_test: bool,
    resume: bool,
    random_init: bool,
    overwrite: bool,
) -> FinetuneResult:
    """`finetune` once its output directory is checked and locked (``overwrite``: the run goes in place of
    the directory's old content, `rundir.replacing`)."""
    import torch

    from albert_lm.tokenizer import load_tokenizer
    from albert_lm.train.distributed import barrier

    torch.manual_seed(cfg.run.seed)
    tokenizer = load_model_tokenizer(init)
    train_examples, train_features, dev_sets = _featurize_splits(task, tokenizer, cfg, train_limit)
    identity = run_identity(task, cfg, tokenizer, train_features, {s: f for s, (_, f) in dev_sets.items()})
    if resume:  # before anything is built: the run's own settings, or a clear refusal
        check_resume(out, identity)
    model = _build_model(task, init, cfg, random_init)
    init_name = f"random init, architecture of {init}" if random_init else str(init)
    batches = _train_batches(task, train_features, cfg, pad_id_of(tokenizer), dist)
    total_steps, warmup_steps = cfg.steps_for(len(train_features))
    steps_per_epoch = max(1, len(batches) // batches.micro_batches)
    plan = {  # the head of report.json
        "init": init_name,
        "config": cfg.to_dict(),
        "num_train_examples": len(train_examples),
        "num_dev_examples": {s: len(e) for s, (e, _) in dev_sets.items()},
        "total_steps": total_steps,
        "warmup_steps": warmup_steps,
        "steps_per_epoch": steps_per_epoch,
    }
    dev = _DevEvaluation(task, dev_sets, cfg, pad_id_of(tokenizer))

    def on_save(tmp: Path) -> None:
        tokenizer.save_pretrained(tmp)
        # the fingerprint of the tokenizer as saved, which predict / serve / evaluate find beside the model
        extra = {"max_seq_length": cfg.finetune.max_seq_length, "init": init_name, RUN_KEY: identity}
        write_task_info(task, tmp, {**extra, "tokenizer": tokenizer_record(load_tokenizer(tmp))})

    # the old run goes aside only now that the data and the model are known to be good
    with replacing(out, enabled=overwrite and dist.is_main):
        barrier(dist)
        trainer = _make_trainer(
            model, cfg, out, total_steps, warmup_steps, steps_per_epoch, dev, on_save, dist
        )
        if resume:
            _calibrate_as_resumed(task, out)
        logger.info(
            "fine-tuning %s from %s: %d steps (%.2f epochs of %d batches), warmup %d, lr %g, batch %d",
            task.name, init, total_steps, total_steps / steps_per_epoch, steps_per_epoch, warmup_steps,
            cfg.optim.learning_rate, cfg.finetune.batch_size,
        )  # fmt: skip
        result = trainer.fit(batches, resume=resume or None)
        return _conclude(task, model, result, dev, plan, tokenizer, cfg, out, predict_test, dist.is_main)


def _calibrate_as_resumed(task: Task, out: Path) -> None:
    """The task as the last evaluation before the checkpoint left it (`Task.calibrate`: SQuAD 2.0's
    no-answer threshold, written into the task.json of the checkpoints saved before the next one)."""
    from albert_lm.train.checkpoint import latest_checkpoint, read_trainer_state

    history = read_trainer_state(latest_checkpoint(out)).get("eval_history") or []
    if history:  # the first dev split's metrics are the ones without a split prefix, as in _DevEvaluation
        task.calibrate({k.removeprefix("eval_"): v for k, v in history[-1].items()})


def _conclude(
    task: Task,
    model: Any,
    result: Any,
    dev: _DevEvaluation,
    plan: dict[str, Any],
    tokenizer: Any,
    cfg: FinetuneConfig,
    out: Path,
    predict_test: bool,
    is_main: bool,
) -> FinetuneResult:
    """After training (`TrainResult` ``result``; ``model``: the final weights): the best and last
    checkpoints with their dev metrics, and, on the main process, their dev predictions, the test-split
    predictions and report.json."""
    history = [{k.removeprefix("eval_"): v for k, v in r.items()} for r in result.eval_history]
    best, last = _checkpoints(
        result, out, history, f"score on {dev.main_split} (mean of {', '.join(task.metric_names)})"
    )
    report_path = out / REPORT_FILE
    if is_main:
        best_dir = Path(result.best_checkpoint or result.last_checkpoint or out)
        load_best = functools.cache(lambda: _load_model(type(model), best_dir, cfg))
        best_eval = _write_dev_predictions(dev, result, load_best, out / "predictions", final=model)
        breakdown = metric_breakdowns(task, dev, best_eval)
        if predict_test and task.test_splits:
            _predict_test_splits(task, load_best(), best, tokenizer, cfg, out / "test")
        report = {"task": task.info(), **plan, "train_seconds": result.elapsed_s}
        report.update(
            stop_reason=result.stop_reason, checkpoints={"best": best, "last": last}, history=history
        )
        if breakdown:
            report["breakdown"] = breakdown
        if cfg.run.early_stopping_patience is not None:
            report["early_stopping"] = early_stopping_record(cfg, result)
        atomic_write_text(report_path, json_text(report, str(report_path), indent=2) + "\n")
        write_finetune_cards(out, report)  # README.md of each checkpoint (albert_lm.convert.card)
        logger.info("best (step %s): %s", best.get("step"), best.get("dir"))
        logger.info("last (step %s): %s", last.get("step"), last.get("dir"))
    return FinetuneResult(
        out, best, last, history, result.elapsed_s, report_path, breakdown if is_main else {}
    )


def early_stopping_record(cfg: FinetuneConfig, result: Any) -> dict[str, Any]:
    """report.json's ``early_stopping``: the settings, whether the run stopped early, at which evaluation
    and step and why (`albert_lm.train.early_stopping.early_stopping_status` of its dev history)."""
    from albert_lm.train.early_stopping import EARLY_STOPPING, early_stopping_status

    r = cfg.run
    status = early_stopping_status(
        result.eval_history, "eval_score", "max", r.early_stopping_patience, r.early_stopping_threshold
    )
    stopped = result.stop_reason == EARLY_STOPPING
    if not stopped:  # patience used up only by the final evaluation: the run ended on its steps
        status.update(stopped_at_evaluation=None, stopped_at_step=None)
        status.pop("reason", None)
    return {"stopped": stopped, **status}


def _checkpoints(
    result: Any, out: Path, history: list[dict[str, Any]], selected_by: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report's ``best`` and ``last`` entries: directory (relative to the run directory ``out``,
    `rundir.report_dir`), step and dev metrics, as the trainer's `TrainResult` names them (its best step,
    best and last checkpoints)."""
    last: dict[str, Any] = {
        "dir": report_dir(out, result.last_checkpoint),
        **(history[-1] if history else {"step": result.steps}),
    }
    best: dict[str, Any] = {"dir": report_dir(out, result.best_checkpoint), "selected_by": selected_by}
    best.update(next((h for h in history if h.get("step") == result.best_step), {"step": result.best_step}))
    return best, last


def _featurize_splits(
    task: Task, tokenizer: Any, cfg: FinetuneConfig, train_limit: int | None
) -> tuple[list[Example], list[Feature], DevSets]:
    """The training examples and features (the first ``train_limit``), and each dev split's."""
    t0 = time.perf_counter()
    train_examples = task.read(task.train_split)
    if train_limit is not None:
        train_examples = train_examples[:train_limit]
    require_label_variety(task, task.train_split, require_examples(task, task.train_split, train_examples))
    dev_examples = {split: require_examples(task, split, task.read(split)) for split in task.dev_splits}
    train_features = task.featurize(train_examples, tokenizer, cfg.finetune.max_seq_length)
    dev_sets: DevSets = {
        split: (ex, task.featurize(ex, tokenizer, cfg.finetune.max_seq_length))
        for split, ex in dev_examples.items()
    }
    logger.info(
        "%s: %d train examples, %s; featurized in %.1fs",
        task.name,
        len(train_examples),
        ", ".join(f"{len(e)} {s}" for s, (e, _) in dev_sets.items()) or "no dev set",
        time.perf_counter() - t0,
    )
    return train_examples, train_features, dev_sets


def _build_model(task: Task, init: str | Path, cfg: FinetuneConfig, random_init: bool) -> Any:
    """The task's model from ``init`` with the fine-tuning dropouts; ``random_init``: fresh weights."""
    import torch

    overrides: dict[str, Any] = {"classifier_dropout_prob": cfg.finetune.classifier_dropout}
    if cfg.finetune.encoder_dropout is not None:
        overrides.update(
            hidden_dropout_prob=cfg.finetune.encoder_dropout,
            attention_probs_dropout_prob=cfg.finetune.encoder_dropout,
        )
    model = task.build_model(init, **overrides)
    if random_init:
        torch.manual_seed(cfg.run.seed)
        model.init_weights()
        logger.info("random initialization: %s's architecture and tokenizer, fresh weights", init)
    return model


def _train_batches(
    task: Task, features: list[Feature], cfg: FinetuneConfig, pad_id: int, dist: Any
) -> LengthGroupedBatches:
    """This process's share of the shuffled (by default length-grouped) training batches, each split into
    the micro-batches of ``run.micro_batch_size`` (`micro_batches`)."""
    if cfg.finetune.batch_size % dist.world_size:
        raise ValueError(
            f"batch size {cfg.finetune.batch_size} is not divisible by the {dist.world_size} processes"
        )
    micro, accum = micro_batches(cfg, dist.world_size)
    if accum > 1:
        logger.info("batch %d: %d micro-batches of %d per process, accumulated (a final batch of fewer than "
                    "%d examples is skipped)", cfg.finetune.batch_size, accum, micro, accum)  # fmt: skip
    collate = functools.partial(
        task.collate,
        pad_id=pad_id,
        pad_to=cfg.finetune.max_seq_length if cfg.finetune.pad_to_max_length else None,
    )
    return LengthGroupedBatches(
        features,
        cfg.finetune.batch_size // dist.world_size,
        collate,
        group_by_length=cfg.finetune.group_by_length and not cfg.finetune.pad_to_max_length,
        seed=cfg.run.seed,
        rank=dist.rank,
        world_size=dist.world_size,
        micro_batches=accum,
    )


def micro_batches(cfg: FinetuneConfig, world_size: int) -> tuple[int, int]:
    """(micro-batch per process, micro-batches per optimizer step): ``batch_size`` over the processes in
    passes of ``micro_batch_size`` (`albert_lm.train.settings.accumulation`, pretraining's rule). A step's
    loss is the mean of its micro-batches' mean losses: the batch's mean where the parts are of one size
    (a batch of 32 in micro-batches of 8), and within a part's rounding of it for a short final batch."""
    return accumulation(cfg.finetune.batch_size, cfg.run.micro_batch_size, world_size, "batch_size",
                        "micro_batch_size")  # fmt: skip


class _DevEvaluation:
    """The trainer's ``eval_fn``: dev metrics, flat (``<metric>`` for the first dev split,
    ``<split>_<metric>`` for the others, and ``score``, the task score on the first dev split, by which
    the trainer's ``best_metric`` selects the best checkpoint). It keeps the prediction records of the
    latest evaluation only; the best one's are written once training is over (`_write_dev_predictions`).
    """

    def __init__(self, task: Task, dev_sets: DevSets, cfg: FinetuneConfig, pad_id: int) -> None:
        self.task = task
        self.dev_sets = dev_sets
        self.cfg = cfg
        self.pad_id = pad_id
        self.main_split = task.dev_splits[0] if task.dev_splits else None
        self.latest: dict[str, EvalResult] | None = None

    def run(self, module: Any) -> dict[str, EvalResult]:
        """Predictions and metrics of ``module`` on every dev split."""
        fn = model_predict_fn(module)
        return {
            split: evaluate(
                self.task,
                ex,
                feats,
                fn,
                split=split,
                batch_size=self.cfg.run.eval_batch_size,
                pad_id=self.pad_id,
            )
            for split, (ex, feats) in self.dev_sets.items()
        }

    def __call__(self, module: Any) -> dict[str, float]:
        results = self.run(module)
        flat: dict[str, float] = {}
        for split, res in results.items():
            prefix = "" if split == self.main_split else f"{split}_"
            flat.update({f"{prefix}{k}": v for k, v in res.metrics.items()})
        assert self.main_split is not None
        main = results[self.main_split].metrics
        flat["score"] = self.task.score(main)
        self.task.calibrate(main)  # saved with the checkpoints of this step (task.json)
        self.latest = results
        return flat


def _write_dev_predictions(
    dev: _DevEvaluation, result: Any, load_best: Any, pred_dir: Path, final: Any = None
) -> dict[str, EvalResult] | None:
    """``<split>_last.jsonl``: the records of the last evaluation; ``<split>_best.jsonl``: those of the
    trainer's best step (`TrainResult.best_step`): the last evaluation's when it is that step, else the
    best checkpoint's (``load_best()``) evaluated again (an earlier step, or one of a resumed run).

    A run resumed from its final checkpoint has not evaluated in this process: its last evaluation, of
    the final weights, is run again on ``final`` (the trained model). Returns the best step's results."""
    last_step = result.eval_history[-1]["step"] if result.eval_history else None
    if dev.latest is None and final is not None and last_step is not None and last_step == result.steps:
        dev.latest = dev.run(final)
    if dev.latest is not None:
        for split, res in dev.latest.items():
            write_jsonl(pred_dir / f"{split}_last.jsonl", res.predictions)
    if result.best_step is None or result.best_checkpoint is None:
        return None
    # the last evaluation (dev.latest) is the last entry of the trainer's history
    best = dev.latest if dev.latest is not None and last_step == result.best_step else None
    if best is None:
        best = dev.run(load_best())
    for split, res in best.items():
        write_jsonl(pred_dir / f"{split}_best.jsonl", res.predictions)
    return best


def metric_breakdowns(
    task: Task, dev: _DevEvaluation, best: dict[str, EvalResult] | None
) -> dict[str, dict[str, Any]]:
    """``{split: the task's metric_breakdown of the best checkpoint's predictions}`` (NER: per entity
    type); empty for a task without one."""
    breakdown = getattr(task, "metric_breakdown", None)
    if breakdown is None or not best:
        return {}
    return {
        split: breakdown(res.predictions, dev.dev_sets[split][0])
        for split, res in best.items()
        if res.metrics
    }


def _make_trainer(
    model: Any,
    cfg: FinetuneConfig,
    out: Path,
    total_steps: int,
    warmup_steps: int,
    steps_per_epoch: int,
    dev: _DevEvaluation,
    on_save: Any,
    dist: Any,
) -> Any:
    """`Trainer.for_finetuning` with the config's optimizer and schedule (the one builder), dev evaluation
    every ``run.eval_every`` steps (default: each epoch) and at the end, the best checkpoint by the dev
    score, and step checkpoints every ``run.save_every`` steps / ``run.save_every_minutes`` and at the end,
    the newest ``run.keep_last`` kept."""
    from albert_lm.train import Trainer, TrainerConfig

    has_dev = bool(dev.dev_sets)
    r = cfg.run
    return Trainer.for_finetuning(
        model,
        optim=cfg.optim,
        schedule=cfg.schedule,
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        config=TrainerConfig.from_settings(
            r,
            cfg.optim,
            max_steps=min(total_steps, r.max_steps) if r.max_steps is not None else total_steps,
            eval_every=(r.eval_every or steps_per_epoch) if has_dev else None,
            eval_at_end=has_dev,
            tracking_params=cfg.to_dict(),
            grad_accum_steps=micro_batches(cfg, dist.world_size)[1],
            best_metric="eval_score" if has_dev else None,
            log_every=r.log_every or max(1, min(50, steps_per_epoch // 10)),
        ),
        run_dir=out,
        eval_fn=dev if has_dev else None,
        on_save=on_save,
        dist=dist,
        save_every_s=r.save_every_minutes * 60 if r.save_every_minutes else None,
    )


def _predict_test_splits(
    task: Task, model: Any, best: Mapping[str, Any], tokenizer: Any, cfg: FinetuneConfig, out: Path
) -> None:
    """Predictions of the best checkpoint's ``model`` on the task's test splits that exist (GLUE:
    leaderboard files), answered as its task.json says (`Task.calibrate` with its dev metrics ``best``;
    SQuAD 2.0: the no-answer threshold chosen at that evaluation)."""
    task.calibrate({k: v for k, v in best.items() if isinstance(v, float)})
    fn = model_predict_fn(model)
    for split in task.test_splits:
        try:
            examples = task.read(split)
        except FileNotFoundError as e:
            logger.info("no %s split (%s); no predictions for it", split, e)
            continue
        feats = task.featurize(examples, tokenizer, cfg.finetune.max_seq_length)
        res = evaluate(
            task,
            examples,
            feats,
            fn,
            split=split,
            batch_size=cfg.run.eval_batch_size,
            pad_id=pad_id_of(tokenizer),
        )
        path = task.write_test_predictions(split, res.predictions, out)
        logger.info("wrote %d %s predictions to %s", len(res.predictions), split, path)


def _load_model(model_cls: Any, model_dir: Path, cfg: FinetuneConfig) -> Any:
    """A checkpoint of the run, on the run's device."""
    from albert_lm.runtime.device import pick_device

    return model_cls.from_pretrained(model_dir).to(pick_device(cfg.run.device))
