"""Early stopping: end a run whose held-out metric has stopped improving.

The metric is the one the best checkpoint is kept by (`TrainerConfig.best_metric` and ``best_mode``;
fine-tuning: the task's dev score). An evaluation *improves* when its value beats the reference by more
than ``early_stopping_threshold`` (Keras' ``min_delta``); the reference is the value of the last improving
evaluation (the first evaluation always improves; NaN never does). After ``early_stopping_patience``
evaluations in a row without an improvement the trainer stops, writes its checkpoint and returns with
``stop_reason`` ``"early_stopping"`` (transformers' ``EarlyStoppingCallback`` counts the same way).

The counter is not a state of its own: `early_stopping_status` replays the trainer's evaluation history,
which every checkpoint saves, so an exact resume continues it where the interrupted run left it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["EARLY_STOPPING", "early_stop", "early_stopping_status", "stop_message"]

EARLY_STOPPING = "early_stopping"
"""The ``stop_reason`` of a run that early stopping ended."""


def _improves(value: float, reference: float | None, mode: str, threshold: float) -> bool:
    if not math.isfinite(value):
        return False
    if reference is None:
        return True
    return value > reference + threshold if mode == "max" else value < reference - threshold


def early_stopping_status(
    history: Sequence[Mapping[str, Any]], metric: str, mode: str, patience: int | None, threshold: float
) -> dict[str, Any]:
    """The early-stopping state after the evaluations ``history`` (the trainer's: ``{"step", metric, ...}``
    in order): ``best_value`` / ``best_step`` (of the last improving evaluation), ``evaluations_without_improvement``
    (since then), and, once that reached ``patience``, ``stopped_at_evaluation`` (1-based) and
    ``stopped_at_step``; ``reason`` says why in words."""
    key = metric if metric.startswith("eval_") else f"eval_{metric}"
    reference: float | None = None
    best_step = None
    waited = 0
    stopped: tuple[int, int] | None = None
    for i, record in enumerate(history, 1):
        value = float(record.get(key, math.nan))
        if _improves(value, reference, mode, threshold):
            reference, best_step, waited = value, record["step"], 0
        else:
            waited += 1
        if patience is not None and waited >= patience:
            stopped = (i, int(record["step"]))
            break
    status: dict[str, Any] = {
        "metric": key,
        "mode": mode,
        "patience": patience,
        "threshold": threshold,
        "best_value": reference,
        "best_step": best_step,
        "evaluations_without_improvement": waited,
        "stopped_at_evaluation": stopped[0] if stopped else None,
        "stopped_at_step": stopped[1] if stopped else None,
    }
    if stopped:
        better = "above" if mode == "max" else "below"
        status["reason"] = (
            f"{key} not {better} {reference} (the value at step {best_step}) by more than {threshold:g} in "
            f"{waited} evaluations in a row (patience {patience})"
        )
    return status


def early_stop(history: Sequence[Mapping[str, Any]], config: Any) -> str | None:
    """`EARLY_STOPPING` when the evaluations ``history`` have used up ``config``'s patience (a
    `TrainerConfig`), else None."""
    patience = config.early_stopping_patience
    if patience is None or config.best_metric is None or not history:
        return None
    status = early_stopping_status(
        history, config.best_metric, config.best_mode, patience, config.early_stopping_threshold
    )
    return EARLY_STOPPING if status["stopped_at_step"] is not None else None


def stop_message(stop: str, config: Any) -> str:
    """Why the trainer stops before its last step, for the log: a signal, the time budget, early stopping."""
    if stop == "signal":
        return "signal received"
    if stop == EARLY_STOPPING:
        return f"no improvement of {config.best_metric} in {config.early_stopping_patience} evaluations"
    return f"time budget of {config.max_time_s:g}s reached"
