"""The training loop with a toy module and a synthetic, resumable batch stream."""

from __future__ import annotations

import json
import logging
import os
import signal

import pytest
import torch

from albert_lm.optim import build_optimizer, build_scheduler
from albert_lm.train import OptimSettings, Trainer, TrainerConfig, TrainingDiverged, load_metrics
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.parallelize import enable_activation_checkpointing
from toy_training import Stream, Toy


def make(tmp_path=None, *, steps=10, lr=0.05, optimizer="lamb", dropout=0.0, warmup=0, seed=0, **cfg):
    torch.manual_seed(seed)
    model = Toy(dropout=dropout)
    opt = build_optimizer(model, optimizer, lr=lr)
    sched = build_scheduler(opt, total_steps=steps, warmup_steps=warmup)
    cfg.setdefault("progress", False)
    cfg.setdefault("log_every", 1)
    config = TrainerConfig(max_steps=steps, **{"precision": "fp32", **cfg})
    return model, opt, sched, config


def params_of(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_training_learns_the_toy_regression(tmp_path):
    model, opt, sched, cfg = make(steps=60, lr=0.05, optimizer="adamw")
    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream(batch_size=32))
    records = [r for r in load_metrics(tmp_path) if "loss" in r]
    assert len(records) == 60
    assert records[-1]["loss"] < 0.1 * records[0]["loss"]
    assert result.steps == 60 and result.stop_reason == "max_steps"
    assert result.tokens == 60 * 32 * 4  # no input_ids: numel of the first tensor (x, 32 x 4)


def test_metrics_jsonl_has_the_fields_and_lr_follows_the_schedule(tmp_path):
    model, opt, sched, cfg = make(steps=6, warmup=2, lr=0.1, optimizer="adamw")
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    recs = load_metrics(tmp_path)
    assert [r["step"] for r in recs] == [1, 2, 3, 4, 5, 6]
    for key in ("loss", "abs_err", "lr", "grad_norm", "tokens_per_s", "tokens", "elapsed_s"):
        assert key in recs[0], key
    # warmup 2 then linear decay from step 0 over 6 steps: updates use factors 0, 1/2, 4/6, 3/6, 2/6, 1/6
    assert [r["lr"] for r in recs] == pytest.approx([0.0, 0.05, 0.1 * 4 / 6, 0.05, 0.1 * 2 / 6, 0.1 / 6])
    assert (tmp_path / "result.json").exists()


