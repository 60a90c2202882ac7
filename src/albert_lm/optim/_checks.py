"""The one check every optimizer and schedule hyperparameter gets: a finite number.

NaN and infinity pass every ``lr < 0`` style check (``nan < 0`` is false), and a learning rate of ``inf``
turns every weight into NaN on the first update while the run goes on.
"""

from __future__ import annotations

import math


def check_finite(owner: str, **values: float) -> None:
    """Raise `ValueError` naming the first of ``values`` that is not a finite number."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{owner}: {name} must be a finite number (got {value})")
