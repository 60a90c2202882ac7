"""The task framework shared by GLUE, custom data, SQuAD and RACE: the `Task` interface, `Example`,
`FinetuneConfig`, and evaluation through a predict function.

A `Task` reads its data (`read`), featurizes it with the tokenizer (`featurize`), names its head and
loss (`build_model`), turns model outputs into per-example predictions and metrics (`postprocess`,
`compute_metrics`, a pure function), and rebuilds itself from the task.json of a model it fine-tuned
(`from_info`). Everything else is shared:

* training goes through the one trainer (`albert.train`) via `albert.tasks.finetune`; no task has its
  own loop;
* evaluation takes a *predict function* (batch of tensors -> model outputs), not a trainer: `predict`
  runs it over features in length-sorted batches and puts the outputs back in order, `evaluate` adds the
  task's post-processing and metrics (big_vision's evaluators work the same way).

The modules around this one: `albert.tasks.inputs` (model directory tokenizers, token ids),
`albert.tasks.classification` (GLUE and custom data), `albert.tasks.race`, `albert.tasks.squad`,
`albert.tasks.rundir` (run directories, task.json) and `albert.tasks.finetune` (the orchestration).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert._io import atomic_write_text
from albert.tasks import metrics as M
from albert.tasks.collate import Batch, Feature, feature_length, group_key, pad_features

REPORT_FILE = "report.json"
"""What a fine-tuning run directory's report is called (`albert.tasks.rundir`)."""

PredictFn = Callable[[Batch], Any]
"""A batch of tensors (no labels) -> model outputs: a tensor (B, ...) or a mapping of name -> (B, ...)."""


# ---------------------------------------------------------------------------------------------------------
# Errors
class TaskDataError(ValueError):
    """Bad task data; the message names the file, the line (or question) and the field."""


class ModelDirError(ValueError):
    """A model directory that cannot be used for fine-tuning or prediction; the message says why."""


class UnknownNameError(KeyError):
    """An unknown task, split or metric name: a failed lookup (so a KeyError) whose message lists the known
    names, shown as it is (a plain KeyError shows its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FinetuneConfigError(ValueError):
    """Fine-tuning hyperparameters that cannot work; one ``(field, reason)`` per bad field in ``problems``."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{name}: {reason}" for name, reason in self.problems))


