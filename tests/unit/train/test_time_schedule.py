"""The learning rate laid over training time (schedule.by=time): its values, the trainer feeding it the
training time, a budgeted run ending at lr ~0, and a resumed run continuing from the saved training time.

The trainer's clock is replaced by a fake one that advances 1 s per batch, so the schedule is exact here."""

from __future__ import annotations

import json
import time as real_time

import pytest
import torch

from albert_lm.optim import build_optimizer
from albert_lm.optim.schedules import ElapsedTimeLR, TimeWarmupPolyDecay, build_time_scheduler
from albert_lm.pretrain.config import ConfigError, apply_dict, recipe
from albert_lm.train import Trainer, TrainerConfig, load_metrics
from albert_lm.train import trainer as trainer_module
from toy_training import Stream, Toy

LR = 0.1
BUDGET_S = 20.0
WARMUP_S = 2.0


def test_warmup_then_decay_over_seconds_ending_at_zero():
    f = TimeWarmupPolyDecay(budget_s=100.0, warmup_s=10.0)
    assert [f(t) for t in (0.0, 2.5, 5.0, 9.99)] == pytest.approx([0.0, 0.25, 0.5, 0.999])
    # after the warmup: the original's decay, counted from 0 (at 10 s already 1 - 10/100)
    assert [f(t) for t in (10.0, 50.0, 90.0, 99.0)] == pytest.approx([0.9, 0.5, 0.1, 0.01])
    assert f(100.0) == 0.0 and f(1e6) == 0.0  # the end of the budget and past it
    assert TimeWarmupPolyDecay(budget_s=100.0, power=2.0)(50.0) == pytest.approx(0.25)
    assert TimeWarmupPolyDecay(budget_s=100.0)(0.0) == 1.0  # no warmup


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget_s": 0.0}, "time budget"),
        ({"budget_s": float("inf")}, "time budget"),
        ({"budget_s": 10.0, "warmup_s": 11.0}, "warmup_s"),
        ({"budget_s": 10.0, "power": float("nan")}, "power"),
    ],
)
def test_bad_time_schedules_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TimeWarmupPolyDecay(**kwargs)


def test_elapsed_time_lr_follows_the_time_it_is_told_and_its_state_is_plain_json():
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    sched = build_time_scheduler(opt, budget_s=100.0, warmup_s=10.0)
    assert opt.param_groups[0]["lr"] == 0.0  # the first update has rate 0, as the original's warmup
    lrs = []
    for t in (5.0, 50.0, 100.0):
        sched.set_elapsed(t)
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == pytest.approx([0.05, 0.05, 0.0])
    state = json.loads(json.dumps(sched.state_dict()))  # what a checkpoint stores (no pickle needed)
    other = build_time_scheduler(torch.optim.SGD(model.parameters(), lr=LR), budget_s=1.0)
    other.load_state_dict(state)
    assert other.elapsed_s == 100.0 and other.factor == TimeWarmupPolyDecay(budget_s=100.0, warmup_s=10.0)


