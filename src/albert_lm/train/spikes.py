"""The loss-spike rule, shared by the trainer's rollback (`albert_lm.train.rollback`) and a pretraining run's
health watch (`albert_lm.pretrain.health`): a logged loss far above the recent ones."""

from __future__ import annotations

import math
import statistics
from collections import deque

# a spike: a logged loss above the median of the last SPIKE_WINDOW logged losses by this factor
SPIKE_FACTOR = 1.5
SPIKE_WINDOW = 10


class LossSpikes:
    """The spike rule: a logged loss above `SPIKE_FACTOR` times the median of the last `SPIKE_WINDOW` logged
    losses (no verdict before the window is full). A spike or a non-finite loss does not join the window."""

    def __init__(self) -> None:
        self.recent: deque[float] = deque(maxlen=SPIKE_WINDOW)

    def check(self, loss: float) -> float | None:
        """The median ``loss`` is a spike against, or None when it is none (then it joins the window)."""
        if not math.isfinite(loss):
            return None
        if len(self.recent) == self.recent.maxlen:
            median = statistics.median(self.recent)
            if loss > SPIKE_FACTOR * median:
                return median
        self.recent.append(loss)
        return None
