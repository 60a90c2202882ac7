"""What `albert_lm.train.Trainer.fit` returns and writes to RUN_DIR/result.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TrainResult:
    """What `Trainer.fit` returns (also written to RUN_DIR/result.json)."""

    steps: int
    tokens: int
    elapsed_s: float
    stop_reason: str
    """max_steps | signal | time_limit"""
    train_metrics: dict[str, float] = field(default_factory=dict)
    """The last logged training window."""
    eval_metrics: dict[str, float] = field(default_factory=dict)
    """The last evaluation."""
    eval_history: list[dict[str, float]] = field(default_factory=list)
    best_metric: float | None = None
    best_step: int | None = None
    best_checkpoint: str | None = None
    last_checkpoint: str | None = None
    stop_signal: int | None = None
    """The signal number when stop_reason is "signal"."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
