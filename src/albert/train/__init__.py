"""ONE training loop for pretraining and fine-tuning (see `albert.train.trainer` for the contract)."""

from albert.train.trainer import Trainer, TrainerConfig, TrainingDiverged, TrainResult, load_metrics

__all__ = ["Trainer", "TrainerConfig", "TrainResult", "TrainingDiverged", "load_metrics"]
