"""A labelled file for a fine-tuned model's task, read as its task.json says, and the task metric of a
predict function on it (what ``albert export onnx --calibrate-on FILE`` reports before and after int8).

Each task class reads its own format (`albert_lm.tasks.base.Task.read_labelled`): CSV / TSV / JSONL columns
for classification and regression, the multiple-choice JSONL, a SQuAD JSON file, a CoNLL file for
named entities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_lm.infer.runners import featurize
from albert_lm.tasks.base import Example, PredictFn, Task
from albert_lm.tasks.evaluate import evaluate
from albert_lm.tasks.inputs import pad_id_of
from albert_lm.tasks.registry import READERS, task_class


def read_labelled(
    info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
) -> list[Example]:
    """The labelled examples of ``path`` for the task of ``info`` (a task.json); ``columns``: the column
    names of a CSV / TSV file without a header row.

    Raises:
        FileNotFoundError: no such file.
        TaskDataError: a record without the needed fields, or an unknown label (names file and line).
    """
    task_class(info)  # a known kind, or one line naming it
    return READERS[str(info["kind"])].read_labelled(info, path, columns)


def task_metrics(
    task: Task,
    examples: Sequence[Example],
    tokenizer: Any,
    max_length: int,
    predict_fn: PredictFn,
    batch_size: int = 32,
) -> dict[str, float]:
    """The task's metrics of ``predict_fn`` on labelled ``examples``, plus ``score`` (the task score)."""
    features = featurize(task, examples, tokenizer, max_length)
    result = evaluate(
        task,
        examples,
        features,
        predict_fn,
        split="calibrate",
        batch_size=batch_size,
        pad_id=pad_id_of(tokenizer),
    )
    return {**result.metrics, "score": task.score(result.metrics)}