def test_tensorboard_gets_every_logged_scalar(tmp_path):
    """With the tensorboard package installed, RUN_DIR/tb holds the metrics.jsonl values (train and eval)."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model, opt, sched, cfg = make(steps=4, lr=0.1, optimizer="adamw", eval_every=2)
    Trainer(model, opt, sched, cfg, run_dir=tmp_path, eval_fn=lambda m: {"err": 1.5}).fit(Stream())
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    recs = load_metrics(tmp_path)
    for name in ("loss", "lr", "grad_norm", "tokens_per_s", "eval_err"):
        logged = [(r["step"], r[name]) for r in recs if name in r]
        got = [(e.step, e.value) for e in events.Scalars(name)]
        assert [s for s, _ in got] == [s for s, _ in logged], name
        assert [v for _, v in got] == pytest.approx([v for _, v in logged], rel=1e-6), name


def test_gradient_accumulation_equals_the_big_batch():
    # Two micro-batches of 8 with accumulation == one batch of 16 (mean losses over equal sizes).
    model_a, opt_a, sched_a, cfg_a = make(steps=4, grad_accum_steps=2)
    Trainer(model_a, opt_a, sched_a, cfg_a).fit(Stream(batch_size=8))

    class Joined:
        def __iter__(self):
            small = iter(Stream(batch_size=8))
            while True:
                a, b = next(small), next(small)
                yield {k: torch.cat([a[k], b[k]]) for k in a}

    model_b, opt_b, sched_b, cfg_b = make(steps=4)
    Trainer(model_b, opt_b, sched_b, cfg_b).fit(Joined())
    for k, v in params_of(model_a).items():
        torch.testing.assert_close(v, params_of(model_b)[k], rtol=1e-5, atol=1e-6)


def test_global_norm_clipping_bounds_the_gradient(tmp_path):
    torch.manual_seed(0)
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    cfg = TrainerConfig(precision="fp32", max_steps=1, max_grad_norm=1.0, progress=False, log_every=1)
    big = [{"x": torch.randn(8, 4) * 100, "y": torch.randn(8) * 100}]
    Trainer(model, opt, None, cfg, run_dir=tmp_path).fit(big)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    # SGD with lr 1: the step is the clipped gradient, whose global norm is exactly 1
    assert torch.linalg.vector_norm(after - before).item() == pytest.approx(1.0, rel=1e-4)
    assert load_metrics(tmp_path)[0]["grad_norm"] > 1.0  # the logged norm is the one before clipping


def test_nan_loss_skips_the_step_and_warns(tmp_path, caplog):
    model, opt, sched, cfg = make(steps=5)
    stream = Stream(poison_at=(2,))
    snapshots = []

    class Watch:
        def __iter__(self):
            for b in stream:
                snapshots.append(params_of(model))
                yield b

    with caplog.at_level(logging.WARNING):
        result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Watch())
    assert "non-finite loss at step 3" in caplog.text
    assert result.steps == 5  # the poisoned batch did not count as a step
    # batch 2 was poisoned: the parameters before batch 3 equal those before batch 2
    for k in snapshots[2]:
        assert torch.equal(snapshots[2][k], snapshots[3][k])
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert [r["step"] for r in load_metrics(tmp_path)] == [1, 2, 3, 4, 5]


def test_many_nan_losses_in_a_row_stop_with_the_last_good_checkpoint(tmp_path):
    model, opt, sched, cfg = make(steps=20, max_bad_steps=3)
    stream = Stream(poison_at=tuple(range(4, 100)))
    with pytest.raises(TrainingDiverged, match=r"4 consecutive steps .* step 4.*saved in .*step-00000004"):
        Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(stream)
    ckpt = ckpt_io.latest_checkpoint(tmp_path)
    assert ckpt_io.read_trainer_state(ckpt)["step"] == 4
    reloaded = Toy()
    ckpt_io.load_model_weights(reloaded, ckpt)
    assert all(torch.isfinite(p).all() for p in reloaded.parameters())


def run_with_resume(tmp_path, stop_at, total=8):
    """Run `stop_at` steps (checkpoint), then a fresh process-like trainer resumes to `total`."""
    model, opt, sched, cfg = make(steps=total, dropout=0.3, seed=1)
    cfg.max_steps = stop_at
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream(seed=3))
    torch.manual_seed(999)  # the resumed run must not depend on the ambient RNG
    model, opt, sched, cfg = make(steps=total, dropout=0.3, seed=5)  # different init: overwritten by resume
    stream = Stream(seed=3)
    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(stream, resume=True)
    return model, result


def test_resume_is_bit_exact_with_dropout_and_data_position(tmp_path):
    straight_dir = tmp_path / "straight"
    model_a, opt, sched, cfg = make(steps=8, dropout=0.3, seed=1)
    Trainer(model_a, opt, sched, cfg, run_dir=straight_dir).fit(Stream(seed=3))
    model_b, result = run_with_resume(tmp_path / "resumed", stop_at=3)
    assert result.steps == 8
    for k, v in params_of(model_a).items():
        assert torch.equal(v, params_of(model_b)[k]), k
    losses = lambda d: [(r["step"], r["loss"]) for r in load_metrics(d)]  # noqa: E731
    assert losses(straight_dir) == losses(tmp_path / "resumed")


def test_resume_truncates_metrics_written_after_the_checkpoint(tmp_path):
    model, opt, sched, cfg = make(steps=6, save_every=2)
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    # as if killed after step 5 with the last checkpoint at 4: drop step-6, keep the log lines of 5 and 6
    import shutil

    shutil.rmtree(tmp_path / "checkpoints" / "step-00000006")
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 7, "loss": 1.0')  # a line cut by the kill
    model, opt, sched, cfg = make(steps=6, save_every=2)
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream(), resume=True)
    assert [r["step"] for r in load_metrics(tmp_path)] == [1, 2, 3, 4, 5, 6]


def test_resume_without_data_state_skips_consumed_batches(tmp_path):
    data = [Stream(seed=4).batch_at(i) for i in range(5)]  # a list: 5 batches per epoch, no state
    model_a, opt, sched, cfg = make(steps=7)
    Trainer(model_a, opt, sched, cfg).fit(data)
    model, opt, sched, cfg = make(steps=7)
    cfg.max_steps = 6  # stops inside epoch 2 (after its first batch)
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(data)
    model_b, opt, sched, cfg = make(steps=7)
    Trainer(model_b, opt, sched, cfg, run_dir=tmp_path).fit(data, resume=True)
    for k, v in params_of(model_a).items():
        assert torch.equal(v, params_of(model_b)[k]), k
    assert ckpt_io.read_trainer_state(ckpt_io.latest_checkpoint(tmp_path))["epoch"] == 1


def test_checkpoints_keep_last_k_and_are_model_dirs(tmp_path):
    model, opt, sched, cfg = make(steps=10, save_every=2, keep_last=2)
    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["step-00000008", "step-00000010"]
    ckpt = tmp_path / "checkpoints" / "step-00000010"
    assert result.last_checkpoint == str(ckpt)
    for f in ("model.safetensors", "training_state.json", "training_state.safetensors", "trainer_state.json"):
        assert (ckpt / f).exists(), f
    reloaded = Toy()
    ckpt_io.load_model_weights(reloaded, ckpt)
    for k, v in params_of(model).items():
        assert torch.equal(v, params_of(reloaded)[k])


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path):
    model, opt, sched, cfg = make(steps=4, save_every=2)
    calls = []

    def on_save(d):
        calls.append(d)
        (d / "tokenizer.txt").write_text("vocab")
        if len(calls) == 2:
            raise OSError("disk full")  # the second checkpoint dies mid-write

    with pytest.raises(OSError, match="disk full"):
        Trainer(model, opt, sched, cfg, run_dir=tmp_path, on_save=on_save).fit(Stream())
    assert [p.name for p in ckpt_io.list_checkpoints(tmp_path / "checkpoints")] == ["step-00000002"]
    assert ckpt_io.latest_checkpoint(tmp_path).name == "step-00000002"
    assert (tmp_path / "checkpoints" / "step-00000002" / "tokenizer.txt").exists()
    # the next save cleans the half-written temporary directory
    model, opt, sched, cfg = make(steps=4, save_every=2)
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream(), resume=True)
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    assert ckpt_io.latest_checkpoint(tmp_path).name == "step-00000004"


def test_eval_callback_best_checkpoint_and_summary(tmp_path):
    model, opt, sched, cfg = make(steps=6, eval_every=2, best_metric="score", best_mode="max")
    scores = iter([0.5, 0.9, 0.7])
    seen_modes = []

    def evaluate(m):
        seen_modes.append((m.training, torch.is_grad_enabled()))
        return {"score": next(scores), "eval_loss": 1.0}

    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path, eval_fn=evaluate).fit(Stream())
    assert seen_modes == [(False, False)] * 3
    assert [e["step"] for e in result.eval_history] == [2, 4, 6]
    assert result.eval_history[1] == {"step": 4, "eval_score": 0.9, "eval_loss": 1.0}
    assert (result.best_metric, result.best_step) == (0.9, 4)
    best = tmp_path / "checkpoints" / "best"
    assert result.best_checkpoint == str(best)
    assert json.loads((best / "trainer_state.json").read_text())["step"] == 4
    assert not (best / "training_state.json").exists()  # model only
    evals = [r for r in load_metrics(tmp_path) if "eval_score" in r]
    assert [r["step"] for r in evals] == [2, 4, 6]
    assert json.loads((tmp_path / "result.json").read_text())["best_step"] == 4


def test_unknown_best_metric_is_a_clear_error(tmp_path):
    model, opt, sched, cfg = make(steps=2, eval_every=1, best_metric="f1")
    with pytest.raises(KeyError, match="best_metric 'f1' is not among the eval metrics"):
        Trainer(model, opt, sched, cfg, run_dir=tmp_path, eval_fn=lambda m: {"acc": 1.0}).fit(Stream())


def test_sigterm_saves_a_checkpoint_then_stops(tmp_path):
    model, opt, sched, cfg = make(steps=50)
    stream = Stream()

    class Signaller:
        def __iter__(self):
            for i, b in enumerate(stream):
                if i == 4:
                    os.kill(os.getpid(), signal.SIGTERM)
                yield b

    old = signal.getsignal(signal.SIGTERM)
    trainer = Trainer(model, opt, sched, cfg, run_dir=tmp_path)
    result = trainer.fit(Signaller())
    assert result.stop_reason == "signal" and trainer.stop_signal == signal.SIGTERM
    assert result.steps == 5  # the step in progress finished
    assert ckpt_io.latest_checkpoint(tmp_path).name == "step-00000005"
    assert signal.getsignal(signal.SIGTERM) is old  # handlers restored


def test_time_budget_stops_and_saves(tmp_path):
    model, opt, sched, cfg = make(steps=10_000, max_time_s=0.3)
    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    assert result.stop_reason == "time_limit"
    assert 0 < result.steps < 10_000
    assert ckpt_io.latest_checkpoint(tmp_path).name == ckpt_io.step_dir_name(result.steps)


def test_time_limited_run_s_bar_counts_training_time_not_steps(tmp_path, capsys):
    """A run whose lr is laid over its time budget (schedule.by=time) ends there: it showed "N/10000
    steps" and an ETA of the step cap (issue 23). The cap is a field, not the count."""
    from albert_lm.optim.schedules import build_time_scheduler
    from albert_lm.train.metrics import advance_bar, progress_bar, step_of

    model, opt, _, cfg = make(steps=10_000, max_time_s=1.2, progress=True, log_every=1000)
    sched = build_time_scheduler(opt, budget_s=1.2)
    result = Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    last = capsys.readouterr().err.rstrip().split("\r")[-1]
    assert result.stop_reason == "time_limit"
    assert last.startswith(f"step {result.steps} of 10000 ") and "00:01 / 00:02 training time" in last
    assert "/10000" not in last and "it/s" not in last
    with progress_bar(100_000, 40, time_budget_s=14 * 3600, elapsed_s=600, by="time") as bar:  # resumed
        assert (bar.total, bar.unit, bar.n) == (14 * 3600, "s", 600)
        advance_bar(bar, 41, 3600.5)
        shown = str(bar)
    assert shown.startswith("step 41 of 100000 ") and "1:00:00 / 14:00:00 training time" in shown
    assert "/100000" not in shown
    assert step_of(40, 100_000, 125.4, 600.0, by="time") == "step 40 (125/600 s)"  # the log line, no bar
    assert step_of(40, 1000, 125.4, None) == "step 40/1000"
    with pytest.raises(ValueError, match="time budget"), progress_bar(1000, 0, by="time"):
        pass


