"""The finiteness checks: every optimizer and schedule hyperparameter is a finite number, and every tensor
of weights (read or written) holds finite values.

NaN and infinity pass every ``lr < 0`` style check (``nan < 0`` is false), and a learning rate of ``inf``
turns every weight into NaN on the first update while the run goes on. Weights holding NaN give NaN logits,
which argmax reads as class 0 and softmax as NaN probabilities: every reader and writer of weights refuses
them (`first_non_finite_tensor`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def check_finite(owner: str, **values: float) -> None:
    """Raise `ValueError` naming the first of ``values`` that is not a finite number."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{owner}: {name} must be a finite number (got {value})")


def first_non_finite_tensor(named: Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """The name of the first floating-point tensor of ``named`` holding NaN or infinity, or None.

    One host sync for all tensors; the names are looked up only when something is wrong. Integer tensors
    are always finite and skipped."""
    floats = [(name, t) for name, t in named if t.is_floating_point()]
    if not floats:
        return None
    finite = torch.stack([torch.isfinite(t).all().to(floats[0][1].device) for _, t in floats]).tolist()
    return next((name for (name, _), ok in zip(floats, finite) if not ok), None)