# ---------------------------------------------------------------------------------------------------------
# Examples and hyperparameters
@dataclass
class Example:
    """One item as read from disk.

    Attributes:
        guid: identifier, kept into prediction files (GLUE: the test file's index column).
        texts: the input texts: (text,) or (text_a, text_b); multiple choice: (context,) with the question
            and options in ``meta``.
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
    original's tables; every field is a flag of `albert finetune` (its docstring is the flag's help)."""

    learning_rate: float = 2e-5
    """Peak learning rate (linear warmup, then linear decay to 0)."""
    batch_size: int = 32
    """Examples per optimizer step (global, across processes)."""
    train_steps: int | None = None
    """Optimizer steps (overrides epochs); null: epochs passes over the training set."""
    epochs: float = 3.0
    """Passes over the training set when train_steps is null."""
    warmup_steps: int | None = None
    """Linear warmup steps; null: warmup_fraction of the training steps."""
    warmup_fraction: float = 0.1
    """Warmup as a fraction of the steps when warmup_steps is null."""
    max_seq_length: int = 512
    """Maximum tokens per sequence (the original's max_seq_length; SQuAD windows longer paragraphs)."""
    eval_batch_size: int = 64
    """Batch size for evaluation."""
    eval_every: int | None = None
    """Evaluate on dev every N steps (and at the end); null: once per epoch."""
    classifier_dropout: float = 0.1
    """Dropout before the task head (original run_classifier.py / run_race.py: 0.1)."""
    encoder_dropout: float | None = None
    """Hidden and attention dropout inside the encoder while fine-tuning (the README's 'ALBERT DR');
    null keeps the checkpoint's config."""
    # Without bias correction Adam's step t is (1 - beta1^t) / sqrt(1 - beta2^t) times larger: 3.2x at
    # t = 1, 6.5x at 10, 4.1x at 60, 1.3x at 1000. That matters in short runs: MiniLM on the polarity CSV,
    # 60 steps of 16 at lr 5e-5 (warmup 6, seq 48, seed 1, fp32), held-out accuracy 0.78 with
    # adamw_original vs 0.59 with adamw (one seed; measured for issue 15).
    optimizer: str = "adamw_original"
    """adamw_original | adamw | lamb. adamw_original is what the original fine-tuned with: run_glue.sh,
    run_squad_v1/v2 and run_race's --optimizer=adamw is optimization.py's AdamWeightDecayOptimizer,
    without Adam's bias correction; adamw is torch.optim.AdamW, with it."""
    weight_decay: float = 0.01
    """Weight decay, LayerNorm and biases excluded (original optimization.py AdamWeightDecayOptimizer:
    0.01)."""
    adam_epsilon: float = 1e-6
    """Adam epsilon (original optimization.py: 1e-6)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clipping (original optimization.py: clip_by_global_norm 1.0)."""
    seed: int = 42
    """Random seed (initialization of the head, data order, dropout)."""
    group_by_length: bool = True
    """Batch examples of similar length together (fast); false: plain shuffled batches."""
    pad_to_max_length: bool = False
    """Pad every batch to max_seq_length as the original does (slow; for comparisons)."""
    precision: str = "auto"
    """auto | fp32 | bf16 | fp16; auto: bf16 where the device runs it natively (GPUs from Ampere on, CPUs
    with AVX512-BF16 or AMX), else fp32."""
    device: str | None = None
    """cpu | cuda | cuda:N (default: a GPU when there is one)"""
    fp32_linear: str = "auto"
    """auto | torch | onednn: the library of the fp32 linear layers on a CPU; auto: measured at start-up,
    oneDNN only where clearly faster. Fix it for runs that must match bit for bit."""

    def validate(self, model_config: Any = None) -> None:
        """Check every field before anything is read or built: types, finite numbers, ranges, names, and
        with ``model_config`` (an `AlbertConfig`) a ``max_seq_length`` the position table holds.

        Raises:
            FinetuneConfigError: listing each bad field with the reason, one per field.
        """
        from albert._fields import FieldError, coerce, field_types

        problems: list[tuple[str, str]] = []
        for name, tp in field_types(FinetuneConfig).items():
            try:
                coerce(getattr(self, name), tp, name)  # the type, and numbers finite
            except FieldError as e:
                problems.append((name, str(e).removeprefix(f"{name}: ")))
        bad = {name for name, _ in problems}
        for name, ok, need in self._range_rules(model_config):
            value = getattr(self, name)
            if name not in bad and value is not None and not ok(value):
                problems.append((name, f"must be {need}, got {value!r}"))
                bad.add(name)
        if problems:
            raise FinetuneConfigError(problems)

    @staticmethod
    def _range_rules(model_config: Any) -> list[tuple[str, Callable[[Any], bool], str]]:
        """(field, test, what the test asks) for `validate`; a null value passes (where the type allows
        it, null has a meaning of its own)."""
        from albert.optim import OPTIMIZERS
        from albert.train.config import FP32_LINEARS, PRECISIONS

        def at_least(n: float) -> Callable[[Any], bool]:
            return lambda v: v >= n

        def fraction(v: float) -> bool:
            return 0 <= v < 1

        rules: list[tuple[str, Callable[[Any], bool], str]] = [
            ("learning_rate", at_least(0), "at least 0"),
            ("batch_size", at_least(1), "at least 1"),
            ("train_steps", at_least(1), "at least 1 (or null: use epochs)"),
            ("epochs", lambda v: v > 0, "greater than 0"),
            ("warmup_steps", at_least(0), "at least 0"),
            ("warmup_fraction", lambda v: 0 <= v <= 1, "between 0 and 1"),
            ("max_seq_length", at_least(3), "at least 3 ([CLS], a token, [SEP])"),  # tasks.inputs
            ("eval_batch_size", at_least(1), "at least 1"),
            ("eval_every", at_least(1), "at least 1 (or null: once per epoch)"),
            ("classifier_dropout", fraction, "in [0, 1)"),
            ("encoder_dropout", fraction, "in [0, 1)"),
            ("optimizer", lambda v: v in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
            ("weight_decay", at_least(0), "at least 0"),
            ("adam_epsilon", lambda v: v > 0, "greater than 0"),
            ("max_grad_norm", lambda v: v > 0, "greater than 0"),
            ("seed", at_least(0), "at least 0"),
            ("precision", lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
            ("fp32_linear", lambda v: v in FP32_LINEARS, f"one of {', '.join(FP32_LINEARS)}"),
        ]
        if model_config is not None:
            limit = int(model_config.max_position_embeddings)
            rules.append(
                (
                    "max_seq_length",
                    lambda v: v <= limit,
                    f"at most {limit}, the model's max_position_embeddings",
                )
            )
        return rules

    def replace(self, **changes: Any) -> FinetuneConfig:
        """A copy with ``changes``; None is a value like any other (``train_steps=None``: use epochs)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def steps_for(self, num_train_examples: int) -> tuple[int, int]:
        """(total optimizer steps, warmup steps) for a training set of this size."""
        if self.train_steps is not None:
            total = self.train_steps
        else:
            total = max(1, math.ceil(self.epochs * num_train_examples / self.batch_size))
        warmup = self.warmup_steps if self.warmup_steps is not None else int(self.warmup_fraction * total)
        return total, min(warmup, total)


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
    #: the task.json kinds whose models this class (or the base that defines `from_info`) rebuilds
    kinds: ClassVar[tuple[str, ...]] = ()
    #: the heads (`albert.model.HEADS` names) of this task's models, each with the outputs its
    #: `postprocess` reads: what an exported graph returns, in this order (`albert.export.graph`)
    head_outputs: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: the one line `albert finetune --help` / `albert evaluate --help` show for the task's command
    cli_help: ClassVar[str] = ""

    @classmethod
    @abc.abstractmethod
    def from_info(cls, info: Mapping[str, Any]) -> Task:
        """The task a fine-tuned model was trained with, from its task.json (`info`), without data: what
        `albert predict` needs (labels, head settings, thresholds chosen on dev)."""

    @abc.abstractmethod
    def read(self, split: str) -> list[Example]:
        """The examples of a split; raises `TaskDataError` naming file and line on bad input."""

    @abc.abstractmethod
    def featurize(self, examples: Sequence[Example], tokenizer: Any, max_length: int) -> list[Feature]:
        """Features for the model; each carries ``example_index`` (position in ``examples``)."""

    @abc.abstractmethod
    def build_model(self, init: str | Path, *, require_head: bool = False, **config_overrides: Any) -> Any:
        """The model with this task's head, the encoder loaded from a model directory (``init``); a head
        that ``init`` lacks is freshly initialized, or with ``require_head`` (a fine-tuned model, for
        prediction) an error (`albert.convert.hf.CheckpointError`)."""

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
        """Metrics of labelled examples; a pure function of its arguments (it changes neither the records
        nor the task)."""

    @abc.abstractmethod
    def predict_examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int],
        source: str,
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """Examples from `albert predict` input: JSON objects, or text lines split at tabs (given as
        ``{"_texts": [...]}``); ``numbers`` are their line numbers in ``source`` for errors."""

    @abc.abstractmethod
    def output_row(self, example: Example, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """The line `albert predict` writes for one input."""

    def request_fields(self) -> tuple[str, ...]:
        """The fields of an `albert serve` request this model takes: ``texts`` (one text each),
        ``pairs`` (two texts each), ``items`` (JSON objects as `albert predict` reads them)."""
        return ("items",)

    @classmethod
    def read_labelled(
        cls, info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
    ) -> list[Example]:
        """The labelled examples of one file for the model whose task.json is ``info`` (``albert export
        onnx --calibrate-on``); ``columns``: the column names of a file without a header row.

        Raises:
            FileNotFoundError: no such file.
            TaskDataError: a record the task cannot use, naming file and line.
        """
        raise TaskDataError(f"{info.get('kind')} models read no labelled files")

    # ------------------------------------------------------------------------------------ command line
    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        """Add the task's data arguments to the parser of ``albert finetune TASK`` (``mode`` "finetune")
        or ``albert evaluate TASK`` ("evaluate")."""
        raise NotImplementedError(f"{cls.__name__} has no command")

    @classmethod
    def cli_task(cls, args: Any, info: Mapping[str, Any] | None = None) -> tuple[Task, FinetuneConfig]:
        """The task of parsed arguments, and its hyperparameter preset; ``info``: the task.json of the
        fine-tuned model being evaluated (it fixes e.g. the label order)."""
        raise NotImplementedError(f"{cls.__name__} has no command")

    @classmethod
    def cli_summary(cls, args: Any) -> dict[str, Any] | None:
        """`albert evaluate`'s answer without evaluating a model (GLUE: ``--task all``), or None."""
        return None

    def apply_metrics(
        self, predictions: Sequence[Mapping[str, Any]], metrics: Mapping[str, float]
    ) -> list[dict[str, Any]]:
        """The prediction records as the metrics settle them, as new records (SQuAD 2.0: the answers at
        the no-answer threshold chosen on the split); by default the records unchanged."""
        return [dict(p) for p in predictions]

    def calibrate(self, metrics: Mapping[str, float]) -> None:  # noqa: B027 - an optional hook
        """Keep what evaluating on dev chose for later predictions and task.json (SQuAD 2.0: the
        no-answer threshold); by default nothing."""

    def collate(self, features: Sequence[Feature], pad_id: int = 0, pad_to: int | None = None) -> Batch:
        """Features -> padded batch (dynamic padding unless ``pad_to``)."""
        return pad_features(features, pad_id, pad_to=pad_to)

    def info(self) -> dict[str, Any]:
        """What `albert predict` needs to use a fine-tuned model (saved as task.json, read by `from_info`)."""
        return {"task": self.name, "kind": self.kind, "metric_names": list(self.metric_names)}

    def split_source(self, split: str) -> str:
        """Where a split is read from, for error messages (custom data: its file); by default the task
        and split names."""
        return f"{self.name} {split} split"

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
    """Prediction records as JSON lines, written atomically (the directory is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


# ---------------------------------------------------------------------------------------------------------
# Prediction and evaluation with a predict function
#: Batch keys a model's forward reads when predicting (``p_mask``: the SQuAD 2.0 verifier); labels and the
#: features' bookkeeping stay out.
PREDICT_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids", "p_mask"})


def model_predict_fn(
    model: Any,
    device: Any = None,
    output_keys: Sequence[str] | None = None,
    *,
    fp32_linear: str | None = None,
) -> PredictFn:
    """THE torch predict function (fine-tuning's dev evaluation, `albert evaluate`, `albert predict`,
    `albert serve`, the metrics of `albert export onnx`): eval mode, no grad, only the model's inputs, and
    the outputs asked for, moved to the CPU as float32 arrays.

    Args:
        model: a module whose forward(**batch) returns a mapping (our `Output`).
        device: where to run; None: the model's device.
        output_keys: which outputs to keep (`albert.tasks.registry.HEAD_OUTPUTS`: those its task's
            post-processing reads); None: every tensor output but ``loss``.
        fp32_linear: "auto": on a CPU in fp32, run the linear layers on the library measured fastest
            (`albert.model.fp32_linear.choose_fp32_linear`; an int8 model's layers are not F.linear and
            stay as they are); None: as they are.
    """
    import contextlib

    import torch

    from albert.model.fp32_linear import choose_fp32_linear
    from albert.model.fp32_linear import fp32_linear as linear_backend

    first = next(model.parameters(), None)
    if device is None:
        device = first.device if first is not None else torch.device("cpu")
    keys = output_keys
    cpu_fp32 = torch.device(device).type == "cpu" and first is not None and first.dtype == torch.float32
    backend = choose_fp32_linear() if fp32_linear == "auto" and cpu_fp32 else None

    @torch.no_grad()
    def predict_fn(batch: Batch) -> dict[str, Any]:
        model.eval()
        inputs = {k: v.to(device) for k, v in batch.items() if k in PREDICT_INPUTS}
        with linear_backend(backend) if backend else contextlib.nullcontext():
            out = model(**inputs)
        names = keys or [k for k, v in out.items() if torch.is_tensor(v) and k != "loss" and v.dim() > 0]
        return {k: out[k].detach().float().cpu().numpy() for k in names}

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
    # sorted by length, and multiple-choice examples with different option counts kept apart
    order = sorted(
        range(len(features)),
        key=lambda i: (str(group_key(features[i])), feature_length(features[i])),
    )
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


def require_examples(task: Task, split: str, examples: list[Example]) -> list[Example]:
    """``examples``, when there are any. An empty training split cannot train; an empty dev split
    trained every step and then failed on metrics that do not exist (a ``KeyError`` after the whole
    run), and `albert evaluate` on one printed no metric with exit 0 (issue 22 item 5).

    Raises:
        TaskDataError: naming the split's source (`Task.split_source`).
    """
    if not examples:
        raise TaskDataError(f"{task.split_source(split)}: no examples (an empty {split} split)")
    return examples


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
    """Predictions and (when every example is labelled) metrics for one split; the records are those the
    metrics settle (`Task.apply_metrics`)."""
    t0 = time.perf_counter()
    outputs = predict(task, features, predict_fn, batch_size=batch_size, pad_id=pad_id)
    predictions = task.postprocess(outputs, examples, features)
    labelled = bool(examples) and all(ex.label is not None for ex in examples)
    metrics = task.compute_metrics(predictions, examples) if labelled else {}
    predictions = task.apply_metrics(predictions, metrics)
    return EvalResult(split, metrics, predictions, time.perf_counter() - t0)
