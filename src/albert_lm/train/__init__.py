"""ONE training loop for pretraining and fine-tuning (see `albert_lm.train.trainer` for the contract), and the
settings both workflows share (`albert_lm.train.settings`).

Names are imported on first use (PEP 562): the settings dataclasses that the command line reads do not
import torch, so ``albert pretrain --help`` and ``albert finetune --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "OptimSettings": "albert_lm.train.settings",
    "RunSettings": "albert_lm.train.settings",
    "ScheduleSettings": "albert_lm.train.settings",
    "Trainer": "albert_lm.train.trainer",
    "TrainerConfig": "albert_lm.train.config",
    "TrainResult": "albert_lm.train.trainer",
    "TrainingDiverged": "albert_lm.train.trainer",
    "load_metrics": "albert_lm.train.metrics",
}

__all__ = [
    "OptimSettings",
    "RunSettings",
    "ScheduleSettings",
    "Trainer",
    "TrainerConfig",
    "TrainResult",
    "TrainingDiverged",
    "load_metrics",
]

if TYPE_CHECKING:  # names for type checkers and IDEs
    from albert_lm.train.config import TrainerConfig
    from albert_lm.train.metrics import load_metrics
    from albert_lm.train.settings import OptimSettings, RunSettings, ScheduleSettings
    from albert_lm.train.trainer import Trainer, TrainingDiverged, TrainResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'albert_lm.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
