"""ONE training loop for pretraining and fine-tuning (see `albert.train.trainer` for the contract), and the
settings both workflows share (`albert.train.settings`)."""

from albert.train.config import TrainerConfig
from albert.train.metrics import load_metrics
from albert.train.settings import OptimSettings, RunSettings, ScheduleSettings
from albert.train.trainer import Trainer, TrainingDiverged, TrainResult

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
