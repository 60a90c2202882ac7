"""Running a fine-tuned model for prediction: batch featurization and the three backends as predict
functions (`albert_lm.tasks.base.PredictFn`: a padded batch -> the head's outputs as arrays).

* `featurize`: a task's features for a list of examples (`Task.featurize`; classification and regression
  tokenize the whole list in ONE tokenizer call, with the backend's threads).
* PyTorch, fp32 or int8 (`albert_lm.infer.quantize.quantize_torch_int8`): the one torch predict function,
  `albert_lm.tasks.evaluate.model_predict_fn` with ``fp32_linear="auto"``;
* `ort_predict_fn`: ONNX Runtime on an exported file (`albert_lm.infer.onnx`).
* `load_torch_model`: the torch backend's model, from a fine-tuned model directory (the ONNX session:
  `albert_lm.infer.backend.onnx_session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from albert_lm.finetune.rundir import FineTuned
from albert_lm.infer.graph import output_names
from albert_lm.infer.onnx import run_session
from albert_lm.runtime.allocator import keep_freed_memory
from albert_lm.tasks.base import Example, ModelDirError, PredictFn, Task
from albert_lm.tasks.classification import ClassificationTask
from albert_lm.tasks.collate import Batch, Feature
from albert_lm.tasks.evaluate import model_predict_fn


def featurize(
    task: Task, examples: Sequence[Example], tokenizer: Any, max_length: int, num_workers: int | None = 1
) -> list[Feature]:
    """Features of ``examples`` for ``task``, in order: ``task.featurize``; classification and regression
    tokenize the whole list in one call with ``num_workers`` threads."""
    if isinstance(task, ClassificationTask):
        return task.featurize(examples, tokenizer, max_length, num_workers=num_workers or 1)
    return task.featurize(examples, tokenizer, max_length)


def torch_predict_fn(model: nn.Module) -> PredictFn:
    """The torch backend's predict function: `albert_lm.tasks.evaluate.model_predict_fn` (the one torch predict
    function) with the outputs the model's head computes and, on a CPU in fp32, the fastest linear library."""
    return model_predict_fn(model, output_keys=output_names(model), fp32_linear="auto")


def ort_predict_fn(session: Any) -> PredictFn:
    """A predict function around an ONNX Runtime session of an exported model."""

    def predict_fn(batch: Batch) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float32) for k, v in run_session(session, batch).items()}

    return predict_fn


def load_torch_model(finetuned: FineTuned, int8: bool, threads: int | None, device: str | None) -> nn.Module:
    """The fine-tuned model for the torch backend: fp32 on ``device`` (default: the CPU), or torch.ao
    dynamic int8 (CPU only); ``threads``: torch's intra-op threads.

    Raises:
        ModelDirError: no ``model.safetensors`` (an ONNX export directory), int8 off the CPU, or weights
            without the task head.
    """
    if not (finetuned.model_dir / "model.safetensors").is_file():
        raise ModelDirError(
            f"{finetuned.model_dir}: no model.safetensors for the torch backend (an ONNX export "
            "directory? use the onnx backend)"
        )
    if threads:
        torch.set_num_threads(int(threads))
    keep_freed_memory()  # each batch's activations reuse freed memory (albert_lm.runtime.allocator)
    if int8 and device not in (None, "cpu"):
        raise ModelDirError(f"int8 runs on the CPU only, not on {device}")
    model = finetuned.load_model(device or "cpu").eval()  # refuses weights without the task head
    if int8:
        from albert_lm.infer.quantize import quantize_torch_int8

        quantize_torch_int8(model)
    return model
