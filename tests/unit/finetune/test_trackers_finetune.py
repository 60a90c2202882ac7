"""``--report-to``: the metrics of a real tiny `albert finetune` run in MLflow and W&B (offline), read back
with their own clients / files; a tracker whose package is missing is one line, exit 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from finetune_support import finetune_argv, report, tiny_init, write_data

from albert_lm.cli.main import main
from albert_lm.train import load_metrics

STEPS = ["--batch-size", "4", "--train-steps", "4", "--eval-every", "2", "--learning-rate", "1e-3"]


def _data(tmp_path: Path) -> tuple[Path, Path, Path]:
    init = tiny_init(tmp_path / "init")
    return init, write_data(tmp_path / "train.csv", 16), write_data(tmp_path / "dev.csv", 8, seed=1)


@pytest.mark.slow
def test_mlflow_run_holds_the_params_and_the_metric_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    init, train, dev = _data(tmp_path)
    out = tmp_path / "run"
    assert main(finetune_argv(init, train, dev, out, *STEPS, "--report-to", "mlflow")) == 0
    run_id = json.loads((out / "tracking.json").read_text())["mlflow"]
    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())  # the default: under the run dir
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    params = run.data.params
    assert (
        params["learning_rate"] == "0.001"
        and params["batch_size"] == "4"
        and params["optimizer"] == "adamw_original"
    )
    # the metric history is metrics.jsonl's, step by step
    records = load_metrics(out)
    losses = [(r["step"], r["loss"]) for r in records if "loss" in r]
    scores = [(r["step"], r["eval_score"]) for r in records if "eval_score" in r]
    for name, expected in (("loss", losses), ("eval_score", scores)):
        got = sorted((m.step, m.value) for m in client.get_metric_history(run_id, name))
        assert [s for s, _ in got] == [s for s, _ in expected], name
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6), name
    assert [s for s, _ in scores] == [2, 4]
    assert report(out)["stop_reason"] == "max_steps"


@pytest.mark.slow
def test_wandb_offline_files_are_written_under_the_run_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    monkeypatch.setenv("WANDB_SILENT", "true")
    init, train, dev = _data(tmp_path)
    out = tmp_path / "run"
    assert main(finetune_argv(init, train, dev, out, *STEPS, "--report-to", "wandb,tensorboard")) == 0
    run_id = json.loads((out / "tracking.json").read_text())["wandb"]
    runs = list((out / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 1, list((out / "wandb").iterdir())
    data = list(runs[0].glob("run-*.wandb"))
    assert data and data[0].stat().st_size > 0
    assert (out / "tb").is_dir() and any((out / "tb").iterdir())  # both trackers at once


@pytest.mark.parametrize(
    ("tracker", "modules"),
    [
        ("mlflow", ["mlflow"]),
        ("wandb", ["wandb"]),
        ("tensorboard", ["tensorboard", "torch.utils.tensorboard"]),
    ],
)
def test_a_missing_tracker_package_is_one_line_exit_1(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tracker: str,
    modules: list[str],
) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)  # import fails, find_spec finds nothing: not installed
    init, train, dev = _data(tmp_path)
    out = tmp_path / "run"
    assert main(finetune_argv(init, train, dev, out, *STEPS, "--report-to", tracker)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("albert finetune: error: --report-to: ")
    assert f"pip install 'albert-lm[{tracker}]'" in err[0]
    assert not out.exists()  # refused before anything was written


def test_an_unknown_tracker_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    init, train, dev = _data(tmp_path)
    assert main(finetune_argv(init, train, dev, tmp_path / "run", "--report-to", "mlflow,comet")) == 1
    err = capsys.readouterr().err
    assert "--report-to" in err and "'comet' is not one of none, tensorboard, mlflow, wandb" in err