def test_step_schedule_s_bar_counts_steps_and_shows_the_budget_beside(tmp_path, capsys):
    """schedule.by=steps, total_steps 6400, run.max_time_minutes=1000: the run ends at step 6400, but
    the bar showed "00:00 / 16:40:00 training time" (issue 23). It counts the steps; the budget is a
    field."""
    from albert_lm.train.metrics import advance_bar, progress_bar, step_of

    with progress_bar(6400, 0, time_budget_s=1000 * 60) as bar:
        assert (bar.total, bar.unit, bar.n) == (6400, "step", 0)
        assert "0/6400" in str(bar) and "00:00 / 16:40:00 training time" in str(bar)
        advance_bar(bar, 1, 90.5)
        assert bar.n == 1 and "1/6400" in str(bar) and "01:30 / 16:40:00 training time" in str(bar)
    with progress_bar(1000, 40) as bar:  # no budget: steps alone
        advance_bar(bar, 41, 3600.5)
        assert bar.n == 41 and "41/1000" in str(bar) and "training time" not in str(bar)
    assert step_of(40, 6400, 125.4, 60000.0) == "step 40/6400 (125/60000 s)"
    # the trainer's bar: a step schedule under a large budget counts its steps
    model, opt, sched, cfg = make(steps=3, max_time_s=60000.0, progress=True, log_every=1000)
    assert Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream()).stop_reason != "time_limit"
    last = capsys.readouterr().err.rstrip().split("\r")[-1]
    assert "3/3 " in last and "/ 16:40:00 training time" in last


