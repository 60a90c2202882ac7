"""Running a fine-tuned model for prediction: batch featurization and the three backends as predict
functions (`albert.tasks.base.PredictFn`: a padded batch -> the head's outputs as arrays).

* `featurize`: a task's features for a list of examples (`Task.featurize`; classification and regression
  tokenize the whole list in ONE tokenizer call, with the backend's threads).
* PyTorch, fp32 or int8 (`albert.export.quantize.quantize_torch_int8`): the one torch predict function,
  `albert.tasks.base.model_predict_fn` with ``fp32_linear="auto"``;
* `ort_predict_fn`: ONNX Runtime on an exported file (`albert.export.onnx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from albert.export.onnx import run_session
from albert.tasks.base import Example, PredictFn, Task
from albert.tasks.classification import ClassificationTask
from albert.tasks.collate import Batch, Feature


def featurize(
    task: Task, examples: Sequence[Example], tokenizer: Any, max_length: int, num_workers: int | None = 1
) -> list[Feature]:
    """Features of ``examples`` for ``task``, in order: ``task.featurize``; classification and regression
    tokenize the whole list in one call with ``num_workers`` threads."""
    if isinstance(task, ClassificationTask):
        return task.featurize(examples, tokenizer, max_length, num_workers=num_workers or 1)
    return task.featurize(examples, tokenizer, max_length)


def ort_predict_fn(session: Any) -> PredictFn:
    """A predict function around an ONNX Runtime session of an exported model."""

    def predict_fn(batch: Batch) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float32) for k, v in run_session(session, batch).items()}

    return predict_fn
