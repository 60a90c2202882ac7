"""Metrics on NaN input are NaN, as scipy's (``nan_policy='propagate'``), never a plausible score; and no
JSON output (report.json, prediction files, `albert predict`'s lines) ever holds ``NaN``: the writer
refuses, naming the output and the value's place, and leaves what was there."""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from albert_lm._io import NonFiniteJsonError, atomic_write_json, json_text
from albert_lm.tasks import metrics
from albert_lm.tasks.base import write_jsonl

NAN = float("nan")


def test_spearman_and_pearson_of_nan_are_nan_as_in_scipy() -> None:
    y = [0.1, 0.5, 0.2, 0.9, 0.4]
    p = [0.2, NAN, 0.1, 0.8, 0.3]
    assert math.isnan(stats.spearmanr(p, y).statistic) and math.isnan(metrics.spearman(p, y))
    assert math.isnan(stats.pearsonr(p, y).statistic) and math.isnan(metrics.pearson(p, y))
    assert math.isnan(metrics.spearman(y, p)) and math.isnan(metrics.pearson(y, p))
    assert np.isnan(metrics.rankdata(p)).all()
    # infinity is the largest value to rank (scipy too); a correlation of it is NaN
    inf = [0.2, np.inf, 0.1, 0.8, 0.3]
    assert metrics.spearman(inf, y) == pytest.approx(stats.spearmanr(inf, y).statistic)
    assert math.isnan(metrics.pearson(inf, y))
    # finite input: unchanged
    q = [0.2, 0.6, 0.1, 0.8, 0.3]
    assert metrics.spearman(q, y) == pytest.approx(stats.spearmanr(q, y).statistic)


@pytest.mark.parametrize("name", ["accuracy", "f1", "f1_macro", "matthews"])
def test_classification_metrics_of_nan_are_nan(name: str) -> None:
    labels = [0.0, 1.0, 1.0, 0.0]
    assert not math.isnan(metrics.METRICS[name]([0.0, 1.0, 0.0, 0.0], labels))
    assert math.isnan(metrics.METRICS[name]([0.0, NAN, 0.0, 0.0], labels))
    assert math.isnan(metrics.METRICS[name](labels, [0.0, 1.0, np.inf, 0.0]))


def test_json_text_refuses_nan_naming_the_output_and_the_place() -> None:
    assert json_text({"a": [1.5, "é"]}, "x") == '{"a": [1.5, "é"]}'
    with pytest.raises(NonFiniteJsonError, match=r"^out\.json: metrics\.dev\[1\]\.spearman is not a finite"):
        json_text({"metrics": {"dev": [{"spearman": 0.5}, {"spearman": NAN}]}}, "out.json")
    with pytest.raises(NonFiniteJsonError, match="probabilities.neg"):
        json_text({"probabilities": {"neg": -math.inf}}, "<stdin>:3")


def test_report_and_prediction_files_are_never_written_with_nan(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    atomic_write_json(report, {"accuracy": 0.5})
    with pytest.raises(NonFiniteJsonError, match=f"{report}: accuracy"):
        atomic_write_json(report, {"accuracy": NAN})
    assert json.loads(report.read_text()) == {"accuracy": 0.5}  # the old report stays whole
    preds = tmp_path / "dev_predictions.jsonl"
    with pytest.raises(NonFiniteJsonError, match=rf"{preds}: probabilities\.pos"):
        write_jsonl(preds, [{"probabilities": {"pos": 0.1}}, {"probabilities": {"pos": NAN}}])
    assert not preds.exists()


def test_predict_writes_no_nan_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prediction row holding NaN (a model whose finite weights overflow) is an error naming the input
    line, not ``{"probabilities": {"neg": NaN}}`` on stdout."""
    from albert_lm.cli import predict

    class Lines(list):
        def ready(self) -> bool:
            return True

    def rows(predictor: object, chunk: list, *args: object) -> list[dict]:
        return [{"line": n, "probabilities": {"neg": NAN}} for n, _ in chunk]

    monkeypatch.setattr(predict, "chunk_rows", rows)
    from albert_lm.infer.settings import InferenceSettings

    args = argparse.Namespace(
        input="-",
        format="text",
        inference=InferenceSettings(eval_batch_size=2),
        text_field="text",
        pair_field=None,
    )
    out = io.StringIO()
    with pytest.raises(NonFiniteJsonError, match=r"^<stdin>:1: probabilities\.neg is not a finite number"):
        predict.write_predictions(object(), Lines([b"good film\n"]), args, out)
    assert "NaN" not in out.getvalue()
