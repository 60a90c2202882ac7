"""The task framework shared by GLUE, custom data, SQuAD and RACE: the `Task` interface, `Example`,
`FinetuneConfig`, and evaluation through a predict function.

A `Task` reads its data (`read`), featurizes it with the tokenizer (`featurize`), names its head and
loss (`build_model`), turns model outputs into per-example predictions and metrics (`postprocess`,
`compute_metrics`, a pure function), and rebuilds itself from the task.json of a model it fine-tuned
(`from_info`). Everything else is shared:

* training goes through the one trainer (`albert_lm.train`) via `albert_lm.finetune.run`; no task has its
  own loop;
* evaluation takes a *predict function* (batch of tensors -> model outputs), not a trainer: `predict`
  runs it over features in length-sorted batches and puts the outputs back in order, `evaluate` adds the
  task's post-processing and metrics (big_vision's evaluators work the same way).

The modules around this one: `albert_lm.tasks.inputs` (model directory tokenizers, token ids),
`albert_lm.tasks.classification` (GLUE and custom data), `albert_lm.tasks.race`, `albert_lm.tasks.squad`,
`albert_lm.finetune.rundir` (run directories, task.json) and `albert_lm.finetune.run` (the orchestration).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm._io import atomic_write_text, json_text
from albert_lm.tasks import metrics as M
from albert_lm.tasks.collate import Batch, Feature, pad_features

REPORT_FILE = "report.json"
"""What a fine-tuning run directory's report is called (`albert_lm.finetune.rundir`)."""

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


# ---------------------------------------------------------------------------------------------------------
# Examples
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


class TaskAdapters(abc.ABC):
    """How a task meets the world around training, with defaults a kind overrides where it has more to say:
    `albert predict`'s input and output rows, the request fields of `albert serve`, labelled files for
    `albert export onnx --calibrate-on`, its command line and preset, and leaderboard files. The core a kind
    must write is `Task`'s: read, featurize, its head, postprocess and metrics."""

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
    def cli_task(cls, args: Any, info: Mapping[str, Any] | None = None) -> tuple[Task, Mapping[str, Any]]:
        """The task of parsed arguments, and its hyperparameter preset (flat names -> values); ``info``: the task.json of the
        fine-tuned model being evaluated (it fixes e.g. the label order)."""
        raise NotImplementedError(f"{cls.__name__} has no command")

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        """The preset ``albert finetune TASK --help`` shows as the flags' defaults, and a note on when it
        differs (GLUE: by --task); by default none."""
        return {}, ""

    @classmethod
    def cli_summary(cls, args: Any) -> dict[str, Any] | None:
        """`albert evaluate`'s answer without evaluating a model (GLUE: ``--task all``), or None."""
        return None

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


# ---------------------------------------------------------------------------------------------------------
# The task interface
class Task(TaskAdapters, abc.ABC):
    """What a fine-tuning task kind provides: the core (`read`, `featurize`, `build_model`, `postprocess`,
    `compute_metrics`, `from_info`) and, through `TaskAdapters`, how it meets prediction, serving and the
    command line. See the module docstring for how the pieces are used."""

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
    #: `postprocess` reads: what an exported graph returns, in this order (`albert_lm.infer.graph`)
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