def test_the_bar_counts_what_the_schedule_is_laid_over():
    from albert_lm.train.settings import ScheduleSettings

    for by in ("steps", "time"):
        trainer = Trainer.for_finetuning(
            Toy(),
            optim=OptimSettings(optimizer="adamw", learning_rate=1e-3),
            total_steps=6400,
            schedule=ScheduleSettings(by=by),
            config=TrainerConfig(precision="fp32", max_steps=6400, max_time_s=60000.0, progress=False),
        )
        assert trainer._by == by


def test_bf16_autocast_on_cpu():
    model, opt, sched, cfg = make(steps=2, precision="bf16")
    Trainer(model, opt, sched, cfg).fit(Stream())
    assert model.seen_dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32


def test_fp16_uses_loss_scaling(tmp_path):
    model, opt, sched, cfg = make(steps=3, precision="fp16", device="cpu")
    trainer = Trainer(model, opt, sched, cfg, run_dir=tmp_path)
    trainer.fit(Stream())
    assert model.seen_dtype == torch.float16
    assert trainer.scaler.is_enabled()
    assert "loss_scale" in load_metrics(tmp_path)[-1]


def test_for_finetuning_builds_adamw_with_warmup_and_linear_decay(tmp_path):
    torch.manual_seed(0)
    model = Toy()
    cfg = TrainerConfig(precision="fp32", max_steps=4, progress=False, log_every=1)
    optim = OptimSettings(optimizer="adamw", learning_rate=1e-3)
    trainer = Trainer.for_finetuning(
        model, optim=optim, total_steps=4, warmup_steps=1, config=cfg, run_dir=tmp_path
    )
    assert isinstance(trainer.optimizer, torch.optim.AdamW)
    trainer.fit(Stream())
    assert [r["lr"] for r in load_metrics(tmp_path)] == pytest.approx([0.0, 7.5e-4, 5e-4, 2.5e-4])


