"""The task framework shared by GLUE, custom data, SQuAD and RACE.

A `Task` reads its data (`read`), featurizes it with the tokenizer (`featurize`), names its head and
loss (`build_model`), and turns model outputs into per-example predictions and metrics (`postprocess`,
`compute_metrics`). Everything else is shared:

* training goes through the one trainer (`albert.train`) via `finetune`; no task has its own loop;
* evaluation takes a *predict function* (batch of tensors -> model outputs), not a trainer: `predict`
  runs it over features in length-sorted batches and puts the outputs back in order, `evaluate` adds the
  task's post-processing and metrics (big_vision's evaluators work the same way);
* a fine-tuning run directory holds two model directories, ``checkpoints/best`` (best on dev by the
  task's score) and ``checkpoints/step-N`` (the last weights, with the optimizer state for --resume),
  each loadable by `albert predict` / `albert evaluate` and by transformers, plus ``report.json`` saying
  which is which and with what dev metrics.

This module also holds `ClassificationTask`, the one class behind every GLUE task (a table of specs in
`albert.tasks.glue`) and the user's own CSV/TSV/JSONL data (`albert.tasks.custom`).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from albert.tasks import metrics as M
from albert.tasks.collate import Batch, Feature, LengthGroupedBatches, feature_length, pad_features

logger = logging.getLogger(__name__)

PredictFn = Callable[[Batch], Any]
"""A batch of tensors (no labels) -> model outputs: a tensor (B, ...) or a mapping of name -> (B, ...)."""


# ---------------------------------------------------------------------------------------------------------
# Errors
class TaskDataError(ValueError):
    """Bad task data; the message names the file, the line (or question) and the field."""


class ModelDirError(ValueError):
    """A model directory that cannot be used for fine-tuning or prediction; the message says why."""


# ---------------------------------------------------------------------------------------------------------
# Examples and hyperparameters
@dataclass
class Example:
    """One item as read from disk.

    Attributes:
        guid: identifier, kept into prediction files (GLUE: the test file's index column).
        texts: the input texts: (text,) or (text_a, text_b); multiple choice: (context,) with the options
            in ``meta["options"]``-derived fields of the task.
        label: class name (str), score (float) or option index (int); None when unlabelled (test sets).
        meta: anything else the task keeps (RACE level, source file and line, ...).
    """

    guid: str
    texts: tuple[str, ...]
    label: Any = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning hyperparameters. Task presets (e.g. `albert.tasks.glue.SPECS`) fill them from the
    original's tables; every field can be overridden on the command line."""

    learning_rate: float = 2e-5
    batch_size: int = 32
    """Examples per optimizer step (global, across processes)."""
    train_steps: int | None = None
    """Optimizer steps; None: ``epochs`` passes over the training set."""
    epochs: float = 3.0
    warmup_steps: int | None = None
    """Linear warmup steps; None: ``warmup_fraction`` of the training steps."""
    warmup_fraction: float = 0.1
    max_seq_length: int = 512
    eval_batch_size: int = 64
    eval_every: int | None = None
    """Evaluate on dev every N steps (and at the end); None: once per epoch."""
    classifier_dropout: float = 0.1
    """Dropout before the task head (original run_classifier.py / run_race.py: 0.1)."""
    encoder_dropout: float | None = None
    """'ALBERT DR' of the original README: hidden and attention dropout inside the encoder while
    fine-tuning; None keeps the checkpoint's config."""
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    """original optimization.py AdamWeightDecayOptimizer: 0.01, LayerNorm and biases excluded."""
    adam_epsilon: float = 1e-6
    """original optimization.py: epsilon 1e-6."""
    max_grad_norm: float = 1.0
    """original optimization.py: clip_by_global_norm 1.0."""
    seed: int = 42
    group_by_length: bool = True
    """Length-grouped batches (fast); False: plain shuffled batches."""
    pad_to_max_length: bool = False
    """Pad every batch to max_seq_length as the original does (slow; for comparisons)."""
    precision: str = "fp32"
    """fp32 | bf16 | fp16, passed to the trainer."""
    device: str | None = None
    """None: cuda when available, else cpu."""

    def replace(self, **changes: Any) -> FinetuneConfig:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def steps_for(self, num_train_examples: int, world_size: int = 1) -> tuple[int, int]:
        """(total optimizer steps, warmup steps) for a training set of this size."""
        if self.train_steps is not None:
            total = self.train_steps
        else:
            total = max(1, math.ceil(self.epochs * num_train_examples / self.batch_size))
        warmup = self.warmup_steps if self.warmup_steps is not None else int(self.warmup_fraction * total)
        return total, min(warmup, total)


# ---------------------------------------------------------------------------------------------------------
# Tokenizer side
TOKENIZER_FILES: tuple[str, ...] = ("spiece.model", "vocab.txt")


def load_model_tokenizer(model_dir: str | Path) -> Any:
    """The tokenizer of a model directory, checked against the model's vocabulary.

    Raises:
        ModelDirError: the directory or its config.json is missing, it has no tokenizer file
            (``spiece.model`` or ``vocab.txt``), or the tokenizer's vocabulary size differs from the
            model's ``vocab_size`` (ids would index the wrong, or no, embedding rows).
    """
    from albert.config import AlbertConfig
    from albert.tokenizer import load_tokenizer

    path = Path(model_dir)
    if not path.is_dir():
        raise ModelDirError(
            f"{path}: not a model directory (expected config.json, model weights and a tokenizer)"
        )
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelDirError(f"{path}: no config.json; is this a model directory?")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelDirError(
            f"{path}: no tokenizer in the model directory (looked for {' or '.join(TOKENIZER_FILES)}); "
            "copy the SentencePiece model / WordPiece vocab the checkpoint was trained with into it"
        )
    config = AlbertConfig.from_json(config_file)
    tokenizer = load_tokenizer(path)
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelDirError(
            f"{path}: the tokenizer has {tokenizer.vocab_size} entries but config.json says vocab_size="
            f"{config.vocab_size}; the tokenizer does not belong to this model"
        )
    return tokenizer


def truncate_seq_pair(a: list[int], b: list[int], max_length: int) -> None:
    """Truncate in place, one token at a time from the longer sequence (from ``b`` on a tie), until
    ``len(a) + len(b) <= max_length`` (original classifier_utils.py _truncate_seq_pair)."""
    while len(a) + len(b) > max_length:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()


def build_inputs(tokenizer: Any, a: list[int], b: list[int] | None = None) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` with type ids 0 for CLS, a and the first SEP and 1
    for b and its SEP (original classifier_utils.py convert_single_example)."""
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, tokenizer.sep_id]
        types += [1] * (len(b) + 1)
    return ids, types


def encode_text_pair(tokenizer: Any, a: str, b: str | None, max_length: int) -> tuple[list[int], list[int]]:
    """Tokenize, truncate as the original and add special tokens."""
    if max_length < 3 + (b is not None):
        raise ValueError(f"max_seq_length {max_length} leaves no room for text")
    ids_a = list(tokenizer.encode_ids(a))
    if b is None:
        ids_a = ids_a[: max_length - 2]  # account for [CLS] and [SEP]
        return build_inputs(tokenizer, ids_a)
    ids_b = list(tokenizer.encode_ids(b))
    truncate_seq_pair(ids_a, ids_b, max_length - 3)  # account for [CLS], [SEP], [SEP]
    return build_inputs(tokenizer, ids_a, ids_b)


# ---------------------------------------------------------------------------------------------------------
# The task interface
class Task(abc.ABC):
    """What a fine-tuning task provides. See the module docstring for how the pieces are used."""

    #: short name (``sst2``, ``custom``, ``race``, ``squad``)
    name: str = "task"
    #: head kind: ``classification`` | ``regression`` | ``multiple_choice`` | ``span``
    kind: str = "classification"
    #: metric names computed by `compute_metrics`; the task score (best-checkpoint selection) is their mean
    metric_names: tuple[str, ...] = ("accuracy",)
    #: the splits `read` accepts, the first labelled one after train used for dev
    train_split: str = "train"
    dev_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ()

    @abc.abstractmethod
    def read(self, split: str) -> list[Example]:
        """The examples of a split; raises `TaskDataError` naming file and line on bad input."""

    @abc.abstractmethod
    def featurize(self, examples: Sequence[Example], tokenizer: Any, max_length: int) -> list[Feature]:
        """Features for the model; each carries ``example_index`` (position in ``examples``)."""

    @abc.abstractmethod
    def build_model(self, init: str | Path, **config_overrides: Any) -> Any:
        """The model with this task's head, the encoder loaded from a model directory."""

    @abc.abstractmethod
    def postprocess(
        self,
        outputs: Sequence[Mapping[str, np.ndarray]],
        examples: Sequence[Example],
        features: Sequence[Feature],
    ) -> list[dict[str, Any]]:
        """Per-example prediction records (JSON-serialisable, with ``guid``) from per-feature outputs."""

    @abc.abstractmethod
    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, float]:
        """Metrics of labelled examples."""

    def collate(self, features: Sequence[Feature], pad_id: int = 0, pad_to: int | None = None) -> Batch:
        """Features -> padded batch (dynamic padding unless ``pad_to``)."""
        return pad_features(features, pad_id, pad_to=pad_to)

    def info(self) -> dict[str, Any]:
        """What `albert predict` needs to use a fine-tuned model (saved as task.json)."""
        return {"task": self.name, "kind": self.kind, "metric_names": list(self.metric_names)}

    def score(self, metrics: Mapping[str, float]) -> float:
        """One number to select the best checkpoint: the mean of the task's metrics (GLUE convention)."""
        return M.task_score(metrics, self.metric_names)

    def writes_submission(self, split: str) -> bool:
        """Whether `albert evaluate` writes this split with `write_test_predictions` too, beside its JSONL
        predictions: only tasks with a leaderboard / official format (GLUE test splits, SQuAD) say yes."""
        return False

    def write_test_predictions(
        self, split: str, predictions: Sequence[Mapping[str, Any]], out_dir: Path
    ) -> Path:
        """Write a split's predictions; tasks with a leaderboard format override this."""
        path = out_dir / f"{split}_predictions.jsonl"
        write_jsonl(path, predictions)
        return path


def write_jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------------------
# Sequence classification and regression (GLUE, custom data)
ReadFn = Callable[[str], list[Example]]


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class ClassificationTask(Task):
    """Single-sentence or sentence-pair classification (``labels`` given) or regression (``labels`` None),
    with the examples coming from a reader function. Head: pooled -> dropout -> dense (num_labels, or 1
    with MSE for regression), `albert.model.AlbertForSequenceClassification`."""

    def __init__(
        self,
        name: str,
        reader: ReadFn,
        labels: Sequence[str] | None,
        metric_names: Sequence[str],
        *,
        dev_splits: Sequence[str] = ("dev",),
        test_splits: Sequence[str] = (),
        positive_label: str | None = None,
        text_fields: int = 1,
    ) -> None:
        self.name = name
        self.text_fields = text_fields
        self._reader = reader
        self.labels = list(labels) if labels is not None else None
        self.kind = "classification" if labels is not None else "regression"
        self.metric_names = tuple(metric_names)
        self.dev_splits = tuple(dev_splits)
        self.test_splits = tuple(test_splits)
        # F1 is of this class (GLUE MRPC / QQP: "1")
        self.positive_label: str | None = positive_label
        if positive_label is None and self.labels:
            self.positive_label = self.labels[-1]

    @property
    def num_labels(self) -> int:
        return len(self.labels) if self.labels is not None else 1

    def read(self, split: str) -> list[Example]:
        return self._reader(split)

    def label_id(self, label: Any) -> int | float:
        if self.labels is None:
            return float(label)
        return self.labels.index(label)

    def featurize(self, examples: Sequence[Example], tokenizer: Any, max_length: int) -> list[Feature]:
        features = []
        for i, ex in enumerate(examples):
            b = ex.texts[1] if len(ex.texts) > 1 else None
            ids, types = encode_text_pair(tokenizer, ex.texts[0], b, max_length)
            feat: Feature = {"input_ids": ids, "token_type_ids": types, "example_index": i}
            if ex.label is not None:
                feat["labels"] = self.label_id(ex.label)
            features.append(feat)
        return features

    def build_model(self, init: str | Path, **config_overrides: Any) -> Any:
        from albert.model import AlbertForSequenceClassification

        model = AlbertForSequenceClassification.from_pretrained(
            init, num_labels=self.num_labels, **config_overrides
        )
        if self.labels is not None:
            model.label_names = list(self.labels)  # type: ignore[assignment]  # -> config.json id2label
        return model

    def postprocess(
        self,
        outputs: Sequence[Mapping[str, np.ndarray]],
        examples: Sequence[Example],
        features: Sequence[Feature],
    ) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = [{} for _ in examples]
        for out, feat in zip(outputs, features):
            i = feat["example_index"]
            logits = np.asarray(out["logits"], dtype=np.float64)
            rec: dict[str, Any] = {"guid": examples[i].guid}
            if self.labels is None:
                rec["score"] = float(logits.reshape(-1)[0])
            else:
                probs = _softmax(logits)
                rec["label"] = self.labels[int(np.argmax(probs))]
                rec["probabilities"] = {name: float(p) for name, p in zip(self.labels, probs)}
            records[i] = rec
        return records

    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, float]:
        gold = [ex.label for ex in examples]
        if any(g is None for g in gold):
            raise ValueError(f"{self.name}: cannot compute metrics on unlabelled examples")
        out: dict[str, float] = {}
        if self.labels is None:
            pred_scores = np.array([p["score"] for p in predictions], dtype=np.float64)
            gold_scores = np.array(gold, dtype=np.float64)
            for name in self.metric_names:
                out[name] = M.METRICS[name](pred_scores, gold_scores)
            return out
        pred = np.array([p["label"] for p in predictions], dtype=object)
        gold_arr = np.array(gold, dtype=object)
        for name in self.metric_names:
            if name == "f1":
                out[name] = M.f1_binary(pred, gold_arr, positive=self.positive_label)
            else:
                out[name] = M.METRICS[name](pred, gold_arr)
        return out

    def info(self) -> dict[str, Any]:
        return {**super().info(), "labels": self.labels, "text_fields": self.text_fields}


# ---------------------------------------------------------------------------------------------------------
# Prediction and evaluation with a predict function
def model_predict_fn(model: Any, device: Any = None, output_keys: Sequence[str] | None = None) -> PredictFn:
    """A predict function around a model: eval mode, no grad, labels dropped, outputs moved to the CPU.

    Args:
        model: a module whose forward(**batch) returns a mapping (our `Output`).
        device: where to run; None: the model's device.
        output_keys: which outputs to keep; None: every tensor output except ``loss``.
    """
    import torch

    if device is None:
        device = next(model.parameters()).device

    @torch.no_grad()
    def predict_fn(batch: Batch) -> dict[str, Any]:
        model.eval()
        inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        out = model(**inputs)
        keys = output_keys or [
            k for k, v in out.items() if torch.is_tensor(v) and k != "loss" and v.dim() > 0
        ]
        return {k: out[k].detach().float().cpu() for k in keys}

    return predict_fn


def predict(
    task: Task,
    features: Sequence[Feature],
    predict_fn: PredictFn,
    *,
    batch_size: int = 64,
    pad_id: int = 0,
) -> list[dict[str, np.ndarray]]:
    """Run ``predict_fn`` over the features in length-sorted batches; one output dict per feature, in the
    features' order."""
    order = sorted(range(len(features)), key=lambda i: feature_length(features[i]))
    # keep multiple-choice examples with different option counts apart
    from albert.tasks.collate import group_key

    order.sort(key=lambda i: (str(group_key(features[i])), feature_length(features[i])))
    results: list[dict[str, np.ndarray] | None] = [None] * len(features)
    start = 0
    while start < len(order):
        key = group_key(features[order[start]])
        end = start
        while end < len(order) and end - start < batch_size and group_key(features[order[end]]) == key:
            end += 1
        idx = order[start:end]
        batch = task.collate([features[i] for i in idx], pad_id=pad_id)
        out = predict_fn(batch)
        if not isinstance(out, Mapping):
            out = {"logits": out}
        arrays = {k: np.asarray(v) for k, v in out.items()}
        for row, i in enumerate(idx):
            results[i] = {k: a[row] for k, a in arrays.items()}
        start = end
    return results  # type: ignore[return-value]


@dataclass
class EvalResult:
    """Metrics (empty for unlabelled splits) and per-example prediction records of one split."""

    split: str
    metrics: dict[str, float]
    predictions: list[dict[str, Any]]
    seconds: float = 0.0

    @property
    def num_examples(self) -> int:
        return len(self.predictions)


def evaluate(
    task: Task,
    examples: Sequence[Example],
    features: Sequence[Feature],
    predict_fn: PredictFn,
    *,
    split: str = "dev",
    batch_size: int = 64,
    pad_id: int = 0,
) -> EvalResult:
    """Predictions and (when every example is labelled) metrics for one split."""
    t0 = time.perf_counter()
    outputs = predict(task, features, predict_fn, batch_size=batch_size, pad_id=pad_id)
    predictions = task.postprocess(outputs, examples, features)
    labelled = bool(examples) and all(ex.label is not None for ex in examples)
    metrics = task.compute_metrics(predictions, examples) if labelled else {}
    return EvalResult(split, metrics, predictions, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------------------
# Fine-tuned model directories and run directories
TASK_FILE = "task.json"
REPORT_FILE = "report.json"


def write_task_info(task: Task, path: Path, extra: Mapping[str, Any] | None = None) -> None:
    info = {**task.info(), **(extra or {})}
    (path / TASK_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def resolve_model_dir(path: str | Path, checkpoint: str = "best") -> Path:
    """A model directory is returned as is; a fine-tuning run directory resolves to its ``best`` or
    ``last`` checkpoint (as recorded in its report.json)."""
    p = Path(path)
    if (p / "config.json").is_file():
        return p
    if checkpoint not in ("best", "last"):
        raise ValueError(f"checkpoint must be 'best' or 'last', got {checkpoint!r}")
    report = p / REPORT_FILE
    if report.is_file():
        d = json.loads(report.read_text(encoding="utf-8"))["checkpoints"][checkpoint].get("dir")
        if d and (Path(d) / "config.json").is_file():
            return Path(d)
        if d and (p / "checkpoints" / Path(d).name / "config.json").is_file():  # run dir moved
            return p / "checkpoints" / Path(d).name
    if checkpoint == "best" and (p / "checkpoints" / "best" / "config.json").is_file():
        return p / "checkpoints" / "best"
    raise ModelDirError(
        f"{p}: neither a model directory (config.json) nor a fine-tuning run directory with a {checkpoint} checkpoint"
    )


def read_task_info(model_dir: Path) -> dict[str, Any]:
    f = model_dir / TASK_FILE
    if not f.is_file():
        raise ModelDirError(
            f"{model_dir}: no {TASK_FILE}; this model directory was not written by `albert finetune`, so its "
            "task and labels are unknown"
        )
    info: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    return info


# ---------------------------------------------------------------------------------------------------------
# Fine-tuning through the one trainer
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


def finetune(
    task: Task,
    init: str | Path,
    output_dir: str | Path,
    cfg: FinetuneConfig,
    *,
    train_limit: int | None = None,
    predict_test: bool = True,
    resume: bool = False,
    max_time_s: float | None = None,
    progress_bar: bool = True,
    random_init: bool = False,
) -> FinetuneResult:
    """Fine-tune ``init`` (a model directory: ours, HF ALBERT, HF BERT) on ``task`` with the one trainer.

    Evaluates on the dev split(s) every ``cfg.eval_every`` steps (default: each epoch) and at the end.
    Keeps two checkpoints, both model directories with the tokenizer and task.json:
    ``OUTPUT/checkpoints/best`` (highest task score on the first dev split; the original reports only
    this one) and ``OUTPUT/checkpoints/step-N`` (the final weights). ``OUTPUT/report.json`` says which is
    which, with their dev metrics; dev predictions of both go to ``OUTPUT/predictions/``, test-split
    predictions of the best checkpoint (GLUE: leaderboard files) to ``OUTPUT/test/``.

    ``random_init``: keep ``init``'s architecture and tokenizer but draw every weight afresh (seeded by
    ``cfg.seed``) -- the from-scratch baseline that shows what pretraining bought.
    """
    import torch

    from albert.train import Trainer, TrainerConfig
    from albert.train.distributed import init_distributed

    out = Path(output_dir)
    dist = init_distributed(cfg.device)
    torch.manual_seed(cfg.seed)
    tokenizer = load_model_tokenizer(init)
    pad_id = int(getattr(tokenizer, "pad_id", 0) or 0)

    t0 = time.perf_counter()
    train_examples = task.read(task.train_split)
    if train_limit is not None:
        train_examples = train_examples[:train_limit]
    if not train_examples:
        raise TaskDataError(f"{task.name}: the {task.train_split} split is empty")
    train_features = task.featurize(train_examples, tokenizer, cfg.max_seq_length)
    dev_sets: dict[str, tuple[list[Example], list[Feature]]] = {}
    for split in task.dev_splits:
        ex = task.read(split)
        dev_sets[split] = (ex, task.featurize(ex, tokenizer, cfg.max_seq_length))
    logger.info(
        "%s: %d train examples, %s; featurized in %.1fs",
        task.name,
        len(train_examples),
        ", ".join(f"{len(e)} {s}" for s, (e, _) in dev_sets.items()) or "no dev set",
        time.perf_counter() - t0,
    )

    overrides: dict[str, Any] = {"classifier_dropout_prob": cfg.classifier_dropout}
    if cfg.encoder_dropout is not None:
        overrides.update(
            hidden_dropout_prob=cfg.encoder_dropout, attention_probs_dropout_prob=cfg.encoder_dropout
        )
    model = task.build_model(init, **overrides)
    init_name = f"random init, architecture of {init}" if random_init else str(init)
    if random_init:
        torch.manual_seed(cfg.seed)
        model.init_weights()
        logger.info("random initialization: %s's architecture and tokenizer, fresh weights", init)

    if cfg.batch_size % dist.world_size:
        raise ValueError(f"batch size {cfg.batch_size} is not divisible by the {dist.world_size} processes")
    collate = functools.partial(
        task.collate, pad_id=pad_id, pad_to=cfg.max_seq_length if cfg.pad_to_max_length else None
    )
    batches = LengthGroupedBatches(
        train_features,
        cfg.batch_size // dist.world_size,
        collate,
        group_by_length=cfg.group_by_length and not cfg.pad_to_max_length,
        seed=cfg.seed,
        rank=dist.rank,
        world_size=dist.world_size,
    )
    total_steps, warmup_steps = cfg.steps_for(len(train_features))
    steps_per_epoch = max(1, len(batches))
    main_split = task.dev_splits[0] if task.dev_splits else None
    pred_dir = out / "predictions"
    state: dict[str, Any] = {"best_score": None, "latest": None}

    def eval_fn(module: Any) -> dict[str, float]:
        """Dev metrics, flat: ``<metric>`` for the first dev split, ``<split>_<metric>`` for the others,
        and ``score`` (the task score on the first dev split, which selects the best checkpoint)."""
        fn = model_predict_fn(module)
        flat: dict[str, float] = {}
        results = {}
        for split, (ex, feats) in dev_sets.items():
            res = evaluate(task, ex, feats, fn, split=split, batch_size=cfg.eval_batch_size, pad_id=pad_id)
            results[split] = res
            prefix = "" if split == main_split else f"{split}_"
            flat.update({f"{prefix}{k}": v for k, v in res.metrics.items()})
        assert main_split is not None
        score = task.score(results[main_split].metrics)
        flat["score"] = score
        state["latest"] = results
        if dist.is_main and (state["best_score"] is None or score > state["best_score"]):
            state["best_score"] = score  # the trainer keeps the weights under the same rule (max, strict)
            for split, res in results.items():
                write_jsonl(pred_dir / f"{split}_best.jsonl", res.predictions)
        return flat

    def on_save(tmp: Path) -> None:
        tokenizer.save_pretrained(tmp)
        write_task_info(task, tmp, {"max_seq_length": cfg.max_seq_length, "init": init_name})

    eval_every = cfg.eval_every or steps_per_epoch
    trainer = Trainer.for_finetuning(
        model,
        lr=cfg.learning_rate,
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        optimizer=cfg.optimizer,
        weight_decay=cfg.weight_decay,
        config=TrainerConfig(
            max_steps=total_steps,
            max_grad_norm=cfg.max_grad_norm,
            precision=cfg.precision,
            device=cfg.device,
            eval_every=eval_every if dev_sets else None,
            eval_at_end=bool(dev_sets),
            save_every=None,
            keep_last=1,
            best_metric="eval_score" if dev_sets else None,
            best_mode="max",
            max_time_s=max_time_s,
            progress_bar=progress_bar,
            log_every=max(1, min(50, steps_per_epoch // 10)),
        ),
        run_dir=out,
        eval_fn=eval_fn if dev_sets else None,
        on_save=on_save,
        dist=dist,
    )
    logger.info(
        "fine-tuning %s from %s: %d steps (%.2f epochs of %d batches), warmup %d, lr %g, batch %d",
        task.name,
        init,
        total_steps,
        total_steps / steps_per_epoch,
        steps_per_epoch,
        warmup_steps,
        cfg.learning_rate,
        cfg.batch_size,
    )
    result = trainer.fit(batches, resume=resume or None)

    def strip(rec: Mapping[str, Any]) -> dict[str, Any]:
        return {k.removeprefix("eval_"): v for k, v in rec.items()}

    history = [strip(r) for r in result.eval_history]
    last: dict[str, Any] = {
        "dir": result.last_checkpoint,
        **(history[-1] if history else {"step": result.steps}),
    }
    best: dict[str, Any] = {
        "dir": result.best_checkpoint,
        "selected_by": f"score on {main_split} (mean of {', '.join(task.metric_names)})",
    }
    best.update(next((h for h in history if h.get("step") == result.best_step), {"step": result.best_step}))
    report_path = out / REPORT_FILE
    if dist.is_main:
        if state["latest"] is not None:
            for split, res in state["latest"].items():
                write_jsonl(pred_dir / f"{split}_last.jsonl", res.predictions)
        if predict_test and task.test_splits:
            best_dir = Path(result.best_checkpoint or result.last_checkpoint or out)
            _predict_test_splits(
                task, type(model).from_pretrained(best_dir), tokenizer, cfg, out / "test", pad_id
            )
        report = {
            "task": task.info(),
            "init": init_name,
            "config": cfg.to_dict(),
            "num_train_examples": len(train_examples),
            "num_dev_examples": {s: len(e) for s, (e, _) in dev_sets.items()},
            "total_steps": total_steps,
            "warmup_steps": warmup_steps,
            "steps_per_epoch": steps_per_epoch,
            "train_seconds": result.elapsed_s,
            "stop_reason": result.stop_reason,
            "checkpoints": {"best": best, "last": last},
            "history": history,
        }
        report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        logger.info("best (step %s): %s", best.get("step"), best.get("dir"))
        logger.info("last (step %s): %s", last.get("step"), last.get("dir"))
    return FinetuneResult(out, best, last, history, result.elapsed_s, report_path)


def _predict_test_splits(
    task: Task, model: Any, tokenizer: Any, cfg: FinetuneConfig, out: Path, pad_id: int
) -> None:
    """Predictions of ``model`` on the task's test splits that exist (GLUE: leaderboard files)."""
    from albert.train.distributed import pick_device

    model.to(pick_device(cfg.device))
    fn = model_predict_fn(model)
    for split in task.test_splits:
        try:
            examples = task.read(split)
        except FileNotFoundError as e:
            logger.info("no %s split (%s); no predictions for it", split, e)
            continue
        feats = task.featurize(examples, tokenizer, cfg.max_seq_length)
        res = evaluate(task, examples, feats, fn, split=split, batch_size=cfg.eval_batch_size, pad_id=pad_id)
        path = task.write_test_predictions(split, res.predictions, out)
        logger.info("wrote %d %s predictions to %s", len(res.predictions), split, path)
