"""Running a fine-tuned model for prediction: batch featurization and the three backends as predict
functions (`albert.tasks.base.PredictFn`: a padded batch -> the head's outputs as arrays).

* `featurize`: a task's features for a list of examples. Classification and regression tokenize the
  whole list in ONE ``tokenizer.batch_encode`` call (the task's own ``featurize`` makes one call per
  text, which costs more than the model for short texts); the other tasks use their ``featurize``.
* `torch_predict_fn`: PyTorch, fp32 or int8 (`albert.export.quantize.quantize_torch_int8`), returning only
  the head's outputs (`albert.export.graph.output_names`), not the encoder states beside them; fp32 on a
  CPU runs its linear layers on the library `albert.model.fp32_linear.choose_fp32_linear` picks.
* `ort_predict_fn`: ONNX Runtime on an exported file (`albert.export.onnx`).
* `load_torch_model`: the torch backend's model, from a fine-tuned model directory (the ONNX session:
  `albert.export.backend.onnx_session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from albert.export.graph import output_names
from albert.export.onnx import run_session
from albert.model.fp32_linear import choose_fp32_linear, fp32_linear
from albert.tasks.base import Example, ModelDirError, PredictFn, Task
from albert.tasks.classification import ClassificationTask
from albert.tasks.collate import Batch, Feature
from albert.tasks.rundir import FineTuned


def featurize(
    task: Task, examples: Sequence[Example], tokenizer: Any, max_length: int, num_workers: int | None = 1
) -> list[Feature]:
    """Features of ``examples`` for ``task`` (without labels for classification), in order.

    Classification and regression: one ``batch_encode`` call with the original's longest-first pair
    truncation, the same ids as `albert.tasks.inputs.encode_text_pair`; other tasks: ``task.featurize``.
    """
    if not isinstance(task, ClassificationTask):
        return task.featurize(examples, tokenizer, max_length)
    if not examples:
        return []
    pairs = [len(ex.texts) > 1 for ex in examples]
    if any(pairs) and not all(pairs):
        raise ValueError("a batch mixes single texts and text pairs")
    encodings = tokenizer.batch_encode(
        [ex.texts[0] for ex in examples],
        [ex.texts[1] for ex in examples] if pairs[0] else None,
        max_length=max_length,
        truncation="longest_first",
        num_workers=num_workers,
    )
    return [
        {"input_ids": e["input_ids"], "token_type_ids": e["token_type_ids"], "example_index": i}
        for i, e in enumerate(encodings)
    ]


def torch_predict_fn(model: nn.Module, device: str | torch.device | None = None) -> PredictFn:
    """A predict function around ``model`` (eval mode, inference mode, only the head's outputs)."""
    names = output_names(model)
    device = device if device is not None else next(model.parameters(), torch.empty(0)).device
    accepted = {"input_ids", "attention_mask", "token_type_ids", "p_mask"}
    model.eval()
    # fp32 on a CPU: the linear layers on the library measured fastest here (albert.model.fp32_linear);
    # an int8 model's quantized layers are not F.linear and stay as they are
    first = next(model.parameters(), None)
    cpu_fp32 = torch.device(device).type == "cpu" and first is not None and first.dtype == torch.float32
    linear = choose_fp32_linear() if cpu_fp32 else "torch"

    @torch.inference_mode()
    def predict_fn(batch: Batch) -> dict[str, np.ndarray]:
        inputs = {k: v.to(device) for k, v in batch.items() if k in accepted}
        with fp32_linear(linear):
            out = model(**inputs)
        return {name: out[name].detach().float().cpu().numpy() for name in names}

    return predict_fn


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
    if int8 and device not in (None, "cpu"):
        raise ModelDirError(f"int8 runs on the CPU only, not on {device}")
    model = finetuned.load_model(device or "cpu").eval()  # refuses weights without the task head
    if int8:
        from albert.export.quantize import quantize_torch_int8

        quantize_torch_int8(model)
    return model