def test_forward_without_loss_is_a_clear_error():
    class NoLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x, y, poison=None):
            return {"logits": x * self.w}

    model = NoLoss()
    cfg = TrainerConfig(precision="fp32", max_steps=1, progress=False)
    with pytest.raises(TypeError, match="must return a dict with 'loss'"):
        Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), None, cfg).fit(Stream())


def test_empty_iterable_is_a_clear_error():
    model, opt, sched, cfg = make(steps=2)
    with pytest.raises(ValueError, match="yielded no batch"):
        Trainer(model, opt, sched, cfg).fit([])


def test_activation_checkpointing_hook():
    assert enable_activation_checkpointing(Toy()) == 1
    with pytest.raises(ValueError, match="no activation checkpointing hook"):
        enable_activation_checkpointing(torch.nn.Linear(2, 2))


def test_metrics_fn_ratios_are_pooled_over_the_window(tmp_path):
    model, opt, sched, cfg = make(steps=2, log_every=2, grad_accum_steps=2)

    def metrics_fn(batch, out):
        # micro-batch k contributes (k correct, 10 counted) -> pooled 0+1+2+3 over 40, not a mean of ratios
        metrics_fn.k += 1
        return {"acc": (torch.tensor(float(metrics_fn.k - 1)), torch.tensor(10.0))}

    metrics_fn.k = 0
    Trainer(model, opt, sched, cfg, run_dir=tmp_path, metrics_fn=metrics_fn).fit(Stream())
    assert load_metrics(tmp_path)[0]["acc"] == pytest.approx(6 / 40)


