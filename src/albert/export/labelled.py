"""A labelled file for a fine-tuned model's task, read by what its task.json says, and the task metric of
a predict function on it (what ``albert export onnx --calibrate-on FILE`` reports before and after int8).

Formats by task kind:

* classification / regression: CSV, TSV or JSONL with named columns (`albert.tasks.custom.read_file`);
  the column names are the training ones (task.json ``columns`` of custom data, the GLUE spec's dev
  columns of a GLUE task), else ``text`` / ``text_pair`` / ``label``; a file without a header row
  names its columns with ``columns`` (the polarity CSV: ``label,text``);
* multiple choice: the generic JSONL format (`albert.tasks.race.read_mc_jsonl`);
* span (SQuAD): a SQuAD JSON file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert.export.runtime import featurize
from albert.tasks.base import Example, PredictFn, Task, TaskDataError, evaluate
from albert.tasks.inputs import pad_id_of


def _text_columns(info: Mapping[str, Any]) -> tuple[str, str | None, str, tuple[str, ...] | None]:
    """(text, pair, label, headerless column names) of a classification task's files."""
    pairs = int(info.get("text_fields", 1)) == 2
    if info.get("glue_task"):
        from albert.tasks.glue import get_spec

        dev = get_spec(str(info["glue_task"])).splits["dev"]
        return dev.text_a, dev.text_b, dev.label or "label", dev.columns
    columns = info.get("columns") or {}
    text = columns.get("text") or "text"
    pair = (columns.get("text_pair") or "text_pair") if pairs else None
    return text, pair, columns.get("label") or "label", None


def read_labelled(
    info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
) -> list[Example]:
    """The labelled examples of ``path`` for the task of ``info`` (a task.json); see the module docstring.

    Raises:
        FileNotFoundError: no such file.
        TaskDataError: a record without the needed fields, or an unknown label (names file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = info.get("kind")
    if kind == "span":
        from albert.tasks.squad import SquadTask

        return SquadTask.from_info(info, files={"dev": path}).read("dev")
    if kind == "multiple_choice":
        from albert.tasks.race import read_mc_jsonl

        return read_mc_jsonl(path)
    from albert.tasks.custom import CustomData, read_file

    text, pair, label, headerless = _text_columns(info)
    labels = info.get("labels")
    data = CustomData(
        text_column=text,
        text_pair_column=pair,
        label_column=label,
        regression=kind == "regression",
        labels=tuple(labels) if labels else None,
        columns=tuple(columns) if columns else headerless,
    )
    examples = read_file(data, path, labelled=True, split="calibrate")
    if labels:
        for ex in examples:
            if ex.label not in labels:
                raise TaskDataError(
                    f"{ex.meta['file']}:{ex.meta['line']}: label {ex.label!r} is not one of the model's "
                    f"labels ({', '.join(labels)})"
                )
    return examples


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
