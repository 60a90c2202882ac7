"""`albert finetune race` -> `albert evaluate race` -> `albert predict` (multiple choice) on the RACE
fixtures with a tiny random model."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from standin_tokenizer import make_tiny_model_dir

from albert_lm.cli.main import main
from albert_lm.finetune.rundir import resolve_model_dir
from conftest import FIXTURES

RACE_DIR = FIXTURES / "race"


@pytest.fixture(scope="module")
def race_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [f.read_text(encoding="utf-8") for f in sorted(RACE_DIR.rglob("*.txt"))]
    texts.append((RACE_DIR / "mc.jsonl").read_text(encoding="utf-8"))
    init = make_tiny_model_dir(tmp_path_factory.mktemp("init"), texts)
    run = tmp_path_factory.mktemp("run") / "race"
    argv = ["finetune", "race", "--data-dir", str(RACE_DIR), "--init", str(init), "--output", str(run)]
    argv += ["--train-steps", "2", "--batch-size", "2", "--max-seq-length", "48", "--learning-rate", "1e-3"]
    argv += ["--eval-every", "1", "--no-progress", "--precision", "fp32"]  # compared with evaluate's (fp32)
    assert main(argv) == 0
    return run


def test_report_has_per_level_dev_accuracy_and_both_checkpoints(race_run: Path) -> None:
    report = json.loads((race_run / "report.json").read_text())
    assert report["task"]["kind"] == "multiple_choice" and report["task"]["max_qa_length"] == 128
    # the RACE preset: original v2 setting, here overridden on the command line
    assert report["config"]["encoder_dropout"] == 0.0 and report["config"]["learning_rate"] == 1e-3
    for which in ("best", "last"):
        rec = report["checkpoints"][which]
        assert {"accuracy", "accuracy_middle", "accuracy_high"} <= set(rec)
        assert rec["num_middle"] == 2.0 and rec["num_high"] == 2.0
        assert resolve_model_dir(race_run, which).is_dir()
    preds = [json.loads(x) for x in (race_run / "predictions" / "dev_best.jsonl").read_text().splitlines()]
    assert [p["guid"] for p in preds] == [
        "middle/middle2.txt#1",
        "middle/middle2.txt#2",
        "high/high1.txt#1",
        "high/high2.txt#1",
    ]
    assert all(p["prediction"] in "ABCD" and len(p["probabilities"]) == 4 for p in preds)
    # per-question predictions of the test split
    test = [json.loads(x) for x in (race_run / "test" / "test_predictions.jsonl").read_text().splitlines()]
    assert [t["guid"] for t in test] == ["middle/middle3.txt#1"]


def test_evaluate_matches_report_and_predict_takes_any_option_count(
    race_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["evaluate", "race", "--data-dir", str(RACE_DIR), "--model", str(race_run)]) == 0
    out = json.loads(capsys.readouterr().out)
    best = json.loads((race_run / "report.json").read_text())["checkpoints"]["best"]
    assert out["accuracy"] == pytest.approx(best["accuracy"]) and out["accuracy_high"] == pytest.approx(
        best["accuracy_high"]
    )

    monkeypatch.setattr("sys.stdin", io.StringIO((RACE_DIR / "mc.jsonl").read_text()))
    assert main(["predict", "--model", str(race_run)]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"]
    assert [len(r["probabilities"]) for r in rows] == [3, 2, 5]
    assert all(sum(r["probabilities"]) == pytest.approx(1.0, abs=1e-5) for r in rows)
