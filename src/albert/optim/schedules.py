"""Learning-rate schedules: linear warmup, then linear or polynomial decay, as the original.

google-research/albert optimization.py `create_optimizer` builds the rate in two stages, both as functions
of the global step *before* the update (step 0 is the first update):

1. ``tf.train.polynomial_decay(init_lr, step, num_train_steps, end_learning_rate=0.0, power=poly_power,
   cycle=False)``: ``init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** power``. The decay is
   counted from step 0, *not* from the end of the warmup: at the end of the warmup the rate is already
   ``init_lr * (1 - num_warmup_steps / num_train_steps) ** power``.
2. If ``num_warmup_steps``: while ``step - start_warmup_step < num_warmup_steps`` the rate is
   ``init_lr * (step - start_warmup_step) / num_warmup_steps`` instead. So the very first update has rate 0.

``poly_power`` is 1.0 in run_pretraining.py and run_classifier.py (linear decay); ``start_warmup_step`` is 0.
One deviation: for ``step < start_warmup_step`` the original formula gives a *negative* rate (it does not
clamp); we clamp the warmup factor at 0.

`build_scheduler` wraps the factor in a `torch.optim.lr_scheduler.LambdaLR`, so ``scheduler.step()`` after
each ``optimizer.step()`` gives update ``i`` the rate ``factor(i) * lr``, as the original.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class WarmupPolyDecay:
    """The multiplier of the base learning rate at a step (a picklable callable for `LambdaLR`).

    Attributes:
        total_steps: num_train_steps; the rate reaches 0 there and stays 0 after.
        warmup_steps: num_warmup_steps (0: no warmup).
        power: poly_power; 1.0 is linear decay, 0.0 keeps the rate constant after the warmup.
        start_warmup_step: start_warmup_step of the original (0).
    """

    total_steps: int
    warmup_steps: int = 0
    power: float = 1.0
    start_warmup_step: int = 0

    def __post_init__(self) -> None:
        if self.total_steps <= 0:
            raise ValueError(f"schedule: total_steps must be positive (got {self.total_steps})")
        if self.warmup_steps < 0:
            raise ValueError(f"schedule: warmup_steps must be >= 0 (got {self.warmup_steps})")
        if self.power < 0:
            raise ValueError(f"schedule: power must be >= 0 (got {self.power})")

    def __call__(self, step: int) -> float:
        if self.warmup_steps:
            warm_step = step - self.start_warmup_step
            if warm_step < self.warmup_steps:
                # original: init_lr * global_steps_float / warmup_steps_float (not clamped below 0)
                return max(warm_step, 0) / self.warmup_steps
        # tf.train.polynomial_decay with end_learning_rate=0, cycle=False
        done = min(step, self.total_steps) / self.total_steps
        return (1.0 - done) ** self.power


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    total_steps: int,
    warmup_steps: int = 0,
    power: float = 1.0,
    start_warmup_step: int = 0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A `LambdaLR` running `WarmupPolyDecay` on every parameter group of ``optimizer``.

    Call ``scheduler.step()`` once after each ``optimizer.step()``. The state (``last_epoch`` = steps done
    and the schedule's parameters) is in ``scheduler.state_dict()``.
    """
    factor = WarmupPolyDecay(
        total_steps=total_steps, warmup_steps=warmup_steps, power=power, start_warmup_step=start_warmup_step
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
