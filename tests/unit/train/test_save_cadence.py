"""The trainer's checkpoint cadence by training time (``save_every_s``, fine-tuning's default), alone and
with a step cadence, across a resume; the trainer's clock is the fake one of test_time_schedule (1 s of
training per batch)."""

from __future__ import annotations

import pytest
import torch
from test_time_schedule import FakeClock, TimedStream

from albert_lm.optim import build_optimizer
from albert_lm.train import Trainer, TrainerConfig
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train import trainer as trainer_module
from toy_training import Toy


def run(monkeypatch, run_dir, *, max_steps: int, save_every_s: float | None, resume: bool = False, **cfg):
    monkeypatch.setattr(trainer_module, "time", FakeClock(1000.0))
    clock = trainer_module.time
    torch.manual_seed(0)
    model = Toy()
    opt = build_optimizer(model, "adamw", lr=0.01)
    config = TrainerConfig(max_steps=max_steps, keep_last=100, progress=False, **{"precision": "fp32", **cfg})
    stream = TimedStream(clock)  # type: ignore[arg-type]
    trainer = Trainer(model, opt, None, config, run_dir=run_dir, data_state=stream, save_every_s=save_every_s)
    trainer.fit(stream, resume=resume)
    return trainer


def saved_steps(run_dir) -> list[int]:
    return [int(p.name.removeprefix("step-")) for p in ckpt_io.list_checkpoints(run_dir / "checkpoints")]


def test_a_checkpoint_every_so_many_seconds_of_training(monkeypatch, tmp_path):
    # step k ends k seconds in: 3.5 s since the last checkpoint first at step 4, then 8, and the final one
    run(monkeypatch, tmp_path / "time", max_steps=10, save_every_s=3.5)
    assert saved_steps(tmp_path / "time") == [4, 8, 10]
    # with a step cadence: whichever comes first (steps 3, 6, 9; time never 3.5 s after one of them)
    run(monkeypatch, tmp_path / "both", max_steps=10, save_every_s=3.5, save_every=3)
    assert saved_steps(tmp_path / "both") == [3, 6, 9, 10]
    run(monkeypatch, tmp_path / "none", max_steps=10, save_every_s=None)
    assert saved_steps(tmp_path / "none") == [10]


def test_the_time_cadence_counts_from_the_checkpoint_a_run_resumed_from(monkeypatch, tmp_path):
    run(monkeypatch, tmp_path, max_steps=5, save_every_s=3.0)  # checkpoints at 3 and 5 (the end)
    assert saved_steps(tmp_path) == [3, 5]
    # resumed at 5 s of training (another wall clock): the next one 3 s later, at step 8, then 11
    run(monkeypatch, tmp_path, max_steps=12, save_every_s=3.0, resume=True)
    assert saved_steps(tmp_path) == [3, 5, 8, 11, 12]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_save_every_s_must_be_positive_and_finite(bad):
    model = Toy()
    with pytest.raises(ValueError, match="save_every_s must be finite and > 0"):
        Trainer(
            model,
            build_optimizer(model, "adamw", lr=0.01),
            None,
            TrainerConfig(precision="fp32", max_steps=1),
            save_every_s=bad,
        )
