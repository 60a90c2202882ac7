"""`albert_lm.train.trackers` under the one loop: ``report_to`` opens the trackers, a resumed run goes on
in the same tracker run, and a tracker that cannot start is an error naming its extra."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: toy_training

from albert_lm.config import ConfigError  # noqa: E402
from albert_lm.optim import build_optimizer, build_scheduler  # noqa: E402
from albert_lm.pretrain.config import recipe  # noqa: E402
from albert_lm.train import Trainer, TrainerConfig, load_metrics  # noqa: E402
from albert_lm.train.trackers import TrackerError  # noqa: E402
from toy_training import Stream, Toy  # noqa: E402


def _fit(run_dir: Path, steps: int, resume: bool = False, **cfg: object):
    torch.manual_seed(0)
    model = Toy()
    opt = build_optimizer(model, "adamw", lr=0.01)
    config = TrainerConfig(max_steps=steps, precision="fp32", progress=False, log_every=1, save_every=1,
                           tensorboard=False, **cfg)  # fmt: skip
    trainer = Trainer(model, opt, build_scheduler(opt, total_steps=4), config, run_dir=run_dir)
    return trainer.fit(Stream(), resume=resume or None)


def test_report_to_tensorboard_writes_the_event_files(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _fit(tmp_path, 3, report_to="tensorboard")
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [e.step for e in events.Scalars("loss")] == [1, 2, 3]
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "tracking.json").exists()


def test_no_tracker_by_default_for_the_commands(tmp_path: Path) -> None:
    _fit(tmp_path, 2)  # report_to "none", tensorboard False (what from_settings gives the commands)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "metrics.jsonl", "result.json"]


@pytest.mark.slow
def test_a_resumed_run_goes_on_in_the_same_mlflow_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = {"optim.learning_rate": 0.01, "run.seed": 3}
    _fit(tmp_path, 2, report_to="mlflow", tracking_params=params)
    first = json.loads((tmp_path / "tracking.json").read_text())["mlflow"]
    _fit(tmp_path, 4, resume=True, report_to="mlflow", tracking_params=params)
    assert json.loads((tmp_path / "tracking.json").read_text())["mlflow"] == first
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    assert client.get_run(first).data.params == {"optim.learning_rate": "0.01", "run.seed": "3"}
    history = sorted((m.step, m.value) for m in client.get_metric_history(first, "loss"))
    expected = [(r["step"], r["loss"]) for r in load_metrics(tmp_path) if "loss" in r]
    assert [s for s, _ in history] == [1, 2, 3, 4] == [s for s, _ in expected]
    assert [v for _, v in history] == pytest.approx([v for _, v in expected])


def test_a_tracker_that_cannot_start_names_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "mlflow"] + ["mlflow"]:
        monkeypatch.setitem(sys.modules, name, None)  # not installed (nor any of its modules loaded)
    with pytest.raises(
        TrackerError, match=r"run.report_to: mlflow needs the mlflow package.*albert-lm\[mlflow\]"
    ):
        _fit(tmp_path, 2, report_to="mlflow")
    assert not (tmp_path / "checkpoints").exists()  # before any step


def test_pretraining_checks_report_to_and_records_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = recipe("smoke")
    cfg.run.report_to = "wandb"
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ConfigError, match=r"run.report_to: wandb needs the wandb package"):
        cfg.validate()
    cfg.run.report_to = "none"
    tcfg = cfg.trainer_config(1, "cpu", evaluate=False)
    assert (
        tcfg.tracking_params["optim.learning_rate"] == 0.01
        and tcfg.tracking_params["model.preset"] == "albert-tiny"
    )
    assert tcfg.report_to == "none" and tcfg.tensorboard is False


@pytest.mark.slow
def test_a_run_that_fails_ends_its_mlflow_run_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def broken_eval(model: torch.nn.Module) -> dict[str, float]:
        raise RuntimeError("dev set unreadable")

    torch.manual_seed(0)
    model = Toy()
    opt = build_optimizer(model, "adamw", lr=0.01)
    config = TrainerConfig(max_steps=4, precision="fp32", progress=False, eval_every=2, tensorboard=False,
                           report_to="mlflow")  # fmt: skip
    with pytest.raises(RuntimeError, match="dev set unreadable"):
        Trainer(model, opt, None, config, run_dir=tmp_path, eval_fn=broken_eval).fit(Stream())
    run_id = json.loads((tmp_path / "tracking.json").read_text())["mlflow"]
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    assert client.get_run(run_id).info.status == "FAILED"
