"""``--early-stopping-patience`` / ``--early-stopping-threshold`` in a real tiny `albert finetune` run."""

from __future__ import annotations

from pathlib import Path

import pytest
from finetune_support import finetune_argv, report, tiny_init, write_data

from albert_lm.cli.main import main


@pytest.mark.slow
def test_a_run_whose_dev_score_stops_improving_stops_and_says_why(tmp_path: Path) -> None:
    """At learning rate 0 the dev score never moves: the first evaluation sets it, the second does not
    improve on it, and with patience 1 the run stops there (step 2 of 10), writes its checkpoint and
    reports the evaluation, the step and why."""
    init = tiny_init(tmp_path / "init")
    train, dev = write_data(tmp_path / "train.csv", 16), write_data(tmp_path / "dev.csv", 8, seed=1)
    out = tmp_path / "run"
    extra = ["--batch-size", "4", "--train-steps", "10", "--eval-every", "1", "--learning-rate", "0"]
    extra += ["--early-stopping-patience", "1"]
    assert main(finetune_argv(init, train, dev, out, *extra)) == 0
    rep = report(out)
    assert rep["stop_reason"] == "early_stopping"
    assert [h["step"] for h in rep["history"]] == [1, 2]
    es = rep["early_stopping"]
    assert es["stopped"] is True and es["stopped_at_evaluation"] == 2 and es["stopped_at_step"] == 2
    assert es["best_step"] == 1 and es["patience"] == 1 and "eval_score" in es["reason"]
    assert rep["checkpoints"]["last"]["step"] == 2 and (out / "checkpoints" / "step-00000002").is_dir()
    assert rep["config"]["early_stopping_patience"] == 1


@pytest.mark.slow
def test_a_run_that_keeps_its_patience_reports_no_stop(tmp_path: Path) -> None:
    init = tiny_init(tmp_path / "init")
    train, dev = write_data(tmp_path / "train.csv", 16), write_data(tmp_path / "dev.csv", 8, seed=1)
    out = tmp_path / "run"
    extra = ["--batch-size", "4", "--train-steps", "3", "--eval-every", "1", "--learning-rate", "0"]
    extra += ["--early-stopping-patience", "5"]
    assert main(finetune_argv(init, train, dev, out, *extra)) == 0
    rep = report(out)
    assert rep["stop_reason"] == "max_steps" and rep["early_stopping"]["stopped"] is False
    assert (
        rep["early_stopping"]["stopped_at_step"] is None
        and rep["early_stopping"]["evaluations_without_improvement"] == 2
    )
