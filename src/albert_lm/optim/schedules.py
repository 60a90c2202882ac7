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

Beside the original's shape (``shape="polynomial"``), ``shape="cosine"``: the same warmup, then half a
cosine from the end of the warmup to the end (SGDR, Loshchilov & Hutter 2017, without restarts; transformers'
``get_cosine_schedule_with_warmup``): ``0.5 * (1 + cos(pi * progress))``, ``progress`` going from 0 at the
end of the warmup to 1 at ``total_steps``. Either decay can end on a ``floor`` (a fraction of the peak rate,
transformers' ``min_lr_rate``): ``floor + (1 - floor) * decay``; the original's floor is 0.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from albert_lm.optim._checks import check_finite

# the decays after the warmup (albert_lm.train.settings.LR_SCHEDULER_TYPES spells the same names)
DECAY_SHAPES = ("polynomial", "cosine")


@dataclass
class WarmupPolyDecay:
    """The multiplier of the base learning rate at a step (a picklable callable for `LambdaLR`).

    Attributes:
        total_steps: num_train_steps; the rate reaches 0 there and stays 0 after.
        warmup_steps: num_warmup_steps (0: no warmup).
        power: poly_power; 1.0 is linear decay, 0.0 keeps the rate constant after the warmup.
        start_warmup_step: start_warmup_step of the original (0).
        shape: ``polynomial`` (the original) or ``cosine`` (see the module docstring).
        floor: the rate at the end of the decay, as a fraction of the peak (0: the original).
    """

    total_steps: int
    warmup_steps: int = 0
    power: float = 1.0
    start_warmup_step: int = 0
    shape: str = "polynomial"
    floor: float = 0.0

    def __post_init__(self) -> None:
        check_finite("schedule", power=self.power, floor=self.floor)
        check_shape(self.shape, self.floor)
        if self.total_steps <= 0:
            raise ValueError(f"schedule: total_steps must be positive (got {self.total_steps})")
        if self.warmup_steps < 0:
            raise ValueError(f"schedule: warmup_steps must be >= 0 (got {self.warmup_steps})")
        if self.power < 0:
            raise ValueError(f"schedule: power must be >= 0 (got {self.power})")

    def __call__(self, step: int) -> float:
        return warmup_decay(
            step,
            self.total_steps,
            self.warmup_steps,
            self.power,
            self.start_warmup_step,
            self.shape,
            self.floor,
        )


def check_shape(shape: str, floor: float) -> None:
    """Raises ValueError for a decay shape not in `DECAY_SHAPES` or a floor outside [0, 1)."""
    if shape not in DECAY_SHAPES:
        raise ValueError(f"schedule: unknown decay {shape!r}; choose one of {', '.join(DECAY_SHAPES)}")
    if not 0 <= floor < 1:
        raise ValueError(f"schedule: the floor must be in [0, 1) (got {floor})")


def warmup_decay(
    x: float,
    total: float,
    warmup: float,
    power: float,
    start_warmup: float = 0,
    shape: str = "polynomial",
    floor: float = 0.0,
) -> float:
    """The multiplier at ``x``: the original's (`warmup_poly_decay`) for ``shape="polynomial"``, or the same
    warmup then a cosine from its end to ``total`` (``shape="cosine"``); either decay ends on ``floor``."""
    if warmup and x - start_warmup < warmup:
        return max(x - start_warmup, 0) / warmup
    if shape == "cosine":
        begin = start_warmup + warmup if warmup else 0
        progress = min(max((x - begin) / (total - begin), 0.0), 1.0) if total > begin else 1.0
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        decay = warmup_poly_decay(x, total, 0, power)
    return floor + (1.0 - floor) * decay


def warmup_poly_decay(x: float, total: float, warmup: float, power: float, start_warmup: float = 0) -> float:
    """The original's multiplier at ``x`` (steps, or seconds for `TimeWarmupPolyDecay`): linear warmup over
    ``warmup`` from ``start_warmup``, else polynomial decay to 0 at ``total``, counted from 0."""
    if warmup:
        warm = x - start_warmup
        if warm < warmup:
            # original: init_lr * global_steps_float / warmup_steps_float (not clamped below 0)
            return max(warm, 0) / warmup
    # tf.train.polynomial_decay with end_learning_rate=0, cycle=False
    done = min(x, total) / total
    return float((1.0 - done) ** power)


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    total_steps: int,
    warmup_steps: int = 0,
    power: float = 1.0,
    start_warmup_step: int = 0,
    shape: str = "polynomial",
    floor: float = 0.0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A `LambdaLR` running `WarmupPolyDecay` on every parameter group of ``optimizer``.

    Call ``scheduler.step()`` once after each ``optimizer.step()``. The state (``last_epoch`` = steps done
    and the schedule's parameters) is in ``scheduler.state_dict()``.
    """
    factor = WarmupPolyDecay(total_steps, warmup_steps, power, start_warmup_step, shape, floor)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ------------------------------------------------------------------------------------------------ by time
@dataclass
class TimeWarmupPolyDecay:
    """`WarmupPolyDecay` laid over training time instead of steps: the multiplier after ``elapsed_s``
    seconds of training, reaching 0 at the end of the budget.

    With a time budget the number of steps is not known in advance (it is the machine's speed), so a step
    schedule either ends early or is cut off with the rate still high. Izsak et al. 2021 ("How to Train
    BERT with an Academic Budget", IntelLabs/academic-budget-bert ``--lr_schedule time``) and Cramming
    (Geiping & Goldstein 2023) lay the schedule over the budget instead; the shape here stays the original's
    (linear warmup, then decay counted from 0).

    Attributes:
        budget_s: seconds of training; the rate is 0 there and after.
        warmup_s: seconds of linear warmup (Izsak et al.: 6% of the budget, ``--warmup_proportion 0.06``).
        power: as `WarmupPolyDecay.power` (1.0: linear decay).
    """

    budget_s: float
    warmup_s: float = 0.0
    power: float = 1.0
    shape: str = "polynomial"
    floor: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise ValueError(f"schedule: the time budget must be a finite number > 0 (got {self.budget_s})")
        if not (math.isfinite(self.warmup_s) and 0 <= self.warmup_s <= self.budget_s):
            raise ValueError(f"schedule: warmup_s must be in [0, {self.budget_s}] (got {self.warmup_s})")
        if not (math.isfinite(self.power) and self.power >= 0):
            raise ValueError(f"schedule: power must be a finite number >= 0 (got {self.power})")
        check_shape(self.shape, self.floor)

    def __call__(self, elapsed_s: float) -> float:
        return warmup_decay(elapsed_s, self.budget_s, self.warmup_s, self.power, 0, self.shape, self.floor)


class ElapsedTimeLR(torch.optim.lr_scheduler.LRScheduler):
    """Learning rate = base rate x `TimeWarmupPolyDecay` of the training time so far.

    The caller says how much training time has passed with `set_elapsed` before each ``step()``; the
    `albert_lm.train.Trainer` does, with its training time (summed over resumed runs, evaluation and
    checkpoint writes excluded). That time is in ``state_dict()`` (plain numbers: JSON-friendly), so a
    resumed run continues the schedule from the saved time. The rate then depends on the machine's speed:
    two runs of the same configuration are not bit-identical, unlike with the step schedule.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, factor: TimeWarmupPolyDecay) -> None:
        self.factor = factor
        self.elapsed_s = 0.0
        super().__init__(optimizer)

    def set_elapsed(self, elapsed_s: float) -> None:
        """Training time (seconds) at the next ``step()``."""
        self.elapsed_s = float(elapsed_s)

    def get_lr(self) -> list[float | torch.Tensor]:
        f = self.factor(self.elapsed_s)
        return [base * f for base in self.base_lrs]

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["factor"] = dataclasses.asdict(self.factor)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The saved time and schedule (as `LambdaLR` restores its factor's parameters)."""
        state = dict(state_dict)
        self.factor = TimeWarmupPolyDecay(**state.pop("factor"))
        super().load_state_dict(state)


def build_time_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    budget_s: float,
    warmup_s: float = 0.0,
    power: float = 1.0,
    shape: str = "polynomial",
    floor: float = 0.0,
) -> ElapsedTimeLR:
    """An `ElapsedTimeLR`: warmup over ``warmup_s`` seconds of training, decay to ``floor`` at ``budget_s``."""
    return ElapsedTimeLR(optimizer, TimeWarmupPolyDecay(budget_s, warmup_s, power, shape, floor))
