"""Roll back on a loss spike (issue 25 item 6; `albert_lm.train.rollback`): back to the last checkpoint written
before the spike, the batches read since skipped, not replayed (PaLM, Chowdhery et al. 2022, Sec. 5.1)."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from albert_lm.config import ConfigError
from albert_lm.finetune.config import FinetuneConfig
from albert_lm.optim import build_optimizer, build_scheduler
from albert_lm.pretrain.config import PretrainConfig
from albert_lm.pretrain.health import HEALTH_FILE, HealthMonitor
from albert_lm.train import Trainer, TrainerConfig, TrainingDiverged, load_metrics
from albert_lm.train import checkpoint as ckpt_io
from toy_training import Stream, Toy


class Recording(Stream):
    """A `Stream` that notes the index of every batch it gives."""

    def __init__(self, **kwargs) -> None:
        super().__init__(batch_size=256, **kwargs)  # a loss steady enough to make no spike of its own
        self.seen: list[int] = []

    def batch_at(self, index: int) -> dict[str, torch.Tensor]:
        self.seen.append(index)
        return super().batch_at(index)


def _trainer(run_dir, steps: int, **cfg) -> Trainer:
    torch.manual_seed(0)
    model = Toy(dropout=0.1)  # dropout: the RNG state is part of what a rollback restores
    opt = build_optimizer(model, "lamb", lr=0.02)
    sched = build_scheduler(opt, total_steps=steps, warmup_steps=0)
    config = TrainerConfig(
        max_steps=steps,
        fp32_linear="torch",
        progress=False,
        tensorboard=False,
        **{"precision": "fp32", **cfg},
    )
    return Trainer(model, opt, sched, config, run_dir=run_dir)


def _never_saw(steps: int, kept: list[int], **cfg) -> dict[str, torch.Tensor]:
    """The weights of a run without rollback over the batches ``kept`` (a plain list of batches)."""
    stream = Stream(batch_size=256)
    trainer = _trainer(None, steps, **cfg)  # no checkpoints: they change no number
    trainer.fit([stream.batch_at(i) for i in kept])
    return trainer.model.state_dict()


def _assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _steps(path) -> list[int]:
    return [int(p.name.removeprefix("step-")) for p in ckpt_io.list_checkpoints(path / "checkpoints")]


def test_a_spike_rolls_back_before_it_and_the_run_equals_one_that_never_saw_the_batches(tmp_path, caplog):
    # logged every 2 steps, so the spike at step 21 (batch 20) shows in the record of step 22; the checkpoint
    # of step 21 was written during the spike and is no good: back to step 18, the newest at or before the last
    # clean record (step 20)
    run = tmp_path / "run"
    trainer = _trainer(run, 26, log_every=2, save_every=3, keep_last=3, spike_rollback=True)
    health = HealthMonitor(0.05, 1.5, None, lambda r: 0.0, run)
    trainer.on_log = health.on_train_record
    stream = Recording(spike_at=(20,))
    with caplog.at_level(logging.WARNING, logger="albert_lm.train.rollback"):
        result = trainer.fit(stream)
    assert result.steps == 26
    # batches 18..21 (read by steps 19..22) are skipped, never read again
    assert stream.seen == list(range(26 + 4))
    reference = _never_saw(26, [*range(18), *range(22, 30)], log_every=2)
    _assert_same_weights(trainer.model.state_dict(), reference)

    [line] = [r.getMessage() for r in caplog.records if r.name == "albert_lm.train.rollback"]
    assert "at step 22" in line and "from step 22 to step 18" in line and "skipped 4 global batches" in line
    records = load_metrics(run)
    assert [r["step"] for r in records if "loss" in r] == list(
        range(2, 27, 2)
    )  # the abandoned 20, 22 are gone
    [event] = [r for r in records if "rollback_from_step" in r]
    assert event == {"step": 18, "rollback_from_step": 22, "rollback_skipped_batches": 4,
                     "rollback_reason": "loss spike"}  # fmt: skip
    kinds = [(e["kind"], e["step"]) for e in json.loads((run / HEALTH_FILE).read_text())["events"]]
    assert kinds == [("spike", 22), ("rollback", 22)]
    # the checkpoint written during the spike went with the rollback; the last one counts the rollback
    assert _steps(run) == [21, 24, 26]
    redone = ckpt_io.read_trainer_state(run / "checkpoints" / "step-00000021")
    assert redone["batches_read"] == 25  # not the abandoned one's 21: written after the rollback
    last = ckpt_io.read_trainer_state(run / "checkpoints" / "step-00000026")
    assert last["rollbacks"] == [event] and last["batches_read"] == 30


def test_a_non_finite_step_rolls_back_and_more_batches_are_skipped(tmp_path):
    run = tmp_path / "run"
    cfg = {"log_every": 1, "save_every": 4}
    trainer = _trainer(run, 20, spike_rollback=True, spike_skip_batches=3, **cfg)
    stream = Recording(poison_at=(13,))  # NaN at step 14: back to step 12, batches 12, 13 and 3 more skipped
    result = trainer.fit(stream)
    assert result.steps == 20 and stream.seen.count(13) == 1
    _assert_same_weights(
        trainer.model.state_dict(), _never_saw(20, [*range(12), *range(17, 30)], log_every=1)
    )
    [event] = [r for r in load_metrics(run) if "rollback_from_step" in r]
    assert (
        event["step"] == 12 and event["rollback_from_step"] == 14 and event["rollback_skipped_batches"] == 5
    )
    assert event["rollback_reason"] == "non-finite loss"


def test_without_the_flag_a_spike_is_only_logged(tmp_path):
    run = tmp_path / "run"
    trainer = _trainer(run, 16, log_every=1, save_every=2)
    health = HealthMonitor(0.05, 1.5, None, lambda r: 0.0, run)
    trainer.on_log = health.on_train_record
    stream = Recording(spike_at=(12,))
    trainer.fit(stream)
    assert stream.seen == list(range(16))
    records = load_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 17))  # no rollback record
    assert [(e["kind"], e["step"]) for e in health.events] == [("spike", 13)]


def test_rollbacks_are_bounded_then_the_run_stops_saying_why(tmp_path):
    run = tmp_path / "run"
    trainer = _trainer(run, 30, log_every=1, save_every=2, spike_rollback=True, spike_max_rollbacks=2)
    with pytest.raises(TrainingDiverged, match=r"non-finite loss at step 11, after 2 rollback\(s\).*"
                       r"from step 11 to 10; step 11 to 10\).*last good checkpoint is .*step-00000010"):  # fmt: skip
        trainer.fit(Recording(poison_at=tuple(range(10, 100))))
    assert [r["rollback_from_step"] for r in load_metrics(run) if "rollback_from_step" in r] == [11, 11]


def test_a_resumed_run_counts_the_rollbacks_before_it(tmp_path):
    run = tmp_path / "run"
    cfg = {"log_every": 1, "save_every": 4, "spike_rollback": True, "spike_max_rollbacks": 1}
    _trainer(run, 16, **cfg).fit(Recording(poison_at=(13, 24)))  # back from step 14 to 12, to step 16
    resumed = _trainer(run, 24, **cfg)
    with pytest.raises(TrainingDiverged, match=r"non-finite loss at step 23, after 1 rollback\(s\)"):
        resumed.fit(Recording(poison_at=(13, 24)), resume=True)  # batch 24 is read by step 23 now


def test_without_a_good_checkpoint_the_non_finite_step_is_skipped(tmp_path, caplog):
    trainer = _trainer(tmp_path / "run", 6, log_every=1, save_every=4, spike_rollback=True)
    stream = Recording(poison_at=(1,))
    with caplog.at_level(logging.WARNING):
        result = trainer.fit(stream)
    assert result.steps == 6 and stream.seen == list(range(7))  # one batch skipped, as without the flag
    assert any("no checkpoint written at or before step 1" in r.getMessage() for r in caplog.records)
    assert not [r for r in load_metrics(tmp_path / "run") if "rollback_from_step" in r]


def test_the_trainer_refuses_a_rollback_it_cannot_do(tmp_path):
    with pytest.raises(ConfigError, match="spike_rollback: needs a run_dir"):
        _trainer(None, 4, save_every=2, spike_rollback=True)
    with pytest.raises(ConfigError, match="spike_rollback: needs checkpoints to go back to"):
        _trainer(tmp_path, 4, spike_rollback=True, save_every=None)
    with pytest.raises(ConfigError, match="spike_skip_batches"):
        TrainerConfig(precision="fp32", max_steps=4, spike_skip_batches=-1)


@pytest.mark.parametrize("make", [PretrainConfig, FinetuneConfig])
def test_the_settings_take_it_and_refuse_it_without_checkpoints(make):
    cfg = make()
    cfg.run.output = "run"
    cfg.run.spike_rollback, cfg.run.spike_skip_batches = True, 100
    cfg.run.save_every, cfg.run.save_every_minutes = None, None
    with pytest.raises(ConfigError) as e:
        cfg.validate()
    assert [p[0] for p in e.value.problems if p[0].startswith("run.")] == ["run.spike_rollback"]
    cfg.run.save_every_minutes = 5.0
    cfg.run.spike_skip_batches = -1
    with pytest.raises(ConfigError) as e:
        cfg.validate()
    assert [p[0] for p in e.value.problems if p[0].startswith("run.")] == ["run.spike_skip_batches"]


def test_the_pretraining_loop_gets_the_settings():
    cfg = PretrainConfig.from_dict({"run": {"spike_rollback": True, "spike_skip_batches": 7}}, "x.json")
    tcfg = cfg.trainer_config(1, "cpu", evaluate=False)
    assert (tcfg.spike_rollback, tcfg.spike_skip_batches, tcfg.spike_max_rollbacks) == (True, 7, 3)
