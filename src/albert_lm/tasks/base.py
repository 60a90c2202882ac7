"""The task framework shared by GLUE, custom data, SQuAD and RACE: the `Task` interface, `Example`,
`FinetuneConfig`, and evaluation through a predict function.

A `Task` reads its data (`read`), featurizes it with the tokenizer (`featurize`), names its head and
loss (`build_model`), turns model outputs into per-example predictions and metrics (`postprocess`,
`compute_metrics`, a pure function), and rebuilds itself from the task.json of a model it fine-tuned
(`from_info`). Everything else is shared:

* training goes through the one trainer (`albert_lm.train`) via `albert_lm.tasks.finetune`; no task has its
  own loop;
* evaluation takes a *predict function* (batch of tensors -> model outputs), not a trainer: `predict`
  runs it over features in length-sorted batches and puts the outputs back in order, `evaluate` adds the
  task's post-processing and metrics (big_vision's evaluators work the same way).

The modules around this one: `albert_lm.tasks.inputs` (model directory tokenizers, token ids),
`albert_lm.tasks.classification` (GLUE and custom data), `albert_lm.tasks.race`, `albert_lm.tasks.squad`,
`albert_lm.tasks.rundir` (run directories, task.json) and `albert_lm.tasks.finetune` (the orchestration).
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm._io import atomic_write_text, json_text
from albert_lm.config import ConfigError
from albert_lm.tasks import metrics as M
from albert_lm.tasks.collate import Batch, Feature, cheapest_batches, feature_length, group_key, pad_features
from albert_lm.train.settings import (
    SHARED_FLAGS,
    OptimSettings,
    Rule,
    RunSettings,
    ScheduleSettings,
    above,
    at_least,
    check_sections,
    sections_dict,
)

REPORT_FILE = "report.json"
"""What a fine-tuning run directory's report is called (`albert_lm.tasks.rundir`)."""

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


# The one configuration error (albert_lm.config.ConfigError), under the name this module gave it before: each
# bad field's ``(section.field, reason)`` in ``problems``.
FinetuneConfigError = ConfigError


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


