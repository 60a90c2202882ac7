"""ONE training loop for pretraining and fine-tuning (see `albert.train.trainer` for the contract)."""

from albert.train.config import TrainerConfig
from albert.train.metrics import load_metrics
from albert.train.trainer import Trainer, TrainingDiverged, TrainResult

__all__ = ["Trainer", "TrainerConfig", "TrainResult", "TrainingDiverged", "load_metrics"]
