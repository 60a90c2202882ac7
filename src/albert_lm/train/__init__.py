"""ONE training loop for pretraining and fine-tuning (see `albert_lm.train.trainer` for the contract), and the
settings both workflows share (`albert_lm.train.settings`)."""

from albert_lm.train.config import TrainerConfig
from albert_lm.train.metrics import load_metrics
from albert_lm.train.settings import OptimSettings, RunSettings, ScheduleSettings
from albert_lm.train.trainer import Trainer, TrainingDiverged, TrainResult

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
