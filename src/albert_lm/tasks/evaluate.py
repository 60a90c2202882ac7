"""Evaluation through a predict function: the one way every task's metrics are computed.

A *predict function* maps a batch of tensors (no labels) to model outputs (`PredictFn`); `model_predict_fn`
makes the torch one (fine-tuning's dev evaluation, and `albert_lm.infer`'s torch backend), `albert_lm.infer`
the ONNX Runtime and int8 ones. `predict` runs one over features in length-sorted batches and puts the outputs
back in order; `evaluate` adds the task's post-processing and metrics (big_vision's evaluators work the same
way: they take a predict function, not a trainer). It sits with the tasks, below the workflows, because
fine-tuning evaluates on dev with it as `albert evaluate` does.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from albert_lm.tasks.base import Example, PredictFn, Task, TaskDataError
from albert_lm.tasks.collate import Batch, Feature, cheapest_batches, feature_length, group_key

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
    (`albert_lm.runtime.attention.skip_padding`: a padded batch costs its real tokens), only the model's inputs,
    and the outputs asked for, moved to the CPU as float32 arrays.

    Args:
        model: a module whose forward(**batch) returns a mapping (our `Output`).
        device: where to run; None: the model's device.
        output_keys: which outputs to keep (`albert_lm.tasks.registry.HEAD_OUTPUTS`: those its task's
            post-processing reads); None: every tensor output but ``loss``.
        fp32_linear: "auto": on a CPU in fp32, run the linear layers on the library measured fastest
            (`albert_lm.runtime.fp32_linear.choose_fp32_linear`; an int8 model's layers are not F.linear and
            stay as they are); None: as they are.
    """
    import contextlib

    import torch

    from albert_lm.runtime.attention import skip_padding
    from albert_lm.runtime.fp32_linear import choose_fp32_linear
    from albert_lm.runtime.fp32_linear import fp32_linear as linear_backend

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
    run), and `albert evaluate` on one printed no metric with exit 0.

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
