"""What `albert finetune` leaves behind, and how `albert predict` / `albert evaluate` read it back.

A fine-tuning run directory holds two model directories, ``checkpoints/best`` (best on dev by the
task's score) and ``checkpoints/step-N`` (the last weights, with the optimizer state for --resume),
each loadable by `albert predict` / `albert evaluate` and by transformers, plus ``report.json`` saying
which is which and with what dev metrics. Each model directory has a ``task.json`` (`Task.info`) from
which the task rebuilds itself (`task_from_info`: one table from the task kind to its class, each class
with its `Task.from_info`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert._io import atomic_write_json
from albert.tasks.base import FinetuneConfig, ModelDirError, Task
from albert.tasks.classification import ClassificationTask
from albert.tasks.inputs import load_model_tokenizer
from albert.tasks.race import MultipleChoiceTask
from albert.tasks.squad import SquadTask

TASK_FILE = "task.json"
REPORT_FILE = "report.json"

TASK_KINDS: dict[str, type[Task]] = {
    "classification": ClassificationTask,
    "regression": ClassificationTask,
    "multiple_choice": MultipleChoiceTask,
    "span": SquadTask,
}
"""Head kind (``Task.kind``, saved in task.json) -> the task class that rebuilds itself from task.json."""


def write_task_info(task: Task, path: Path, extra: Mapping[str, Any] | None = None) -> None:
    """``path/task.json``: `Task.info` and ``extra`` (e.g. ``max_seq_length``), written atomically."""
    atomic_write_json(path / TASK_FILE, {**task.info(), **(extra or {})}, indent=2)


def read_task_info(model_dir: Path) -> dict[str, Any]:
    """The task.json of a fine-tuned model directory.

    Raises:
        ModelDirError: there is none (the directory was not written by `albert finetune`).
    """
    f = model_dir / TASK_FILE
    if not f.is_file():
        raise ModelDirError(
            f"{model_dir}: no {TASK_FILE}; this model directory was not written by `albert finetune`, so its "
            "task and labels are unknown"
        )
    info: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    return info


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


def task_from_info(info: Mapping[str, Any]) -> Task:
    """The task a fine-tuned model was trained with, without data, from its task.json."""
    kind = info.get("kind")
    if kind not in TASK_KINDS:
        raise ModelDirError(f"{TASK_FILE}: unknown task kind {kind!r}; known: {', '.join(TASK_KINDS)}")
    return TASK_KINDS[str(kind)].from_info(info)


def trained_max_seq_length(info: Mapping[str, Any], given: int | None = None) -> int:
    """The sequence length to featurize with: ``given`` (a command-line flag), else the one the model was
    fine-tuned with (task.json; `albert finetune` always records it), else `FinetuneConfig`'s default."""
    if given:
        return int(given)
    return int(info.get("max_seq_length", FinetuneConfig.max_seq_length))


@dataclass
class FineTuned:
    """A fine-tuned model directory, read back: the task rebuilt from its task.json and its tokenizer."""

    model_dir: Path
    info: dict[str, Any]
    task: Task
    tokenizer: Any
    max_seq_length: int


def load_finetuned(
    path: str | Path, checkpoint: str = "best", max_seq_length: int | None = None
) -> FineTuned:
    """A run directory's ``checkpoint`` (or a model directory) with its task, tokenizer and the sequence
    length to use (`trained_max_seq_length`); the model itself is `FineTuned.task.build_model(model_dir)`.

    Raises:
        ModelDirError: not a (fine-tuned) model directory, or a tokenizer that does not fit it.
    """
    model_dir = resolve_model_dir(path, checkpoint)
    info = read_task_info(model_dir)
    tokenizer = load_model_tokenizer(model_dir)
    return FineTuned(
        model_dir, info, task_from_info(info), tokenizer, trained_max_seq_length(info, max_seq_length)
    )
