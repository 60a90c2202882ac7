"""Early stopping in the one training loop: a controlled sequence of dev scores, through `Trainer.fit`."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: toy_training

from albert_lm.config import ConfigError  # noqa: E402
from albert_lm.optim import build_optimizer, build_scheduler  # noqa: E402
from albert_lm.pretrain.config import recipe  # noqa: E402
from albert_lm.train import Trainer, TrainerConfig  # noqa: E402
from albert_lm.train.early_stopping import early_stopping_status  # noqa: E402
from toy_training import Stream, Toy  # noqa: E402

# the dev score after each step (one evaluation a step). threshold 0.02, patience 3: improvements at
# evaluations 1 (0.5), 2 (0.6) and 4 (0.65 > 0.6 + 0.02); then 0.64, 0.66 (not above 0.65 + 0.02) and 0.665
# make three in a row without one: the run stops after evaluation 7, at step 7, before 0.9 comes
SCORES = {1: 0.5, 2: 0.6, 3: 0.6, 4: 0.65, 5: 0.64, 6: 0.66, 7: 0.665, 8: 0.9, 9: 0.9, 10: 0.9}


def _trainer(run_dir: Path, max_steps: int, **cfg: object) -> Trainer:
    torch.manual_seed(0)
    model = Toy()
    opt = build_optimizer(model, "adamw", lr=0.01)
    config = TrainerConfig(
        max_steps=max_steps, precision="fp32", progress=False, log_every=1, eval_every=1, save_every=1,
        best_metric="eval_score", early_stopping_patience=3, early_stopping_threshold=0.02, **cfg,
    )  # fmt: skip
    trainer: Trainer

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        return {"score": SCORES[trainer.step]}

    trainer = Trainer(
        model, opt, build_scheduler(opt, total_steps=20), config, run_dir=run_dir, eval_fn=evaluate
    )
    return trainer


def test_the_loop_stops_after_patience_evaluations_without_improvement(tmp_path: Path) -> None:
    result = _trainer(tmp_path, 10).fit(Stream())
    assert result.stop_reason == "early_stopping"
    assert result.steps == 7 and [r["step"] for r in result.eval_history] == [1, 2, 3, 4, 5, 6, 7]
    assert result.best_step == 7  # the best checkpoint is the best value (0.665), whatever the threshold
    assert result.last_checkpoint is not None and result.last_checkpoint.endswith("step-00000007")
    status = early_stopping_status(result.eval_history, "eval_score", "max", 3, 0.02)
    assert (status["stopped_at_evaluation"], status["stopped_at_step"], status["best_step"]) == (7, 7, 4)
    assert "in 3 evaluations in a row" in status["reason"]


def test_an_exact_resume_keeps_the_counter(tmp_path: Path) -> None:
    """Stopped after step 5 (one evaluation without improvement counted), the resumed run counts on from
    there: it stops at step 7 as the uninterrupted run does (a counter started afresh would go on to 0.9)."""
    first = _trainer(tmp_path, 5).fit(Stream())
    assert first.stop_reason == "max_steps" and first.steps == 5
    resumed = _trainer(tmp_path, 10).fit(Stream(), resume=True)
    assert resumed.stop_reason == "early_stopping" and resumed.steps == 7
    # and a run resumed from its early-stopped checkpoint stays stopped
    again = _trainer(tmp_path, 10).fit(Stream(), resume=True)
    assert again.stop_reason == "early_stopping" and again.steps == 7


def test_status_rules() -> None:
    hist = [{"step": s, "eval_loss": v} for s, v in [(1, 2.0), (2, math.nan), (3, 1.9), (4, 1.95)]]
    # min mode: NaN never improves; 1.9 is below 2.0 - 0.05
    status = early_stopping_status(hist, "loss", "min", 2, 0.05)
    assert status["best_step"] == 3 and status["evaluations_without_improvement"] == 1
    assert status["stopped_at_step"] is None
    assert early_stopping_status(hist, "loss", "min", 2, 0.2)["stopped_at_step"] == 3  # 1.9 not < 1.8


def test_patience_needs_a_metric_and_pretraining_refuses_it() -> None:
    with pytest.raises(ConfigError, match="early_stopping_patience: needs a best_metric"):
        TrainerConfig(max_steps=1, early_stopping_patience=2)
    cfg = recipe("smoke")
    cfg.run.early_stopping_patience = 2
    with pytest.raises(ConfigError, match="run.early_stopping_patience: is fine-tuning's"):
        cfg.validate()