@dataclass
class FinetuneOptions:
    """What only fine-tuning has; the optimizer, schedule and run settings are the shared sections
    (`albert_lm.train.settings`)."""

    batch_size: int = 32
    """Examples per optimizer step (global, across processes)."""
    epochs: float = 3.0
    """Passes over the training set when train_steps (schedule.total_steps) is null."""
    max_seq_length: int = 512
    """Maximum tokens per sequence (the original's max_seq_length; SQuAD windows longer paragraphs)."""
    classifier_dropout: float = 0.1
    """Dropout before the task head (original run_classifier.py / run_race.py: 0.1)."""
    encoder_dropout: float | None = None
    """Hidden and attention dropout inside the encoder while fine-tuning (the README's 'ALBERT DR');
    null keeps the checkpoint's config."""
    group_by_length: bool = True
    """Batch examples of similar length together (fast); false: plain shuffled batches."""
    pad_to_max_length: bool = False
    """Pad every batch to max_seq_length as the original does (slow; for comparisons)."""

    RULES: ClassVar[list[Rule]] = [
        ("batch_size", at_least(1), "at least 1"),
        ("epochs", above(0), "greater than 0"),
        ("max_seq_length", at_least(3), "at least 3 ([CLS], a token, [SEP])"),  # tasks.inputs
        ("classifier_dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
        ("encoder_dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
    ]


# Fine-tuning's values of the shared settings: a preset over their fields, as every task preset is.
# Without bias correction Adam's step t is (1 - beta1^t) / sqrt(1 - beta2^t) times larger: 3.2x at t = 1,
# 6.5x at 10, 4.1x at 60, 1.3x at 1000. That matters in short runs: MiniLM on the polarity CSV, 60 steps of
# 16 at lr 5e-5 (warmup 6, seq 48, seed 1, fp32), held-out accuracy 0.78 with adamw_original vs 0.59 with
# adamw (one seed; measured for issue 15). Hence the original's AdamWeightDecayOptimizer (adamw_original).
FINETUNE_DEFAULTS: dict[str, dict[str, Any]] = {
    "optim": {"name": "adamw_original", "lr": 2e-5},
    # train_steps null: epochs; warmup: 10% of the steps (original run_classifier.py warmup_proportion)
    "schedule": {"total_steps": None, "warmup_steps": None, "warmup_fraction": 0.1},
    # A checkpoint every 10 minutes of training: a killed fine-tune loses at most that much whatever its step
    # speed, and a short one (most on a GPU) writes only its final one; a resume needs only the newest.
    "run": {"seed": 42, "log_every": None, "eval_every": None, "save_every": None, "save_every_minutes": 10.0,
            "keep_last": 1},
}  # fmt: skip

SECTIONS: dict[str, type] = {
    "finetune": FinetuneOptions,
    "optim": OptimSettings,
    "schedule": ScheduleSettings,
    "run": RunSettings,
}

# flat name (the flag's spelling, and the record's key) -> section.field
FLAT_NAMES: dict[str, str] = {
    **{f.name: f"finetune.{f.name}" for f in dataclasses.fields(FinetuneOptions)},
    **SHARED_FLAGS,
}
# The keys of report.json's and task.json's "config" (the record every fine-tuned run directory holds, and
# what a resume compares), in their order: the same flat record as before the settings were shared.
RECORD_KEYS = (
    "learning_rate", "batch_size", "train_steps", "epochs", "warmup_steps", "warmup_fraction",
    "max_seq_length", "eval_batch_size", "eval_every", "classifier_dropout", "encoder_dropout", "optimizer",
    "weight_decay", "adam_epsilon", "max_grad_norm", "seed", "group_by_length", "pad_to_max_length",
    "precision", "device", "fp32_linear",
)  # fmt: skip


@dataclass(init=False)
class FinetuneConfig:
    """Fine-tuning hyperparameters: the ``finetune`` section (`FinetuneOptions`) and the settings shared with
    pretraining (``optim``, ``schedule``, ``run``) at fine-tuning's values (`FINETUNE_DEFAULTS`). Task
    presets (e.g. `albert_lm.tasks.glue.SPECS`) set values from the original's tables by their flat names,
    the flags of `albert finetune` (`FLAT_NAMES`: ``FinetuneConfig(learning_rate=3e-5, train_steps=800)``),
    which also read through (``cfg.learning_rate`` is ``cfg.optim.lr``)."""

    finetune: FinetuneOptions
    optim: OptimSettings
    schedule: ScheduleSettings
    run: RunSettings

    def __init__(
        self,
        finetune: FinetuneOptions | None = None,
        optim: OptimSettings | None = None,
        schedule: ScheduleSettings | None = None,
        run: RunSettings | None = None,
        **flat: Any,
    ) -> None:
        self.finetune = finetune or FinetuneOptions()
        self.optim = optim or OptimSettings(**FINETUNE_DEFAULTS["optim"])
        self.schedule = schedule or ScheduleSettings(**FINETUNE_DEFAULTS["schedule"])
        self.run = run or RunSettings(**FINETUNE_DEFAULTS["run"])
        for name, value in flat.items():
            self._set(name, value)

    def _set(self, name: str, value: Any) -> None:
        if name not in FLAT_NAMES:
            raise TypeError(f"FinetuneConfig: unknown setting {name!r} (known: {', '.join(FLAT_NAMES)})")
        section, _, attr = FLAT_NAMES[name].partition(".")
        setattr(getattr(self, section), attr, value)

    def __getattr__(self, name: str) -> Any:
        # only called for names that are not attributes: the flat names read through to their section
        target = FLAT_NAMES.get(name)
        if target is None or target.partition(".")[0] not in self.__dict__:
            raise AttributeError(f"'FinetuneConfig' object has no attribute {name!r}")
        section, _, attr = target.partition(".")
        return getattr(self.__dict__[section], attr)

    def validate(self, model_config: Any = None) -> None:
        """Check every field before anything is read or built: types, finite numbers, ranges, names
        (`albert_lm.train.settings.check_sections`), and with ``model_config`` (an `AlbertConfig`) a
        ``max_seq_length`` the position table holds.

        Raises:
            ConfigError: listing each bad ``section.field`` with the reason, one per field.
        """
        extra = []
        if model_config is not None:
            limit = int(model_config.max_position_embeddings)
            if self.finetune.max_seq_length > limit:
                reason = f"must be at most {limit}, the model's max_position_embeddings, got {self.finetune.max_seq_length}"
                extra.append(("finetune.max_seq_length", reason))
        try:
            check_sections(self, SECTIONS, extra)
        except ConfigError as e:  # listed in the record's order (learning rate first, as the flags' help)
            order = {FLAT_NAMES[k]: i for i, k in enumerate(RECORD_KEYS)}
            raise ConfigError(sorted(e.problems, key=lambda p: order.get(p[0], len(order)))) from None

    def replace(self, **changes: Any) -> FinetuneConfig:
        """A copy with ``changes`` by flat name; None is a value like any other (``train_steps=None``:
        use epochs)."""
        out = copy.deepcopy(self)
        for name, value in changes.items():
            out._set(name, value)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The flat record of report.json and task.json (`RECORD_KEYS`), and ``head_lr_scale`` where it is not
        1 (so that the records, and the resumes, of runs from before it was a setting stay as they were)."""
        out = {name: getattr(self, name) for name in RECORD_KEYS}
        if self.optim.head_lr_scale != 1:
            out["head_lr_scale"] = self.optim.head_lr_scale
        return out

    def sections(self) -> dict[str, dict[str, Any]]:
        """``{section: {field: value}}``: what ``--print-config`` prints and ``--config`` reads."""
        return sections_dict(self, SECTIONS)

    def steps_for(self, num_train_examples: int) -> tuple[int, int]:
        """(total optimizer steps, warmup steps) for a training set of this size."""
        f = self.finetune
        return self.schedule.steps(f.epochs * num_train_examples / f.batch_size)


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
    #: the heads (`albert_lm.model.HEADS` names) of this task's models, each with the outputs its
    #: `postprocess` reads: what an exported graph returns, in this order (`albert_lm.export.graph`)
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
        prediction) an error (`albert_lm.convert.hf.CheckpointError`)."""

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
    atomic_write_text(path, "".join(json_text(r, str(path)) + "\n" for r in records))


def per_example(
    outputs: Sequence[Mapping[str, np.ndarray]],
    examples: Sequence[Example],
    features: Sequence[Feature],
    record: Callable[[Mapping[str, np.ndarray], Feature, Example], dict[str, Any]],
) -> list[dict[str, Any]]:
    """`Task.postprocess` of a task with one feature per example (classification, NER, multiple choice):
    ``record(output, feature, example)`` for each feature, in the order of the examples."""
    records: list[dict[str, Any]] = [{} for _ in examples]
    for out, feat in zip(outputs, features):
        i = feat["example_index"]
        records[i] = record(out, feat, examples[i])
    return records


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
    `albert serve`, the metrics of `albert export onnx`): eval mode, no grad, padding skipped
    (`albert_lm.model.encoder.skip_padding`: a padded batch costs its real tokens), only the model's inputs,
    and the outputs asked for, moved to the CPU as float32 arrays.

    Args:
        model: a module whose forward(**batch) returns a mapping (our `Output`).
        device: where to run; None: the model's device.
        output_keys: which outputs to keep (`albert_lm.tasks.registry.HEAD_OUTPUTS`: those its task's
            post-processing reads); None: every tensor output but ``loss``.
        fp32_linear: "auto": on a CPU in fp32, run the linear layers on the library measured fastest
            (`albert_lm.model.fp32_linear.choose_fp32_linear`; an int8 model's layers are not F.linear and
            stay as they are); None: as they are.
    """
    import contextlib

    import torch

    from albert_lm.model.encoder import skip_padding
    from albert_lm.model.fp32_linear import choose_fp32_linear
    from albert_lm.model.fp32_linear import fp32_linear as linear_backend

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
        with linear_backend(backend) if backend else contextlib.nullcontext(), skip_padding():
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
    call_cost_tokens: float | None = None,
) -> list[dict[str, np.ndarray]]:
    """Run ``predict_fn`` over the features in length-sorted batches; one output dict per feature, in the
    features' order.

    ``call_cost_tokens``: cut the sorted features into the batches of least cost (`cheapest_batches`:
    padded tokens plus this much per model call) instead of every ``batch_size``. A server's batch of
    32 random sentences padded to its longest costs ~2x its real tokens, where a length-sorted file costs
    ~1.06x; cut like this it costs ~1.1x (benchmarks/bench_serve.py). None: batches of ``batch_size``.
    """
    # sorted by length, and multiple-choice examples with different option counts kept apart
    keys = [str(group_key(f)) for f in features]
    lengths = [feature_length(f) for f in features]
    order = sorted(range(len(features)), key=lambda i: (keys[i], lengths[i]))
    ends: list[int] = []
    for _, run in itertools.groupby(order, key=keys.__getitem__):  # batches never cross a group key
        run_lengths = [lengths[i] for i in run]
        if call_cost_tokens is None:
            cuts = [*range(batch_size, len(run_lengths), batch_size), len(run_lengths)]
        else:
            cuts = cheapest_batches(run_lengths, batch_size, call_cost_tokens)
        first = ends[-1] if ends else 0
        ends += [first + e for e in cuts]
    results: list[dict[str, np.ndarray] | None] = [None] * len(features)
    start = 0
    for end in ends:
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


def require_label_variety(task: Task, split: str, examples: list[Example]) -> list[Example]:
    """``examples``, unless every one has the same class label while the task has several: a classifier
    trained on one class learns a constant and reports accuracy 1.0 on a dev split of that class, a wrong
    result with exit 0 (a pair CSV whose label column was built wrongly did exactly that). Applies to tasks
    with a ``labels`` list and one label per example (classification); spans, tags and choices pass.

    Raises:
        TaskDataError: naming the split's source, the one label and the task's labels.
    """
    labels = getattr(task, "labels", None)
    if not labels or len(labels) < 2:
        return examples
    if not all(isinstance(ex.label, (str, int)) for ex in examples):
        return examples  # not one class label per example
    seen = {ex.label for ex in examples}
    if len(seen) == 1:
        raise TaskDataError(
            f"{task.split_source(split)}: all {len(examples)} {split} examples have the label "
            f"{next(iter(seen))!r}, one of the task's {len(labels)} ({', '.join(map(str, labels))}); "
            "a classifier cannot learn from one class: check the label column"
        )
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