class EpochStream(Stream):
    """Like the pretraining dataset: finite epochs, set_epoch rewinds, a finished pass starts the next."""

    def __init__(self, per_epoch: int = 3, **kw):
        super().__init__(**kw)
        self.per_epoch, self.epoch = per_epoch, 0

    def set_epoch(self, epoch):
        self.epoch, self.pos = epoch, 0

    def __iter__(self):
        while self.pos < self.per_epoch:
            self.pos += 1
            yield self.batch_at(self.epoch * 100 + self.pos)
        self.set_epoch(self.epoch + 1)

    def state_dict(self):
        return {"pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state):
        self.pos, self.epoch = state["pos"], state["epoch"]


def test_resume_keeps_a_stateful_iterables_position_across_epochs(tmp_path):
    model_a, opt, sched, cfg = make(steps=8)
    Trainer(model_a, opt, sched, cfg).fit(EpochStream())
    model, opt, sched, cfg = make(steps=8)
    cfg.max_steps = 4  # epoch 1, one batch in
    Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(EpochStream())
    model_b, opt, sched, cfg = make(steps=8)
    Trainer(model_b, opt, sched, cfg, run_dir=tmp_path).fit(EpochStream(), resume=True)
    for k, v in params_of(model_a).items():
        assert torch.equal(v, params_of(model_b)[k]), k


def test_training_lines_put_the_losses_first_whatever_the_model_names_them():
    from albert_lm.train.metrics import train_record

    values = {"grad_norm": 2.0, "acc": 0.5, "b_loss": 1.0, "loss": 3.0, "a_loss": 2.0, "lr": 9.0}
    record = train_record(7, values, {"lr": 0.1, "grad_norm": values["grad_norm"]})
    assert list(record) == ["step", "loss", "a_loss", "b_loss", "acc", "lr", "grad_norm"]
    assert record["lr"] == 0.1  # the loop's own keys win over a metric of the same name


def test_best_metric_rule_is_strict_and_ignores_nan():
    from albert_lm.train.metrics import BestMetric, improves

    assert improves(0.5, None) and not improves(float("nan"), None)
    assert not improves(0.5, 0.5) and improves(0.4, 0.5, "min") and not improves(0.6, 0.5, "min")
    best = BestMetric("acc", "max")
    assert best.update({"eval_acc": 0.7}, step=2) and (best.value, best.step) == (0.7, 2)
    assert not best.update({"eval_acc": 0.7}, step=4) and best.step == 2
    assert not BestMetric(None).update({"eval_acc": 1.0}, step=1)
    with pytest.raises(KeyError, match="best_metric 'f1'"):
        BestMetric("f1").update({"eval_acc": 1.0}, step=1)


def test_metrics_file_with_a_broken_line_names_file_and_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n{"step": 2,\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not valid JSON"):
        load_metrics(tmp_path)
    with pytest.raises(FileNotFoundError, match="metrics.jsonl not found"):
        load_metrics(tmp_path / "nope")