class FakeClock:
    """`time` for the trainer module: perf_counter() advances only when a batch is drawn (1 s each)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(real_time, name)


class TimedStream(Stream):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(batch_size=8, seed=3)
        self.clock = clock

    def __iter__(self):
        for batch in super().__iter__():
            self.clock.now += 1.0  # one second of training per batch
            yield batch


def run(monkeypatch, run_dir, *, max_steps: int, start: float, resume: bool = False) -> Trainer:
    clock = FakeClock(start)
    monkeypatch.setattr(trainer_module, "time", clock)
    torch.manual_seed(0)
    model = Toy(dropout=0.1)
    opt = build_optimizer(model, "adamw", lr=LR)
    sched = build_time_scheduler(opt, budget_s=BUDGET_S, warmup_s=WARMUP_S)
    cfg = TrainerConfig(
        precision="fp32",
        max_steps=max_steps,
        max_time_s=BUDGET_S,
        log_every=1,
        save_every=5,
        keep_last=5,
        progress=False,
    )
    stream = TimedStream(clock)
    trainer = Trainer(model, opt, sched, cfg, run_dir=run_dir, data_state=stream)
    trainer.result = trainer.fit(stream, resume=resume)  # type: ignore[attr-defined]
    return trainer


def want_lr(step: int) -> float:
    """The lr of update ``step`` (1-based): the schedule at the training time after ``step - 1`` batches."""
    return LR * TimeWarmupPolyDecay(budget_s=BUDGET_S, warmup_s=WARMUP_S)(float(step - 1))


def test_a_budgeted_run_lays_the_lr_over_its_training_time_and_ends_at_zero(monkeypatch, tmp_path):
    trainer = run(monkeypatch, tmp_path, max_steps=10_000, start=500.0)
    result = trainer.result  # type: ignore[attr-defined]
    assert result.stop_reason == "time_limit" and result.steps == 20  # 20 batches of 1 s
    recs = [r for r in load_metrics(tmp_path) if "loss" in r]
    assert [r["lr"] for r in recs] == pytest.approx([want_lr(s) for s in range(1, 21)])
    assert recs[1]["lr"] == pytest.approx(LR / 2)  # mid-warmup
    assert recs[-1]["lr"] == pytest.approx(LR / 20)  # the last update: 1 s before the end of the budget
    assert trainer.optimizer.param_groups[0]["lr"] == 0.0  # and the budget ends at lr 0
    assert isinstance(trainer.scheduler, ElapsedTimeLR) and trainer.scheduler.elapsed_s == BUDGET_S


def test_a_resumed_run_continues_the_schedule_from_the_saved_training_time(monkeypatch, tmp_path):
    straight = run(monkeypatch, tmp_path / "straight", max_steps=10_000, start=0.0)
    want = [r for r in load_metrics(tmp_path / "straight") if "loss" in r]

    first = run(monkeypatch, tmp_path / "cut", max_steps=10, start=0.0)  # stops at step 10, 10 s in
    assert first.result.stop_reason == "max_steps"  # type: ignore[attr-defined]
    # a later process on another wall clock: only the saved training time may count
    resumed = run(monkeypatch, tmp_path / "cut", max_steps=10_000, start=123_456.0, resume=True)
    assert resumed.result.stop_reason == "time_limit"  # type: ignore[attr-defined]
    got = [r for r in load_metrics(tmp_path / "cut") if "loss" in r]
    assert [r["step"] for r in got] == list(range(1, 21))
    assert got[10]["lr"] == pytest.approx(want_lr(11))  # the first update after the resume
    for key in ("lr", "loss", "elapsed_s"):
        assert [r[key] for r in got] == [r[key] for r in want], key  # bit for bit
    for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_pretraining_config_by_time(tmp_path):
    from albert_lm.pretrain.run import _optimizer

    demo = recipe("demo")
    assert (demo.schedule.by, demo.run.max_time_minutes) == ("time", 10.0)
    demo.validate()
    opt, sched = _optimizer(demo, Toy())
    assert isinstance(sched, ElapsedTimeLR)
    assert sched.factor == TimeWarmupPolyDecay(budget_s=600.0, warmup_s=36.0)  # warmup 6% of 10 minutes
    smoke = recipe("smoke")
    assert smoke.schedule.by == "steps" and not isinstance(_optimizer(smoke, Toy())[1], ElapsedTimeLR)

    no_budget = apply_dict(demo, {"run": {"max_time_minutes": None}}, "test")
    with pytest.raises(ConfigError, match="schedule.by: time needs a time budget"):
        no_budget.validate()
    with pytest.raises(ConfigError, match="schedule.by: must be one of steps, time"):
        apply_dict(demo, {"schedule": {"by": "epochs"}}, "test").validate()
    with pytest.raises(ConfigError, match="warmup_fraction"):
        apply_dict(demo, {"schedule": {"warmup_fraction": 1.5}}, "test").validate()
    # a step cap below the (unused) warmup_steps: by time it is only a cap; by steps the warmup must fit
    apply_dict(demo, {"schedule": {"train_steps": 1}}, "test").validate()
    with pytest.raises(ConfigError, match=r"schedule.warmup_steps: must be in \[0, train_steps=1\]"):
        apply_dict(demo, {"schedule": {"train_steps": 1, "by": "steps"}}, "test").validate()
